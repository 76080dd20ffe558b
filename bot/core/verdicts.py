"""Judging tests: on one commit (same code), over a history, and the 7-day known-flaky memory.

Everything here takes plain data (``TestHistory`` and its ``Observation``s) and returns plain data;
each judgement carries its evidence in one line a person can check.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from itertools import compress
from typing import NamedTuple

from bot.core.observations import (
    COMMIT_OF,
    ERROR,
    FAILED,
    OUTCOME_WORDS,
    OUTCOMES_OF,
    PASSED,
    SECONDS_OF,
    STARTED_AT_OF,
    Observation,
    TestHistory,
    commits_of,
    has_failure,
    letters_of,
)
from bot.core.scores import CROSS_COMMIT_FLIP as CROSS_COMMIT_FLIP
from bot.core.scores import HALF_LIFE_COMMITS as HALF_LIFE_COMMITS
from bot.core.scores import SAME_COMMIT_FLIP as SAME_COMMIT_FLIP
from bot.core.scores import flip_score as flip_score
from bot.core.scores import flips
from bot.core.scores import wilson_interval as wilson_interval
from bot.core.scores import wilson_lower_bound as wilson_lower_bound
from bot.core.scores import wilson_upper_bound as wilson_upper_bound
from bot.core.times import in_window, parse_time, possibly_within
from bot.core.verdict_names import SINGLE_FAIL_POLICIES as SINGLE_FAIL_POLICIES
from bot.core.verdict_names import CommitVerdict as CommitVerdict
from bot.core.verdict_names import TestVerdict as TestVerdict

MIN_OBSERVATIONS = 5
STABLE_BELOW = 0.05
FLAKY_ABOVE = 0.10
KNOWN_FLAKY_DAYS = 7
WINDOW_DAYS = 30


@dataclass(frozen=True, slots=True)
class Thresholds:
    """How a history verdict is drawn: the window and the flip-score thresholds (a repository may set
    them in ``.github/flaketally.yml``; these are the defaults)."""

    window_days: int = WINDOW_DAYS
    flaky_above: float = FLAKY_ABOVE
    stable_below: float = STABLE_BELOW


DEFAULT_THRESHOLDS = Thresholds()


# enum members looked up once: attribute access on an Enum class is slow on a hot path
_PASSING, _FLAKY, _FAILING = CommitVerdict.PASSING, CommitVerdict.FLAKY, CommitVerdict.FAILING


def short(sha: str) -> str:
    return sha[:7]


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


class CommitJudgement(NamedTuple):
    commit: str
    verdict: CommitVerdict
    attempts: int  # attempts that ran (skipped ones not counted)
    passed: int
    failed: int
    seconds: float
    observations: tuple[Observation, ...]
    policy: CommitVerdict

    @property
    def evidence(self) -> str:
        """Which attempts passed and failed, in one line; made only when shown."""
        evidence = f"{short(self.commit)}: {_attempt_words(self.observations)}"
        if self.failed == 1 and not self.passed:
            evidence += f"; a single failure, no second run of this code (single-fail policy: {self.policy.value})"
        return evidence


def _attempt_words(observations: Sequence[Observation]) -> str:
    """``failed on attempt 1, passed on attempt 2`` with in-report retries spelled out."""
    words = OUTCOME_WORDS
    parts = []
    for obs in observations:
        run = f" of run {obs.run_id}" if obs.run_id is not None else ""
        if len(obs.outcomes) == 1:
            parts.append(f"{words[obs.outcomes]} on attempt {obs.attempt}{run}")
        elif len(set(obs.outcomes)) == 1:
            retries = len(obs.outcomes) - 1
            parts.append(
                f"{words[obs.outcomes[0]]} on attempt {obs.attempt}{run} and on its {_plural(retries, 'retry')} "
                "in the report".replace("retrys", "retries")
            )
        else:
            steps = ", then ".join(words[c] for c in obs.outcomes)
            parts.append(f"on attempt {obs.attempt}{run}: {steps} (retries in one report)")
    return "; ".join(parts)


def commit_judgement(
    commit: str,
    observations: Sequence[Observation],
    policy: CommitVerdict = CommitVerdict.UNDETERMINED,
) -> CommitJudgement:
    """One test on one commit in one context, across every attempt and in-report retry."""
    verdict, attempts, passed, failed = _tally_of("".join(map(OUTCOMES_OF, observations)), policy)
    seconds = sum(map(SECONDS_OF, observations))
    # made in C: a history of a month has a thousand failed commits for each flaky test
    return _NEW(CommitJudgement, (commit, verdict, attempts, passed, failed, seconds, tuple(observations), policy))


def flaky_events(groups: Mapping[str, Sequence[Observation]], policy: CommitVerdict) -> list[tuple[float, int]]:
    """(seconds, attempts) of each commit of ``groups`` (its observations) that ``commit_judgement`` calls
    flaky, in order: what ``bot.core.cost.cost_of`` counts, without a whole judgement of each commit."""
    events = []
    for observations in groups.values():
        verdict, attempts, _, _ = _tally_of("".join(map(OUTCOMES_OF, observations)), policy)
        if verdict is _FLAKY:
            events.append((sum(map(SECONDS_OF, observations)), attempts))
    return events


_TALLIES: dict[tuple[str, CommitVerdict], tuple[CommitVerdict, int, int, int]] = {}
_NEW = tuple.__new__


def _tally_of(letters: str, policy: CommitVerdict) -> tuple[CommitVerdict, int, int, int]:
    """``_tally``, kept per letter string: a history holds a handful of distinct ones."""
    tally = _TALLIES.get((letters, policy))
    if tally is None:
        tally = _tally(letters, policy)
        if len(_TALLIES) < 4096:
            _TALLIES[(letters, policy)] = tally
    return tally


def _tally(letters: str, policy: CommitVerdict) -> tuple[CommitVerdict, int, int, int]:
    """The verdict of a commit's outcome letters, and its attempts that ran, passed and failed."""
    letters = letters.replace("S", "")
    failed = letters.count("F") + letters.count("E")
    passed = len(letters) - failed
    if not failed:
        verdict = _PASSING
    elif passed:
        verdict = _FLAKY
    elif failed >= 2:
        verdict = _FAILING
    else:
        verdict = policy
    return verdict, len(letters), passed, failed


