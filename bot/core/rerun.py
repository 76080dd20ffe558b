"""When Flaketally asks GitHub to re-run a run's failed jobs (``rerun: failed-jobs``), in one place.

After a run's first attempt failed, a rerun settles its single failures: a test that passes on the rerun
is proven flaky, one that fails again is ``failing``. It is asked only when it can settle something and
cannot hide anything:

- automatic reruns are on for the repository, and this is the run's first attempt, still its latest
  (a person has not rerun it already);
- the run failed: not cancelled, not timed out;
- it is younger than GitHub's 30-day limit for reruns;
- every failed job produced a readable report: a failed job without one crashed, which is a real red;
- at least one and at most ``max_failed_tests`` distinct tests failed, not counting the tests that fail
  on the default branch too (a rerun cannot change their verdict).

It is asked once per run, ever (the store keeps the decision before the request is sent). Every decision,
taken or not, is one line in the check run.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.core.baseline import SHOWN_IN_ORDER, Word

MAX_AGE = timedelta(days=30)  # GitHub refuses to re-run a run older than this


@dataclass(frozen=True, slots=True)
class RerunFacts:
    """What the decision looks at, for one attempt of one run."""

    enabled: bool
    attempt: int
    latest_attempt: int
    conclusion: str | None  # the run's
    started_at: datetime | None
    now: datetime
    failed: Sequence[tuple[str, Word]]  # (test id, its word) of the tests that failed in this attempt
    jobs_without_report: Sequence[str]  # failed jobs of the attempt that left no readable report
    max_failed_tests: int


@dataclass(frozen=True, slots=True)
class RerunDecision:
    rerun: bool
    line: str  # one line for the check run


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def decide_rerun(facts: RerunFacts) -> RerunDecision | None:
    """The decision for this attempt, or None when there is none to take (reruns off, a later attempt, a
    run that did not fail)."""
    if not facts.enabled or facts.attempt != 1 or facts.conclusion in (None, "success", "skipped", "neutral"):
        return None
    if facts.latest_attempt > facts.attempt:
        return RerunDecision(False, f"no rerun: attempt {facts.latest_attempt} has run already")
    if facts.conclusion in ("cancelled", "timed_out"):
        said = "was cancelled" if facts.conclusion == "cancelled" else "timed out"
        return RerunDecision(False, f"no rerun: the run {said}")
    if facts.conclusion != "failure":
        return RerunDecision(False, f"no rerun: the run concluded {facts.conclusion}")
    if facts.started_at is not None and facts.now - facts.started_at > MAX_AGE:
        return RerunDecision(False, "no rerun: the run is older than GitHub's 30-day limit for reruns")
    if facts.jobs_without_report:
        jobs = ", ".join(f"`{name}`" for name in sorted(facts.jobs_without_report)[:3])
        more = f" and {len(facts.jobs_without_report) - 3} more" if len(facts.jobs_without_report) > 3 else ""
        return RerunDecision(
            False, f"no rerun: job {jobs}{more} failed without a report (a crash is a real failure, not a flake)"
        )
    counted = {test: word for test, word in facts.failed if word not in (Word.BROKEN, Word.REGRESSION)}
    broken = len({test for test, _ in facts.failed}) - len(counted)
    aside = f" ({_plural(broken, 'test')} broken on the default branch not counted)" if broken else ""
    if not counted:
        return RerunDecision(False, f"no rerun: no test failed that a rerun could settle{aside}")
    if len(counted) > facts.max_failed_tests:
        return RerunDecision(
            False, f"no rerun: {len(counted)} tests failed, over the limit of {facts.max_failed_tests}{aside}"
        )
    words: Counter[Word] = Counter(counted.values())
    kinds = [w for w in SHOWN_IN_ORDER if words[w]]
    if len(counted) == 1:
        what = f"1 failed test ({kinds[0].value})"
    elif len(kinds) == 1:
        what = f"{len(counted)} failed tests, {'both' if len(counted) == 2 else 'all'} {kinds[0].value}"
    else:
        what = f"{len(counted)} failed tests (" + ", ".join(f"{words[w]} {w.value}" for w in kinds) + ")"
    return RerunDecision(True, f"rerun requested: {what}{aside}")
