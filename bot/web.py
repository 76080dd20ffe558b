"""The GitHub App's receiver: verify, answer ping, check the installation, enqueue, answer.

All work happens in rq workers. The receiver enqueues by dotted path (``workers.jobs.*``) so it never
imports worker code, with JSON-safe keyword arguments and a job id that makes the enqueue idempotent.
``ROUTES`` below is the one place that says which event becomes which job.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import anyio
import redis
import sqlalchemy as sa
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from redis import RedisError
from redis.backoff import ExponentialWithJitterBackoff
from redis.retry import Retry as RedisRetry
from rq import Queue, Retry
from rq.exceptions import DuplicateJobError
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from bot import metrics
from bot.settings import Settings
from bot.store import Store

log = logging.getLogger(__name__)

DELIVERY_KEY = "flaketally:delivery:"
DELIVERY_SECONDS = 4 * 24 * 3600  # outlives GitHub's 3-day redelivery window
CLAIM_SECONDS = 60  # a claim whose enqueue never finished lapses, so a redelivery can try again
JOB_RETRY = Retry(max=3, interval=[10, 60, 300])
RESULT_TTL = 24 * 3600  # a finished job's hash keeps its id unique for a day
FAILURE_TTL = 7 * 24 * 3600  # a job that finally failed stays visible in the failed registry for a week
READY_TIMEOUT = 3.0
WEBHOOK_THREADS = 4

_DELIVERY_ID = re.compile(r"[A-Za-z0-9-]{1,64}")
_EVENT = re.compile(r"[a-z_]{1,64}")
_FULL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}")
_SHA = re.compile(r"[0-9a-f]{40}|[0-9a-f]{64}")


class BadPayload(Exception):
    """The delivery is signed but lacks a field the job needs; the message names the field."""


# Reading the payload: everything from outside is hostile until parsed.


def _walk(payload: Mapping[str, Any], path: str) -> object:
    value: object = payload
    for key in path.split("."):
        if not isinstance(value, dict) or key not in value:
            raise BadPayload(f"{path} is missing")
        value = value[key]
    return value


def _int(payload: Mapping[str, Any], path: str) -> int:
    value = _walk(payload, path)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise BadPayload(f"{path} is not a positive integer")
    return value


def _str(payload: Mapping[str, Any], path: str, pattern: re.Pattern[str]) -> str:
    value = _walk(payload, path)
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise BadPayload(f"{path} is not a valid value")
    return value


def _repositories(payload: Mapping[str, Any], key: str) -> list[dict[str, object]]:
    found = payload.get(key) or []
    if not isinstance(found, list):
        raise BadPayload(f"{key} is not a list")
    out: list[dict[str, object]] = []
    for n, item in enumerate(found):
        if not isinstance(item, dict):
            raise BadPayload(f"{key}[{n}] is not an object")
        out.append({"id": _int(item, "id"), "full_name": _str(item, "full_name", _FULL_NAME)})
    return out


def _account(payload: Mapping[str, Any]) -> str:
    account = _walk(payload, "installation.account")
    if isinstance(account, dict):
        for key in ("login", "slug"):  # an enterprise installation's account has a slug, not a login
            value = account.get(key)
            if isinstance(value, str) and 0 < len(value) <= 100:
                return value
    raise BadPayload("installation.account.login is missing")


def installation_id_of(payload: Mapping[str, Any]) -> int | None:
    try:
        return _int(payload, "installation.id")
    except BadPayload:
        return None


# What each handled event enqueues: (payload, installation id, delivery id) -> (job id, keyword arguments).
# rq 3 allows only letters, digits, "_" and "-" in a job id (it uses ":" itself), hence the dashes.

JobSpec = tuple[str, dict[str, object]]


def _run_completed(p: Mapping[str, Any], installation_id: int, delivery: str) -> JobSpec:
    repo_id, run_id, attempt = _int(p, "repository.id"), _int(p, "workflow_run.id"), _int(p, "workflow_run.run_attempt")
    args: dict[str, object] = {
        "installation_id": installation_id,
        "repo": _str(p, "repository.full_name", _FULL_NAME),
        "repo_id": repo_id,
        "run_id": run_id,
        "attempt": attempt,
    }
    return f"run-{repo_id}-{run_id}-{attempt}", args


def _run_requested(p: Mapping[str, Any], installation_id: int, delivery: str) -> JobSpec:
    repo_id, run_id, attempt = _int(p, "repository.id"), _int(p, "workflow_run.id"), _int(p, "workflow_run.run_attempt")
    args: dict[str, object] = {
        "installation_id": installation_id,
        "repo": _str(p, "repository.full_name", _FULL_NAME),
        "repo_id": repo_id,
        "head_sha": _str(p, "workflow_run.head_sha", _SHA),
        "run_id": run_id,
        "attempt": attempt,
    }
    return f"open-{repo_id}-{run_id}-{attempt}", args


def _check_rerequested(p: Mapping[str, Any], installation_id: int, delivery: str) -> JobSpec:
    repo_id, check_run_id = _int(p, "repository.id"), _int(p, "check_run.id")
    args: dict[str, object] = {
        "installation_id": installation_id,
        "repo": _str(p, "repository.full_name", _FULL_NAME),
        "repo_id": repo_id,
        "head_sha": _str(p, "check_run.head_sha", _SHA),
        "check_run_id": check_run_id,
    }
    return f"rejudge-{repo_id}-{check_run_id}-{delivery}", args


def _installation(p: Mapping[str, Any], installation_id: int, delivery: str) -> JobSpec:
    """``created`` lists the repositories granted, ``deleted`` the ones lost; other actions list none."""
    action = str(p["action"])
    listed = _repositories(p, "repositories")
    added, removed = (listed, []) if action == "created" else ([], listed) if action == "deleted" else ([], [])
    return _record_installation(p, installation_id, delivery, added, removed)


def _installation_repositories(p: Mapping[str, Any], installation_id: int, delivery: str) -> JobSpec:
    added, removed = _repositories(p, "repositories_added"), _repositories(p, "repositories_removed")
    return _record_installation(p, installation_id, delivery, added, removed)


def _record_installation(
    p: Mapping[str, Any],
    installation_id: int,
    delivery: str,
    added: list[dict[str, object]],
    removed: list[dict[str, object]],
) -> JobSpec:
    args: dict[str, object] = {
        "installation_id": installation_id,
        "action": str(p["action"]),
        "account": _account(p),
        "repositories_added": added,
        "repositories_removed": removed,
    }
    return f"installation-{installation_id}-{delivery}", args


@dataclass(frozen=True, slots=True)
class JobRoute:
    function: str  # dotted path of the job function
    timeout: int  # rq job_timeout, seconds
    build: Callable[[Mapping[str, Any], int, str], JobSpec]


_INSTALLATION = JobRoute("workers.jobs.record_installation", 120, _installation)
_INSTALLATION_REPOSITORIES = JobRoute("workers.jobs.record_installation", 120, _installation_repositories)
# (event, action) -> job. Anything not here is answered 202 and ignored.
ROUTES: Mapping[tuple[str, str], JobRoute] = {
    ("workflow_run", "completed"): JobRoute("workers.jobs.process_workflow_run", 900, _run_completed),
    ("workflow_run", "requested"): JobRoute("workers.jobs.open_check_run", 120, _run_requested),
    ("check_run", "rerequested"): JobRoute("workers.jobs.rejudge", 600, _check_rerequested),
    ("installation", "created"): _INSTALLATION,
    ("installation", "deleted"): _INSTALLATION,
    ("installation", "suspend"): _INSTALLATION,
    ("installation", "unsuspend"): _INSTALLATION,
    ("installation", "new_permissions_accepted"): _INSTALLATION,
    ("installation_repositories", "added"): _INSTALLATION_REPOSITORIES,
    ("installation_repositories", "removed"): _INSTALLATION_REPOSITORIES,
}


def signature_ok(secret: str, body: bytes, header: str | None) -> bool:
    """GitHub's ``X-Hub-Signature-256``: "sha256=" + HMAC-SHA256(secret, raw body). Never SHA-1."""
    if header is None or not header.startswith("sha256="):
        return False
    expected = "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected.encode(), header.strip().encode("latin-1", "replace"))


