"""What the GitHub App keeps beside the reports: tenants, runs, jobs, its own check runs and comments,
and the tests it last knew as flaky. Every write is an upsert, so a job that runs twice changes nothing.

``repo_key`` is the store's key of a repository (its ``repos`` row); ``repo_id`` is GitHub's id of it,
as everywhere else in Flaketally (kept in the ``repos.github_id`` column)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, NamedTuple

import sqlalchemy as sa

from bot.core.times import stored_time
from bot.store import Store
from bot.store.schema import (
    check_runs,
    comments,
    contexts,
    installations,
    jobs,
    known_flaky,
    observations,
    reports,
    repos,
    runs,
    tests,
)


class InstallationState(StrEnum):
    """Where an installation of the App stands; only an active one is processed."""

    ACTIVE = "active"
    SUSPENDED = "suspended"
    DELETED = "deleted"


@dataclass(frozen=True, slots=True)
class RunRecord:
    run_id: int
    attempt: int
    head_sha: str
    head_branch: str | None
    event: str | None
    workflow_path: str | None
    run_number: int | None
    html_url: str | None
    conclusion: str | None
    run_started_at: str | None
    updated_at: str | None
    pull_requests: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class JobRecord:
    id: int
    run_id: int
    attempt: int
    name: str
    conclusion: str | None
    started_at: str | None
    completed_at: str | None
    labels: tuple[str, ...]
    html_url: str | None


def _upsert(store: Store, table: sa.Table, values: dict[str, Any], keys: Sequence[str]) -> None:
    statement = store._insert(table).values(**values)
    update = {k: v for k, v in values.items() if k not in keys}
    statement = (
        statement.on_conflict_do_update(index_elements=list(keys), set_=update)
        if update
        else statement.on_conflict_do_nothing()
    )
    with store.engine.begin() as conn:
        conn.execute(statement)


def record_installation(
    store: Store,
    installation_id: int,
    account: str,
    state: InstallationState,
    permissions: Mapping[str, str] | None = None,
) -> None:
    values: dict[str, object] = {"id": installation_id, "account": account, "status": state.value}
    # the deletion's time (its data is purged a retention period later); any other event cancels it
    deleted = stored_time(datetime.now(UTC)) if state is InstallationState.DELETED else None
    values["deleted_at"] = deleted
    if permissions is not None:
        values["permissions"] = json.dumps(dict(sorted(permissions.items())))
    _upsert(store, installations, values, ["id"])


def installation_state(store: Store, installation_id: int) -> InstallationState | None:
    """None for an installation no event has told about yet (it is processed)."""
    with store.engine.connect() as conn:
        found = conn.execute(sa.select(installations.c.status).where(installations.c.id == installation_id)).scalar()
    return InstallationState(found) if found is not None else None


def repo_key(store: Store, full_name: str, installation_id: int | None = None, repo_id: int | None = None) -> int:
    """The store's key of a repository, recording its installation and GitHub's id of it (``repo_id``)."""
    with store.engine.begin() as conn:
        found = store.repo_key(conn, full_name, installation_id)
        if installation_id is not None or repo_id is not None:
            values = {k: v for k, v in (("installation_id", installation_id), ("github_id", repo_id)) if v is not None}
            conn.execute(sa.update(repos).where(repos.c.id == found).values(**values))
        return found


def record_run(store: Store, repo_key: int, run: RunRecord) -> None:
    values = {
        "repo_id": repo_key,
        "run_id": run.run_id,
        "attempt": run.attempt,
        "head_sha": run.head_sha,
        "head_branch": run.head_branch,
        "event": run.event,
        "workflow_path": run.workflow_path,
        "run_number": run.run_number,
        "html_url": run.html_url,
        "conclusion": run.conclusion,
        "run_started_at": run.run_started_at,
        "updated_at": run.updated_at,
        "pull_requests": json.dumps(list(run.pull_requests)),
    }
    _upsert(store, runs, values, ["repo_id", "run_id", "attempt"])


def _run(row: Any) -> RunRecord:
    return RunRecord(
        int(row.run_id),
        int(row.attempt),
        row.head_sha,
        row.head_branch,
        row.event,
        row.workflow_path,
        row.run_number,
        row.html_url,
        row.conclusion,
        row.run_started_at,
        row.updated_at,
        tuple(int(n) for n in json.loads(row.pull_requests)),
    )


def runs_for_sha(store: Store, repo_key: int, head_sha: str) -> list[RunRecord]:
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(runs)
            .where(runs.c.repo_id == repo_key, runs.c.head_sha == head_sha)
            .order_by(runs.c.run_id, runs.c.attempt)
        ).all()
    return [_run(r) for r in rows]


def record_jobs(store: Store, repo_key: int, records: Iterable[JobRecord]) -> None:
    for job in records:
        values = {
            "id": job.id,
            "repo_id": repo_key,
            "run_id": job.run_id,
            "attempt": job.attempt,
            "name": job.name,
            "conclusion": job.conclusion,
            "started_at": job.started_at,
            "completed_at": job.completed_at,
            "labels": json.dumps(list(job.labels)),
            "html_url": job.html_url,
        }
        _upsert(store, jobs, values, ["id"])


def jobs_of(store: Store, repo_key: int, run_id: int, *, every: bool = False) -> list[JobRecord]:
    """The jobs stored for a run, newest attempt first: one per name, or with ``every`` each attempt's."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(jobs)
            .where(jobs.c.repo_id == repo_key, jobs.c.run_id == run_id)
            .order_by(jobs.c.attempt.desc(), jobs.c.id)
        ).all()
    found: dict[object, JobRecord] = {}
    for r in rows:
        found.setdefault(
            r.id if every else r.name,
            JobRecord(
                int(r.id),
                int(r.run_id),
                int(r.attempt),
                r.name,
                r.conclusion,
                r.started_at,
                r.completed_at,
                tuple(json.loads(r.labels)),
                r.html_url,
            ),
        )
    return list(found.values())


