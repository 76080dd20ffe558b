"""What flakes cost: every rate is a declared input with a default, shown next to every figure."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from bot.core.verdict_names import CommitVerdict

if TYPE_CHECKING:
    from bot.core.verdicts import CommitJudgement


@dataclass(frozen=True, slots=True)
class Rates:
    compute_per_minute: float = 0.008
    developer_per_minute: float = 1.50
    developer_minutes_per_event: float = 15.0
    currency: str = "USD"

    def describe(self) -> str:
        return (
            f"{self.developer_minutes_per_event:g} developer minutes per flaky event at "
            f"{self.developer_per_minute:.2f} {self.currency}/min, CI compute at "
            f"{self.compute_per_minute:g} {self.currency}/min"
        )


@dataclass(frozen=True, slots=True)
class Cost:
    events: int
    wasted_compute_minutes: float
    developer_minutes: float
    compute: float
    developer: float
    untimed_events: int = 0  # events on commits whose reports gave the test no time: compute unknown

    @property
    def total(self) -> float:
        return self.compute + self.developer

    @property
    def compute_known(self) -> bool:
        """False when events lack a time and the others add up to nothing: unknown, not zero."""
        return not self.untimed_events or self.wasted_compute_minutes >= 0.0005

    def minutes(self, digits: int = 3) -> str:
        """The wasted compute in words: ``0.123 min``, ``unknown (…)``, or a lower bound naming the events
        without time."""
        if not self.compute_known:
            if self.untimed_events == self.events:
                return "unknown (the reports give no time)"
            return f"unknown ({self.untimed_events} of {self.events} events without time)"
        figure = f"{self.wasted_compute_minutes:.{digits}f} min"
        if self.untimed_events:
            return f"at least {figure} ({self.untimed_events} of {self.events} events without time)"
        return figure

    def as_dict(self) -> dict[str, float | int | None]:
        return {
            "events": self.events,
            "untimed_events": self.untimed_events,
            "wasted_compute_minutes": round(self.wasted_compute_minutes, 6) if self.compute_known else None,
            "developer_minutes": round(self.developer_minutes, 6),
            "compute": round(self.compute, 6),
            "developer": round(self.developer, 6),
            "total": round(self.total, 6),
        }


ZERO = Cost(0, 0.0, 0.0, 0.0, 0.0)


def cost_of(commits: Sequence[CommitJudgement], rates: Rates) -> Cost:
    """A flaky event is one (test, commit, context) judged flaky; its wasted compute, a lower bound,
    is the test's mean runtime on that commit times the attempts beyond the first. An event whose reports
    gave the test no time is counted in ``untimed_events``: its compute is unknown, not zero."""
    return cost_of_events([(c.seconds, c.attempts) for c in commits if c.verdict is CommitVerdict.FLAKY], rates)


def cost_of_events(events: Sequence[tuple[float, int]], rates: Rates) -> Cost:
    """``cost_of`` the flaky events given as (seconds, attempts) of each commit."""
    wasted = sum(seconds / attempts * (attempts - 1) for seconds, attempts in events if attempts) / 60
    developer_minutes = len(events) * rates.developer_minutes_per_event
    return Cost(
        events=len(events),
        wasted_compute_minutes=wasted,
        developer_minutes=developer_minutes,
        compute=wasted * rates.compute_per_minute,
        developer=developer_minutes * rates.developer_per_minute,
        untimed_events=sum(1 for seconds, _ in events if not seconds),
    )


@dataclass(frozen=True, slots=True)
class RerunTiming:
    """What one rerun attempt cost as GitHub measured it: the minutes its jobs ran (the jobs API; None when
    no job of it has both times, as in a replay) and the wait from the previous attempt's completion to its
    start (None when either time is unknown)."""

    job_minutes: float | None
    wait_minutes: float | None


@dataclass(frozen=True, slots=True)
class Measured:
    """A flaky test's share of the reruns that proved it, on one commit."""

    rerun_minutes: float | None  # None: GitHub gave no job times for those reruns
    wait_minutes: float | None
    reruns: int

    def compute(self, rates: Rates) -> float:
        return (self.rerun_minutes or 0.0) * rates.compute_per_minute


def measured_share(
    passed_in: Sequence[tuple[int, int]],
    timings: Mapping[tuple[int, int], RerunTiming],
    sharers: Mapping[tuple[int, int], int],
) -> Measured | None:
    """A test's share of the rerun attempts it passed in (``passed_in``: (run id, attempt)): each
    attempt's job minutes split evenly among the ``sharers`` flaky tests that passed in it."""
    found = [(key, timings[key]) for key in dict.fromkeys(passed_in) if key in timings]
    if not found:
        return None
    timed = [(key, t.job_minutes) for key, t in found if t.job_minutes is not None]
    minutes = sum(m / max(1, sharers.get(key, 1)) for key, m in timed) if timed else None
    waits = [t.wait_minutes for _, t in found if t.wait_minutes is not None]
    return Measured(minutes, max(waits) if waits else None, len(found))
