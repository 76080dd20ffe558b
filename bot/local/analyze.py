"""``flaketally analyze``: read local reports, store them, judge and cost every test seen.

This is what the GitHub workers do too, minus the GitHub part: read, store, judge (``bot.core.judge``).
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.core.analysis import Analysis
from bot.core.cost import Rates
from bot.core.judge import judge
from bot.core.verdicts import CommitVerdict
from bot.local.files import report_files
from bot.local.reader import Progress, read_all
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
