"""The store's layout (``bot.store.layout``): histories read from shared manifests are the histories the
reports say; a history of a few tests reads only their rows; migration 0012 converts the old arrays."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from typing import Any

import pytest
import sqlalchemy as sa
from alembic import command
from alembic.config import Config

from bot.core.cost import Rates
from bot.core.identity import RunIdentity
from bot.core.judge import judge
from bot.core.observations import LETTER, Observation, TestHistory
from bot.core.results import Attempt, Outcome, Report, TestResult
from bot.core.verdicts import CommitVerdict
from bot.store import Store, codec
from bot.store import records as rec
from bot.store.schema import contexts
from tests.builders import E, F, P, S, report, result, run

REPO = "acme/widgets"


def _mixed() -> list[tuple[Report, RunIdentity]]:
    """Passes, skips, failures, in-report retries, tests added and removed, two contexts, reruns."""
    t = "2026-03-0{}T10:00:00Z"
    return [
        (
            report(result("a", seconds=0.5), result("b", F), result("c", S), result("d", seconds=0.125)),
            run("c1", 1, run_id=1, started_at=t.format(1)),
        ),
        (
            report(result("a", seconds=0.25), result("b", seconds=0.75), result("c", S), result("d", F, P)),
            run("c1", 2, run_id=1, started_at=t.format(2)),
        ),
        (
            report(result("a", seconds=2.0), result("b"), result("c"), result("e", seconds=3.0)),
            run("c2", 1, run_id=2, started_at=t.format(3)),
        ),
        (
            report(result("a", seconds=1.5), result("b", seconds=0.5), result("c"), result("e")),
            run("c3", 1, run_id=3, started_at=t.format(4)),
        ),
        (report(result("a", E), result("b")), run("c3", 1, run_id=4, started_at=t.format(5), os="windows-latest")),
        (
            report(result("a", seconds=4.0), result("b", S)),
            run("c3", 2, run_id=4, started_at=t.format(6), os="windows-latest"),
        ),
    ]


def _expected(reports: list[tuple[Report, RunIdentity]]) -> dict[tuple[str, str], list[Observation]]:
    """What the reports say, test by test and context, in the order they ran (their start times)."""
    found: dict[tuple[str, str], list[Observation]] = {}
    for order, (one, identity) in enumerate(reports):
        for r in one.results:
            letters = "".join(LETTER[a.outcome] for a in r.attempts)
            seconds = sum(a.duration for a in r.attempts) if letters != "S" else 0.0
            kept = len(r.attempts) > 1 or r.outcome not in (Outcome.PASSED, Outcome.SKIPPED)
            found.setdefault((r.name, identity.context.key()), []).append(
                Observation(
                    order,
                    identity.commit,
                    identity.attempt,
                    identity.run_id,
                    identity.started_at,
                    letters,
                    seconds,
                    r.message if kept else "",
                    (r.details or "") if kept else "",
                )
            )
    return found


def _as_dict(histories: list[TestHistory]) -> dict[tuple[str, str], list[Observation]]:
    return {(h.name, h.context): h.observations for h in histories}


def test_histories_from_manifests_are_what_the_reports_say(store: Store) -> None:
    reports = _mixed()
    for one, identity in reversed(reports):
        store.ingest(one, identity)
    assert _as_dict(store.history(REPO)) == _expected(reports)
    with store.engine.connect() as conn:
        manifests = conn.execute(sa.text("SELECT count(*) FROM manifests")).scalar()
    assert manifests == 4  # c2 and c3 held the same tests; c3's rerun on Windows skipped b


def test_a_few_tests_read_alone_are_the_same_histories(store: Store) -> None:
    for one, identity in _mixed():
        store.ingest(one, identity)
    everything = store.history(REPO)
    assert store.history(REPO, {"tests.mod::b", "tests.mod::e"}) == [h for h in everything if h.name in ("b", "e")]
    assert store.history(REPO, {"tests.mod::nothing"}) == []


def test_judging_without_durations_keeps_every_verdict_and_cost(store: Store) -> None:
    """``timed=False`` gives a plain pass its seconds only where the judge adds them up; every verdict and
    every cost is the same as with every duration decoded, whichever report was stored first."""
    for one, identity in _mixed()[::2] + _mixed()[1::2]:
        store.ingest(one, identity)
    timed, untimed = store.history(REPO), store.history(REPO, timed=False)
    assert [h.test_id for h in timed] == [h.test_id for h in untimed]
    for full, judged in zip(timed, untimed, strict=True):
        # the same observations but for a plain pass's seconds (read report by report when timed; when not,
        # a test that every report of its context held starts from a copy of the context's passes)
        assert [o._replace(seconds=0.0) for o in full.observations] == [
            o._replace(seconds=0.0) for o in judged.observations
        ]
        assert [o.seconds for o in full.observations if o.outcomes != "P"] == [
            o.seconds for o in judged.observations if o.outcomes != "P"
        ]
        first, other = (judge(h, CommitVerdict.UNDETERMINED, Rates()) for h in (full, judged))
        assert first.judgement == other.judgement
        assert [(c.verdict, c.seconds) for c in first.commits if c.verdict is CommitVerdict.FLAKY] == [
            (c.verdict, c.seconds) for c in other.commits if c.verdict is CommitVerdict.FLAKY
        ]
        assert first.cost == other.cost
    b = next(h for h in untimed if h.name == "b" and "ubuntu" in h.context)
    assert [o.seconds for o in b.observations] == [1.0, 0.75, 0.0, 0.0]  # flaky on c1: both attempts timed


def test_a_history_of_a_few_tests_reads_no_other_test(store: Store) -> None:
    """Counted on the statements sent: the tests, observations and pass times asked for are the wanted
    ones only, and judging (``timed=False``) reads no report's durations."""
    names = [f"test_{i:03}" for i in range(200)]
    for n in range(6):
        results = [result(name, F if name in ("test_007", "test_100") and n % 2 else P) for name in names]
        store.ingest(report(*results), run(f"c{n}", run_id=n, started_at=f"2026-03-0{n + 1}T10:00:00Z"))
    with store.engine.connect() as conn:
        pks = {int(i) for (i,) in conn.execute(sa.text("SELECT id FROM tests WHERE name = 'test_007'"))}
    repo_key = rec.repo_key(store, REPO)
    with store.engine.connect() as conn:
        report_ids = {int(i) for (i,) in conn.execute(sa.text("SELECT id FROM reports"))}
    sent = list(_statements(store, lambda: store.history(REPO, {"tests.mod::test_007"}, timed=False)))
    assert not any("passed_ms" in text for text, _ in sent)
    for text, values in sent:
        if "FROM tests" in text:
            assert len([v for k, v in values.items() if isinstance(v, str) and len(v) == 64]) == 1
        if "FROM observations" in text or "FROM pass_times" in text:
            assert {v for k, v in values.items() if k.startswith("test_id")} == pks
            # the window's 6 reports are few: asked by id as well (``layout._FEW``)
            assert {v for k, v in values.items() if k.startswith("report_id")} == report_ids
            assert {v for k, v in values.items() if isinstance(v, int)} <= pks | report_ids | {repo_key}
    (history,) = store.history(REPO, {"tests.mod::test_007"}, timed=False)
    assert [o.outcomes for o in history.observations] == ["P", "F", "P", "F", "P", "F"]


