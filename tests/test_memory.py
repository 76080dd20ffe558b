"""``analyze`` without ``--db`` judges in memory: the same bytes as through a store, on every history the
suite has (the worked example, the samples, every real runner, the collision and hostile files)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.core.verdicts import CommitVerdict
from bot.local.analyze import analyze
from bot.render.analysis import RENDERERS
from bot.store import Store
from tests.conftest import FIXTURES

ROOT = Path(__file__).resolve().parent.parent
HISTORIES = {
    "flakeledger": [FIXTURES / "flakeledger"],
    "samples": [ROOT / "samples"],
    "real runners": [FIXTURES / "real-runners"],
    "collision": [FIXTURES / "collision"],
    "hostile": [FIXTURES / "hostile"],
}


@pytest.mark.parametrize("name", sorted(HISTORIES))
@pytest.mark.parametrize("fmt", ["text", "json"])
def test_in_memory_and_through_a_store_say_the_same(name: str, fmt: str, store: Store) -> None:
    paths = [str(p) for p in HISTORIES[name]]
    for policy in (CommitVerdict.UNDETERMINED, CommitVerdict.FLAKY):
        stored = analyze(store, paths, repo=f"{name}-{policy}", policy=policy)
        held = analyze(None, paths, repo=f"{name}-{policy}", policy=policy)
        render = RENDERERS[fmt]
        assert render(held) == render(stored)
        assert (held.files, held.refused, held.new_reports) == (stored.files, stored.refused, stored.new_reports)
