"""How long the store keeps what it was told, and forgetting an installation.

- ``prune``: reports (with their observations and pass times), runs and jobs that started more than
  ``retention_days`` ago are deleted (``FLAKETALLY_RETENTION_DAYS``, default 90: GitHub keeps artifacts 90
  days at most, and verdicts look back 30), and the manifests no report points at any more. The
  scheduler runs it once a day. Reports with no start time (local files) are never pruned by age: they
  are the user's own.
- ``purge_installation``: everything the store holds of one installation at once (its repositories and
  all that hangs from them, the configuration files read from them, its digests, the installation itself).
  An ``installation`` ``deleted`` event keeps when it arrived; ``prune`` purges such an installation once
  the retention period has passed since (a reinstallation before then keeps its history).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from bot.core.times import stored_time
from bot.store import Store
from bot.store.records import InstallationState
from bot.store.schema import (
    actions,
    check_runs,
    comments,
    config_files,
    digests,
    installations,
    jobs,
    known_flaky,
    manifests,
    observations,
    pass_times,
    problems,
    reports,
    repos,
    reruns,
    runs,
    tests,
)

DEFAULT_RETENTION_DAYS = 90
# what hangs from a repository, deleted before it, each before what it refers to (observations first)
_OF_REPOSITORY = (reports, manifests, known_flaky, tests, runs, jobs, check_runs, comments, problems, actions, reruns)


@dataclass(frozen=True, slots=True)
class Pruned:
    reports: int
    runs: int
    jobs: int
    installations: tuple[int, ...]  # purged: deleted longer than the retention period ago

    def __str__(self) -> str:
        purged = f", purged installations {', '.join(map(str, self.installations))}" if self.installations else ""
        return f"pruned {self.reports} reports, {self.runs} run attempts and {self.jobs} jobs{purged}"


def prune(store: Store, retention_days: int = DEFAULT_RETENTION_DAYS, *, now: datetime | None = None) -> Pruned:
    """Delete what started before the retention period (module docstring)."""
    cutoff = stored_time((now or datetime.now(UTC)) - timedelta(days=retention_days))
    with store.engine.begin() as conn:
        old = sa.select(reports.c.id).where(reports.c.started_at.is_not(None), reports.c.started_at < cutoff)
        conn.execute(sa.delete(observations).where(observations.c.report_id.in_(old)))
        conn.execute(sa.delete(pass_times).where(pass_times.c.report_id.in_(old)))
        pruned_reports = conn.execute(sa.delete(reports).where(reports.c.id.in_(old.scalar_subquery()))).rowcount
        used = sa.select(reports.c.manifest_id).where(reports.c.manifest_id.is_not(None))
        conn.execute(sa.delete(manifests).where(manifests.c.id.not_in(used.scalar_subquery())))
        pruned_runs = conn.execute(
            sa.delete(runs).where(runs.c.run_started_at.is_not(None), runs.c.run_started_at < cutoff)
        ).rowcount
        pruned_jobs = conn.execute(
            sa.delete(jobs).where(jobs.c.started_at.is_not(None), jobs.c.started_at < cutoff)
        ).rowcount
        gone = conn.execute(
            sa.select(installations.c.id).where(
                installations.c.status == InstallationState.DELETED.value,
                installations.c.deleted_at.is_not(None),
                installations.c.deleted_at < cutoff,
            )
        ).scalars()
        purged = tuple(int(i) for i in gone)
    for installation_id in purged:
        purge_installation(store, installation_id)
    store._test_pks.clear()
    return Pruned(pruned_reports, pruned_runs, pruned_jobs, purged)


@dataclass(frozen=True, slots=True)
class Purged:
    installation_id: int
    repositories: tuple[str, ...]
    reports: int

    def __str__(self) -> str:
        names = ", ".join(self.repositories) or "no repository"
        return f"deleted {len(self.repositories)} repositories ({names}) and {self.reports} reports"


def purge_installation(store: Store, installation_id: int) -> Purged:
    """Delete everything the store holds of the installation, in one transaction."""
    with store.engine.begin() as conn:
        found = conn.execute(
            sa.select(repos.c.id, repos.c.full_name).where(repos.c.installation_id == installation_id)
        ).all()
        keys = [int(r.id) for r in found]
        names = tuple(sorted(str(r.full_name) for r in found))
        removed = _delete_repositories(conn, keys)
        account = conn.execute(sa.select(installations.c.account).where(installations.c.id == installation_id)).scalar()
        owners = {name.split("/", 1)[0] for name in names} | ({str(account)} if account else set())
        for source in (*names, *(f"{owner}/.github" for owner in owners)):
            conn.execute(sa.delete(config_files).where(config_files.c.source.startswith(f"{source}:", autoescape=True)))
        conn.execute(sa.delete(digests).where(digests.c.installation_id == installation_id))
        conn.execute(sa.delete(installations).where(installations.c.id == installation_id))
    store._test_pks.clear()
    return Purged(installation_id, names, removed)


def _delete_repositories(conn: Connection, keys: list[int]) -> int:
    """Every row of those repositories; how many reports went."""
    if not keys:
        return 0
    mine = sa.select(reports.c.id).where(reports.c.repo_id.in_(keys))
    conn.execute(sa.delete(observations).where(observations.c.report_id.in_(mine)))
    conn.execute(sa.delete(pass_times).where(pass_times.c.report_id.in_(mine)))
    removed = 0
    for table in _OF_REPOSITORY:
        deleted = conn.execute(sa.delete(table).where(table.c.repo_id.in_(keys))).rowcount
        removed = deleted if table is reports else removed
    conn.execute(sa.delete(repos).where(repos.c.id.in_(keys)))
    return removed
