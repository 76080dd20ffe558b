"""The store, on SQLite and on PostgreSQL: idempotent, compact, and nothing of the same commit lost."""

from __future__ import annotations

import dataclasses

import sqlalchemy as sa

from bot.core.cost import Rates
from bot.core.judge import judge
from bot.core.verdicts import CommitVerdict, TestVerdict
from bot.store import Store
from bot.store.schema import metadata
from tests.builders import F, P, S, report, result, run


def dump(store: Store) -> dict[str, list[tuple[object, ...]]]:
    with store.engine.connect() as conn:
        return {
            name: sorted(tuple(row) for row in conn.execute(sa.select(table)))
            for name, table in metadata.tables.items()
        }


def test_ingesting_the_same_report_twice_changes_nothing(store: Store) -> None:
    one = report(result("test_a"), result("test_b", F))
    assert store.ingest(one, run("c1")) is True
    before = dump(store)
    assert store.ingest(one, run("c1")) is False
    assert dump(store) == before


def test_a_copy_of_a_report_is_one_report_wherever_it_was_read(store: Store) -> None:
    one = report(result("test_a", F))
    first = run("c1")
    copy = dataclasses.replace(first, source="elsewhere/report.xml")
    assert store.ingest(one, first)
    assert not store.ingest(one, copy)
    assert store.counts()["reports"] == 1


def test_passing_results_take_no_row(store: Store) -> None:
    names = [f"test_{i}" for i in range(300)]
    for n in range(20):
        results = [result(name, F if (name == "test_7" and n % 5 == 0) else P) for name in names]
        store.ingest(report(*results), run(f"c{n}"))
    counts = store.counts()
    assert counts["tests"] == 300
    assert counts["reports"] == 20
    assert counts["observations"] == 4  # the four failures of test_7, nothing for the 5,996 passes


def test_passes_are_still_seen_by_the_judge(store: Store) -> None:
    store.ingest(report(result("test_a", P, seconds=2.0), result("test_s", S)), run("c1", 1))
    store.ingest(report(result("test_a", F, seconds=4.0), result("test_s", S)), run("c1", 2))
    histories = {h.name: h for h in store.history("acme/widgets")}
    analysis = judge(histories["test_a"], CommitVerdict.UNDETERMINED, Rates())
    assert [c.verdict for c in analysis.commits] == [CommitVerdict.FLAKY]
    assert analysis.judgement.verdict is TestVerdict.FLAKY
    assert analysis.commits[0].seconds == 6.0
    assert [o.outcomes for o in histories["test_s"].observations] == ["S", "S"]


def test_same_commit_evidence_is_kept_whatever_the_order_of_ingest(store: Store) -> None:
    store.ingest(report(result("test_a", F)), run("c1", 2, run_index=2))
    store.ingest(report(result("test_a", P)), run("c1", 1, run_index=1))
    (history,) = store.history("acme/widgets")
    assert [(o.attempt, o.outcomes) for o in history.observations] == [(1, "P"), (2, "F")]


def test_in_report_retries_are_kept_as_attempts(store: Store) -> None:
    store.ingest(report(result("test_a", F, F, P)), run("c1"))
    (history,) = store.history("acme/widgets")
    assert history.observations[0].outcomes == "FFP"


def test_contexts_are_kept_apart(store: Store) -> None:
    store.ingest(report(result("test_a", F)), run("c1", os="windows-latest"))
    store.ingest(report(result("test_a", P)), run("c1", os="ubuntu-latest"))
    histories = store.history("acme/widgets")
    assert len(histories) == 2
    verdicts = [c.verdict for h in histories for c in judge(h, CommitVerdict.UNDETERMINED, Rates()).commits]
    assert verdicts == [CommitVerdict.UNDETERMINED]  # Windows failed once; Linux passed: not flaky


def test_repositories_are_kept_apart(store: Store) -> None:
    store.ingest(report(result("test_a", F)), run("c1", repo="acme/one"))
    store.ingest(report(result("test_a", P)), run("c1", 2, repo="acme/two"))
    assert [h.observations[0].outcomes for h in store.history("acme/one")] == ["F"]
    assert store.history("acme/missing") == []


def test_migrations_run_once(store_url: str) -> None:
    Store.open(store_url).close()
    again = Store.open(store_url)
    assert again.counts()["reports"] == 0
    again.close()


def test_schema_head_is_the_newest_migration(store: Store) -> None:
    from alembic.config import Config
    from alembic.script import ScriptDirectory

    from bot.store import SCHEMA_HEAD

    config = Config()
    config.set_main_option("script_location", "bot.store:migrations")
    assert ScriptDirectory.from_config(config).get_current_head() == SCHEMA_HEAD
    with store.engine.connect() as conn:
        assert Store.schema_version(conn) == SCHEMA_HEAD


def test_history_since_leaves_out_older_reports(store: Store) -> None:
    store.ingest(report(result("test_a", F)), run("old", started_at="2026-10-01T10:00:00Z"))
    store.ingest(report(result("test_a", P)), run("new", started_at="2026-11-30T10:00:00Z"))
    store.ingest(report(result("test_a", P), digest="undated"), run("local"))
    (history,) = store.history("acme/widgets", since="2026-11-01T10:00:00Z")
    assert [o.commit for o in history.observations] == ["local", "new"]  # undated reports sort first