def stored_artifacts(store: Store, repo_key: int, run_id: int) -> set[int]:
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(reports.c.artifact_id).where(
                reports.c.repo_id == repo_key, reports.c.run_id == run_id, reports.c.artifact_id.is_not(None)
            )
        )
        return {int(a) for (a,) in rows}


def stored_artifact_names(store: Store, repo_key: int, run_id: int, attempt: int) -> set[str]:
    """The names of the artifacts this attempt's stored reports came from (a report's source is
    ``artifact/member``)."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(reports.c.source).where(
                reports.c.repo_id == repo_key, reports.c.run_id == run_id, reports.c.attempt == attempt
            )
        )
        return {str(source).split("/", 1)[0] for (source,) in rows}


def stored_attempts(store: Store, repo_key: int, run_id: int) -> set[int]:
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(reports.c.attempt).where(reports.c.repo_id == repo_key, reports.c.run_id == run_id).distinct()
        )
        return {int(a) for (a,) in rows}


def _get(store: Store, column: sa.Column[Any], where: sa.ColumnElement[bool]) -> int | None:
    with store.engine.connect() as conn:
        found = conn.execute(sa.select(column).where(where)).scalar()
    return int(found) if found is not None else None


@dataclass(frozen=True, slots=True)
class CheckRunRecord:
    check_run_id: int
    output_digest: str | None
    annotations_sent: frozenset[str]


def check_run_of(store: Store, repo_key: int, head_sha: str, run_id: int, attempt: int) -> CheckRunRecord | None:
    """The check run opened for this attempt of this run, and what was already sent to it."""
    with store.engine.connect() as conn:
        row = conn.execute(
            sa.select(check_runs.c.check_run_id, check_runs.c.output_digest, check_runs.c.annotations_sent).where(
                check_runs.c.repo_id == repo_key,
                check_runs.c.head_sha == head_sha,
                check_runs.c.run_id == run_id,
                check_runs.c.attempt == attempt,
            )
        ).first()
    if row is None:
        return None
    return CheckRunRecord(int(row.check_run_id), row.output_digest, frozenset(json.loads(row.annotations_sent)))


def check_runs_of_commit(store: Store, repo_key: int, head_sha: str) -> list[tuple[int, int, CheckRunRecord]]:
    """(run id, attempt, what was sent) of every check run opened on the commit, by run and attempt."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(
                check_runs.c.run_id,
                check_runs.c.attempt,
                check_runs.c.check_run_id,
                check_runs.c.output_digest,
                check_runs.c.annotations_sent,
            )
            .where(check_runs.c.repo_id == repo_key, check_runs.c.head_sha == head_sha)
            .order_by(check_runs.c.run_id, check_runs.c.attempt)
        ).all()
    return [
        (
            int(r.run_id),
            int(r.attempt),
            CheckRunRecord(int(r.check_run_id), r.output_digest, frozenset(json.loads(r.annotations_sent))),
        )
        for r in rows
    ]


def remember_check_run(
    store: Store, repo_key: int, head_sha: str, run_id: int, attempt: int, record: CheckRunRecord
) -> None:
    values = {
        "repo_id": repo_key,
        "head_sha": head_sha,
        "run_id": run_id,
        "attempt": attempt,
        "check_run_id": record.check_run_id,
        "output_digest": record.output_digest,
        "annotations_sent": json.dumps(sorted(record.annotations_sent)),
    }
    _upsert(store, check_runs, values, ["repo_id", "head_sha", "run_id", "attempt"])


def comment_of(store: Store, repo_key: int, pr_number: int) -> int | None:
    return _get(
        store, comments.c.comment_id, sa.and_(comments.c.repo_id == repo_key, comments.c.pr_number == pr_number)
    )


def comment_digest_of(store: Store, repo_key: int, pr_number: int) -> str | None:
    """The digest of what the pull request's comment was last sent saying (None when not known)."""
    where = sa.and_(comments.c.repo_id == repo_key, comments.c.pr_number == pr_number)
    with store.engine.connect() as conn:
        found = conn.execute(sa.select(comments.c.body_digest).where(where)).scalar()
    return str(found) if found is not None else None


