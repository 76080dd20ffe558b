"""What the App did with each installation's weekly digest: one row per ISO week, ever.

A digest is posted under the installation's digest lock (``workers.jobs``), so this row is read and written
by one worker at a time; it says whether the week was posted (where, which issue) or why it could not be,
which ``/readyz`` shows as a warning."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import sqlalchemy as sa

from bot.store import Store
from bot.store.records import InstallationState, _upsert
from bot.store.schema import digests, installations


class DigestState(StrEnum):
    POSTED = "posted"
    NOT_POSTED = "not_posted"  # no repository to post in; ``line`` says why


@dataclass(frozen=True, slots=True)
class DigestRecord:
    installation_id: int
    week: str
    state: DigestState
    repo: str | None
    issue_number: int | None
    line: str


def _record(row: sa.Row[tuple[object, ...]]) -> DigestRecord:
    m = row._mapping
    number = m["issue_number"]
    return DigestRecord(
        int(str(m["installation_id"])),
        str(m["week"]),
        DigestState(str(m["state"])),
        str(m["repo"]) if m["repo"] is not None else None,
        int(str(number)) if number is not None else None,
        str(m["line"]),
    )


def digest_of(store: Store, installation_id: int, week: str) -> DigestRecord | None:
    with store.engine.connect() as conn:
        row = conn.execute(
            sa.select(digests).where(digests.c.installation_id == installation_id, digests.c.week == week)
        ).first()
    return _record(row) if row is not None else None


def keep_digest(
    store: Store,
    installation_id: int,
    week: str,
    state: DigestState,
    line: str,
    *,
    repo: str | None = None,
    issue_number: int | None = None,
) -> None:
    values = {
        "installation_id": installation_id,
        "week": week,
        "state": state.value,
        "repo": repo,
        "issue_number": issue_number,
        "line": line,
    }
    _upsert(store, digests, values, ["installation_id", "week"])


def digest_warnings(store: Store) -> list[str]:
    """One line per active installation whose latest digest could not be posted."""
    latest = (
        sa.select(digests.c.installation_id, sa.func.max(digests.c.week).label("week"))
        .group_by(digests.c.installation_id)
        .subquery()
    )
    query = (
        sa.select(digests.c.line, installations.c.account)
        .join(latest, sa.and_(digests.c.installation_id == latest.c.installation_id, digests.c.week == latest.c.week))
        .join(installations, installations.c.id == digests.c.installation_id)
        .where(digests.c.state == DigestState.NOT_POSTED.value)
        .where(installations.c.status == InstallationState.ACTIVE.value)
        .order_by(installations.c.account)
    )
    with store.engine.connect() as conn:
        return [str(r.line) for r in conn.execute(query)]


def active_installations(store: Store) -> list[tuple[int, str]]:
    """(id, account) of every installation that is neither suspended nor deleted."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(installations.c.id, installations.c.account)
            .where(installations.c.status == InstallationState.ACTIVE.value)
            .order_by(installations.c.id)
        ).all()
    return [(int(r.id), str(r.account)) for r in rows]