def _statements(store: Store, action: Any) -> Iterator[tuple[str, dict[str, object]]]:
    """The statements ``action`` sends, each with its parameters by name (whatever the driver's style)."""
    sent: list[tuple[str, dict[str, object]]] = []

    def seen(_conn: Any, _cursor: Any, statement: str, _parameters: Any, context: Any, _many: bool) -> None:
        named = context.compiled_parameters[0] if context.compiled_parameters else {}
        sent.append((" ".join(statement.split()), dict(named)))

    sa.event.listen(store.engine, "before_cursor_execute", seen)
    try:
        action()
    finally:
        sa.event.remove(store.engine, "before_cursor_execute", seen)
    yield from sent


# migration 0012


def _alembic(conn: sa.Connection) -> Config:
    config = Config()
    config.set_main_option("script_location", "bot.store:migrations")
    config.attributes["connection"] = conn
    return config


def _store_at_0011(url: str) -> Store:
    store = Store(url)
    with store.engine.begin() as conn:
        command.upgrade(_alembic(conn), "0011")
    return store


def _ingest_as_0011(store: Store, one: Report, identity: RunIdentity) -> dict[str, bytes]:
    """A report stored as Flaketally did before migration 0012: arrays of passes and skips on the report."""
    with store.engine.begin() as conn:
        repo_key = store.repo_key(conn, identity.repo)
        context_id = store._id(conn, contexts, {"key": identity.context.key()}, {})
        ids = store._test_ids(conn, repo_key, one.results)
        passed = {
            i: r.attempts[0].duration
            for i, r in zip(ids, one.results, strict=True)
            if r.attempts and len(r.attempts) == 1 and r.outcome is P
        }
        skipped = sorted(i for i, r in zip(ids, one.results, strict=True) if len(r.attempts) == 1 and r.outcome is S)
        kept = [(i, r) for i, r in zip(ids, one.results, strict=True) if i not in passed and i not in skipped]
        order = sorted(passed)
        blobs = {
            "passed_ids": codec.pack_ids(order),
            "passed_ms": codec.pack_ms([passed[i] for i in order]),
            "skipped_ids": codec.pack_ids(skipped),
        }
        report_id = conn.execute(
            sa.text(
                "INSERT INTO reports (key, repo_id, context_id, commit_sha, attempt, run_id, run_index, started_at,"
                " source, digest, artifact_id, results, passed_ids, passed_ms, skipped_ids) VALUES (:key, :repo,"
                " :context, :commit, :attempt, :run_id, NULL, :started, :source, :digest, NULL, :results, :passed_ids,"
                " :passed_ms, :skipped_ids) RETURNING id"
            ),
            {
                "key": identity.report_key(one.digest),
                "repo": repo_key,
                "context": context_id,
                "commit": identity.commit,
                "attempt": identity.attempt,
                "run_id": identity.run_id,
                "started": identity.started_at,
                "source": identity.source,
                "digest": one.digest,
                "results": len(one.results),
                **blobs,
            },
        ).scalar_one()
        for test_pk, r in kept:
            conn.execute(
                sa.text(
                    "INSERT INTO observations (report_id, test_id, outcome, attempts, duration, message, details)"
                    " VALUES (:r, :t, :o, :a, :d, :m, NULL)"
                ),
                {
                    "r": report_id,
                    "t": test_pk,
                    "o": r.outcome.value,
                    "a": "["
                    + ", ".join(f'["{LETTER[a.outcome]}", {a.duration}, "{a.message}"]' for a in r.attempts)
                    + "]",
                    "d": sum(a.duration for a in r.attempts),
                    "m": r.message,
                },
            )
    return blobs