def by_commit(observations: Sequence[Observation]) -> list[tuple[str, list[Observation]]]:
    """Observations grouped by commit, commits in the order they first ran."""
    groups: dict[str, list[Observation]] = {}
    for obs in observations:
        groups.setdefault(obs.commit, []).append(obs)
    return list(groups.items())


def failed_commits(observations: Sequence[Observation]) -> dict[str, list[Observation]]:
    """``by_commit`` of only the commits with a failure or an error (every observation of each), in the
    order they first ran: a large history passes on most commits, and no list is made for those.

    The failing commits are picked out in C (a history holds few distinct outcome strings), so Python
    steps only through the observations on those commits."""
    outcomes = list(map(OUTCOMES_OF, observations))
    bad = {o for o in set(outcomes) if FAILED in o or ERROR in o}
    if not bad:
        return {}
    commits = list(map(COMMIT_OF, observations))
    return _grouped(observations, commits, set(compress(commits, map(bad.__contains__, outcomes))))


def flaky_commits(
    observations: Sequence[Observation], proven: Collection[str] | None = None
) -> dict[str, list[Observation]]:
    """``failed_commits`` of only the commits with a pass too (the ones ``commit_judgement`` calls flaky);
    ``proven``: those commits, when already known (a history verdict's ``proof_commits``, when it covered
    every observation)."""
    commits = list(map(COMMIT_OF, observations))
    if proven is None:
        proven, _ = _proof(commits, list(map(OUTCOMES_OF, observations)))
    return _grouped(observations, commits, set(proven)) if proven else {}


def _grouped(
    observations: Sequence[Observation], commits: Sequence[str], among: set[str]
) -> dict[str, list[Observation]]:
    """The observations on the commits ``among`` (``commits``: each observation's), by commit in the order
    the commits first ran."""
    groups: dict[str, list[Observation]] = {}
    for obs in compress(observations, map(among.__contains__, commits)):
        groups.setdefault(obs[1], []).append(obs)
    return groups


@dataclass(frozen=True, slots=True)
class HistoryJudgement:
    verdict: TestVerdict
    score: float
    lower_bound: float
    observations: int  # attempts that ran, in the window
    runs: int  # reports that held the test and did not skip it
    failed_runs: int
    commits: int
    proof_commits: tuple[str, ...]  # commits with a pass and a failure of this test
    first_failing_commit: str | None
    evidence: str


