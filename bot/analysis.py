"""The analysis behind ``flaketally analyze``: read reports, store them, judge and cost every test seen.

This is the pipeline the GitHub workers run too, minus the GitHub part: parse, ingest, judge.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.cost import Cost, Rates, cost_of
from bot.identity import ExecutionContext
from bot.junit import ReportRefused, parse
from bot.local import FileWarning, identify, report_files
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


@dataclass(slots=True)
class Analysis:
    policy: CommitVerdict
    rates: Rates
    tests: list[TestAnalysis] = field(default_factory=list)
    warnings: list[FileWarning] = field(default_factory=list)
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
    """A test's history verdict, and a judgement of each commit on which it failed at least once (a commit
    where every attempt passed is counted, not spelled out: most of a large history is just that)."""
    observations = history.observations
    if not any("F" in o.outcomes or "E" in o.outcomes for o in observations):
        commits: tuple[CommitJudgement, ...] = ()
        seen = len({o.commit for o in observations})
    else:
        groups = by_commit(observations)
        seen = len(groups)
        commits = tuple(
            judge_commit(sha, obs, policy)
            for sha, obs in groups
            if any("F" in o.outcomes or "E" in o.outcomes for o in obs)
        )
    return TestAnalysis(history, judge_history(history), commits, cost_of(commits, rates), seen - len(commits))


@dataclass(slots=True)
class _Read:
    """What reading and storing one file gave: small, so it crosses a process boundary cheaply."""

    path: str
    warnings: list[FileWarning]
    ids: set[str]
    refused: bool = False
    new: bool = False


def read_and_store(store: Store, path: Path, repo: str, write_lock: AbstractContextManager[Any] | None = None) -> _Read:
    """Parse one report, tell its run, store it (holding ``write_lock`` while storing, when given)."""
    try:
        with path.open("rb") as stream:
            report = parse(stream)
    except ReportRefused as exc:
        return _Read(str(path), [FileWarning(str(path), str(exc))], set(), refused=True)
    except OSError as exc:
        return _Read(str(path), [FileWarning(str(path), f"cannot be read: {exc.strerror or exc}")], set(), refused=True)
    run, problems = identify(path, report, repo)
    with write_lock or nullcontext():
        new = store.ingest(report, run)
    return _Read(str(path), problems, {r.id for r in report.results}, new=new)


_worker_store: Store | None = None
_worker_lock: AbstractContextManager[Any] | None = None


def _worker_start(url: str, lock: AbstractContextManager[Any] | None) -> None:
    global _worker_store, _worker_lock
    _worker_store = Store(url)  # migrated already by the parent
    _worker_lock = lock


def _worker_read(path: Path, repo: str) -> _Read:
    assert _worker_store is not None
    return read_and_store(_worker_store, path, repo, _worker_lock)


# Below this many files one process reads them all: starting others would cost more than it saves.
PARALLEL_FROM = 16


def _read_all(store: Store, files: Sequence[Path], repo: str, progress: Progress | None) -> Iterator[_Read]:
    """Every file read and stored, in the order given; on several cores when there are many files and
    the store is one that several processes can share (a file or a server, not SQLite in memory)."""
    processes = min(os.cpu_count() or 1, 4)
    url = store.engine.url
    shareable = url.get_backend_name() != "sqlite" or url.database not in (None, "", ":memory:")
    forkable = "fork" in multiprocessing.get_all_start_methods()
    if processes < 2 or len(files) < PARALLEL_FROM or not shareable or not forkable:
        for index, path in enumerate(files, 1):
            if progress:
                progress(index, len(files), str(path))
            yield read_and_store(store, path, repo)
        return
    context = multiprocessing.get_context("fork")  # the CLI has no threads; fork keeps start-up cheap
    # SQLite has one writer at a time, and a writer that finds it busy sleeps in steps of up to 100 ms:
    # taking turns on a lock instead keeps the processes parsing, not sleeping.
    lock = context.Lock() if store.engine.dialect.name == "sqlite" else None
    start = (url.render_as_string(hide_password=False), lock)
    with ProcessPoolExecutor(processes, mp_context=context, initializer=_worker_start, initargs=start) as pool:
        for index, read in enumerate(pool.map(_worker_read, files, [repo] * len(files), chunksize=4), 1):
            if progress:
                progress(index, len(files), read.path)
            yield read


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
    for read in _read_all(store, files, repo, progress):
        result.warnings.extend(read.warnings)
        result.refused += read.refused
        result.new_reports += read.new
        seen |= read.ids
    result.tests = [judge(h, policy, result.rates) for h in store.history(repo, seen)]
    return result
