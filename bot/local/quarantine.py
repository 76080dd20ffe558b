"""``flaketally quarantine``: the repository's quarantined tests, most costly first, in the form a runner
takes to skip them (``bot.config.skiplist``), from a local file or from the repository on GitHub."""

from __future__ import annotations

from collections.abc import Sequence

from bot.core.display import display_id
from bot.core.judge import TestAnalysis
from bot.core.quarantine import Entry


def most_costly_first(entries: Sequence[Entry], tests: Sequence[TestAnalysis]) -> list[Entry]:
    """The entries by what their tests' flakes cost in the history given (all contexts an entry covers
    added up), the most first; entries that cost nothing keep the file's order."""
    cost: dict[int, float] = {}
    for t in tests:
        if not t.cost.events:
            continue
        shown = display_id(t.history.classname, t.history.name, t.history.file)
        context = t.context.display()
        for index, entry in enumerate(entries):
            if entry.covers(shown, context):
                cost[index] = cost.get(index, 0.0) + t.cost.total
    order = sorted(range(len(entries)), key=lambda i: (-round(cost.get(i, 0.0), 9), i))
    return [entries[i] for i in order]
