"""The receiver against a real Redis: what it answers, and exactly what lands in the rq queue."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from prometheus_client.parser import text_string_to_metric_families
from redis.backoff import NoBackoff
from redis.retry import Retry
from rq import Queue
from rq.job import Job

from bot.settings import Settings
from bot.web import metrics
from bot.web.app import create_app
from bot.web.events import ROUTES
from bot.web.receiver import DELIVERY_KEY, DELIVERY_SECONDS, Receiver, signature_ok
from tests.conftest import shared_path

pytestmark = pytest.mark.anyio

SECRET = "webhook-secret-for-tests"
QUEUE = "flaketally-test"
LIMIT = 64 * 1024
INSTALLATION = {"id": 4242}
REPO = {"id": 300029405, "full_name": "octo-org/octo-repo", "default_branch": "main"}
SHA = "3484a3fb816e0859fd6e1cea078d76385ff50625"


def run_payload(action: str = "completed", *, run_id: int = 289782451, attempt: int = 1) -> dict[str, Any]:
    """Only the keys the receiver reads."""
    return {
        "action": action,
        "installation": INSTALLATION,
        "repository": REPO,
        "workflow_run": {"id": run_id, "run_attempt": attempt, "head_sha": SHA},
    }


def official(name: str, **extra: Any) -> dict[str, Any]:
    """An example payload from GitHub's documentation, plus what an App's delivery adds."""
    payload: dict[str, Any] = json.loads(shared_path("github", "webhooks", name).read_text())
    payload.update(extra)
    return payload


def sign(body: bytes, secret: str = SECRET) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def headers(event: str, body: bytes, delivery: str = "d-1", **extra: str) -> dict[str, str]:
    found = {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": sign(body),
        "Content-Type": "application/json",
    }
    found.update(extra)
    return found


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A port on 127.0.0.1 that refuses connections: bound by us, never listening."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    yield int(sock.getsockname()[1])
    sock.close()


def make_settings(redis_url: str, tmp_path: Path, **changes: Any) -> Settings:
    values: dict[str, Any] = {
        "app_id": 0,
        "webhook_secret": SECRET,
        "redis_url": redis_url,
        "database_url": str(tmp_path / "flaketally.db"),
        "queue_name": QUEUE,
        "max_body_bytes": LIMIT,
    }
    values.update(changes)
    return Settings(**values)


@pytest.fixture
def settings(redis_url: str, tmp_path: Path) -> Settings:
    return make_settings(redis_url, tmp_path)


@asynccontextmanager
async def serving(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    """The real app, its lifespan run, reached through httpx's ASGI transport."""
    app = create_app(settings)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://receiver") as client:
            yield client


@pytest.fixture
async def client(settings: Settings) -> AsyncIterator[httpx.AsyncClient]:
    async with serving(settings) as found:
        yield found


async def deliver(
    client: httpx.AsyncClient, event: str, payload: object, delivery: str = "d-1", **extra: str
) -> httpx.Response:
    body = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
    return await client.post("/webhook", content=body, headers=headers(event, body, delivery, **extra))


def queued(conn: redis.Redis) -> list[Job]:
    return Queue(QUEUE, connection=conn).get_jobs()


def jobs(conn: redis.Redis) -> list[tuple[str, str | None, dict[str, Any]]]:
    return [(job.id, job.func_name, job.kwargs) for job in queued(conn)]


# signature


def test_github_signature_test_vector() -> None:
    vector = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    assert signature_ok("It's a Secret to Everybody", b"Hello, World!", vector)
    assert not signature_ok("It's a Secret to Everybody", b"Hello, World!!", vector)
    assert not signature_ok("another secret", b"Hello, World!", vector)
    assert not signature_ok("It's a Secret to Everybody", b"Hello, World!", vector.removeprefix("sha256="))
    assert not signature_ok("It's a Secret to Everybody", b"Hello, World!", None)


