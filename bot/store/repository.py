"""What the App knows of a repository beyond its reports and its own writes: its default branch, its
configuration files as last read (with their ETags), and what could not be judged on its commits."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import sqlalchemy as sa

from bot.store import Store
from bot.store.records import _upsert
from bot.store.schema import actions, config_files, problems, repos, reruns, runs


def set_default_branch(store: Store, repo_key: int, branch: str) -> None:
    with store.engine.begin() as conn:
        conn.execute(sa.update(repos).where(repos.c.id == repo_key).values(default_branch=branch))


def default_branch(store: Store, repo_key: int) -> str | None:
    with store.engine.connect() as conn:
        found = conn.execute(sa.select(repos.c.default_branch).where(repos.c.id == repo_key)).scalar()
    return str(found) if found else None


def commits_on_branch(store: Store, repo_key: int, branch: str, since: str) -> set[str]:
    """The commits whose runs ran on ``branch`` (pushes to it) since ``since``."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(runs.c.head_sha)
            .distinct()
            .where(
                runs.c.repo_id == repo_key,
                runs.c.head_branch == branch,
                runs.c.event != "pull_request",
                sa.or_(runs.c.run_started_at.is_(None), runs.c.run_started_at >= since),
            )
        )
        return {str(sha) for (sha,) in rows}


@dataclass(frozen=True, slots=True)
class Problem:
    """Something on a commit that could not be judged, found while collecting one attempt of one run."""

    run_id: int
    attempt: int
    text: str
    unjudged_failure: str | None = None  # the test id, when a failed test shares its name with another


def record_problem(store: Store, repo_key: int, head_sha: str, problem: Problem) -> None:
    """Keep a problem of the commit once, however many deliveries find it (keyed on the attempt that has
    it and its text, so that which delivery found it first changes nothing)."""
    key = f"{problem.run_id}:{problem.attempt}:{problem.text}"
    values = {
        "repo_id": repo_key,
        "head_sha": head_sha,
        "digest": hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest(),
        "run_id": problem.run_id,
        "attempt": problem.attempt,
        "text": problem.text,
        "unjudged_failure": problem.unjudged_failure,
    }
    _upsert(store, problems, values, ["repo_id", "head_sha", "digest"])


def problems_of_commit(store: Store, repo_key: int, head_sha: str) -> list[Problem]:
    """Every problem found on the commit, by run, attempt and text: the same list whoever asks."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(problems.c.run_id, problems.c.attempt, problems.c.text, problems.c.unjudged_failure)
            .where(problems.c.repo_id == repo_key, problems.c.head_sha == head_sha)
            .order_by(problems.c.run_id, problems.c.attempt, problems.c.text)
        ).all()
    return [Problem(int(r.run_id), int(r.attempt), str(r.text), r.unjudged_failure) for r in rows]


def cached_file(store: Store, source: str) -> tuple[str | None, str | None] | None:
    """(ETag, text) of a configuration file as last read, or None when it was never read."""
    with store.engine.connect() as conn:
        row = conn.execute(
            sa.select(config_files.c.etag, config_files.c.text).where(config_files.c.source == source)
        ).first()
    return (row.etag, row.text) if row is not None else None


def cache_file(store: Store, source: str, etag: str | None, text: str | None) -> None:
    _upsert(store, config_files, {"source": source, "etag": etag, "text": text}, ["source"])


def claim_rerun(
    store: Store, repo_key: int, run_id: int, head_sha: str, attempt: int, requested: bool, line: str
) -> bool:
    """Keep the run's rerun decision; True when this call kept it (no decision was kept before), so only
    that caller may send the request."""
    values = {
        "repo_id": repo_key,
        "run_id": run_id,
        "head_sha": head_sha,
        "attempt": attempt,
        "requested": requested,
        "line": line,
    }
    # RETURNING, not rowcount: psycopg reports -1 rows for an INSERT ... ON CONFLICT DO NOTHING
    statement = store._insert(reruns).values(**values).on_conflict_do_nothing().returning(reruns.c.run_id)
    with store.engine.begin() as conn:
        return conn.execute(statement).scalar() is not None


def amend_rerun(store: Store, repo_key: int, run_id: int, requested: bool, line: str) -> None:
    """The decision's outcome when the request could not be sent: never tried again."""
    with store.engine.begin() as conn:
        conn.execute(
            sa.update(reruns)
            .where(reruns.c.repo_id == repo_key, reruns.c.run_id == run_id)
            .values(requested=requested, line=line)
        )


def reruns_of_repo(store: Store, repo_key: int) -> list[tuple[int, int, bool, str]]:
    """(run id, attempt it followed, requested, line) of every rerun decision of the repository."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(reruns.c.run_id, reruns.c.attempt, reruns.c.requested, reruns.c.line)
            .where(reruns.c.repo_id == repo_key)
            .order_by(reruns.c.run_id)
        ).all()
    return [(int(r.run_id), int(r.attempt), bool(r.requested), str(r.line)) for r in rows]


def reruns_of_commit(store: Store, repo_key: int, head_sha: str) -> list[tuple[int, int, bool, str]]:
    """(run id, attempt it followed, requested, line) of every rerun decision on the commit, by run."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(reruns.c.run_id, reruns.c.attempt, reruns.c.requested, reruns.c.line)
            .where(reruns.c.repo_id == repo_key, reruns.c.head_sha == head_sha)
            .order_by(reruns.c.run_id)
        ).all()
    return [(int(r.run_id), int(r.attempt), bool(r.requested), str(r.line)) for r in rows]


def claim_action(
    store: Store, repo_key: int, check_run_id: int, identifier: str, head_sha: str, sender: str, line: str
) -> bool:
    """Keep that ``sender`` clicked button ``identifier`` on the check run; True when this call kept it (no
    click was kept before), so only that caller acts."""
    values = {
        "repo_id": repo_key,
        "check_run_id": check_run_id,
        "identifier": identifier,
        "head_sha": head_sha,
        "sender": sender[:100],
        "line": line,
    }
    statement = store._insert(actions).values(**values).on_conflict_do_nothing().returning(actions.c.check_run_id)
    with store.engine.begin() as conn:
        return conn.execute(statement).scalar() is not None


def release_action(store: Store, repo_key: int, check_run_id: int, identifier: str) -> None:
    """Forget a click that could not be acted on, so that the job's retry acts on it."""
    with store.engine.begin() as conn:
        conn.execute(
            sa.delete(actions)
            .where(actions.c.repo_id == repo_key, actions.c.check_run_id == check_run_id)
            .where(actions.c.identifier == identifier)
        )


def settle_action(store: Store, repo_key: int, check_run_id: int, identifier: str, line: str) -> None:
    """What the click did, in the line the check run shows."""
    with store.engine.begin() as conn:
        conn.execute(
            sa.update(actions)
            .where(actions.c.repo_id == repo_key, actions.c.check_run_id == check_run_id)
            .where(actions.c.identifier == identifier)
            .values(line=line)
        )


def actions_of_commit(store: Store, repo_key: int, head_sha: str) -> list[str]:
    """The lines of every click on the commit's check runs, oldest check run first."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(actions.c.line)
            .where(actions.c.repo_id == repo_key, actions.c.head_sha == head_sha)
            .order_by(actions.c.check_run_id, actions.c.identifier)
        ).all()
    return [str(r.line) for r in rows]
