"""What an analysis of many reports found: every test seen with its judgement and cost, the problems with
the inputs, and counts. ``flaketally analyze`` fills it (``bot.local.analyze``); ``bot.render.analysis``
shows it."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from bot.core.cost import Rates
from bot.core.judge import TestAnalysis
from bot.core.verdicts import CommitVerdict, TestVerdict

# What needs a person first: a test that started failing, one that always fails, a flaky one, then a test
# whose history is fine but that failed on a commit (undetermined or failing there).
_SEVERITY = {TestVerdict.REGRESSION: 0, TestVerdict.BROKEN: 1, TestVerdict.FLAKY: 2}


@dataclass(frozen=True, slots=True)
class FileWarning:
    """A problem with one input file, named in the output; the rest of the run goes on."""

    path: str
    message: str


@dataclass(slots=True)
class Analysis:
    policy: CommitVerdict
    rates: Rates
    tests: list[TestAnalysis] = field(default_factory=list)
    warnings: list[FileWarning] = field(default_factory=list)
    files: int = 0
    refused: int = 0
    new_reports: int = 0
    collided_failures: int = 0  # failures of tests sharing a name with another: named in a warning, not judged

    @property
    def usable(self) -> int:
        return self.files - self.refused

    def ranking(self) -> list[TestAnalysis]:
        """Tests that cost something, by total cost, then by test id and context: a stable order."""
        costly = [t for t in self.tests if t.cost.events]
        return sorted(costly, key=lambda t: (-round(t.cost.total, 9), t.history.test_id, t.history.context))

    def worst_first(self) -> list[TestAnalysis]:
        """The findings, the most urgent first (``worst_first``)."""
        return worst_first(self.tests)

    @property
    def total_cost(self) -> float:
        return sum(t.cost.total for t in self.tests)


def urgency(t: TestAnalysis) -> tuple[int, float, float, str, str]:
    """A sort key, worst first: by verdict, then cost, then failure rate; ties by id and context."""
    j = t.judgement
    rate = j.failed_runs / j.runs if j.runs else 0.0
    return (_SEVERITY.get(j.verdict, 3), -round(t.cost.total, 9), -rate, t.history.test_id, t.history.context)


def worst_first(tests: Iterable[TestAnalysis]) -> list[TestAnalysis]:
    """The tests that need attention, the most urgent first: the one order of the table, the HTML report
    and every other list of findings."""
    return sorted((t for t in tests if t.is_finding), key=urgency)
