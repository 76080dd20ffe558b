"""Quarantine as code: the tests a repository has taken out of the way until someone fixes them, listed in
a file in the repository (``.github/flaketally-quarantine.yml``), per test and execution context, with the
evidence that put each there. The file's schema is ``bot.config.schema.QuarantineFile``; these are the rules.

- A test is named by its display id (``bot.core.display``), as its runner prints it; the context is the
  execution context's display form, or ``all`` (every context). An entry for one context never covers
  another: a matrix variant is quarantined alone (DataDog/dd-trace-py#15191).
- The gate does not hold a quarantined test's failure against a change; it is still observed, stored and
  shown, marked quarantined.
- Recovery: an entry is due to leave when its test has run at least ``clean_runs`` times in its context
  over at least ``clean_days`` days with no failure (``recovered``). The defaults: 59 clean runs rule out
  a failure rate of 5% or more with 95% confidence (0.95^59 = 0.048 < 0.05), the flip score's stable
  threshold; 7 days make the runs span a week of load, runner images and time-dependent bugs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime

from bot.core.observations import Observation

ALL_CONTEXTS = "all"
FAILURE_RATE_RULED_OUT = 0.05  # the flip score's stable threshold
CONFIDENCE = 0.95


def clean_runs_needed(rate: float = FAILURE_RATE_RULED_OUT, confidence: float = CONFIDENCE) -> int:
    """The clean runs in a row that rule out a failure rate of ``rate`` or more at ``confidence``: the
    smallest n with (1 - rate)^n <= 1 - confidence (59 for 5% at 95%)."""
    return math.ceil(math.log(1 - confidence) / math.log(1 - rate))


def rate_ruled_out(clean: int, confidence: float = CONFIDENCE) -> float:
    """The failure rate that ``clean`` clean runs in a row rule out at ``confidence``: the p with
    (1 - p)^clean = 1 - confidence (1.0 with no run)."""
    return 1 - (1 - confidence) ** (1 / clean) if clean else 1.0


CLEAN_RUNS = clean_runs_needed()
CLEAN_DAYS = 7


@dataclass(frozen=True, slots=True)
class Entry:
    """One quarantined test in one context (or in all of them)."""

    test: str  # the display id
    context: str = ALL_CONTEXTS
    reason: str = ""  # its flaky evidence and cost when it was quarantined
    since: date | None = None
    owner: str | None = None
    issue: str | None = None

    def covers(self, display: str, context: str) -> bool:
        """Whether this entry quarantines test ``display`` in the context whose display form is ``context``."""
        return self.test == display and self.context in (ALL_CONTEXTS, context)


@dataclass(frozen=True, slots=True)
class Quarantine:
    entries: tuple[Entry, ...] = ()
    clean_runs: int = CLEAN_RUNS
    clean_days: int = CLEAN_DAYS

    def entry_for(self, display: str, context: str) -> Entry | None:
        """The entry that quarantines the test in the context, if any (one for that context first)."""
        found = [e for e in self.entries if e.covers(display, context)]
        return min(found, key=lambda e: e.context == ALL_CONTEXTS) if found else None

    def __bool__(self) -> bool:
        return bool(self.entries)


NONE = Quarantine()


@dataclass(frozen=True, slots=True)
class Recovery:
    """Whether a quarantined test may leave: its clean runs since the last failure, and the days they span."""

    clean_runs: int
    days: float
    due: bool
    evidence: str


def recovery(observations: Sequence[Observation], quarantine: Quarantine) -> Recovery:
    """A test's runs in one context (time order): the clean runs since its last failure and what they
    prove. Undated runs count as runs but not as days."""
    clean: list[Observation] = []
    for o in reversed(observations):
        letters = o.outcomes.replace("S", "")
        if not letters:
            continue
        if "F" in letters or "E" in letters:
            break
        clean.append(o)
    times = [_parse(o.started_at) for o in clean if o.started_at]
    span = (max(times) - min(times)).total_seconds() / 86400 if len(times) >= 2 else 0.0
    due = len(clean) >= quarantine.clean_runs and span >= quarantine.clean_days
    ruled_out = rate_ruled_out(len(clean))
    evidence = (
        f"{len(clean)} clean runs in a row over {span:.1f} days since its last failure, which rule out a failure "
        f"rate of {ruled_out:.0%} or more with {CONFIDENCE:.0%} confidence (due to leave at "
        f"{quarantine.clean_runs} runs over {quarantine.clean_days} days)"
    )
    return Recovery(len(clean), span, due, evidence)


def _parse(value: str) -> datetime:
    from bot.core.times import parse_time

    return parse_time(value)
