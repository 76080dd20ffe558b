"""The rq job functions. Thin: primitive arguments in, a call into ``bot.pipeline``, a summary out.

A worker process reads its settings once (``configure``, called by ``workers.main`` at start-up, or
on the first job) and mints its own installation tokens; the token cache is shared through Redis, so
a job forked per task does not mint a new one.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import redis
from rq import get_current_job

from bot.github.budget import WriteBudget, Writes
from bot.github.port import GitHubPort
from bot.pipeline import attempt as pipeline
from bot.pipeline.publish import conclude_failed
from bot.pipeline.scope import Options
from bot.settings import Settings
from bot.store import Store
from bot.store import records as rec
from bot.web import metrics

log = logging.getLogger(__name__)

PortFactory = Callable[[Settings, redis.Redis, int, Writes], GitHubPort]
BudgetFactory = Callable[[redis.Redis, int], Writes]
# Publishing (check run, PR comments) is serialised per repository, so two workers racing on one
# commit edit the same comment instead of each posting one.
PUBLISH_LOCK_SECONDS = 300

T = TypeVar("T")


@dataclass(slots=True)
class _Worker:
    """What one worker process reads once: its settings, store, Redis and how it reaches GitHub."""

    settings: Settings
    store: Store
    redis: redis.Redis
    port: PortFactory
    pid: int
    budget: BudgetFactory


_worker: _Worker | None = None


def configure(
    settings: Settings,
    *,
    store: Store | None = None,
    connection: redis.Redis | None = None,
    port_factory: PortFactory | None = None,
    budget_factory: BudgetFactory | None = None,
) -> None:
    """Read once per worker process: the settings, the store, Redis, how to reach GitHub, and how a job
    holds its installation's write budget."""
    global _worker
    _worker = _Worker(
        settings=settings,
        store=store or Store.open_current(settings.database_url),
        redis=connection or redis.Redis.from_url(settings.redis_url),
        port=port_factory or github_port,
        pid=os.getpid(),
        budget=budget_factory or write_budget,
    )


def reset() -> None:
    """Forget what ``configure`` read (the next job reads the environment again)."""
    global _worker
    _worker = None


def _context() -> _Worker:
    if _worker is None:
        configure(Settings.from_env())
    assert _worker is not None
    if _worker.pid != os.getpid():
        # rq forks a process per job: its database connections are the parent's, so leave them to the
        # parent (SQLAlchemy's advice for forks) and open this process's own
        _worker.store.engine.dispose(close=False)
        _worker.pid = os.getpid()
    return _worker


def response_metrics(connection: redis.Redis) -> Callable[[int, int | None], None]:
    """What the port calls on every GitHub response: calls by status, and the rate limit left."""

    def on_response(status: int, remaining: int | None) -> None:
        metrics.record_github_call(connection, status)
        if remaining is not None:
            metrics.set_rate_limit_remaining(connection, remaining)

    return on_response


def github_port(settings: Settings, connection: redis.Redis, installation_id: int, writes: Writes) -> GitHubPort:
    return GitHubPort(
        app_id=settings.app_id,
        private_key=settings.private_key,
        installation_id=installation_id,
        api_url=settings.api_url,
        redis=connection,
        on_response=response_metrics(connection),
        writes=writes,
    )


def write_budget(connection: redis.Redis, installation_id: int) -> WriteBudget:
    """The installation's write budget as this job holds it (``bot.github.budget``): shared by every
    worker through Redis, spent by the port on every content-creating request."""
    return WriteBudget(connection, installation_id)


def _options(settings: Settings) -> Options:
    return Options(artifact_patterns=settings.artifact_patterns)


def _final_try() -> bool:
    """Whether rq will not retry the running job again."""
    job = get_current_job()
    return job is None or not job.retries_left


def _timed(name: str, connection: redis.Redis, work: Callable[[], T]) -> T:
    started = time.monotonic()
    try:
        result = work()
    except Exception:
        metrics.record_job(connection, name, time.monotonic() - started, failed=True)
        raise
    metrics.record_job(connection, name, time.monotonic() - started, failed=False)
    return result