@dataclass(slots=True)
class Answer:
    status: int
    body: dict[str, object]
    outcome: str
    event: str = "unverified"
    action: str = ""
    delivery_id: str = ""


class Receiver:
    """The webhook's logic, synchronous, run in a worker thread so Redis calls never block the loop."""

    def __init__(self, settings: Settings, connection: redis.Redis) -> None:
        self.secret = settings.webhook_secret
        self.limit = settings.max_body_bytes
        self.redis = connection
        self.queue = Queue(settings.queue_name, connection=connection)

    def handle(self, headers: Headers, body: bytes) -> Answer:
        """Verify, parse, answer ping, ignore what is not routed, check the installation, enqueue.

        Events nobody routes are ignored before the installation check, so deliveries that carry no
        installation by nature never show as failures in the App's delivery log.
        """
        delivery = headers.get("x-github-delivery", "")
        if not signature_ok(self.secret, body, headers.get("x-hub-signature-256")):
            return Answer(401, {"error": "X-Hub-Signature-256 is missing or wrong"}, "bad_signature")
        event = headers.get("x-github-event", "")
        if not _EVENT.fullmatch(event):
            return Answer(400, {"error": "X-GitHub-Event is missing or malformed"}, "bad_request", "other")
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError):
            payload = None
        if not isinstance(payload, dict):
            return Answer(400, {"error": "the body is not a JSON object"}, "bad_request", event)
        if event == "ping":
            return Answer(200, {"pong": True}, "ping", event)
        raw_action = payload.get("action")
        action = raw_action[:64] if isinstance(raw_action, str) else ""
        answer = self._route(event, action, delivery, payload)
        answer.event, answer.action = event, action
        return answer

    def _route(self, event: str, action: str, delivery: str, payload: dict[str, Any]) -> Answer:
        route = ROUTES.get((event, action))
        if route is None:
            return Answer(202, {"ignored": f"{event}.{action}" if action else event}, "ignored")
        installation_id = installation_id_of(payload)
        if installation_id is None:
            why = "no installation.id: only deliveries from a GitHub App installation are handled"
            return Answer(400, {"error": why}, "no_installation")
        if not _DELIVERY_ID.fullmatch(delivery):
            return Answer(400, {"error": "X-GitHub-Delivery is missing or malformed"}, "bad_request")
        try:
            job_id, kwargs = route.build(payload, installation_id, delivery)
        except BadPayload as exc:
            return Answer(400, {"error": str(exc)}, "bad_payload")
        try:
            return self._enqueue_once(delivery, route, job_id, kwargs)
        except RedisError as exc:
            log.error("redis unavailable", extra={"delivery_id": delivery, "error": repr(exc)})
            return Answer(503, {"error": "the queue is unavailable; redeliver later"}, "unavailable")

    def _enqueue_once(self, delivery: str, route: JobRoute, job_id: str, kwargs: dict[str, object]) -> Answer:
        """Claim the delivery id, enqueue, then keep the claim for the redelivery window.

        Whatever fails between the steps, a redelivery is never refused without its job being queued:
        an enqueue that fails drops the claim (and a claim that could not be dropped lapses after
        CLAIM_SECONDS); a job enqueued twice is refused by its unique id.
        """
        key = DELIVERY_KEY + delivery
        if not self.redis.set(key, b"pending", nx=True, ex=CLAIM_SECONDS):
            if self.redis.get(key) == b"pending":
                return Answer(409, {"in_progress": True}, "in_progress")
            return Answer(200, {"duplicate": True}, "duplicate")
        try:
            self.queue.enqueue_call(
                route.function,
                kwargs=kwargs,
                job_id=job_id,
                unique=True,
                retry=JOB_RETRY,
                timeout=route.timeout,
                result_ttl=RESULT_TTL,
                failure_ttl=FAILURE_TTL,
            )
        except DuplicateJobError:
            answer = Answer(200, {"duplicate": True, "job": job_id}, "duplicate")
        except BaseException:
            try:
                self.redis.delete(key)
            except RedisError as exc:
                log.warning("delivery claim not dropped", extra={"delivery_id": delivery, "error": repr(exc)})
            raise
        else:
            answer = Answer(202, {"enqueued": job_id}, "enqueued")
        try:
            self.redis.set(key, job_id.encode(), xx=True, ex=DELIVERY_SECONDS)
        except RedisError as exc:  # the job is queued; its unique id guards a redelivery
            log.warning("delivery record not kept", extra={"delivery_id": delivery, "error": repr(exc)})
        return answer

    def respond(self, headers: Headers, body: bytes | None) -> Answer:
        """The answer to one delivery (``body`` is None when it was over the cap), logged and counted."""
        try:
            if body is None:
                answer = Answer(413, {"error": f"the body is larger than {self.limit} bytes"}, "too_large")
            else:
                answer = self.handle(headers, body)
        except Exception:
            log.exception("webhook failed", extra={"delivery_id": headers.get("x-github-delivery", "")[:64]})
            answer = Answer(500, {"error": "internal error"}, "error")
        answer.delivery_id = headers.get("x-github-delivery", "")[:64]
        self.finish(answer)
        return answer

    def finish(self, answer: Answer) -> None:
        """Log and count the answer; neither may fail the delivery."""
        fields = {
            "delivery_id": answer.delivery_id,
            "event": answer.event,
            "action": answer.action,
            "outcome": answer.outcome,
            "status": answer.status,
        }
        level = logging.INFO if answer.status < 400 else logging.ERROR if answer.status >= 500 else logging.WARNING
        log.log(level, "webhook delivery", extra=fields)
        metrics.record_delivery(self.redis, answer.event, answer.outcome)


