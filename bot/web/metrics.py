"""Counters kept in Redis, so every uvicorn process and rq worker adds to the same figures.

The ``record_*`` helpers never raise: a metric that cannot be written is logged and dropped, because
counting must never make a webhook or a job fail. ``RedisCollector`` reads them back for ``/metrics``.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterator

import redis
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric, SummaryMetricFamily
from prometheus_client.registry import CollectorRegistry
from rq import Queue

log = logging.getLogger(__name__)

PREFIX = "flaketally:metrics:"
DELIVERIES = PREFIX + "deliveries"  # hash "event|outcome" -> count
JOB_SECONDS = PREFIX + "job_seconds"  # hash function -> seconds (float)
JOB_COUNT = PREFIX + "job_count"  # hash function -> count
JOB_FAILURES = PREFIX + "job_failures"  # hash function -> count
GITHUB_CALLS = PREFIX + "github_calls"  # hash status -> count
RATE_LIMIT_REMAINING = PREFIX + "github_rate_limit_remaining"  # string

_LABEL = re.compile(r"[A-Za-z0-9_.:-]{1,100}")


def _label(value: str) -> str:
    """A label value safe to store and bounded in size; anything else is counted as "other"."""
    return value if _LABEL.fullmatch(value) else "other"


def record_delivery(connection: redis.Redis, event: str, outcome: str) -> None:
    """Count one webhook delivery by its event and what the receiver did with it."""
    _write(lambda: connection.hincrby(DELIVERIES, f"{_label(event)}|{_label(outcome)}", 1), "deliveries")


def record_job(connection: redis.Redis, function_name: str, seconds: float, failed: bool) -> None:
    """Count one finished job run: its duration, and whether it failed."""

    def write() -> None:
        name = _label(function_name)
        pipe = connection.pipeline(transaction=False)
        pipe.hincrbyfloat(JOB_SECONDS, name, max(0.0, float(seconds)))
        pipe.hincrby(JOB_COUNT, name, 1)
        if failed:
            pipe.hincrby(JOB_FAILURES, name, 1)
        pipe.execute()

    _write(write, "job")


def record_github_call(connection: redis.Redis, status: int) -> None:
    """Count one GitHub API response by its HTTP status."""
    _write(lambda: connection.hincrby(GITHUB_CALLS, str(int(status)), 1), "github_calls")


def set_rate_limit_remaining(connection: redis.Redis, remaining: int) -> None:
    """The latest ``x-ratelimit-remaining`` GitHub answered with."""
    _write(lambda: connection.set(RATE_LIMIT_REMAINING, int(remaining)), "rate_limit")


def _write(operation: Callable[[], object], metric: str) -> None:
    try:
        operation()
    except redis.RedisError as exc:
        log.warning("metric not recorded", extra={"metric": metric, "error": repr(exc)})


def _text(value: bytes | str) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


class RedisCollector:
    """A prometheus_client collector reading the Redis-held counters and the rq queue depth."""

    def __init__(self, connection: redis.Redis, queue_name: str) -> None:
        self.connection = connection
        self.queue_key = Queue(queue_name, connection=connection).key

    def collect(self) -> Iterator[Metric]:
        """Raises ``redis.RedisError`` when Redis does not answer: the scrape fails rather than lies."""
        pipe = self.connection.pipeline(transaction=False)
        pipe.hgetall(DELIVERIES)
        pipe.llen(self.queue_key)
        pipe.hgetall(JOB_SECONDS)
        pipe.hgetall(JOB_COUNT)
        pipe.hgetall(JOB_FAILURES)
        pipe.hgetall(GITHUB_CALLS)
        pipe.get(RATE_LIMIT_REMAINING)
        deliveries, depth, seconds, counts, failures, calls, remaining = pipe.execute()

        family = CounterMetricFamily(
            "flaketally_deliveries", "Webhook deliveries received, by event and outcome.", labels=["event", "outcome"]
        )
        for field, value in sorted((_text(k), int(v)) for k, v in deliveries.items()):
            event, _, outcome = field.partition("|")
            family.add_metric([event, outcome], value)
        yield family

        yield GaugeMetricFamily("flaketally_queue_depth", "Jobs waiting in the rq queue.", value=int(depth))

        durations = SummaryMetricFamily(
            "flaketally_job_duration_seconds", "Time spent running jobs, by function.", labels=["function"]
        )
        sums = {_text(k): float(v) for k, v in seconds.items()}
        for name, count in sorted((_text(k), int(v)) for k, v in counts.items()):
            durations.add_metric([name], count, sums.get(name, 0.0))
        yield durations

        failed = CounterMetricFamily(
            "flaketally_job_failures", "Job runs that failed, by function.", labels=["function"]
        )
        for name, value in sorted((_text(k), int(v)) for k, v in failures.items()):
            failed.add_metric([name], value)
        yield failed

        github = CounterMetricFamily(
            "flaketally_github_calls", "GitHub API responses, by HTTP status.", labels=["status"]
        )
        for status, value in sorted((_text(k), int(v)) for k, v in calls.items()):
            github.add_metric([status], value)
        yield github

        rate = GaugeMetricFamily(
            "flaketally_github_rate_limit_remaining", "The x-ratelimit-remaining GitHub last answered with."
        )
        if remaining is not None:
            rate.add_metric([], int(remaining))
        yield rate


def registry(connection: redis.Redis, queue_name: str) -> CollectorRegistry:
    """A registry holding only the Redis-backed figures (no per-process metrics: they would not add up)."""
    found = CollectorRegistry()
    found.register(RedisCollector(connection, queue_name))
    return found
