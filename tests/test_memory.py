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


@pytest.mark.parametrize("name", ["real runners", "samples"])
def test_reading_on_every_core_judges_as_one_process_does(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Large inputs are read by several processes that send columns to the judging one; the judging sees
    the same reports, the same first-seen names and the same order as when one process reads them all."""
    from bot.local import reader

    paths = [str(p) for p in HISTORIES[name]]
    one = analyze(None, paths, repo=name)
    monkeypatch.setattr(reader, "PARALLEL_FROM", 2)
    monkeypatch.setattr(reader, "PARALLEL_BYTES", 0)
    files = sorted(p for root in HISTORIES[name] for p in root.rglob("*.xml"))
    if reader._processes(files) < 2:
        pytest.skip("one core, or no fork: the reading processes cannot be tried here")
    several = analyze(None, paths, repo=name)
    for render in RENDERERS.values():
        assert render(several) == render(one)
    assert (several.files, several.refused, several.new_reports) == (one.files, one.refused, one.new_reports)
    assert [w.message for w in several.warnings] == [w.message for w in one.warnings]