@pytest.fixture
def fresh(tmp_path: Any, store_url: str) -> Iterator[Store]:
    """A store migrated the usual way beside the one under test (SQLite: the other backend is the test's)."""
    opened = Store.open(f"sqlite:///{tmp_path / 'fresh.db'}")
    yield opened
    opened.close()


def test_migration_0012_keeps_every_history_and_summary(store_url: str, fresh: Store) -> None:
    old = _store_at_0011(store_url)
    reports = _mixed()
    blobs = [_ingest_as_0011(old, one, identity) for one, identity in reports]
    old._test_pks.clear()
    assert old.migrate() is not None
    for one, identity in reports:
        fresh.ingest(one, identity)
    assert old.history(REPO) == fresh.history(REPO)
    assert old.history(REPO, {"tests.mod::b"}, timed=False) == fresh.history(REPO, {"tests.mod::b"}, timed=False)
    key_old, key_fresh = rec.repo_key(old, REPO), rec.repo_key(fresh, REPO)
    for sha in ("c1", "c2", "c3"):
        assert rec.commit_summary(old, key_old, sha) == rec.commit_summary(fresh, key_fresh, sha)
        assert rec.tests_on_commit(old, key_old, sha) == rec.tests_on_commit(fresh, key_fresh, sha)
    if old.engine.dialect.name == "sqlite":  # migrated forward only (0012's downgrade says why)
        old.close()
        return
    with old.engine.begin() as conn:
        command.downgrade(_alembic(conn), "0011")
    with old.engine.connect() as conn:
        back = conn.execute(sa.text("SELECT passed_ids, passed_ms, skipped_ids FROM reports ORDER BY id")).all()
    assert [dict(zip(("passed_ids", "passed_ms", "skipped_ids"), map(bytes, row), strict=True)) for row in back] == [
        {k: bytes(v) for k, v in b.items()} for b in blobs
    ]
    old.close()


