"""``flaketally analyze``: read local reports, keep them, judge and cost every test seen.

This is what the GitHub workers do too, minus the GitHub part: read, store, judge (``bot.core.judge``).
Without a store the reports are held in memory (``bot.local.memory``) and read back as a store would.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from bot.core import collector
from bot.core.analysis import Analysis, FileWarning
from bot.core.cost import Rates
from bot.core.judge import judge
from bot.core.observations import TestHistory
from bot.core.verdicts import CommitVerdict
from bot.local.files import report_files
from bot.local.memory import MemoryHistory
from bot.local.reader import Progress, Read, read_all, read_all_into_memory

if TYPE_CHECKING:
    from bot.store import Store


def analyze(
    store: Store | None,
    paths: Sequence[str],
    *,
    repo: str = "local",
    policy: CommitVerdict = CommitVerdict.UNDETERMINED,
    rates: Rates | None = None,
    progress: Progress | None = None,
) -> Analysis:
    """The reports in ``paths`` judged: kept in ``store``, or in memory when it is None."""
    files, warnings = report_files(paths)
    return analyze_files(store, files, warnings, repo=repo, policy=policy, rates=rates, progress=progress)


def analyze_files(
    store: Store | None,
    files: Sequence[Path],
    warnings: Sequence[FileWarning] = (),
    *,
    repo: str = "local",
    policy: CommitVerdict = CommitVerdict.UNDETERMINED,
    rates: Rates | None = None,
    progress: Progress | None = None,
) -> Analysis:
    """``analyze`` of files already found (``report_files``)."""
    result = Analysis(policy=policy, rates=rates or Rates(), warnings=list(warnings), files=len(files))
    reads: Iterable[Read]
    history: Callable[[set[str]], list[TestHistory]]
    if store is None:
        memory = MemoryHistory()
        reads = read_all_into_memory(memory, files, repo, progress)
        history = lambda _: memory.history()  # noqa: E731 - what was read is all it holds
    else:
        reads = read_all(store, files, repo, progress)
        # no file given: every test the store keeps for the repository
        history = functools.partial(store.history, repo) if files else lambda _: store.history(repo)
    seen: set[str] = set()
    with collector.paused():  # a large history is many small objects, none of them in a cycle
        for read in reads:
            result.warnings.extend(read.warnings)
            result.refused += read.refused
            result.new_reports += read.new
            result.collided_failures += read.collided_failures
            seen |= read.ids
        result.tests = [judge(h, policy, result.rates) for h in history(seen)]
    return result