def _change_point(groups: Sequence[tuple[str, list[Observation]]]) -> str | None:
    """The first failing commit when every commit before it passed and every one from it failed."""
    states = []
    for commit, observations in groups:
        letters = "".join(o.outcomes for o in observations).replace("S", "")
        if not letters:
            continue
        fails = sum(1 for c in letters if c in "FE")
        if 0 < fails < len(letters):
            return None
        states.append((commit, fails > 0))
    first = next((i for i, (_, failing) in enumerate(states) if failing), None)
    if first is None or first == 0 or len(states) - first < 2:
        return None
    if all(failing for _, failing in states[first:]):
        return states[first][0]
    return None


def _proof(commits: Sequence[str], outcomes: Sequence[str]) -> tuple[set[str], int]:
    """Of these runs (each one's commit and outcome letters): the commits with a failed run and a passed
    one (a same-code pass and failure), and how many runs failed. Told by the runs' few distinct outcome
    strings and picked out in C: a month's history of a flaky test holds thousands of runs."""
    kinds = set(outcomes)
    failing, passing = {o for o in kinds if has_failure(o)}, {o for o in kinds if PASSED in o}
    proven = set(compress(commits, map(failing.__contains__, outcomes)))
    proven &= set(compress(commits, map(passing.__contains__, outcomes)))
    return proven, sum(map(failing.__contains__, outcomes))