def _weeks_of_runs(store: Store) -> None:
    """Six weeks of runs in two contexts, two a day, every run of commit n also rerun when it failed:
    ``flaky`` fails now and then and passes on the rerun (in ubuntu only, until 3 days ago), ``single``
    fails once in a while without a rerun passing it (windows), ``clean`` failed on a rerun 35 days ago only,
    ``recent`` and ``older`` failed and passed on one commit today and 5 days ago, ``gone`` ran until 20 days
    ago; the last commit (``head``) fails ``flaky`` in both."""
    n = 0
    for day in range(42, -1, -1):
        for half in (0, 12):
            n += 1
            commit = "head" if day == 0 and half == 12 else f"c{n:03}"
            started = (
                f"2026-03-{31 - day:02}T{half:02}:00:00Z" if day < 31 else f"2026-02-{59 - day:02}T{half:02}:00:00Z"
            )
            for os in ("ubuntu-latest", "windows-latest"):
                fails = {
                    "flaky": (n % 5 == 0 and (os == "ubuntu-latest") == (day >= 3)) or commit == "head",
                    "single": os == "windows-latest" and n % 7 == 0,
                    "clean": day == 35 and half == 0,
                    "recent": day == 0 and half == 0,
                    "older": day == 5 and half == 0,
                }
                attempts = [fails, {"clean": False, "flaky": False, "single": fails["single"]}]
                for attempt, failing in enumerate(attempts[: 2 if any(fails.values()) else 1], 1):
                    names = ["flaky", "single", "clean", "recent", "older", "other"] + (["gone"] if day > 20 else [])
                    results = [result(t, F) if failing.get(t) else result(t) for t in names]
                    ident = run(commit, attempt, os=os, run_id=n, started_at=started, run_index=n * 10 + attempt)
                    store.ingest(report(*results, digest=f"{n}-{attempt}-{os}"), ident)


def test_failed_commits_only_are_the_history_on_the_commits_each_test_failed_on(store: Store) -> None:
    _weeks_of_runs(store)
    full = store.history(REPO, timed=False)
    narrow = store.history(REPO, timed=False, failed_commits=True)
    expected = {}
    for h in full:
        failed = {o.commit for o in h.observations if o.failed}
        if failed:
            expected[(h.test_id, h.context)] = [o[1:] for o in h.observations if o.commit in failed]
    assert {(h.test_id, h.context): [o[1:] for o in h.observations] for h in narrow} == expected


