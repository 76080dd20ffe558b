"""What one commit's results say: a finding per test that failed on it (with the one word it is called,
``bot.core.baseline``), the gate's conclusion (``bot.core.gate``), and the tests whose flaky memory has
just ended. Plain data in, plain data out: the check run and the PR comment are rendered from a
``CommitReport``."""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from bot.core.baseline import NO_BASELINE, SHOWN_IN_ORDER, Baseline, Word, baseline, word_for
from bot.core.cost import Cost, Measured, Rates, RerunTiming, measured_share
from bot.core.display import source_location, stored_display_id
from bot.core.gate import Conclusion, Gate, GatePolicy, decide
from bot.core.identity import ExecutionContext
from bot.core.judge import judge_failure
from bot.core.observations import Observation, TestHistory, any_failed, on_commits
from bot.core.quarantine import NONE as NO_QUARANTINE
from bot.core.quarantine import Entry, Quarantine
from bot.core.verdicts import (
    DEFAULT_THRESHOLDS,
    CommitJudgement,
    CommitVerdict,
    HistoryJudgement,
    KnownFlaky,
    TestVerdict,
    Thresholds,
    history_judgement,
    known_flaky,
    no_longer_flaky,
    recovery_evidence,
)

DEFAULT_GATE = GatePolicy()
# The words of a failure that tell nobody anything new: it was failing on the default branch before
# (broken, regression), it is known flaky, or it is quarantined.
NOTHING_NEW = frozenset({Word.BROKEN, Word.REGRESSION, Word.KNOWN_FLAKY, Word.QUARANTINED})

__all__ = ["Advice", "CommitReport", "Conclusion", "Finding", "Gate", "GatePolicy", "commit_report", "decide"]


class Advice(StrEnum):
    RERUN = "rerun"  # a single failure: rerun to know
    KNOWN_FLAKY = "known_flaky"  # a single failure of a test known flaky
    NOT_YOUR_CHANGE = "not_your_change"  # flaky on this commit
    LOOK_AT_CHANGE = "look_at_change"  # failed on every attempt
    KNOWN_BROKEN = "known_broken"  # failing, and failing before this change too
    BROKEN_ON_BRANCH = "broken_on_branch"  # fails on the default branch too
    NEW_FAILURE = "new_failure"  # passed before this change
    QUARANTINED = "quarantined"  # in the repository's quarantine file: not held against the change


@dataclass(frozen=True, slots=True)
class Finding:
    """A test that failed at least once on the commit, in one context."""

    test_id: str
    name: str
    file: str | None
    line: int | None
    context: ExecutionContext
    commit: CommitJudgement
    history: HistoryJudgement
    known: KnownFlaky | None
    cost: Cost
    message: str
    baseline: Baseline = NO_BASELINE
    newly_flaky: bool = False  # flaky here, and stable on the default branch in this context
    automatic: bool = False  # it passed on an attempt that Flaketally's automatic rerun started
    display: str = ""  # the id as its runner prints it (``bot.core.display``)
    recent: str = ""  # its last runs in this context, oldest first: ✓ passed, ✗ failed
    flaky_since: str | None = None  # the day of its first same-code pass and failure in the window
    details: str = ""  # the failure's text on this commit (a stack trace), bounded
    measured: Measured | None = None  # its share of the reruns that proved it flaky here, as GitHub timed them
    quarantine: Entry | None = None  # its entry in the repository's quarantine file, for its context

    @property
    def verdict(self) -> CommitVerdict:
        return self.commit.verdict

    @property
    def word(self) -> Word:
        return word_for(self.verdict, self.known is not None, self.baseline, self.quarantine is not None)

    @property
    def evidence(self) -> str:
        """The commit's evidence, and what the default branch or the base showed when it decided the word."""
        if self.word in (Word.BROKEN, Word.REGRESSION, Word.NEW_FAILURE) or (
            self.word is Word.FAILING and self.baseline.evidence
        ):
            return f"{self.commit.evidence}; {self.baseline.evidence}"
        if self.word is Word.FLAKY and self.automatic:
            return f"{self.commit.evidence}; passed on the automatic rerun"
        if self.word is Word.QUARANTINED and self.quarantine is not None:
            return f"{self.commit.evidence}; quarantined since {self.quarantine.since}: {self.quarantine.reason}"
        return self.commit.evidence

    @property
    def real(self) -> bool:
        """A failure the gate holds against the change."""
        return self.word in (Word.FAILING, Word.NEW_FAILURE, Word.UNDETERMINED)

    @property
    def advice(self) -> Advice:
        word = self.word
        if word is Word.FLAKY:
            return Advice.NOT_YOUR_CHANGE
        if word is Word.QUARANTINED:
            return Advice.QUARANTINED
        if word in (Word.BROKEN, Word.REGRESSION):
            return Advice.BROKEN_ON_BRANCH
        if word is Word.FAILING:
            return Advice.KNOWN_BROKEN if self.history.verdict is TestVerdict.BROKEN else Advice.LOOK_AT_CHANGE
        if word is Word.KNOWN_FLAKY:
            return Advice.KNOWN_FLAKY
        return Advice.NEW_FAILURE if word is Word.NEW_FAILURE else Advice.RERUN