async def test_the_test_vector_passes_verification_end_to_end(redis_url: str, tmp_path: Path) -> None:
    secret = "It's a Secret to Everybody"
    vector = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
    async with serving(make_settings(redis_url, tmp_path, webhook_secret=secret)) as client:
        answer = await client.post(
            "/webhook",
            content=b"Hello, World!",
            headers={"X-GitHub-Event": "ping", "X-GitHub-Delivery": "d-1", "X-Hub-Signature-256": vector},
        )
    assert answer.status_code == 400  # past the signature: refused only because the body is not JSON
    assert answer.json() == {"error": "the body is not a JSON object"}


@pytest.mark.parametrize(
    "signature",
    [
        pytest.param(None, id="missing"),
        pytest.param(sign(b"another body"), id="wrong"),
        pytest.param(sign(json.dumps(run_payload()).encode(), "not the secret"), id="other-secret"),
        pytest.param("sha256=", id="empty"),
    ],
)
async def test_a_bad_signature_is_401_and_nothing_is_enqueued(
    client: httpx.AsyncClient, conn: redis.Redis, signature: str | None
) -> None:
    body = json.dumps(run_payload()).encode()
    sent = headers("workflow_run", body)
    del sent["X-Hub-Signature-256"]
    if signature is not None:
        sent["X-Hub-Signature-256"] = signature
    answer = await client.post("/webhook", content=body, headers=sent)
    assert answer.status_code == 401
    assert "X-Hub-Signature-256" in answer.json()["error"]
    assert queued(conn) == []
    assert conn.keys(DELIVERY_KEY + "*") == []


async def test_a_sha1_signature_alone_is_refused(client: httpx.AsyncClient, conn: redis.Redis) -> None:
    body = json.dumps(run_payload()).encode()
    sha1 = "sha1=" + hmac.new(SECRET.encode(), body, hashlib.sha1).hexdigest()
    sent = {"X-GitHub-Event": "workflow_run", "X-GitHub-Delivery": "d-1", "X-Hub-Signature": sha1}
    assert (await client.post("/webhook", content=body, headers=sent)).status_code == 401
    sent["X-Hub-Signature-256"] = sha1  # a SHA-1 digest in the SHA-256 header
    assert (await client.post("/webhook", content=body, headers=sent)).status_code == 401
    assert queued(conn) == []


# size


async def test_a_body_over_the_cap_is_413_by_its_content_length(client: httpx.AsyncClient, conn: redis.Redis) -> None:
    body = json.dumps({**run_payload(), "padding": "x" * LIMIT}).encode()
    answer = await client.post("/webhook", content=body, headers=headers("workflow_run", body))
    assert answer.status_code == 413
    assert answer.headers["connection"] == "close"  # the rest of the body is not drained
    assert queued(conn) == []


async def test_a_chunked_body_over_the_cap_is_413_and_reading_stops_there(
    client: httpx.AsyncClient, conn: redis.Redis
) -> None:
    chunk, pulled = b"x" * 1024, 0

    async def endless() -> AsyncIterator[bytes]:
        nonlocal pulled
        while True:
            pulled += 1
            yield chunk

    answer = await client.post("/webhook", content=endless(), headers=headers("workflow_run", b""))
    assert answer.request.headers.get("transfer-encoding") == "chunked"
    assert "content-length" not in answer.request.headers
    assert answer.status_code == 413
    assert pulled == LIMIT // len(chunk) + 1  # the first chunk past the cap, and no more
    assert queued(conn) == []


# malformed, ping, unknown, no installation


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b"\xff\xfe", b"[" * 30_000 + b"]" * 30_000])
async def test_a_signed_body_that_is_not_a_json_object_is_400(
    client: httpx.AsyncClient, conn: redis.Redis, body: bytes
) -> None:
    answer = await deliver(client, "workflow_run", body)
    assert answer.status_code == 400
    assert answer.json() == {"error": "the body is not a JSON object"}
    assert queued(conn) == []


async def test_ping_is_200(client: httpx.AsyncClient, conn: redis.Redis) -> None:
    assert (await deliver(client, "ping", {"zen": "Keep it logically awesome.", "hook_id": 1})).status_code == 200
    assert queued(conn) == []