def history_judgement(history: TestHistory, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> HistoryJudgement:
    observations = in_window(history.observations, thresholds.window_days)
    stable_below, flaky_above = thresholds.stable_below, thresholds.flaky_above
    letters = letters_of(observations)
    if "S" in letters:  # the reports that skipped it on every attempt are left out
        ran = [o for o in observations if o.outcomes == "P" or (o.outcomes != "S" and o.outcomes.replace("S", ""))]
        letters = letters_of(ran).replace("S", "")
    else:
        ran = observations
    n = len(letters)
    if not ran and observations:  # skipped every time: nothing to judge, and it says so
        commits = len(commits_of(observations))
        evidence = f"skipped on all {_plural(len(observations), 'run')} on {_plural(commits, 'commit')}"
        return HistoryJudgement(TestVerdict.SKIPPED, 0.0, 0.0, 0, 0, 0, commits, (), None, evidence)
    if "F" not in letters and "E" not in letters:  # the common case: it never failed
        commits = len(commits_of(ran))
        counts = f"failed 0 of {len(ran)} runs on {_plural(commits, 'commit')}"
        if n < MIN_OBSERVATIONS:
            evidence = f"{_plural(n, 'observation')}, fewer than {MIN_OBSERVATIONS}; {counts}"
            return HistoryJudgement(
                TestVerdict.INSUFFICIENT_DATA, 0.0, 0.0, n, len(ran), 0, commits, (), None, evidence
            )
        evidence = f"{counts}; score 0.000, lower bound 0.000 < {stable_below}"
        return HistoryJudgement(TestVerdict.STABLE, 0.0, 0.0, n, len(ran), 0, commits, (), None, evidence)
    # the commits in the order they first ran; only those with a failure grouped (a proof needs one)
    commits_run = list(map(COMMIT_OF, ran))
    ordered = list(dict.fromkeys(commits_run))
    commits = len(ordered)
    proven, failed_runs = _proof(commits_run, list(map(OUTCOMES_OF, ran)))
    proof = tuple(filter(proven.__contains__, ordered))  # in the order the commits first ran
    score, _ = flips(ran, ordered)
    lower = wilson_lower_bound(score, n)
    counts = f"failed {failed_runs} of {len(ran)} runs on {_plural(commits, 'commit')}"
    numbers = f"score {score:.3f}, lower bound {lower:.3f}"

    def verdict(v: TestVerdict, evidence: str, first_failing: str | None = None) -> HistoryJudgement:
        return HistoryJudgement(v, score, lower, n, len(ran), failed_runs, commits, proof, first_failing, evidence)

    if proof:
        named = ", ".join(short(c) for c in proof[:5]) + (", …" if len(proof) > 5 else "")
        return verdict(
            TestVerdict.FLAKY,
            f"passed and failed on the same commit on {len(proof)} of {_plural(commits, 'commit')} "
            f"({named}); {counts}; {numbers}",
        )
    if n < MIN_OBSERVATIONS:
        return verdict(
            TestVerdict.INSUFFICIENT_DATA, f"{_plural(n, 'observation')}, fewer than {MIN_OBSERVATIONS}; {counts}"
        )
    if failed_runs == len(ran):
        return verdict(TestVerdict.BROKEN, f"{counts}: fails every time, not flaky")
    groups = by_commit(ran)
    first_failing = _change_point(groups)
    if first_failing is not None:
        before = next(i for i, (c, _) in enumerate(groups) if c == first_failing)
        return verdict(
            TestVerdict.REGRESSION,
            f"passed on {_plural(before, 'commit')}, then failed on every run from {short(first_failing)} on "
            f"({_plural(len(groups) - before, 'commit')}); {counts}",
            first_failing,
        )
    if lower > flaky_above:
        return verdict(TestVerdict.FLAKY, f"outcomes change across commits; {counts}; {numbers} > {flaky_above}")
    if score < stable_below:
        return verdict(TestVerdict.STABLE, f"{counts}; {numbers} < {stable_below}")
    return verdict(
        TestVerdict.INSUFFICIENT_DATA,
        f"{counts}; {numbers}: between stable ({stable_below}) and flaky ({flaky_above})",
    )


@dataclass(frozen=True, slots=True)
class KnownFlaky:
    runs: int
    failed_runs: int
    same_code_pairs: int  # commits on which the test both passed and failed

    def sentence(self, test: str) -> str:
        times = "once" if self.same_code_pairs == 1 else f"on {self.same_code_pairs} commits"
        return (
            f"{test} failed {self.failed_runs} of {self.runs} runs in the last {KNOWN_FLAKY_DAYS} days and both "
            f"passed and failed on the same code {times}. It may be flaky rather than broken by this change: "
            "rerun it before you change code for it."
        )


def known_flaky(observations: Sequence[Observation], now: datetime) -> KnownFlaky | None:
    """Whether the test both passed and failed on the same code within the last 7 days before ``now``.

    Undated observations (local files without run times) cannot be placed in time and are left out.
    """
    since = now - timedelta(days=KNOWN_FLAKY_DAYS)
    near = possibly_within(observations, since, now)
    starts = list(map(STARTED_AT_OF, near))
    # each time parsed once: a history's observations share their reports' few times
    inside = {value for value in set(starts) if value and since <= parse_time(value) <= now}
    recent = list(compress(near, map(inside.__contains__, starts)))
    outcomes = list(map(OUTCOMES_OF, recent))
    if "S" in outcomes:  # skipped on every attempt: not a run
        recent = [o for o in recent if o.outcomes != "S"]
        outcomes = list(map(OUTCOMES_OF, recent))
    proven, failed = _proof(list(map(COMMIT_OF, recent)), outcomes)
    if not proven:
        return None
    return KnownFlaky(len(recent), failed, len(proven))


def recovered(history: HistoryJudgement, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> bool:
    """Enough clean history to rule the flakiness out: the history's verdict is stable and even the upper
    confidence bound of its flip score is below the flaky threshold (with no flip at all, 35 attempts)."""
    upper = wilson_upper_bound(history.score, history.observations)
    return history.verdict is TestVerdict.STABLE and upper < thresholds.flaky_above


def recovery_evidence(history: HistoryJudgement, thresholds: Thresholds = DEFAULT_THRESHOLDS) -> str:
    """The history's evidence, with the bound that made it a recovery, for a reader to check."""
    upper = wilson_upper_bound(history.score, history.observations)
    return f"{history.evidence}; upper bound of the flip score {upper:.3f} < {thresholds.flaky_above:.2f}"


def no_longer_flaky(
    was_known_flaky: bool,
    now: KnownFlaky | None,
    history: HistoryJudgement,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
) -> bool:
    """True once, when a test that was known flaky has no same-code pass and failure left in the 7-day
    memory *and* its history has recovered. The memory running dry alone proves nothing: a flaky test
    whose failures are single attempts keeps failing without a same-code pair.

    The caller keeps remembering a test that is not recovered yet, so the announcement is made once, when
    it is true.
    """
    return was_known_flaky and now is None and recovered(history, thresholds)
