"""How many times the receiver talks to Redis for a delivery it enqueues, and what the last of those
carries: rq's queue registration, the delivery record and the delivery's count, sent together."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
from pathlib import Path
from typing import Any

import pytest
import redis
from redis.client import Pipeline
from rq import Queue
from starlette.datastructures import Headers

from bot.settings import Settings
from bot.web import metrics
from bot.web.receiver import CLAIM_SECONDS, DELIVERY_KEY, DELIVERY_SECONDS, Receiver

SECRET = "webhook-secret-for-tests"
QUEUE = "flaketally-test"
SHA = "3484a3fb816e0859fd6e1cea078d76385ff50625"
JOB = "run-300029405-289782451-1"


def delivery(delivery_id: str, attempt: int = 1) -> tuple[Headers, bytes]:
    payload: dict[str, Any] = {
        "action": "completed",
        "installation": {"id": 4242},
        "repository": {"id": 300029405, "full_name": "octo-org/octo-repo", "default_branch": "main"},
        "workflow_run": {"id": 289782451, "run_attempt": attempt, "head_sha": SHA},
    }
    body = json.dumps(payload).encode()
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    headers = {"x-github-event": "workflow_run", "x-github-delivery": delivery_id, "x-hub-signature-256": signature}
    return Headers(headers), body


@pytest.fixture
def receiver(redis_url: str, tmp_path: Path, conn: redis.Redis) -> Receiver:
    settings = Settings(
        app_id=0,
        webhook_secret=SECRET,
        redis_url=redis_url,
        database_url=str(tmp_path / "flaketally.db"),
        queue_name=QUEUE,
    )
    return Receiver(settings, conn)


@pytest.fixture
def round_trips(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Every command sent alone, and every pipeline sent, as it goes to Redis."""
    sent: list[str] = []
    command, execute = redis.Redis.execute_command, Pipeline.execute

    def one(self: redis.Redis, *args: Any, **options: Any) -> Any:
        sent.append(str(args[0]))
        return command(self, *args, **options)  # type: ignore[no-untyped-call]

    def pipeline(self: Pipeline, raise_on_error: bool = True) -> list[Any]:
        sent.append("pipeline " + " ".join(str(c[0][0]) for c in self.command_stack))
        return execute(self, raise_on_error)

    monkeypatch.setattr(redis.Redis, "execute_command", one)
    monkeypatch.setattr(Pipeline, "execute", pipeline)
    return sent


def test_a_delivery_enqueued_takes_three_round_trips(
    receiver: Receiver, conn: redis.Redis, round_trips: list[str]
) -> None:
    receiver.respond(*delivery("d-0", attempt=2))  # rq asks the server's version once per queue
    round_trips.clear()
    answer = receiver.respond(*delivery("d-1"))
    assert (answer.status, answer.body) == (202, {"enqueued": JOB})
    # the claim; rq's unique enqueue script (job saved and pushed); its queue registration, the record, the count
    assert round_trips == ["SET", "EVALSHA", "pipeline SADD SET HINCRBY"]
    queue = Queue(QUEUE, connection=conn)
    assert queue.job_ids == ["run-300029405-289782451-2", JOB]
    assert queue.key.encode() in conn.smembers(queue.redis_queues_keys)
    assert conn.get(DELIVERY_KEY + "d-1") == JOB.encode()
    assert DELIVERY_SECONDS - 60 < conn.ttl(DELIVERY_KEY + "d-1") <= DELIVERY_SECONDS
    assert conn.hgetall(metrics.DELIVERIES) == {b"workflow_run|enqueued": b"2"}


def test_a_job_already_queued_is_recorded_and_counted_in_the_same_round_trip(
    receiver: Receiver, conn: redis.Redis, round_trips: list[str]
) -> None:
    assert receiver.respond(*delivery("d-1")).status == 202
    round_trips.clear()
    answer = receiver.respond(*delivery("d-2"))
    assert (answer.status, answer.body) == (200, {"duplicate": True, "job": JOB})
    assert round_trips == ["SET", "EVALSHA", "pipeline SADD SET HINCRBY"]
    assert conn.get(DELIVERY_KEY + "d-2") == JOB.encode()
    assert conn.hgetall(metrics.DELIVERIES) == {b"workflow_run|enqueued": b"1", b"workflow_run|duplicate": b"1"}
    assert Queue(QUEUE, connection=conn).count == 1


def test_a_delivery_already_recorded_is_refused_after_one_round_trip_more(
    receiver: Receiver, round_trips: list[str]
) -> None:
    assert receiver.respond(*delivery("d-1")).status == 202
    round_trips.clear()
    assert receiver.respond(*delivery("d-1")).body == {"duplicate": True}
    assert round_trips == ["SET", "GET", "HINCRBY"]


def test_the_job_stays_queued_when_its_record_and_count_cannot_be_written(
    receiver: Receiver, conn: redis.Redis, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Redis gone after the job was queued: the answer is still 202, the claim lapses on its own."""

    def lost(self: Pipeline, raise_on_error: bool = True) -> list[Any]:
        raise redis.ConnectionError("connection lost")

    monkeypatch.setattr(Pipeline, "execute", lost)
    with caplog.at_level(logging.WARNING, logger="bot.web"):
        answer = receiver.respond(*delivery("d-1"))
    assert (answer.status, answer.body) == (202, {"enqueued": JOB})
    assert answer.writes is None
    assert Queue(QUEUE, connection=conn).job_ids == [JOB]
    assert conn.get(DELIVERY_KEY + "d-1") == b"pending"
    assert 0 < conn.ttl(DELIVERY_KEY + "d-1") <= CLAIM_SECONDS
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["delivery record not kept", "metric not recorded"]


def test_a_count_that_cannot_be_written_leaves_the_record_kept(
    receiver: Receiver, conn: redis.Redis, caplog: pytest.LogCaptureFixture
) -> None:
    conn.set(metrics.DELIVERIES, b"not a hash")  # HINCRBY fails with WRONGTYPE, alone in the pipeline
    with caplog.at_level(logging.WARNING, logger="bot.web"):
        assert receiver.respond(*delivery("d-1")).status == 202
    assert conn.get(DELIVERY_KEY + "d-1") == JOB.encode()
    assert [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING] == ["metric not recorded"]