@pytest.mark.shared
async def test_the_official_ping_is_200(client: httpx.AsyncClient) -> None:
    answer = await deliver(client, "ping", official("ping.with-app_id.payload.json"))
    assert (answer.status_code, answer.json()) == (200, {"pong": True})


async def test_an_event_not_handled_is_202_ignored(client: httpx.AsyncClient, conn: redis.Redis) -> None:
    answer = await deliver(client, "pull_request", {"action": "synchronize", "installation": INSTALLATION})
    assert (answer.status_code, answer.json()) == (202, {"ignored": "pull_request.synchronize"})
    answer = await deliver(client, "workflow_run", run_payload("in_progress"), "d-2")
    assert (answer.status_code, answer.json()) == (202, {"ignored": "workflow_run.in_progress"})
    answer = await deliver(client, "star", {"starred_at": None}, "d-3")
    assert (answer.status_code, answer.json()) == (202, {"ignored": "star"})
    assert queued(conn) == []
    assert conn.keys(DELIVERY_KEY + "*") == []


async def test_an_ignored_event_is_logged(client: httpx.AsyncClient, caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="bot.web"):
        await deliver(client, "pull_request", {"action": "closed"}, "d-log")
    [record] = [r for r in caplog.records if r.getMessage() == "webhook delivery"]
    fields = {k: getattr(record, k) for k in ("delivery_id", "event", "action", "outcome")}
    assert fields == {"delivery_id": "d-log", "event": "pull_request", "action": "closed", "outcome": "ignored"}


@pytest.mark.shared
async def test_a_delivery_without_installation_is_400_naming_why(client: httpx.AsyncClient, conn: redis.Redis) -> None:
    answer = await deliver(client, "workflow_run", official("workflow_run.completed.payload.json"))
    assert answer.status_code == 400
    assert "installation.id" in answer.json()["error"]
    assert queued(conn) == []


async def test_an_inline_delivery_without_installation_is_400(client: httpx.AsyncClient, conn: redis.Redis) -> None:
    payload = run_payload()
    del payload["installation"]
    answer = await deliver(client, "workflow_run", payload)
    assert answer.status_code == 400
    assert "installation.id" in answer.json()["error"]
    assert queued(conn) == []


@pytest.mark.parametrize(
    ("path", "value"),
    [
        ("workflow_run.id", None),
        ("workflow_run.run_attempt", "1"),
        ("repository.full_name", "no slash"),
        ("workflow_run.id", True),
        ("repository.id", -3),
    ],
)
async def test_a_delivery_lacking_what_the_job_needs_is_400_naming_the_field(
    client: httpx.AsyncClient, conn: redis.Redis, path: str, value: object
) -> None:
    payload = run_payload()
    outer, inner = path.split(".")
    payload[outer] = {**payload[outer], inner: value}
    answer = await deliver(client, "workflow_run", payload)
    assert answer.status_code == 400
    assert path in answer.json()["error"]
    assert queued(conn) == []


async def test_a_handled_event_without_a_delivery_id_is_400(client: httpx.AsyncClient, conn: redis.Redis) -> None:
    answer = await deliver(client, "workflow_run", run_payload(), delivery="")
    assert answer.status_code == 400
    assert "X-GitHub-Delivery" in answer.json()["error"]
    assert queued(conn) == []


# enqueueing


async def test_workflow_run_completed_enqueues_one_job(client: httpx.AsyncClient, conn: redis.Redis) -> None:
    answer = await deliver(client, "workflow_run", run_payload(attempt=2), "72d3162e-cc78-11e3-81ab-4c9367dc0958")
    job_id = "run-300029405-289782451-2"
    assert (answer.status_code, answer.json()) == (202, {"enqueued": job_id})
    assert jobs(conn) == [
        (
            job_id,
            "workers.jobs.process_workflow_run",
            {
                "installation_id": 4242,
                "repo": "octo-org/octo-repo",
                "repo_id": 300029405,
                "run_id": 289782451,
                "attempt": 2,
                "default_branch": "main",
                "head_sha": SHA,
            },
        )
    ]
    [job] = queued(conn)
    assert job.args == ()
    assert (job.retries_left, job.retry_intervals) == (3, [10, 60, 300])
    assert job.timeout == 900
    assert job.failure_ttl == 7 * 24 * 3600
    assert json.loads(json.dumps(job.kwargs)) == job.kwargs  # JSON-safe primitives only
    key = DELIVERY_KEY + "72d3162e-cc78-11e3-81ab-4c9367dc0958"
    assert conn.get(key) == job_id.encode()
    assert DELIVERY_SECONDS - 60 < conn.ttl(key) <= DELIVERY_SECONDS