def remember_comment(
    store: Store, repo_key: int, pr_number: int, comment_id: int, body_digest: str | None = None
) -> None:
    _upsert(
        store,
        comments,
        {"repo_id": repo_key, "pr_number": pr_number, "comment_id": comment_id, "body_digest": body_digest},
        ["repo_id", "pr_number"],
    )


def tests_on_commit(store: Store, repo_key: int, head_sha: str) -> set[str]:
    """The ids of the tests that failed, or passed after a retry, on this commit (any context)."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(tests.c.test_id)
            .distinct()
            .join(observations, observations.c.test_id == tests.c.id)
            .join(reports, reports.c.id == observations.c.report_id)
            .where(reports.c.repo_id == repo_key, reports.c.commit_sha == head_sha)
        )
        return {str(t) for (t,) in rows}


def known_flaky_keys(store: Store, repo_key: int) -> set[tuple[str, str]]:
    """(test id, context key) of the tests last announced as known flaky."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(tests.c.test_id, contexts.c.key)
            .join(tests, tests.c.id == known_flaky.c.test_id)
            .join(contexts, contexts.c.id == known_flaky.c.context_id)
            .where(known_flaky.c.repo_id == repo_key)
        )
        return {(str(t), str(c)) for t, c in rows}


def set_known_flaky(store: Store, repo_key: int, keys: Iterable[tuple[str, str]]) -> None:
    """Replace the set of tests known flaky in this repository."""
    wanted = set(keys)
    with store.engine.begin() as conn:
        conn.execute(sa.delete(known_flaky).where(known_flaky.c.repo_id == repo_key))
        if not wanted:
            return
        ids = {
            (str(t), str(c)): (int(ti), int(ci))
            for t, c, ti, ci in conn.execute(
                sa.select(tests.c.test_id, contexts.c.key, tests.c.id, contexts.c.id)
                .select_from(tests.join(contexts, sa.true()))
                .where(tests.c.repo_id == repo_key, tests.c.test_id.in_({t for t, _ in wanted}))
            )
        }
        rows = [
            {"repo_id": repo_key, "test_id": ids[k][0], "context_id": ids[k][1]} for k in sorted(wanted) if k in ids
        ]
        if rows:
            conn.execute(known_flaky.insert(), rows)


class CommitSummary(NamedTuple):
    reports: int
    results: int  # test results in them
    skipped: int  # of which skipped
    seconds: float  # the time the tests ran, every report together


def commit_summary(store: Store, repo_key: int, head_sha: str) -> CommitSummary:
    """What is stored for this commit: its reports, their results and skips, and the tests' time (each
    report's plain passes added up when it was stored, and its kept results)."""
    on_commit = sa.and_(reports.c.repo_id == repo_key, reports.c.commit_sha == head_sha)
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(reports.c.results, reports.c.skipped, reports.c.passed_seconds).where(on_commit)
        ).all()
        kept = conn.execute(
            sa.select(sa.func.coalesce(sa.func.sum(observations.c.duration), 0.0))
            .join(reports, reports.c.id == observations.c.report_id)
            .where(on_commit)
        ).scalar()
    skipped = sum(int(row.skipped) for row in rows)
    seconds = sum(float(row.passed_seconds) for row in rows) + float(kept or 0.0)
    return CommitSummary(len(rows), sum(int(row.results) for row in rows), skipped, seconds)


def check_run_attempt(store: Store, repo_key: int, check_run_id: int) -> tuple[int, int] | None:
    """(run id, attempt) that a check run of ours was opened for."""
    with store.engine.connect() as conn:
        row = conn.execute(
            sa.select(check_runs.c.run_id, check_runs.c.attempt).where(
                check_runs.c.repo_id == repo_key, check_runs.c.check_run_id == check_run_id
            )
        ).first()
    return (int(row[0]), int(row[1])) if row else None


def check_runs_of_attempt(store: Store, repo: str, run_id: int, attempt: int) -> list[tuple[int, str, int]]:
    """(repo pk, head sha, check run id) of the check runs opened for one attempt."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(check_runs.c.repo_id, check_runs.c.head_sha, check_runs.c.check_run_id)
            .join(repos, repos.c.id == check_runs.c.repo_id)
            .where(repos.c.full_name == repo, check_runs.c.run_id == run_id, check_runs.c.attempt == attempt)
        ).all()
    return [(int(r[0]), str(r[1]), int(r[2])) for r in rows]


def report_contexts(store: Store, repo_key: int, run_id: int, attempt: int) -> list[str]:
    """The context keys of the reports stored for one attempt of one run."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(contexts.c.key)
            .join(reports, reports.c.context_id == contexts.c.id)
            .where(reports.c.repo_id == repo_key, reports.c.run_id == run_id, reports.c.attempt == attempt)
        )
        return [str(key) for (key,) in rows]