@contextmanager
def _publish_lock(connection: redis.Redis, repo_id: int) -> Iterator[None]:
    with connection.lock(
        f"flaketally:lock:publish:{repo_id}", timeout=PUBLISH_LOCK_SECONDS, blocking_timeout=PUBLISH_LOCK_SECONDS
    ):
        yield


def process_workflow_run(
    installation_id: int,
    repo: str,
    repo_id: int,
    run_id: int,
    attempt: int,
    default_branch: str | None = None,
    head_sha: str | None = None,
) -> dict[str, Any]:
    """``workflow_run`` ``completed``: collect, judge and report one attempt. ``head_sha``: the commit, as
    the delivery named it, so that a job that fails for good can say so in a check run on it."""
    worker = _context()
    store, connection = worker.store, worker.redis

    def work() -> dict[str, Any]:
        budget = worker.budget(connection, installation_id)
        with worker.port(worker.settings, connection, installation_id, budget) as gh:
            try:
                report = pipeline.process_workflow_run(
                    store,
                    gh,
                    installation_id=installation_id,
                    repo=repo,
                    repo_id=repo_id,
                    run_id=run_id,
                    attempt=attempt,
                    options=_options(worker.settings),
                    publish_lock=lambda: _publish_lock(connection, repo_id),
                    default_branch=default_branch,
                    writes=budget,
                )
            except Exception as exc:
                if _final_try():
                    log.exception("job failed for good", extra={"repo": repo, "run_id": run_id, "attempt": attempt})
                    key = rec.repo_key(store, repo, installation_id, repo_id) if head_sha else None
                    conclude_failed(
                        store,
                        gh,
                        repo=repo,
                        run_id=run_id,
                        attempt=attempt,
                        reason=_reason(exc),
                        head_sha=head_sha,
                        repo_key=key,
                    )
                raise
        if report is None:
            return {"skipped": "installation not active"}
        return {
            "head_sha": report.head_sha,
            "conclusion": report.gate.conclusion.value,
            "findings": len(report.findings),
        }

    return _timed("process_workflow_run", connection, work)


def open_check_run(
    installation_id: int, repo: str, repo_id: int, head_sha: str, run_id: int, attempt: int = 1
) -> dict[str, Any]:
    """What ``workflow_run`` ``requested`` enqueued before Flaketally stopped opening a check run in progress
    (it costs a write of GitHub's budget that nobody reads): such a job, still queued, does nothing."""
    return {"skipped": "a check run is created when the attempt completes"}


def rejudge(
    installation_id: int,
    repo: str,
    repo_id: int,
    head_sha: str,
    check_run_id: int,
    default_branch: str | None = None,
) -> dict[str, Any]:
    """``check_run`` ``rerequested``: judge the commit again and update that check run."""
    worker = _context()
    connection = worker.redis

    def work() -> dict[str, Any]:
        budget = worker.budget(connection, installation_id)
        with worker.port(worker.settings, connection, installation_id, budget) as gh:
            report = pipeline.rejudge(
                worker.store,
                gh,
                installation_id=installation_id,
                repo=repo,
                repo_id=repo_id,
                head_sha=head_sha,
                check_run_id=check_run_id,
                options=_options(worker.settings),
                publish_lock=lambda: _publish_lock(connection, repo_id),
                default_branch=default_branch,
                writes=budget,
            )
        return {"conclusion": report.gate.conclusion.value if report else None}

    return _timed("rejudge", connection, work)


def act(
    installation_id: int,
    repo: str,
    repo_id: int,
    head_sha: str,
    check_run_id: int,
    identifier: str,
    sender: str,
    default_branch: str | None = None,
) -> dict[str, Any]:
    """``check_run`` ``requested_action``: what a click on one of the check run's buttons asks, done once."""
    worker = _context()
    connection = worker.redis

    def work() -> dict[str, Any]:
        budget = worker.budget(connection, installation_id)
        with worker.port(worker.settings, connection, installation_id, budget) as gh:
            line = pipeline.act(
                worker.store,
                gh,
                installation_id=installation_id,
                repo=repo,
                repo_id=repo_id,
                head_sha=head_sha,
                check_run_id=check_run_id,
                identifier=identifier,
                sender=sender,
                options=_options(worker.settings),
                publish_lock=lambda: _publish_lock(connection, repo_id),
                default_branch=default_branch,
                writes=budget,
            )
        return {"done": line}

    return _timed("act", connection, work)