@dataclass(frozen=True, slots=True)
class CommitReport:
    repo: str
    head_sha: str
    policy: CommitVerdict
    rates: Rates
    findings: tuple[Finding, ...]
    tests_seen: int
    reports: int
    no_longer_flaky: tuple[tuple[str, str, str], ...] = ()  # (test id, context display, history evidence)
    # (test id, context key) remembered as flaky: known flaky in the last 7 days, or not recovered since
    known_flaky_now: frozenset[tuple[str, str]] = frozenset()
    problems: tuple[str, ...] = field(default=())  # missing or expired artifacts, refused reports
    # failed tests that share their name with another test in one report: seen, but not judged
    unjudged: tuple[str, ...] = field(default=())
    gate_policy: GatePolicy = field(default=DEFAULT_GATE)
    thresholds: Thresholds = field(default=DEFAULT_THRESHOLDS)
    branch: str | None = None  # the repository's default branch, when known
    skipped: int = 0  # results skipped on the commit
    seconds: float = 0.0  # the time its tests ran, every report together
    # quarantined tests due to leave: (display id, context, evidence), and what was done about it
    leaving: tuple[tuple[str, str, str], ...] = ()
    leaving_note: str = ""

    @property
    def gate(self) -> Gate:
        return decide(self)

    @property
    def has_something_to_say(self) -> bool:
        return bool(self.findings or self.no_longer_flaky or self.unjudged)

    @property
    def has_news(self) -> bool:
        """Something nobody has been told yet: a failure other than one already failing on the default
        branch, known flaky or quarantined (``NOTHING_NEW``), a test no longer flaky, a failure left unjudged,
        a problem with the reports, a quarantined test due to leave."""
        if self.problems or self.unjudged or self.no_longer_flaky or self.leaving:
            return True
        return any(f.word not in NOTHING_NEW for f in self.findings)


_ORDER = {word: n for n, word in enumerate(SHOWN_IN_ORDER)}


def commit_report(
    repo: str,
    head_sha: str,
    histories: Iterable[TestHistory],
    *,
    policy: CommitVerdict,
    rates: Rates,
    now: datetime,
    previously_known: frozenset[tuple[str, str]] = frozenset(),
    tests_seen: int = 0,
    reports: int = 0,
    problems: Sequence[str] = (),
    unjudged: Sequence[str] = (),
    gate_policy: GatePolicy = DEFAULT_GATE,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
    branch: str | None = None,
    default_commits: Collection[str] = (),
    base_commits: Collection[str] = (),
    automatic: Collection[tuple[int, int]] = (),
    timings: Mapping[tuple[int, int], RerunTiming] | None = None,
    quarantine: Quarantine = NO_QUARANTINE,
    still_known: Collection[tuple[str, str]] = (),
) -> CommitReport:
    """``default_commits``: the commits that ran on the default branch (``branch``) in the window;
    ``base_commits``: the pull request's base commits. They give the words ``broken``, ``regression`` and
    ``new failure`` (``bot.core.baseline``). ``automatic``: (run id, attempt) of the attempts an automatic
    rerun started. ``timings``: the rerun attempts of the commit as GitHub timed them (measured cost).
    ``quarantine``: the repository's quarantine file; a quarantined test's failure is not held against the
    change. ``still_known``: (test id, context key) found known flaky now among the previously known tests
    that did not fail on the commit, whose histories the caller did not read for that reason: they stay
    remembered."""
    findings = []
    known_now: set[tuple[str, str]] = set(still_known)
    ended = []
    where = _Where(
        head_sha, policy, rates, thresholds, gate_policy, branch, default_commits, base_commits, automatic, quarantine
    )
    for history in histories:
        known = known_flaky(history.observations, now)
        key = (history.test_id, history.context)
        context = ExecutionContext.from_key(history.context)
        if known:
            known_now.add(key)
        elif key in previously_known:
            judged_history = history_judgement(history, thresholds)
            if no_longer_flaky(True, known, judged_history, thresholds):
                ended.append((history.test_id, context.display(), recovery_evidence(judged_history, thresholds)))
            else:  # remembered until its history shows it recovered
                known_now.add(key)
        here = on_commits(history.observations, {head_sha})
        if any_failed(here):
            findings.append(_finding(history, here, known, context, where))
    if timings:
        findings = _with_measured(findings, head_sha, timings)
    findings.sort(key=lambda f: (_ORDER[f.word], f.test_id, f.context.key()))
    return CommitReport(
        repo,
        head_sha,
        policy,
        rates,
        tuple(findings),
        tests_seen,
        reports,
        tuple(sorted(ended)),
        frozenset(known_now),
        tuple(problems),
        tuple(unjudged),
        gate_policy,
        thresholds,
        branch,
    )


