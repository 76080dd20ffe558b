"""When each organisation's digest is due: ``digest.schedule`` (a cron string, default Monday 09:00) in
``digest.timezone`` (default UTC), from the organisation's configuration as the App last read it.

The scheduler (``flaketally scheduler``: rq's cron scheduler) runs ``workers.jobs.digest_tick`` every
``TICK_MINUTES``; the tick enqueues the digest of every installation whose schedule fired in the last
``CATCH_UP`` and whose week was not posted yet. A firing covers the last whole ISO week (UTC) before it, so
one week has one digest whichever firing, tick or scheduler process asks for it; the store's row and the
installation's lock make the rest idempotent (``bot.digest.post``)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from croniter import croniter

from bot.core.digest import week_of, weeks_before
from bot.digest.collect import organisation_config
from bot.store import Store
from bot.store.digests import active_installations, digest_of

TICK_MINUTES = 15  # the finest schedule that lands on time (time zones are whole quarter hours from UTC)
TICK_CRON = f"*/{TICK_MINUTES} * * * *"
CATCH_UP = timedelta(days=1)  # a firing missed while no scheduler ran is caught up within a day, not later


def last_firing(schedule: str, timezone: str, now: datetime) -> datetime:
    """The latest time at or before ``now`` that ``schedule`` names in ``timezone`` (aware, in that zone)."""
    local = now.astimezone(ZoneInfo(timezone))
    found: datetime = croniter(schedule, local + timedelta(microseconds=1)).get_prev(datetime)
    return found


def week_covered(firing: datetime) -> str:
    """The last whole ISO week (UTC) before a firing: the one before the week it falls in."""
    return weeks_before(week_of(firing), 2)[0]


def due_week(schedule: str, timezone: str, now: datetime) -> str | None:
    """The week whose digest is due at ``now``, or None when the schedule last fired longer than
    ``CATCH_UP`` ago (an installation made on a Wednesday gets its first digest the next Monday)."""
    firing = last_firing(schedule, timezone, now)
    return week_covered(firing) if now - firing <= CATCH_UP else None


def due_digests(store: Store, now: datetime) -> Iterator[tuple[int, str]]:
    """(installation, week) of each digest due at ``now`` and not posted (nor found unpostable) yet."""
    for installation_id, account in active_installations(store):
        digest = organisation_config(store, account).config.digest
        week = due_week(digest.schedule, digest.timezone, now)
        if week is not None and digest_of(store, installation_id, week) is None:
            yield installation_id, week
