"""Reports judged without a store: held in memory and read back exactly as ``Store.history`` gives them
(the same order, the same rounding, the same first-seen name and line), so ``analyze`` without ``--db``
starts without importing a database layer.

A report is kept as columns (``Columns``: its tests' ids, outcome letters and seconds, and the texts of
the few that failed), not as one object per result, so that it crosses from a reading process to the
judging one cheaply (``bot.local.reader``) and a large history stays small.
"""

from __future__ import annotations

import sys
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass, field
from itertools import repeat

from bot.core.identity import RunIdentity, family_id
from bot.core.observations import LETTER, PASSED, SKIPPED, Observation, TestHistory
from bot.core.results import Outcome, Report, TestResult

# Inputs up to this size are judged in memory (columns take ~50 bytes a result, beside the observations any
# judging makes), larger ones through a throwaway store.
MAX_BYTES = 256 << 20
_MAX_MS = 2**32 - 1

# A test as first seen: its id, family, classname, name, file and line.
Named = tuple[str, str, str, str, str | None, int | None]


@dataclass(slots=True)
class Columns:
    """One report's results, a column each: what the judge reads of them, as the store keeps it."""

    ids: list[str]
    outcomes: list[str]  # one letter per attempt (``LETTER``)
    seconds: list[float]
    texts: dict[int, tuple[str, str]]  # by position: the message and details of a result with a failure
    named: list[Named]  # the tests the reader had not sent before, as first seen


def columns(report: Report, sent: set[str] | None = None) -> Columns:
    """``report`` as columns; ``named`` holds its tests not in ``sent`` (all when None), which are added."""
    ids: list[str] = []
    outcomes: list[str] = []
    seconds: list[float] = []
    texts: dict[int, tuple[str, str]] = {}
    named: list[Named] = []
    rounded: dict[float, float] = {}
    for test, classname, name, file, line, project, duration in report.passes:  # most of them (``lean``)
        ids.append(test)
        if sent is None or test not in sent:
            named.append((test, family_id(classname, name, file, project), classname, name, file, line))
            if sent is not None:
                sent.add(test)
        outcomes.append(PASSED)
        value = rounded.get(duration)
        if value is None:
            value = rounded[duration] = min(_MAX_MS, round(duration * 1000)) / 1000  # as the store packs it
        seconds.append(value)
    passed, skipped = Outcome.PASSED, Outcome.SKIPPED
    for position, result in enumerate(report.results, len(ids)):
        test = result.id
        ids.append(test)
        if sent is None or test not in sent:
            named.append(_named(result))
            if sent is not None:
                sent.add(test)
        attempts = result.attempts
        if len(attempts) == 1:
            outcome = attempts[0].outcome
            if outcome is passed:
                outcomes.append(PASSED)
                seconds.append(min(_MAX_MS, round(attempts[0].duration * 1000)) / 1000)  # as the store packs it
                continue
            if outcome is skipped:
                outcomes.append(SKIPPED)
                seconds.append(0.0)
                continue
        outcomes.append("".join(LETTER[a.outcome] for a in attempts))
        seconds.append(sum(round(a.duration, 3) for a in attempts))
        if result.message or result.details:
            texts[position] = (result.message, result.details)
    return Columns(ids, outcomes, seconds, texts, named)


def _named(result: TestResult) -> Named:
    return (result.id, result.family, result.classname, result.name, result.file, result.line)


@dataclass(slots=True)
class MemoryHistory:
    reports: list[tuple[RunIdentity, str, Columns]] = field(default_factory=list)  # run, digest, results
    keys: set[str] = field(default_factory=set)
    first: dict[str, Named] = field(default_factory=dict)  # a test as first seen: its name, file, line

    def ingest(self, report: Report, run: RunIdentity) -> bool:
        """Keep one report; False when it was kept before (the store's key: what was executed)."""
        return self.add(run, report.digest, columns(report))

    def add(self, run: RunIdentity, digest: str, results: Columns) -> bool:
        """Keep one report read elsewhere (``columns``); False when it was kept before."""
        for named in results.named:  # a duplicate's names too: its first copy, read earlier, named them first
            self.first.setdefault(named[0], named)
        key = run.report_key(digest)
        if key in self.keys:
            return False
        self.keys.add(key)
        results.ids = list(map(sys.intern, results.ids))  # one string a test, not one a report
        self.reports.append((run, digest, results))
        return True

    def history(self, wanted: Iterable[str] | None = None) -> list[TestHistory]:
        """Every observation of the wanted tests (all when None), per test and context, in the order the
        reports ran."""
        reports = self.reports
        order = sorted(
            range(len(reports)),
            key=lambda i: (
                reports[i][0].started_at or "",
                reports[i][0].run_index or 0,
                reports[i][0].commit,
                reports[i][0].attempt,
                reports[i][0].run_id or 0,
                reports[i][1],
                i,
            ),
        )
        only = None if wanted is None else set(wanted)
        first = self.first
        histories: dict[tuple[str, str], TestHistory] = {}
        contexts: dict[str, dict[str, list[Observation]]] = {}
        make = tuple.__new__  # an Observation without NamedTuple's keyword handling: one per result
        for position, index in enumerate(order):
            run, _, results = reports[index]
            context = run.context.key()
            lists = contexts.setdefault(context, {})
            commit, attempt, run_id, started = run.commit, run.attempt, run.run_id, run.started_at
            ids = results.ids
            for test in set(ids).difference(lists):  # first seen in this context
                if only is None or test in only:
                    _, family, classname, name, file, line = first[test]
                    history = TestHistory(test, family, classname, name, file, line, context)
                    histories[(test, context)] = history
                    lists[test] = history.observations
            # one Observation a result, made and filed in C: most of a large history is this loop
            made = map(
                make,
                repeat(Observation),
                zip(
                    repeat(position),
                    repeat(commit),
                    repeat(attempt),
                    repeat(run_id),
                    repeat(started),
                    results.outcomes,
                    results.seconds,
                    repeat(""),
                    repeat(""),
                ),
            )
            if only is None:
                deque(map(list.append, map(lists.__getitem__, ids), made), maxlen=0)
            else:
                for test, observation in zip(ids, made, strict=True):
                    if test in only:
                        lists[test].append(observation)
            for i, (message, details) in results.texts.items():  # the few that failed: their words
                found = lists.get(ids[i])
                if found:
                    found[-1] = found[-1]._replace(message=message, details=details)
        return sorted(histories.values(), key=lambda h: (h.test_id, h.context))
