"""``flaketally analyze``: read local reports, store them, judge and cost every test seen.

This is what the GitHub workers do too, minus the GitHub part: read, store, judge (``bot.core.judge``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from bot.core.analysis import Analysis
from bot.core.cost import Rates
from bot.core.judge import judge
from bot.core.verdicts import CommitVerdict
from bot.local.files import report_files
from bot.local.memory import MemoryHistory
from bot.local.reader import Progress, read_all, read_and_store

if TYPE_CHECKING:
    from bot.store import Store


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
    for read in read_all(store, files, repo, progress):
        result.warnings.extend(read.warnings)
        result.refused += read.refused
        result.new_reports += read.new
        result.collided_failures += read.collided_failures
        seen |= read.ids
    result.tests = [judge(h, policy, result.rates) for h in store.history(repo, seen)]
    return result


def analyze_in_memory(
    paths: Sequence[str],
    *,
    repo: str = "local",
    policy: CommitVerdict = CommitVerdict.UNDETERMINED,
    rates: Rates | None = None,
    progress: Progress | None = None,
) -> Analysis:
    """``analyze`` without a store: the same judgement, for inputs small enough to hold in memory."""
    files, warnings = report_files(paths)
    result = Analysis(policy=policy, rates=rates or Rates(), warnings=warnings, files=len(files))
    memory = MemoryHistory()
    seen: set[str] = set()
    for index, path in enumerate(files, 1):
        if progress:
            progress(index, len(files), str(path))
        read = read_and_store(memory, path, repo)
        result.warnings.extend(read.warnings)
        result.refused += read.refused
        result.new_reports += read.new
        result.collided_failures += read.collided_failures
        seen |= read.ids
    result.tests = [judge(h, policy, result.rates) for h in memory.history(seen)]
    return result