@pytest.mark.shared
async def test_the_official_workflow_run_completed_enqueues_its_run(
    client: httpx.AsyncClient, conn: redis.Redis
) -> None:
    payload = official("workflow_run.completed.with-pull-requests.payload.json", installation=INSTALLATION)
    assert (await deliver(client, "workflow_run", payload)).json() == {"enqueued": "run-300029405-289782451-1"}
    assert jobs(conn)[0][2] == {
        "installation_id": 4242,
        "repo": "octo-org/octo-repo",
        "repo_id": 300029405,
        "run_id": 289782451,
        "attempt": 1,
        "default_branch": "master",
        "head_sha": payload["workflow_run"]["head_sha"],
    }


async def test_the_same_delivery_again_enqueues_nothing(client: httpx.AsyncClient, conn: redis.Redis) -> None:
    assert (await deliver(client, "workflow_run", run_payload(), "d-1")).status_code == 202
    again = await deliver(client, "workflow_run", run_payload(), "d-1")
    assert (again.status_code, again.json()) == (200, {"duplicate": True})
    assert len(queued(conn)) == 1


async def test_another_delivery_of_the_same_run_attempt_enqueues_nothing(
    client: httpx.AsyncClient, conn: redis.Redis
) -> None:
    assert (await deliver(client, "workflow_run", run_payload(), "d-1")).status_code == 202
    other = await deliver(client, "workflow_run", run_payload(), "d-2")
    assert (other.status_code, other.json()) == (200, {"duplicate": True, "job": "run-300029405-289782451-1"})
    assert len(queued(conn)) == 1
    rerun = await deliver(client, "workflow_run", run_payload(attempt=2), "d-3")
    assert rerun.json() == {"enqueued": "run-300029405-289782451-2"}
    assert [job_id for job_id, _, _ in jobs(conn)] == ["run-300029405-289782451-1", "run-300029405-289782451-2"]


async def test_a_delivery_still_being_enqueued_elsewhere_is_409(client: httpx.AsyncClient, conn: redis.Redis) -> None:
    conn.set(DELIVERY_KEY + "d-1", b"pending", ex=60)  # another process claimed it a moment ago
    answer = await deliver(client, "workflow_run", run_payload(), "d-1")
    assert (answer.status_code, answer.json()) == (409, {"in_progress": True})
    assert queued(conn) == []


async def test_workflow_run_requested_enqueues_nothing(client: httpx.AsyncClient, conn: redis.Redis) -> None:
    """Nothing is written to GitHub before an attempt completes (an in-progress check run costs a write of
    GitHub's budget that nobody reads), so a ``requested`` delivery has no job."""
    answer = await deliver(client, "workflow_run", run_payload("requested", attempt=3))
    assert (answer.status_code, answer.json()) == (202, {"ignored": "workflow_run.requested"})
    assert jobs(conn) == []


async def test_check_run_rerequested_rejudges(client: httpx.AsyncClient, conn: redis.Redis) -> None:
    payload = {
        "action": "rerequested",
        "installation": INSTALLATION,
        "repository": REPO,
        "check_run": {"id": 4, "head_sha": SHA},
    }
    assert (await deliver(client, "check_run", payload, "d-9")).json() == {"enqueued": "rejudge-300029405-4-d-9"}
    assert jobs(conn) == [
        (
            "rejudge-300029405-4-d-9",
            "workers.jobs.rejudge",
            {
                "installation_id": 4242,
                "repo": "octo-org/octo-repo",
                "repo_id": 300029405,
                "head_sha": SHA,
                "check_run_id": 4,
                "default_branch": "main",
            },
        )
    ]


