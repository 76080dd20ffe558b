"""Times as GitHub and the reports write them, as the store keeps them, and the windows of a history
that judging reads (the last days before its newest report, or around a moment)."""

from __future__ import annotations

import bisect
import functools
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from bot.core.observations import STARTED_AT_OF, Observation


def in_window(observations: Sequence[Observation], days: int) -> list[Observation]:
    """The observations of the last ``days`` days before the newest one; all of them when undated."""
    dated = set(map(STARTED_AT_OF, observations))
    dated.discard(None)
    dated.discard("")
    if not dated:
        return list(observations)
    since, inside = _window(frozenset(dated), days)
    if inside:
        return list(observations)
    return [o for o in observations if not o.started_at or parse_time(o.started_at) >= since]


@functools.lru_cache(maxsize=256)  # the tests of one history mostly ran in the same reports, at the same times
def _window(dated: frozenset[str], days: int) -> tuple[datetime, bool]:
    """Where the window of ``days`` before the newest of these times starts, and whether it holds them all."""
    times = [parse_time(value) for value in dated]
    since = max(times) - timedelta(days=days)
    return since, min(times) >= since


@functools.lru_cache(maxsize=1 << 16)  # every history of a repository shares its reports' times (~6,000 a month)
def parse_time(value: str) -> datetime:
    """An ISO time as GitHub or a report writes it (``Z`` or an offset); a time without one is UTC.
    Raises ValueError when it is not a time."""
    parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)


def stored_time(moment: datetime) -> str:
    """A time as GitHub writes it and the store keeps it, so that stored times compare as text: UTC, to the
    second, ``2026-12-01T10:00:00Z`` (``parse_time`` reads it back)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_optional_time(value: str | None) -> datetime | None:
    """``parse_time`` of a time GitHub may leave out (None or empty: None)."""
    return parse_time(value) if value else None


def possibly_within(observations: Sequence[Observation], since: datetime, until: datetime) -> Sequence[Observation]:
    """The observations whose start time may be within ``since``..``until``, found by bisection when they
    are in the order of their times' text (a stored history is: it is read in time order), else all of
    them. A month's history is mostly outside the 7 days, and parsing and placing each time costs more
    than the rest of ``bot.core.verdicts.known_flaky``.

    A time's text starts with its local date, and its offset is under a day, so the text of a time in the
    range has a date from the day before ``since`` to the day after ``until``, whatever its form (Z or an
    offset, fractions, a space for the T): bounded by those dates' text, the slice holds every one."""
    starts = list(map(STARTED_AT_OF, observations))
    try:
        ordered = starts == sorted(starts)  # linear on a sorted list
    except TypeError:  # an undated observation (None) among dated ones
        return observations
    if not ordered:
        return observations
    first = (since - timedelta(days=1)).strftime("%Y-%m-%d")  # sorts before every text of that date
    after = (until + timedelta(days=2)).strftime("%Y-%m-%d")  # and after every text of the days before
    return observations[bisect.bisect_left(starts, first) : bisect.bisect_left(starts, after)]
