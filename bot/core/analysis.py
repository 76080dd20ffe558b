"""What an analysis of many reports found: every test seen with its judgement and cost, the problems with
the inputs, and counts. ``flaketally analyze`` fills it (``bot.local.analyze``); ``bot.render.analysis``
shows it."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.core.cost import Rates
from bot.core.judge import TestAnalysis
from bot.core.verdicts import CommitVerdict


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

    @property
    def total_cost(self) -> float:
        return sum(t.cost.total for t in self.tests)