@pytest.mark.parametrize("branch", ["", "a b", "x" * 256, 7, "refs~1", None])
async def test_an_implausible_default_branch_is_not_passed_on(
    client: httpx.AsyncClient, conn: redis.Redis, branch: object
) -> None:
    payload = run_payload()
    payload["repository"] = {**REPO, "default_branch": branch}
    assert (await deliver(client, "workflow_run", payload, "d-b")).status_code == 202
    assert jobs(conn)[0][2]["default_branch"] is None


@pytest.mark.shared
async def test_the_official_check_run_rerequested_rejudges(client: httpx.AsyncClient, conn: redis.Redis) -> None:
    answer = await deliver(client, "check_run", official("check_run.rerequested.payload.json"), "d-5")
    assert answer.json() == {"enqueued": "rejudge-526-4-d-5"}
    assert jobs(conn)[0][2]["head_sha"] == "d6fde92930d4715a2b49857d24b940956b26d2d3"
    answer = await deliver(client, "check_run", official("check_run.requested_action.payload.json"), "d-6")
    assert answer.json() == {"enqueued": "action-9384267-1494503112-d-6"}  # the example's ids
    function, args = jobs(conn)[1][1], jobs(conn)[1][2]
    assert function == "workers.jobs.act"
    assert (args["identifier"], args["sender"], args["check_run_id"]) == ("lgtm|26764", "codebytere", 1494503112)


async def test_installation_events_are_recorded(client: httpx.AsyncClient, conn: redis.Redis) -> None:
    account = {**INSTALLATION, "account": {"login": "octo-org"}}
    repo = {"id": 1, "full_name": "octo-org/a", "private": True}
    deliveries = [
        ("installation", {"action": "created", "installation": account, "repositories": [repo]}),
        ("installation", {"action": "suspend", "installation": account}),
        (
            "installation_repositories",
            {"action": "removed", "installation": account, "repositories_added": [], "repositories_removed": [repo]},
        ),
        ("installation", {"action": "deleted", "installation": account, "repositories": [repo]}),
    ]
    for n, (event, payload) in enumerate(deliveries):
        assert (await deliver(client, event, payload, f"d-{n}")).json() == {"enqueued": f"installation-4242-d-{n}"}
    short = {"id": 1, "full_name": "octo-org/a"}
    assert [(func, kwargs) for _, func, kwargs in jobs(conn)] == [
        (
            "workers.jobs.record_installation",
            {
                "installation_id": 4242,
                "action": action,
                "account": "octo-org",
                "repositories_added": added,
                "repositories_removed": removed,
                "permissions": None,  # these deliveries name none (tests/test_actions.py has one that does)
            },
        )
        for action, added, removed in [
            ("created", [short], []),
            ("suspend", [], []),
            ("removed", [], [short]),
            ("deleted", [], [short]),
        ]
    ]


@pytest.mark.shared
@pytest.mark.parametrize(
    ("name", "event", "installation_id", "added", "removed"),
    [
        ("installation.created.payload.json", "installation", 957387, ["Codertocat/Hello-World"], []),
        ("installation.deleted.payload.json", "installation", 2, [], ["octocat/Hello-World"]),
        ("installation.suspend.payload.json", "installation", 16598467, [], []),
        ("installation_repositories.added.payload.json", "installation_repositories", 957387, ["Codertocat/Space"], []),
        ("installation_repositories.removed.payload.json", "installation_repositories", 2, [], ["octocat/Hello-World"]),
    ],
)
async def test_the_official_installation_payloads(
    client: httpx.AsyncClient,
    conn: redis.Redis,
    name: str,
    event: str,
    installation_id: int,
    added: list[str],
    removed: list[str],
) -> None:
    payload = official(name)
    assert (await deliver(client, event, payload, "d-1")).status_code == 202
    [(job_id, _, kwargs)] = jobs(conn)
    assert job_id == f"installation-{installation_id}-d-1"
    assert kwargs["account"] == payload["installation"]["account"]["login"]
    assert [r["full_name"] for r in kwargs["repositories_added"]] == added
    assert [r["full_name"] for r in kwargs["repositories_removed"]] == removed


