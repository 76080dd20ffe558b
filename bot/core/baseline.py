"""What the default branch and the pull request's base already show of a test that failed on a commit, and
the one word a failure is called on a pull request.

The words, strongest evidence first (``word_for``):

- ``flaky``: passed and failed on this commit in this context;
- ``broken``: fails on the default branch too, on every one of its runs there in the window (at least
  two), since commit X: not this change;
- ``regression``: passed on the default branch up to commit Y, fails on every run there since X (at
  least two): not this change;
- ``failing``: failed on every attempt of this commit, at least two;
- ``known flaky``: passed and failed on the same code within the last 7 days, not rerun here;
- ``new failure``: passed on this pull request's base commit, or on the default branch's recent runs
  (at least two, every one of them) in this context, and fails here: likely this change;
- ``undetermined``: none of these, a single failure with nothing to compare it with;
- ``quarantined``: listed in the repository's quarantine file for this context (``bot.core.quarantine``),
  and not flaky here: still observed and shown, never held against the change.

A known flake comes before ``new failure``: a flaky test mostly passes on the default branch, so its
single failure beside those passes proves nothing about the change.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from enum import StrEnum

from bot.core.observations import PASSED, Observation, has_failure, on_commits
from bot.core.verdicts import CommitVerdict, short

MIN_STREAK = 2  # failing runs on the default branch before it is said to fail there
RECENT = 5  # the default branch's newest runs looked at for "passed recently"


class Word(StrEnum):
    FLAKY = "flaky"
    BROKEN = "broken"
    REGRESSION = "regression"
    FAILING = "failing"
    KNOWN_FLAKY = "known flaky"
    NEW_FAILURE = "new failure"
    UNDETERMINED = "undetermined"
    QUARANTINED = "quarantined"


# How findings are listed: what the change must fix first, then what is not its fault.
SHOWN_IN_ORDER = (
    Word.FAILING,
    Word.NEW_FAILURE,
    Word.UNDETERMINED,
    Word.KNOWN_FLAKY,
    Word.BROKEN,
    Word.REGRESSION,
    Word.FLAKY,
    Word.QUARANTINED,
)


class BaselineState(StrEnum):
    BROKEN = "broken"
    REGRESSION = "regression"
    PASSED = "passed"  # passed on the base commit, or on the default branch's recent runs
    UNKNOWN = "unknown"


@dataclass(frozen=True, slots=True)
class Baseline:
    state: BaselineState
    evidence: str = ""
    since: str | None = None  # the first failing commit on the default branch


NO_BASELINE = Baseline(BaselineState.UNKNOWN)


def _letters(o: Observation) -> str:
    return o.outcomes.replace("S", "")


def _fails(o: Observation) -> bool:
    """Every attempt of the run failed (a pass after a retry is not a failure of the run)."""
    letters = _letters(o)
    return bool(letters) and PASSED not in letters


def _passes(o: Observation) -> bool:
    letters = _letters(o)
    return bool(letters) and not has_failure(letters)


def baseline(
    observations: Sequence[Observation],
    head_sha: str,
    *,
    branch: str | None,
    default_commits: Collection[str],
    base_commits: Collection[str] = (),
) -> Baseline:
    """The default branch's runs of the test in this context (``observations``, in time order, of one
    context), and its runs on the pull request's base commit."""
    runs = [o for o in on_commits(observations, default_commits) if o.commit != head_sha and _letters(o)]
    where = branch or "the default branch"
    streak = 0
    for o in reversed(runs):
        if not _fails(o):
            break
        streak += 1
    if streak >= MIN_STREAK:
        failing = runs[len(runs) - streak :]
        since = failing[0].commit
        before = [o for o in runs[: len(runs) - streak] if _passes(o)]
        if before:
            return Baseline(
                BaselineState.REGRESSION,
                f"passed on {where} up to {short(before[-1].commit)} and failed on every run there since "
                f"{short(since)} ({streak} runs): not this change",
                since,
            )
        return Baseline(
            BaselineState.BROKEN,
            f"fails on {where} too: failed all {streak} of its runs there since {short(since)}: not this change",
            since,
        )
    base = [o for o in on_commits(observations, base_commits) if o.commit != head_sha and _letters(o)]
    if base and all(_passes(o) for o in base):
        return Baseline(BaselineState.PASSED, f"passed on this pull request's base {short(base[-1].commit)}")
    recent = runs[-RECENT:]
    if len(recent) >= 2 and all(_passes(o) for o in recent):
        return Baseline(BaselineState.PASSED, f"passed on {where}'s last {len(recent)} runs in this context")
    return NO_BASELINE


def word_for(verdict: CommitVerdict, known: bool, found: Baseline, quarantined: bool = False) -> Word:
    """The one word a failure on a pull request is called (module docstring)."""
    if verdict is CommitVerdict.FLAKY:
        return Word.FLAKY
    if quarantined:
        return Word.QUARANTINED
    if found.state is BaselineState.BROKEN:
        return Word.BROKEN
    if found.state is BaselineState.REGRESSION:
        return Word.REGRESSION
    if verdict is CommitVerdict.FAILING:
        return Word.FAILING
    if known:
        return Word.KNOWN_FLAKY
    if found.state is BaselineState.PASSED:
        return Word.NEW_FAILURE
    return Word.UNDETERMINED