async def read_capped(request: Request, limit: int) -> bytes | None:
    """The body, or None as soon as it is known to exceed ``limit``: never more than that is read."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > limit:
        return None
    body = bytearray()
    async for chunk in request.stream():
        if len(body) + len(chunk) > limit:
            return None
        body += chunk
    return bytes(body)


def redis_client(url: str) -> redis.Redis:
    """A client that fails fast when Redis is gone, so GitHub gets its 503 within seconds."""
    return redis.Redis.from_url(
        url,
        socket_connect_timeout=2,
        socket_timeout=5,
        retry=RedisRetry(ExponentialWithJitterBackoff(cap=0.1, base=0.01), 2),
        health_check_interval=30,
    )


def create_app(settings: Settings, *, redis: redis.Redis | None = None) -> Starlette:
    """The receiver. ``redis`` overrides the client made from ``settings.redis_url`` (tests, embedding)."""
    owned = redis is None
    connection = redis_client(settings.redis_url) if redis is None else redis
    receiver = Receiver(settings, connection)
    store = Store(settings.database_url)  # no migration here: readiness only asks it for SELECT 1
    registry = metrics.registry(connection, settings.queue_name)
    # A few threads are plenty for work that is mostly Redis round trips; more only fight over the GIL
    # and stretch the tail latency (measured by bench/receiver.py).
    webhook_threads = anyio.CapacityLimiter(WEBHOOK_THREADS)

    async def webhook(request: Request) -> Response:
        try:
            body = await read_capped(request, settings.max_body_bytes)
        except ClientDisconnect:
            log.info("webhook client gone", extra={"delivery_id": request.headers.get("x-github-delivery", "")[:64]})
            return Response(status_code=400)
        answer = await anyio.to_thread.run_sync(receiver.respond, request.headers, body, limiter=webhook_threads)
        # after a 413 the rest of the body is still on the wire: close rather than drain it
        close = {"Connection": "close"} if body is None else None
        return JSONResponse(answer.body, status_code=answer.status, headers=close)

    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok")

    def ping_redis() -> None:
        connection.ping()

    def ping_store() -> None:
        with store.engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))

    async def readyz(request: Request) -> Response:
        failed = []
        for name, check in (("redis", ping_redis), ("store", ping_store)):
            try:
                with anyio.fail_after(READY_TIMEOUT):
                    await anyio.to_thread.run_sync(check, abandon_on_cancel=True)
            except Exception as exc:
                log.warning("not ready", extra={"component": name, "error": repr(exc)})
                failed.append(f"{name} unavailable ({type(exc).__name__})")
        if failed:
            return PlainTextResponse("\n".join(failed) + "\n", status_code=503)
        return PlainTextResponse("ready\n")

    async def metrics_page(request: Request) -> Response:
        try:
            text = await run_in_threadpool(generate_latest, registry)
        except RedisError as exc:
            log.warning("metrics unavailable", extra={"error": repr(exc)})
            return PlainTextResponse("redis unavailable\n", status_code=503)
        return Response(text, media_type=CONTENT_TYPE_PLAIN_0_0_4)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        store.close()
        if owned:
            connection.close()

    return Starlette(
        routes=[
            Route("/webhook", webhook, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/metrics", metrics_page, methods=["GET"]),
        ],
        lifespan=lifespan,
    )