def test_assess_reads_less_and_says_the_same(store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    from datetime import UTC, datetime
    from typing import cast

    from bot.pipeline import assess as assessing
    from bot.pipeline.port import Port
    from bot.pipeline.scope import Options, Scope

    _weeks_of_runs(store)
    key = rec.repo_key(store, REPO)
    everywhere = {
        (f"tests.mod::{t}", c)
        for t in ("flaky", "single", "clean", "recent", "older", "gone", "other")
        for c in ("os=ubuntu-latest", "os=windows-latest")
    }
    with store.engine.connect() as conn:
        keys = [str(k) for (k,) in conn.execute(sa.select(contexts.c.key))]
    rec.set_known_flaky(store, key, {(t, c) for t, _ in everywhere for c in keys})
    scope = Scope(store, cast(Port, None), 0, REPO, 0, key, Options())
    now = datetime(2026, 3, 31, 13, tzinfo=UTC)
    asked: list[set[str]] = []
    real = store.history

    def history(*args: Any, **kwargs: Any) -> list[TestHistory]:
        asked.append(set(args[1]))
        return real(*args, **kwargs)

    monkeypatch.setattr(store, "history", history)
    report_now = assessing.assess(scope, "head", now)
    monkeypatch.setattr(assessing, "still_known_flaky", lambda *_: set())
    whole = assessing.assess(scope, "head", now)
    assert report_now == whole
    assert report_now.findings and report_now.known_flaky_now and report_now.no_longer_flaky
    # the known tests that did not fail here asked on their failed commits, the last day first; judged whole:
    # the one that failed here, and the known ones with no same-code pair in the last 7 days
    first, then, judged, _ = asked
    assert first == {f"tests.mod::{t}" for t in ("single", "clean", "recent", "older", "gone", "other")}
    assert then == first - {"tests.mod::recent"}
    assert judged == {f"tests.mod::{t}" for t in ("flaky", "single", "clean", "gone", "other")}


def test_failure_texts_are_read_only_on_the_commits_asked(store: Store) -> None:
    """Judging one commit shows only its own failures' messages and stack traces: the others are left
    empty, and every other field is what a full read says."""
    for one, identity in _mixed():
        store.ingest(one, identity)
    traced = report(dataclasses.replace(result("f", F), details="Traceback (most recent call last): boom"))
    store.ingest(traced, run("c9", 1, run_id=9, started_at="2026-03-09T10:00:00Z"))
    full = store.history(REPO, timed=False)
    assert any(o.message and o.commit == "c1" for h in full for o in h.observations)
    assert any(o.details and o.commit == "c9" for h in full for o in h.observations)
    for asked in ({"c9"}, {"c1", "c3"}, set()):
        some = store.history(REPO, timed=False, texts_on=asked)
        assert [h.test_id for h in some] == [h.test_id for h in full]
        for whole, read in zip(full, some, strict=True):
            assert read.observations == [
                o if o.commit in asked else o._replace(message="", details="") for o in whole.observations
            ]


@pytest.mark.parametrize(
    "attempts",
    [
        [("F", 0.123, "boom")],
        [("F", 1.5, 'said ["P", 2.0, "x"] and ], [" then a quote " and a \\ backslash'), ("P", 0.25, "")],
        [("E", 0.0, "\\"), ("F", 12345.678, '\\", ["P", 9.9, "'), ("P", 1e-05, "ünïcode ✗ \n\t")],
        [("S", 0.0, ""), ("P", -0.0, "")],
        [("P", 3.0, "x" * 5000)],
    ],
)
def test_attempt_outcomes_read_the_stored_text_as_json_would(attempts: list[tuple[str, float, str]]) -> None:
    outcome = {letter: o for o, letter in LETTER.items()}
    text = codec.attempts_text(
        TestResult("m", "t", tuple(Attempt(outcome[letter], seconds, message) for letter, seconds, message in attempts))
    )
    decoded = json.loads(text)
    assert codec.attempt_outcomes(text) == ("".join(a[0] for a in decoded), sum(a[1] for a in decoded))
    # text in another form (none is written) is decoded in full
    compact = json.dumps(decoded, separators=(",", ":"))
    assert codec.attempt_outcomes(compact) == codec.attempt_outcomes(text)
