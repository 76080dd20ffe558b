"""What one commit's results say: a finding per test that failed on it, the gate's conclusion, and the
tests whose flaky memory has just ended. Plain data in, plain data out: the check run and the PR
comment are rendered from a ``CommitReport``."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from bot.core.cost import Cost, Rates
from bot.core.identity import ExecutionContext
from bot.core.judge import judge
from bot.core.observations import TestHistory, any_failed
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
    short,
)


class Conclusion(StrEnum):
    SUCCESS = "success"
    FAILURE = "failure"
    NEUTRAL = "neutral"


class Advice(StrEnum):
    RERUN = "rerun"  # a single failure: rerun to know
    KNOWN_FLAKY = "known_flaky"  # a single failure of a test known flaky
    NOT_YOUR_CHANGE = "not_your_change"  # flaky on this commit
    LOOK_AT_CHANGE = "look_at_change"  # failed on every attempt
    KNOWN_BROKEN = "known_broken"  # failing, and failing before this change too


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

    @property
    def verdict(self) -> CommitVerdict:
        return self.commit.verdict

    @property
    def real(self) -> bool:
        """A failure the gate holds against the change."""
        return self.verdict is CommitVerdict.FAILING or (
            self.verdict is CommitVerdict.UNDETERMINED and self.known is None
        )

    @property
    def advice(self) -> Advice:
        if self.verdict is CommitVerdict.FLAKY:
            return Advice.NOT_YOUR_CHANGE
        if self.verdict is CommitVerdict.FAILING:
            return Advice.KNOWN_BROKEN if self.history.verdict is TestVerdict.BROKEN else Advice.LOOK_AT_CHANGE
        return Advice.KNOWN_FLAKY if self.known else Advice.RERUN


@dataclass(frozen=True, slots=True)
class Gate:
    conclusion: Conclusion
    reason: str  # one sentence, shown first


@dataclass(frozen=True, slots=True)
class GatePolicy:
    """What a repository chose for the failures that are not its change's fault (``gate`` in its
    ``.github/flaketally.yml``)."""

    known_flaky: Conclusion = Conclusion.NEUTRAL  # single failures of tests known flaky, not rerun
    broken: Conclusion = Conclusion.NEUTRAL  # failures of tests broken on the default branch too
    fail_on_new_flake: bool = False


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
    gate_policy: GatePolicy = field(default=GatePolicy())
    thresholds: Thresholds = field(default=DEFAULT_THRESHOLDS)

    @property
    def gate(self) -> Gate:
        return decide(self)

    @property
    def has_something_to_say(self) -> bool:
        return bool(self.findings or self.no_longer_flaky or self.unjudged)


_ORDER = {CommitVerdict.FAILING: 0, CommitVerdict.UNDETERMINED: 1, CommitVerdict.FLAKY: 2, CommitVerdict.PASSING: 3}


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
    gate_policy: GatePolicy = GatePolicy(),
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
) -> CommitReport:
    findings = []
    known_now: set[tuple[str, str]] = set()
    ended = []
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
        here = [o for o in history.observations if o.commit == head_sha]
        if not any_failed(here):
            continue
        judged = judge(history, policy, rates, thresholds)  # the same judgement and cost `flaketally analyze` gives
        commit = next(c for c in judged.commits if c.commit == head_sha)
        message = next((o.message for o in here if o.message), "")
        findings.append(
            Finding(
                history.test_id,
                history.name,
                history.file,
                history.line,
                context,
                commit,
                judged.judgement,
                known,
                judged.cost,
                message,
            )
        )
    findings.sort(key=lambda f: (_ORDER[f.verdict], f.test_id, f.context.key()))
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
    )


def _names(findings: Sequence[Finding], show: Callable[[str], str], limit: int = 3) -> str:
    names = sorted({f.name for f in findings})
    shown = ", ".join(show(n) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _as_is(name: str) -> str:
    return name


def decide(report: CommitReport, show: Callable[[str], str] = _as_is) -> Gate:
    """The check run's conclusion, with its reason in one sentence.

    success: nothing failed, or every failure is a proven flake of this commit; failure: a failure
    that reproduces, a single failure without flaky history, or a failure of a test whose name another
    test in the same report shares (it cannot be judged, and is not let through); neutral: single
    failures of tests known flaky that were not rerun, or no report to judge.
    """
    sha = short(report.head_sha)
    findings = report.findings
    failing = [f for f in findings if f.verdict is CommitVerdict.FAILING]
    lone = [f for f in findings if f.verdict is CommitVerdict.UNDETERMINED and f.known is None]
    known = [f for f in findings if f.verdict is CommitVerdict.UNDETERMINED and f.known is not None]
    flaky = [f for f in findings if f.verdict is CommitVerdict.FLAKY]
    if failing:
        return Gate(Conclusion.FAILURE, f"Failure: {_names(failing, show)} failed on every attempt of {sha}.")
    if lone:
        return Gate(
            Conclusion.FAILURE,
            f"Failure: {_names(lone, show)} failed on the only attempt of {sha} and "
            f"{'has' if len({f.name for f in lone}) == 1 else 'have'} no flaky history; rerun the failed jobs to know "
            "whether it is flaky.",
        )
    if report.unjudged:
        names = report.unjudged
        shown = ", ".join(show(n) for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        return Gate(
            Conclusion.FAILURE,
            f"Failure: {shown} failed, and {'its name is' if len(names) == 1 else 'their names are'} shared with "
            "another test in the same report, so Flaketally cannot tell which one failed; give the tests distinct "
            "names to have them judged.",
        )
    if known:
        conclusion = report.gate_policy.known_flaky
        return Gate(
            conclusion,
            f"{conclusion.value.capitalize()}: {_names(known, show)} failed once and "
            + (
                "is known flaky; it was not rerun."
                if len({f.name for f in known}) == 1
                else "are known flaky; they were not rerun."
            ),
        )
    if flaky:
        only = "the only failure, " if len(flaky) == 1 else "every failure, "
        return Gate(Conclusion.SUCCESS, f"Success: {only}{_names(flaky, show)}, passed on a rerun of the same commit.")
    if report.reports == 0:
        return Gate(Conclusion.NEUTRAL, f"Neutral: no JUnit report was found for {sha}, so nothing was judged.")
    return Gate(Conclusion.SUCCESS, f"Success: no test failed on {sha} ({report.tests_seen} tests).")