# faults


async def test_redis_down_is_503_and_nothing_is_recorded(
    redis_url: str, tmp_path: Path, closed_port: int, conn: redis.Redis
) -> None:
    down = make_settings(f"redis://127.0.0.1:{closed_port}/0", tmp_path)
    async with serving(down) as client:
        answer = await deliver(client, "workflow_run", run_payload())
        assert answer.status_code == 503
        assert "redeliver" in answer.json()["error"]
        assert (await deliver(client, "ping", {"zen": "z"})).status_code == 200  # counting failed, quietly
    assert conn.dbsize() == 0


async def test_an_enqueue_that_fails_drops_the_delivery_record(
    client: httpx.AsyncClient, conn: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise redis.ConnectionError("connection lost")

    with monkeypatch.context() as patch:
        patch.setattr(Queue, "enqueue_call", broken)
        assert (await deliver(client, "workflow_run", run_payload(), "d-1")).status_code == 503
    assert conn.keys(DELIVERY_KEY + "*") == []
    assert queued(conn) == []
    assert (await deliver(client, "workflow_run", run_payload(), "d-1")).status_code == 202  # the redelivery works
    assert len(queued(conn)) == 1


async def test_an_unexpected_error_is_a_logged_500_without_details(
    client: httpx.AsyncClient, conn: redis.Redis, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("a detail the client must not see")

    monkeypatch.setattr(Receiver, "_route", broken)
    with caplog.at_level(logging.ERROR, logger="bot.web"):
        answer = await deliver(client, "workflow_run", run_payload())
    assert (answer.status_code, answer.json()) == (500, {"error": "internal error"})
    assert "detail" not in answer.text
    assert any(r.exc_info and "a detail" in str(r.exc_info[1]) for r in caplog.records)


# health, readiness, metrics


async def test_healthz(client: httpx.AsyncClient) -> None:
    answer = await client.get("/healthz")
    assert (answer.status_code, answer.text) == (200, "ok")


async def test_readyz_when_redis_and_the_store_answer(redis_url: str, tmp_path: Path, store_url: str) -> None:
    async with serving(make_settings(redis_url, tmp_path, database_url=store_url)) as client:
        answer = await client.get("/readyz")
    assert answer.status_code == 200


async def test_readyz_names_redis_when_it_is_down(tmp_path: Path, closed_port: int) -> None:
    async with serving(make_settings(f"redis://127.0.0.1:{closed_port}/0", tmp_path)) as client:
        answer = await client.get("/readyz")
    assert answer.status_code == 503
    assert "redis unavailable" in answer.text
    assert "store" not in answer.text


async def test_readyz_names_the_store_when_it_is_down(redis_url: str, tmp_path: Path, closed_port: int) -> None:
    down = make_settings(redis_url, tmp_path, database_url=f"postgresql://postgres@127.0.0.1:{closed_port}/test")
    async with serving(down) as client:
        answer = await client.get("/readyz")
    assert answer.status_code == 503
    assert "store unavailable" in answer.text
    assert "redis" not in answer.text


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


async def test_metrics_show_deliveries_queue_depth_jobs_and_github_calls(
    client: httpx.AsyncClient, conn: redis.Redis
) -> None:
    await deliver(client, "workflow_run", run_payload(), "d-1")
    await deliver(client, "workflow_run", run_payload(), "d-1")
    await deliver(client, "ping", {"zen": "z"}, "d-2")
    await client.post("/webhook", content=b"{}", headers={"X-GitHub-Event": "workflow_run"})
    metrics.record_job(conn, "workers.jobs.process_workflow_run", 1.5, failed=False)
    metrics.record_job(conn, "workers.jobs.process_workflow_run", 0.25, failed=True)
    metrics.record_github_call(conn, 200)
    metrics.record_github_call(conn, 200)
    metrics.record_github_call(conn, 403)
    metrics.set_rate_limit_remaining(conn, 4990)

    answer = await client.get("/metrics")
    assert answer.status_code == 200
    assert answer.headers["content-type"].startswith("text/plain")
    found = samples(answer.text)
    assert found[("flaketally_deliveries_total", (("event", "workflow_run"), ("outcome", "enqueued")))] == 1
    assert found[("flaketally_deliveries_total", (("event", "workflow_run"), ("outcome", "duplicate")))] == 1
    assert found[("flaketally_deliveries_total", (("event", "ping"), ("outcome", "ping")))] == 1
    assert found[("flaketally_deliveries_total", (("event", "unverified"), ("outcome", "bad_signature")))] == 1
    assert found[("flaketally_queue_depth", ())] == 1
    function = (("function", "workers.jobs.process_workflow_run"),)
    assert found[("flaketally_job_duration_seconds_count", function)] == 2
    assert found[("flaketally_job_duration_seconds_sum", function)] == 1.75
    assert found[("flaketally_job_failures_total", function)] == 1
    assert found[("flaketally_github_calls_total", (("status", "200"),))] == 2
    assert found[("flaketally_github_calls_total", (("status", "403"),))] == 1
    assert found[("flaketally_github_rate_limit_remaining", ())] == 4990


async def test_metrics_are_shared_between_processes(
    client: httpx.AsyncClient, settings: Settings, conn: redis.Redis
) -> None:
    """Two apps on the same Redis, as two uvicorn processes would be, show the same counts."""
    await deliver(client, "ping", {"zen": "z"})
    async with serving(settings) as other:
        await deliver(other, "ping", {"zen": "z"})
        found = samples((await other.get("/metrics")).text)
    assert found[("flaketally_deliveries_total", (("event", "ping"), ("outcome", "ping")))] == 2


async def test_metrics_is_503_when_redis_is_down(tmp_path: Path, closed_port: int) -> None:
    async with serving(make_settings(f"redis://127.0.0.1:{closed_port}/0", tmp_path)) as client:
        assert (await client.get("/metrics")).status_code == 503


def test_metric_writes_never_raise(closed_port: int, caplog: pytest.LogCaptureFixture) -> None:
    down = redis.Redis(port=closed_port, socket_connect_timeout=1, retry=Retry(NoBackoff(), 0))
    with caplog.at_level(logging.WARNING, logger="bot.web.metrics"):
        metrics.record_delivery(down, "workflow_run", "enqueued")
        metrics.record_job(down, "workers.jobs.rejudge", 1.0, failed=True)
        metrics.record_github_call(down, 502)
        metrics.set_rate_limit_remaining(down, 0)
    down.close()
    assert [r.getMessage() for r in caplog.records] == ["metric not recorded"] * 4


def test_metric_labels_are_bounded(conn: redis.Redis) -> None:
    metrics.record_delivery(conn, "x" * 500, "enqueued")
    metrics.record_delivery(conn, "bad|label", "enqueued")
    assert conn.hgetall(metrics.DELIVERIES) == {b"other|enqueued": b"2"}


def test_every_route_calls_its_job_function_with_arguments_it_accepts() -> None:
    """The receiver names jobs by string; this holds it to the functions workers.jobs really has."""
    import importlib
    import inspect

    account = {**INSTALLATION, "account": {"login": "octo-org"}}
    samples_by_event: dict[str, dict[str, Any]] = {
        "workflow_run": run_payload(),
        "check_run": {
            "installation": INSTALLATION,
            "repository": REPO,
            "check_run": {"id": 4, "head_sha": SHA},
            "requested_action": {"identifier": "rerun"},
            "sender": {"login": "octocat"},
        },
        "installation": {"installation": account, "repositories": []},
        "installation_repositories": {"installation": account, "repositories_added": [], "repositories_removed": []},
    }
    for (event, action), route in ROUTES.items():
        module, _, name = route.function.rpartition(".")
        function = getattr(importlib.import_module(module), name)
        _, kwargs = route.build({**samples_by_event[event], "action": action}, 4242, "d-1")
        inspect.signature(function).bind(**kwargs)  # raises TypeError on a missing or unknown argument
