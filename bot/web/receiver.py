"""The webhook's logic: verify the signature, answer ping, ignore what is not routed, check the
installation, enqueue the job once per delivery, and say what happened (``DeliveryOutcome``)."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import re
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

import redis
from redis import RedisError
from redis.client import Pipeline
from rq import Queue, Retry
from rq.exceptions import DuplicateJobError
from starlette.datastructures import Headers

from bot.settings import Settings
from bot.web import metrics
from bot.web.events import ROUTES, BadPayload, JobRoute, installation_id_of

log = logging.getLogger(__name__)

DELIVERY_KEY = "flaketally:delivery:"
DELIVERY_SECONDS = 4 * 24 * 3600  # outlives GitHub's 3-day redelivery window
CLAIM_SECONDS = 60  # a claim whose enqueue never finished lapses, so a redelivery can try again
JOB_RETRY = Retry(max=3, interval=[10, 60, 300])
RESULT_TTL = 24 * 3600  # a finished job's hash keeps its id unique for a day
FAILURE_TTL = 7 * 24 * 3600  # a job that finally failed stays visible in the failed registry for a week

_DELIVERY_ID = re.compile(r"[A-Za-z0-9-]{1,64}")
_EVENT = re.compile(r"[a-z_]{1,64}")


class DeliveryOutcome(StrEnum):
    """What became of one delivery: logged, and counted in ``flaketally_deliveries``."""

    ENQUEUED = "enqueued"
    DUPLICATE = "duplicate"  # a redelivery, or a job already queued
    IN_PROGRESS = "in_progress"  # the same delivery is being enqueued right now
    IGNORED = "ignored"  # an event or action no route handles
    PING = "ping"
    BAD_SIGNATURE = "bad_signature"
    BAD_REQUEST = "bad_request"
    BAD_PAYLOAD = "bad_payload"
    NO_INSTALLATION = "no_installation"
    TOO_LARGE = "too_large"
    UNAVAILABLE = "unavailable"  # Redis is down: GitHub is told to redeliver
    ERROR = "error"


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
    outcome: DeliveryOutcome
    event: str = "unverified"
    action: str = ""
    delivery_id: str = ""
    # writes an enqueue left to send with the delivery's count, in one round trip (see ``_enqueue_once``)
    writes: Pipeline | None = None


def enqueue(
    queue: Queue,
    function: str,
    kwargs: dict[str, object],
    *,
    job_id: str,
    timeout: int,
    pipeline: Pipeline | None = None,
) -> None:
    """One job as every Flaketally job is queued: under its own id (DuplicateJobError while a job of that id
    is queued or its result kept), retried after 10 s, 60 s and 300 s, its result and failure kept a while.

    The job itself is saved and pushed at once, atomically (rq's unique enqueue is one Lua script that takes
    no pipeline); given a ``pipeline``, rq leaves on it only the queue's entry in its set of queues
    (``rq:queues``, which only lists queues), for the caller to send with its own writes."""
    queue.enqueue_call(
        function,
        kwargs=kwargs,
        job_id=job_id,
        unique=True,
        retry=JOB_RETRY,
        timeout=timeout,
        result_ttl=RESULT_TTL,
        failure_ttl=FAILURE_TTL,
        pipeline=pipeline,
    )


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
            return Answer(401, {"error": "X-Hub-Signature-256 is missing or wrong"}, DeliveryOutcome.BAD_SIGNATURE)
        event = headers.get("x-github-event", "")
        if not _EVENT.fullmatch(event):
            return Answer(
                400, {"error": "X-GitHub-Event is missing or malformed"}, DeliveryOutcome.BAD_REQUEST, "other"
            )
        try:
            payload = json.loads(body)
        except (ValueError, RecursionError):
            payload = None
        if not isinstance(payload, dict):
            return Answer(400, {"error": "the body is not a JSON object"}, DeliveryOutcome.BAD_REQUEST, event)
        if event == "ping":
            return Answer(200, {"pong": True}, DeliveryOutcome.PING, event)
        raw_action = payload.get("action")
        action = raw_action[:64] if isinstance(raw_action, str) else ""
        answer = self._route(event, action, delivery, payload)
        answer.event, answer.action = event, action
        return answer

    def _route(self, event: str, action: str, delivery: str, payload: dict[str, Any]) -> Answer:
        route = ROUTES.get((event, action))
        if route is None:
            return Answer(202, {"ignored": f"{event}.{action}" if action else event}, DeliveryOutcome.IGNORED)
        installation_id = installation_id_of(payload)
        if installation_id is None:
            why = "no installation.id: only deliveries from a GitHub App installation are handled"
            return Answer(400, {"error": why}, DeliveryOutcome.NO_INSTALLATION)
        if not _DELIVERY_ID.fullmatch(delivery):
            return Answer(400, {"error": "X-GitHub-Delivery is missing or malformed"}, DeliveryOutcome.BAD_REQUEST)
        try:
            job_id, kwargs = route.build(payload, installation_id, delivery)
        except BadPayload as exc:
            return Answer(400, {"error": str(exc)}, DeliveryOutcome.BAD_PAYLOAD)
        try:
            return self._enqueue_once(delivery, route, job_id, kwargs)
        except RedisError as exc:
            log.error("redis unavailable", extra={"delivery_id": delivery, "error": repr(exc)})
            return Answer(503, {"error": "the queue is unavailable; redeliver later"}, DeliveryOutcome.UNAVAILABLE)

    def _enqueue_once(self, delivery: str, route: JobRoute, job_id: str, kwargs: dict[str, object]) -> Answer:
        """Claim the delivery id, enqueue, then keep the claim for the redelivery window.

        Whatever fails between the steps, a redelivery is never refused without its job being queued:
        an enqueue that fails drops the claim (and a claim that could not be dropped lapses after
        CLAIM_SECONDS); a job enqueued twice is refused by its unique id.

        Three round trips to Redis: the claim, the job (saved and pushed by one script), and a pipeline
        left on the answer (``Answer.writes``) holding rq's queue registration and the delivery record,
        which ``finish`` sends with the delivery's count before the answer goes out.
        """
        key = DELIVERY_KEY + delivery
        if not self.redis.set(key, b"pending", nx=True, ex=CLAIM_SECONDS):
            if self.redis.get(key) == b"pending":
                return Answer(409, {"in_progress": True}, DeliveryOutcome.IN_PROGRESS)
            return Answer(200, {"duplicate": True}, DeliveryOutcome.DUPLICATE)
        writes = self.redis.pipeline(transaction=False)
        try:
            enqueue(self.queue, route.function, kwargs, job_id=job_id, timeout=route.timeout, pipeline=writes)
        except DuplicateJobError:
            answer = Answer(200, {"duplicate": True, "job": job_id}, DeliveryOutcome.DUPLICATE)
        except BaseException:
            writes.reset()
            try:
                self.redis.delete(key)
            except RedisError as exc:
                log.warning("delivery claim not dropped", extra={"delivery_id": delivery, "error": repr(exc)})
            raise
        else:
            answer = Answer(202, {"enqueued": job_id}, DeliveryOutcome.ENQUEUED)
        writes.set(key, job_id.encode(), xx=True, ex=DELIVERY_SECONDS)
        answer.writes = writes
        return answer

    def respond(self, headers: Headers, body: bytes | None) -> Answer:
        """The answer to one delivery (``body`` is None when it was over the cap), logged and counted."""
        try:
            if body is None:
                answer = Answer(
                    413, {"error": f"the body is larger than {self.limit} bytes"}, DeliveryOutcome.TOO_LARGE
                )
            else:
                answer = self.handle(headers, body)
        except Exception:
            log.exception("webhook failed", extra={"delivery_id": headers.get("x-github-delivery", "")[:64]})
            answer = Answer(500, {"error": "internal error"}, DeliveryOutcome.ERROR)
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
        if answer.writes is None:
            metrics.record_delivery(self.redis, answer.event, answer.outcome)
            return
        # the enqueue's writes, the delivery's count last: one round trip
        writes, answer.writes = answer.writes, None
        metrics.record_delivery(writes, answer.event, answer.outcome)
        try:
            results = writes.execute(raise_on_error=False)
        except RedisError as exc:
            results = [exc, exc]
        failed = [r for r in results[:-1] if isinstance(r, Exception)]
        if failed:  # the job is queued; its unique id guards a redelivery
            log.warning("delivery record not kept", extra={"delivery_id": answer.delivery_id, "error": repr(failed[0])})
        if isinstance(results[-1], Exception):
            log.warning("metric not recorded", extra={"metric": "deliveries", "error": repr(results[-1])})
