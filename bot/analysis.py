"""The analysis behind ``flaketally analyze``: read reports, store them, judge and cost every test seen.

This is the pipeline the GitHub workers run too, minus the GitHub part: parse, ingest, judge.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bot.cost import Cost, Rates, cost_of
from bot.identity import ExecutionContext
from bot.junit import ReportRefused, parse
from bot.local import Warning, identify, report_files
from bot.store import Store, TestHistory
from bot.verdicts import (
    CommitJudgement,
    CommitVerdict,
    HistoryJudgement,
    TestVerdict,
    by_commit,
    judge_commit,
    judge_history,
)

Progress = Callable[[int, int, str], None]


@dataclass(frozen=True, slots=True)
class TestAnalysis:
    __test__ = False  # not a pytest test class

    history: TestHistory
    judgement: HistoryJudgement
    commits: tuple[CommitJudgement, ...]
    cost: Cost

    @property
    def context(self) -> ExecutionContext:
        return ExecutionContext.from_key(self.history.context)

    @property
    def is_finding(self) -> bool:
        return self.judgement.verdict in (TestVerdict.FLAKY, TestVerdict.BROKEN, TestVerdict.REGRESSION) or any(
            c.verdict is not CommitVerdict.PASSING for c in self.commits
        )


@dataclass(slots=True)
class Analysis:
    policy: CommitVerdict
    rates: Rates
    tests: list[TestAnalysis] = field(default_factory=list)
    warnings: list[Warning] = field(default_factory=list)
    files: int = 0
    refused: int = 0
    new_reports: int = 0

    @property
    def usable(self) -> int:
        return self.files - self.refused

    def ranking(self) -> list[TestAnalysis]:
        """Tests that cost something, by total cost, then by test id and context: a stable order."""
        costly = [t for t in self.tests if t.cost.events]
        return sorted(costly, key=lambda t: (-round(t.cost.total, 9), t.history.test_id, t.history.context))

    @property
    def total_cost(self) -> float:
        return sum(t.cost.total for t in self.tests)


def judge(history: TestHistory, policy: CommitVerdict, rates: Rates) -> TestAnalysis:
    commits = tuple(judge_commit(sha, obs, policy) for sha, obs in by_commit(history.observations))
    return TestAnalysis(history, judge_history(history), commits, cost_of(commits, rates))


def analyze(
    store: Store,
    paths: Sequence[str],
    *,
    repo: str = "local",
    policy: CommitVerdict = CommitVerdict.UNDETERMINED,
    rates: Rates | None = None,
    progress: Progress | None = None,
) -> Analysis:
    files, warnings = report_files(paths)
    result = Analysis(policy=policy, rates=rates or Rates(), warnings=warnings, files=len(files))
    seen: set[str] = set()
    for index, path in enumerate(files, 1):
        if progress:
            progress(index, len(files), str(path))
        try:
            with Path(path).open("rb") as stream:
                report = parse(stream)
        except ReportRefused as exc:
            result.refused += 1
            result.warnings.append(Warning(str(path), str(exc)))
            continue
        except OSError as exc:
            result.refused += 1
            result.warnings.append(Warning(str(path), f"cannot be read: {exc.strerror or exc}"))
            continue
        run, problems = identify(path, report, repo)
        result.warnings.extend(problems)
        seen.update(r.id for r in report.results)
        if store.ingest(report, run):
            result.new_reports += 1
    result.tests = [judge(h, policy, result.rates) for h in store.history(repo, seen)]
    return result