RECENT_RUNS = 10


@dataclass(frozen=True, slots=True)
class _Where:
    """What every finding of one commit is judged against."""

    head_sha: str
    policy: CommitVerdict
    rates: Rates
    thresholds: Thresholds
    gate_policy: GatePolicy
    branch: str | None
    default_commits: Collection[str]
    base_commits: Collection[str]
    automatic: Collection[tuple[int, int]]
    quarantine: Quarantine


def _finding(
    history: TestHistory,
    here: Sequence[Observation],
    known: KnownFlaky | None,
    context: ExecutionContext,
    w: _Where,
) -> Finding:
    """One test that failed on the commit: its judgement (the same `flaketally analyze` gives), the word
    the default branch and the base give it, and what the comment shows of it."""
    judgement, commit, cost = judge_failure(history, here, w.policy, w.rates, w.thresholds)
    found = baseline(
        history.observations,
        w.head_sha,
        branch=w.branch,
        default_commits=w.default_commits,
        base_commits=w.base_commits,
    )
    newly = w.gate_policy.fail_on_new_flake and _stable_on_branch(history, w.head_sha, w.default_commits, w.thresholds)
    details = next((o.details for o in here if o.details), "")
    file, line = source_location(history.classname, history.file, history.line, details)
    shown = stored_display_id(history.test_id, history.classname, history.name, history.file)
    return Finding(
        history.test_id,
        history.name,
        file,
        line,
        context,
        commit,
        judgement,
        known,
        cost,
        next((o.message for o in here if o.message), ""),
        found,
        newly,
        any((o.run_id, o.attempt) in w.automatic and "P" in o.outcomes for o in here),
        shown,
        recent_outcomes(history),
        first_flaky_day(history, judgement),
        details,
        quarantine=w.quarantine.entry_for(shown, context.display()) if w.quarantine else None,
    )


def recent_outcomes(history: TestHistory) -> str:
    """Its last runs that did not skip it, oldest first: ✓ passed, ✗ failed."""
    marks = []
    for o in reversed(history.observations):  # from the newest: only the last few are shown
        if o.outcomes.replace("S", ""):
            marks.append("✗" if o.failed else "✓")
            if len(marks) == RECENT_RUNS:
                break
    return "".join(reversed(marks))


def first_flaky_day(history: TestHistory, judged: HistoryJudgement) -> str | None:
    """The day of its first same-code pass and failure in the window (None when it has none)."""
    if not judged.proof_commits:
        return None
    first = judged.proof_commits[0]
    dated = [o.started_at for o in history.observations if o.commit == first and o.started_at]
    return min(dated)[:10] if dated else None


def _rerun_passes(finding: Finding, head_sha: str) -> list[tuple[int, int]]:
    """(run id, attempt) of the rerun attempts (attempt 2 on) in which a flaky test passed."""
    return [
        (o.run_id, o.attempt)
        for o in finding.commit.observations
        if o.commit == head_sha and o.run_id is not None and o.attempt > 1 and "P" in o.outcomes
    ]


def _with_measured(
    findings: list[Finding], head_sha: str, timings: Mapping[tuple[int, int], RerunTiming]
) -> list[Finding]:
    """Each flaky finding with its share of the reruns that proved it."""
    flaky = [f for f in findings if f.word is Word.FLAKY]
    sharers = Counter(key for f in flaky for key in dict.fromkeys(_rerun_passes(f, head_sha)))
    return [
        dataclasses.replace(f, measured=measured_share(_rerun_passes(f, head_sha), timings, sharers))
        if f.word is Word.FLAKY
        else f
        for f in findings
    ]


def _stable_on_branch(
    history: TestHistory, head_sha: str, default_commits: Collection[str], thresholds: Thresholds
) -> bool:
    """Whether the test's runs on the default branch in this context, alone, judge it stable."""
    on_branch = [o for o in on_commits(history.observations, default_commits) if o.commit != head_sha]
    alone = TestHistory(
        history.test_id, history.family, history.classname, history.name, history.file, history.line, history.context
    )
    alone.observations.extend(on_branch)
    return history_judgement(alone, thresholds).verdict is TestVerdict.STABLE