def record_installation(
    installation_id: int,
    action: str,
    account: str,
    repositories_added: list[dict[str, Any]],
    repositories_removed: list[dict[str, Any]],
    permissions: dict[str, str] | None = None,
) -> dict[str, Any]:
    """``installation`` and ``installation_repositories``: who the tenants are, which are active, and what
    they granted."""
    worker = _context()

    def work() -> dict[str, Any]:
        state = _STATE_AFTER.get(action, rec.InstallationState.ACTIVE)
        rec.record_installation(worker.store, installation_id, account, state, permissions)
        for repository in repositories_added:
            rec.repo_key(worker.store, str(repository["full_name"]), installation_id, int(repository["id"]))
        return {
            "installation_id": installation_id,
            "status": state.value,
            "added": len(repositories_added),
            "removed": len(repositories_removed),
        }

    return _timed("record_installation", worker.redis, work)


DIGEST_LOCK_SECONDS = 900  # an organisation of many repositories takes a while to add up


def post_digest(installation_id: int, week: str) -> dict[str, Any]:
    """The installation's digest of ``week``, posted once (``bot.digest.post``), under its digest lock."""
    from bot.digest.post import post_digest as post
    from bot.github.limits import web_url

    worker = _context()
    connection = worker.redis

    def work() -> dict[str, Any]:
        if rec.installation_state(worker.store, installation_id) is not rec.InstallationState.ACTIVE:
            return {"skipped": "installation not active"}
        lock = connection.lock(
            f"flaketally:lock:digest:{installation_id}",
            timeout=DIGEST_LOCK_SECONDS,
            blocking_timeout=DIGEST_LOCK_SECONDS,
        )
        budget = worker.budget(connection, installation_id)
        with lock, worker.port(worker.settings, connection, installation_id, budget) as gh:
            done = post(worker.store, gh, installation_id, week, server=web_url(worker.settings.api_url))
        return {"state": done.state.value, "repo": done.repo, "issue": done.issue_number, "line": done.line}

    return _timed("post_digest", connection, work)


def digest_tick(now: str | None = None) -> dict[str, Any]:
    """What the scheduler runs every few minutes: enqueue each digest that is due (``bot.digest.schedule``);
    ``now`` (ISO 8601) stands in for the clock in tests and replays."""
    from datetime import UTC, datetime

    from rq import Queue
    from rq.exceptions import DuplicateJobError

    from bot.digest.schedule import due_digests
    from bot.web.receiver import enqueue

    worker = _context()
    moment = datetime.fromisoformat(now) if now else datetime.now(UTC)
    queue = Queue(worker.settings.queue_name, connection=worker.redis)
    enqueued = []
    for installation_id, week in due_digests(worker.store, moment):
        try:  # one job id per week: while it is queued or its result kept, another tick adds none
            enqueue(
                queue,
                "workers.jobs.post_digest",
                {"installation_id": installation_id, "week": week},
                job_id=f"digest-{installation_id}-{week}",
                timeout=DIGEST_LOCK_SECONDS,
            )
        except DuplicateJobError:
            continue
        enqueued.append(f"{installation_id}:{week}")
    return {"enqueued": enqueued}


def prune_store(now: str | None = None) -> dict[str, Any]:
    """Once a day (the scheduler): forget what is older than the retention period, and the installations
    deleted longer ago than that (``bot.store.retention``)."""
    from datetime import UTC, datetime

    from bot.store.retention import prune

    worker = _context()
    moment = datetime.fromisoformat(now) if now else datetime.now(UTC)

    def work() -> dict[str, Any]:
        done = prune(worker.store, worker.settings.retention_days, now=moment)
        log.info(str(done))
        return {"pruned": str(done), "purged": list(done.installations)}

    return _timed("prune_store", worker.redis, work)


# the ``installation`` actions that end processing; every other one (created, unsuspend, ...) resumes it
_STATE_AFTER = {"deleted": rec.InstallationState.DELETED, "suspend": rec.InstallationState.SUSPENDED}


def _reason(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]
