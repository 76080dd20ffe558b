"""Reports judged without a store: held in memory and read back exactly as ``Store.history`` gives them
(the same order, the same rounding, the same first-seen name and line), so ``analyze`` without ``--db``
starts without importing a database layer. For small inputs; large ones go through a throwaway store.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.core.identity import RunIdentity
from bot.core.observations import LETTER, PASSED, SKIPPED, Observation, TestHistory
from bot.core.results import Outcome, Report, TestResult

MAX_BYTES = 16 << 20  # inputs up to this size are judged in memory


@dataclass(slots=True)
class MemoryHistory:
    reports: list[tuple[RunIdentity, Report]] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)
    first: dict[str, TestResult] = field(default_factory=dict)  # a test as first seen: its name, file, line

    def ingest(self, report: Report, run: RunIdentity) -> bool:
        """Keep one report; False when it was kept before (the store's key: what was executed)."""
        key = run.report_key(report.digest)
        if key in self.keys:
            return False
        self.keys.add(key)
        self.reports.append((run, report))
        for result in report.results:
            self.first.setdefault(result.id, result)
        return True

    def history(self, wanted: set[str]) -> list[TestHistory]:
        """Every observation of the wanted tests, per test and context, in the order the reports ran."""
        order = sorted(
            range(len(self.reports)),
            key=lambda i: (
                self.reports[i][0].started_at or "",
                self.reports[i][0].run_index or 0,
                self.reports[i][0].commit,
                self.reports[i][0].attempt,
                self.reports[i][0].run_id or 0,
                self.reports[i][1].digest,
                i,
            ),
        )
        histories: dict[tuple[str, str], TestHistory] = {}
        for position, index in enumerate(order):
            run, report = self.reports[index]
            context = run.context.key()
            for result in report.results:
                if result.id not in wanted:
                    continue
                found = histories.get((result.id, context))
                if found is None:
                    t = self.first[result.id]
                    found = TestHistory(t.id, t.family, t.classname, t.name, t.file, t.line, context)
                    histories[(result.id, context)] = found
                found.observations.append(_observation(position, run, result))
        for history in histories.values():  # the store lists a report's passes, then skips, then the rest
            history.observations.sort(key=lambda o: o.order)
        return sorted(histories.values(), key=lambda h: (h.test_id, h.context))


def _observation(order: int, run: RunIdentity, result: TestResult) -> Observation:
    attempts = result.attempts
    if len(attempts) == 1 and result.outcome is Outcome.PASSED:
        seconds = min(2**32 - 1, round(attempts[0].duration * 1000)) / 1000  # as the store packs it
        return Observation(order, run.commit, run.attempt, run.run_id, run.started_at, PASSED, seconds)
    if len(attempts) == 1 and result.outcome is Outcome.SKIPPED:
        return Observation(order, run.commit, run.attempt, run.run_id, run.started_at, SKIPPED, 0.0)
    return Observation(
        order,
        run.commit,
        run.attempt,
        run.run_id,
        run.started_at,
        "".join(LETTER[a.outcome] for a in attempts),
        sum(round(a.duration, 3) for a in attempts),
        result.message,
        result.details,
    )
