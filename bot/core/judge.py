"""The one judge of a test: its history verdict, the verdict of each commit it failed on, and their cost.
``flaketally analyze`` shows this for every test it has seen; the PR findings show the part of it a finding
needs for the tests that failed on one commit (``judge_failure``: the same verdict, commit and cost, a test
checks), so the two cannot disagree."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import repeat

from bot.core.cost import Cost, Rates, cost_of, cost_of_events
from bot.core.identity import ExecutionContext
from bot.core.observations import Observation, TestHistory, any_failed, commits_of
from bot.core.verdicts import (
    DEFAULT_THRESHOLDS,
    CommitJudgement,
    CommitVerdict,
    HistoryJudgement,
    TestVerdict,
    Thresholds,
    commit_judgement,
    failed_commits,
    flaky_commits,
    flaky_events,
    history_judgement,
)


@dataclass(frozen=True, slots=True)
class TestAnalysis:
    __test__ = False  # not a pytest test class

    history: TestHistory
    judgement: HistoryJudgement
    commits: tuple[CommitJudgement, ...]  # the commits on which the test failed at least once
    cost: Cost
    passing_commits: int  # the others: every attempt passed or was skipped

    @property
    def context(self) -> ExecutionContext:
        return ExecutionContext.from_key(self.history.context)

    @property
    def is_finding(self) -> bool:
        return self.judgement.verdict in (TestVerdict.FLAKY, TestVerdict.BROKEN, TestVerdict.REGRESSION) or any(
            c.verdict is not CommitVerdict.PASSING for c in self.commits
        )


def judge(
    history: TestHistory, policy: CommitVerdict, rates: Rates, thresholds: Thresholds = DEFAULT_THRESHOLDS
) -> TestAnalysis:
    """A test's history verdict, and a judgement of each commit on which it failed at least once (a commit
    where every attempt passed is counted, not spelled out: most of a large history is just that)."""
    observations = history.observations
    judged = history_judgement(history, thresholds)
    if judged.runs == len(observations):  # every observation in the window and run: its counts are the whole's
        seen, failed = judged.commits, judged.failed_runs > 0
    else:
        seen, failed = len(commits_of(observations)), any_failed(observations)
    if not failed:
        commits: tuple[CommitJudgement, ...] = ()
    else:
        groups = failed_commits(observations)
        commits = tuple(map(commit_judgement, groups, groups.values(), repeat(policy)))
    return TestAnalysis(history, judged, commits, cost_of(commits, rates), seen - len(commits))


def judge_failure(
    history: TestHistory,
    here: Sequence[Observation],
    policy: CommitVerdict,
    rates: Rates,
    thresholds: Thresholds = DEFAULT_THRESHOLDS,
) -> tuple[HistoryJudgement, CommitJudgement, Cost]:
    """What ``judge`` says of a test that failed on one commit (``here``: its observations there, in order),
    as a finding shows it: the history verdict, that commit's judgement and the cost. Only the commits the
    cost counts (the flaky ones) are judged, not every commit it failed on: a flaky test fails on a thousand
    commits a month, and a pull request's check reads this for every test that failed on it. (A single-fail
    policy of flaky makes a lone failure a flaky commit too: then every failed commit is judged.)"""
    observations = history.observations
    judged = history_judgement(history, thresholds)
    if policy is CommitVerdict.FLAKY:
        counted = failed_commits(observations)
    else:  # a verdict over every observation has found the flaky commits already
        counted = flaky_commits(observations, judged.proof_commits if judged.runs == len(observations) else None)
    cost = cost_of_events(flaky_events(counted, policy), rates)
    return judged, commit_judgement(here[0].commit, here, policy), cost
