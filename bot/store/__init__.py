"""The store: SQLite by default, PostgreSQL when the URL names one, one code path for both."""

from __future__ import annotations

import fcntl
import hashlib
import json
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, Engine

from bot.core.identity import RunIdentity
from bot.core.observations import LETTER, PASSED, SKIPPED, Observation, TestHistory
from bot.core.results import Outcome, Report, TestResult
from bot.store import codec
from bot.store.schema import contexts, observations, reports, repos, tests

# The newest migration in migrations/versions (a test checks it against alembic's own view).
SCHEMA_HEAD = "0011"
# the PostgreSQL advisory lock held while migrating (any 64-bit number no other tool uses)
MIGRATION_LOCK = 0x666C616B65_7461
_BATCH = 500


@dataclass(frozen=True, slots=True)
class Migration:
    """What ``Store.migrate`` did: the schema's version before it (None: an empty store), now at the head."""

    before: str | None


class StoreError(Exception):
    """The store cannot be opened or used; the message names the URL's problem."""


def normalise_url(url: str) -> str:
    """A plain path means a SQLite file; ``postgresql://`` uses psycopg 3."""
    if "://" not in url:
        return f"sqlite:///{Path(url).expanduser()}"
    if url.startswith(("postgres://", "postgresql://")):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


def _key(test_id: str) -> str:
    return hashlib.sha256(test_id.encode("utf-8", "surrogatepass")).hexdigest()


def _attempts_json(result: TestResult) -> str:
    return json.dumps([[LETTER[a.outcome], round(a.duration, 3), a.message] for a in result.attempts])


class Store:
    def __init__(self, url: str) -> None:
        self.url = normalise_url(url)
        # psycopg prepares a statement it has seen 5 times, and the generic plan of ``key IN (...)`` is
        # 20-30x slower than the custom one: keep every statement unprepared.
        connect_args = {"prepare_threshold": None} if self.url.startswith("postgresql+psycopg") else {}
        try:
            self.engine: Engine = sa.create_engine(self.url, connect_args=connect_args)
        except Exception as exc:  # an unknown dialect or a malformed URL
            raise StoreError(f"cannot use the store URL {url!r}: {exc}") from None
        self._test_pks: dict[int, dict[str, int]] = {}  # repo -> test id -> row id
        if self.engine.dialect.name == "sqlite":
            sa.event.listen(self.engine, "connect", _sqlite_pragmas)
            if self.engine.url.database and self.engine.url.database != ":memory:":
                Path(self.engine.url.database).parent.mkdir(parents=True, exist_ok=True)

    @classmethod
    def open(cls, url: str) -> Store:
        store = cls(url)
        store.migrate()
        return store

    @classmethod
    def open_current(cls, url: str) -> Store:
        """The store as a long-running process (``serve``, ``worker``, ``scheduler``) opens it: a SQLite
        file is migrated (under its lock: the embedded default needs no step of its own), a PostgreSQL
        store must already be at the newest migration, changed only by ``flaketally migrate``; StoreError,
        naming the command, otherwise."""
        store = cls(url)
        if store.engine.dialect.name == "sqlite":
            store.migrate()
            return store
        try:
            with store.engine.connect() as conn:
                version = store.schema_version(conn)
        except sa.exc.OperationalError as exc:
            store.close()
            raise StoreError(f"cannot reach the store at {store.engine.url!r}: {exc.orig}") from None
        if version != SCHEMA_HEAD:
            store.close()
            where = store.engine.url.render_as_string(hide_password=True)
            if version is not None and version > SCHEMA_HEAD:
                raise StoreError(
                    f"the store at {where} is at migration {version}, newer than this Flaketally ({SCHEMA_HEAD}): "
                    "upgrade Flaketally on this machine"
                )
            found = f"at migration {version}" if version else "not migrated"
            raise StoreError(
                f"the store at {where} is {found}, behind {SCHEMA_HEAD}: run `flaketally migrate` "
                "(or the migration Job) first"
            )
        return store

    def close(self) -> None:
        self.engine.dispose()

    def migrate(self) -> Migration | None:
        """Bring the schema to the newest migration; what this call migrated, None when it found nothing to do.

        A store already there is only asked its version, so a command that opens the store pays for
        loading alembic only when there is something to do. Otherwise the migration runs under a lock
        (an advisory lock on PostgreSQL, a lock file beside a SQLite file), and the version is asked again
        once it is held: any number of processes starting together on a fresh store migrate it once."""
        try:
            with self.engine.connect() as conn:
                if self.schema_version(conn) == SCHEMA_HEAD:
                    return None
            with self._migration_lock(), self.engine.begin() as conn:
                if self.engine.dialect.name == "postgresql":
                    conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK})
                before = self.schema_version(conn)
                if before == SCHEMA_HEAD:
                    return None
                from alembic import command
                from alembic.config import Config

                config = Config()
                config.set_main_option("script_location", "bot.store:migrations")
                config.attributes["connection"] = conn
                command.upgrade(config, "head")
                return Migration(before)
        except sa.exc.OperationalError as exc:
            raise StoreError(f"cannot reach the store at {self.engine.url!r}: {exc.orig}") from None

    @contextmanager
    def _migration_lock(self) -> Iterator[None]:
        """For a SQLite file, an exclusive lock on ``<file>.migrate-lock``, held until the migration is
        committed (SQLite's own locks do not cover alembic's check-then-create). PostgreSQL locks in the
        migration's transaction instead; an in-memory database has one user."""
        database = self.engine.url.database
        if self.engine.dialect.name != "sqlite" or not database or database == ":memory:":
            yield
            return
        with open(f"{database}.migrate-lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    @staticmethod
    def schema_version(conn: Connection) -> str | None:
        if not sa.inspect(conn).has_table("alembic_version"):
            return None
        return conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalar()

    def _insert(self, table: sa.Table) -> Any:
        return (pg_insert if self.engine.dialect.name == "postgresql" else sqlite_insert)(table)

    # writing

    def _id(self, conn: Connection, table: sa.Table, where: dict[str, Any], values: dict[str, Any]) -> int:
        clause = sa.and_(*(table.c[k] == v for k, v in where.items()))
        found = conn.execute(sa.select(table.c.id).where(clause)).scalar()
        if found is None:
            conn.execute(self._insert(table).values(**where, **values).on_conflict_do_nothing())
            found = conn.execute(sa.select(table.c.id).where(clause)).scalar_one()
        return int(found)

    def repo_key(self, conn: Connection, full_name: str, installation_id: int | None = None) -> int:
        """The store's key of a repository (its ``repos`` row), added when new. Not GitHub's id of it."""
        return self._id(conn, repos, {"full_name": full_name}, {"installation_id": installation_id})

    def _test_ids(self, conn: Connection, repo_key: int, results: list[TestResult]) -> list[int]:
        """The store's ids of these tests, adding the ones it has not seen. Ids once known are kept in
        this process: a test's row never changes, so the cache cannot go stale."""
        cache = self._test_pks.setdefault(repo_key, {})
        unknown = [r for r in results if r.id not in cache]
        if unknown:
            keys = {_key(r.id): r for r in unknown}
            cache.update(self._lookup(conn, repo_key, keys))
            missing = [
                {
                    "repo_id": repo_key,
                    "key": key,
                    "test_id": r.id,
                    "family": r.family,
                    "classname": r.classname,
                    "name": r.name,
                    "file": r.file,
                    "line": r.line,
                }
                for key, r in sorted(keys.items())  # one order for every writer: no deadlock on the unique key
                if r.id not in cache
            ]
            for start in range(0, len(missing), _BATCH):
                conn.execute(self._insert(tests).on_conflict_do_nothing(), missing[start : start + _BATCH])
            if missing:
                cache.update(self._lookup(conn, repo_key, {str(row["key"]): keys[str(row["key"])] for row in missing}))
        return [cache[r.id] for r in results]

    def _lookup(self, conn: Connection, repo_key: int, keys: dict[str, TestResult]) -> dict[str, int]:
        found: dict[str, int] = {}
        wanted = list(keys)
        for start in range(0, len(wanted), _BATCH):
            where = tests.c.key.in_(wanted[start : start + _BATCH])
            rows = conn.execute(sa.select(tests.c.key, tests.c.id).where(tests.c.repo_id == repo_key, where)).all()
            found.update({keys[str(k)].id: int(i) for k, i in rows})
        return found

    def ingest(self, report: Report, run: RunIdentity) -> bool:
        """Store one report; False when it was stored before (nothing changes then)."""
        key = run.report_key(report.digest)
        with self.engine.begin() as conn:
            if conn.execute(sa.select(reports.c.id).where(reports.c.key == key)).first():
                return False
            repo_key = self.repo_key(conn, run.repo, run.installation_id)
            context_id = self._id(conn, contexts, {"key": run.context.key()}, {})
            ids = self._test_ids(conn, repo_key, report.results)
            passed: dict[int, float] = {}
            skipped: set[int] = set()
            kept: list[tuple[int, TestResult]] = []
            for test_pk, result in zip(ids, report.results, strict=True):
                if len(result.attempts) == 1 and result.outcome is Outcome.PASSED:
                    passed[test_pk] = result.attempts[0].duration
                elif len(result.attempts) == 1 and result.outcome is Outcome.SKIPPED:
                    skipped.add(test_pk)
                else:
                    kept.append((test_pk, result))
            order = sorted(passed)
            inserted = conn.execute(
                self._insert(reports)
                .values(
                    key=key,
                    repo_id=repo_key,
                    context_id=context_id,
                    commit_sha=run.commit,
                    attempt=run.attempt,
                    run_id=run.run_id,
                    run_index=run.run_index,
                    started_at=run.started_at,
                    source=run.source,
                    digest=report.digest,
                    artifact_id=run.artifact_id,
                    results=len(report.results),
                    passed_ids=codec.pack_ids(order),
                    passed_ms=codec.pack_ms([passed[i] for i in order]),
                    skipped_ids=codec.pack_ids(sorted(skipped)),
                )
                .on_conflict_do_nothing()
                .returning(reports.c.id)
            ).scalar()
            if inserted is None:  # another worker stored it a moment ago
                return False
            if kept:
                conn.execute(
                    observations.insert(),
                    [
                        {
                            "report_id": inserted,
                            "test_id": test_pk,
                            "outcome": result.outcome.value,
                            "attempts": _attempts_json(result),
                            "duration": sum(a.duration for a in result.attempts),
                            "message": result.message,
                            "details": result.details or None,
                        }
                        for test_pk, result in kept
                    ],
                )
        return True

    # reading

    def history(self, repo: str, test_ids: Iterable[str] | None = None, since: str | None = None) -> list[TestHistory]:
        """Every stored observation of the repository's tests (or of the named ones), per test and context;
        with ``since`` (an ISO time in the stored form), only reports that started then or later, and
        undated ones.

        Reports are ordered by when they ran (``started_at``, then ``run_index``), then by commit, attempt
        and run, so the result does not depend on the order in which files were read or runs delivered.
        """
        wanted = set(test_ids) if test_ids is not None else None
        with self.engine.connect() as conn:
            repo_key = conn.execute(sa.select(repos.c.id).where(repos.c.full_name == repo)).scalar()
            if repo_key is None:
                return []
            rows = _history_rows(conn, repo_key, wanted, since)
        return _histories(rows)

    def counts(self) -> dict[str, int]:
        with self.engine.connect() as conn:
            return {
                t.name: int(conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one())
                for t in (repos, contexts, tests, reports, observations)
            }


class _HistoryRows(NamedTuple):
    tests: dict[int, Any]  # the wanted tests' rows, by row id
    context_keys: dict[int, str]
    reports: list[Any]
    kept: list[Any]  # observation rows: results with a failure or a retry


def _history_rows(conn: Connection, repo_key: int, wanted: set[str] | None, since: str | None) -> _HistoryRows:
    test_rows = conn.execute(
        sa.select(
            tests.c.id,
            tests.c.test_id,
            tests.c.family,
            tests.c.classname,
            tests.c.name,
            tests.c.file,
            tests.c.line,
        ).where(tests.c.repo_id == repo_key)
    ).all()
    info = {row.id: row for row in test_rows if wanted is None or row.test_id in wanted}
    started = reports.c.started_at
    recent = sa.true() if since is None else sa.or_(started.is_(None), started >= since)
    context_keys = {int(i): str(k) for i, k in conn.execute(sa.select(contexts.c.id, contexts.c.key))}
    report_rows = list(
        conn.execute(
            sa.select(
                reports.c.id,
                reports.c.context_id,
                reports.c.commit_sha,
                reports.c.attempt,
                reports.c.run_id,
                reports.c.run_index,
                reports.c.started_at,
                reports.c.digest,
                reports.c.passed_ids,
                reports.c.passed_ms,
                reports.c.skipped_ids,
            ).where(reports.c.repo_id == repo_key, recent)
        )
    )
    kept_rows = conn.execute(
        sa.select(
            observations.c.report_id,
            observations.c.test_id,
            observations.c.attempts,
            observations.c.message,
            observations.c.details,
        )
        .join(reports, reports.c.id == observations.c.report_id)
        .where(reports.c.repo_id == repo_key, recent)
    ).all()
    return _HistoryRows(info, context_keys, report_rows, list(kept_rows))


def _histories(rows: _HistoryRows) -> list[TestHistory]:
    """The observation lists, per test and context, filled report by report in the order the reports ran."""
    info, context_keys, report_rows, kept_rows = rows
    # a total order on what was executed, never on when it was stored: two runs of one commit that started
    # in the same second are told apart by their run ids, so the evidence reads the same whoever stored first
    report_rows.sort(
        key=lambda r: (r.started_at or "", r.run_index or 0, r.commit_sha, r.attempt, r.run_id or 0, r.digest, r.id)
    )
    kept: dict[int, list[tuple[int, str, str, str]]] = {}
    for row in kept_rows:
        kept.setdefault(row.report_id, []).append((row.test_id, row.attempts, row.message, row.details or ""))
    histories: dict[tuple[int, int], TestHistory] = {}
    # the observation lists of one context, by test: filled report by report in time order (a list is
    # never empty once made, so ``get(...) or list_of(...)`` makes each one once)
    lists: dict[int, dict[int, list[Observation]]] = {}

    def list_of(test_pk: int, context_id: int) -> list[Observation]:
        t = info[test_pk]
        history = TestHistory(t.test_id, t.family, t.classname, t.name, t.file, t.line, context_keys[context_id])
        histories[(test_pk, context_id)] = history
        lists[context_id][test_pk] = history.observations
        return history.observations

    for order, r in enumerate(report_rows):
        by_test = lists.setdefault(r.context_id, {})
        context_id, commit, attempt, run_id, started = r.context_id, r.commit_sha, r.attempt, r.run_id, r.started_at
        passed = codec.unpack_ids(r.passed_ids)
        seconds = codec.unpack_ms(r.passed_ms)
        for test_pk, secs in zip(passed, seconds, strict=True):
            if test_pk in info:
                (by_test.get(test_pk) or list_of(test_pk, context_id)).append(
                    Observation(order, commit, attempt, run_id, started, PASSED, secs)
                )
        for test_pk in codec.unpack_ids(r.skipped_ids):
            if test_pk in info:
                (by_test.get(test_pk) or list_of(test_pk, context_id)).append(
                    Observation(order, commit, attempt, run_id, started, SKIPPED, 0.0)
                )
        for test_pk, attempts_json, message, details in kept.get(r.id, ()):
            if test_pk in info:
                attempts = json.loads(attempts_json)
                (by_test.get(test_pk) or list_of(test_pk, context_id)).append(
                    Observation(
                        order,
                        commit,
                        attempt,
                        run_id,
                        started,
                        "".join(a[0] for a in attempts),
                        sum(a[1] for a in attempts),
                        message,
                        details,
                    )
                )
    return sorted(histories.values(), key=lambda h: (h.test_id, h.context))


def _sqlite_pragmas(dbapi_conn: Any, _record: Any) -> None:
    cursor = dbapi_conn.cursor()
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA foreign_keys=ON")
    # Turning a fresh file to WAL needs it to itself, and SQLite answers "database is locked" at once,
    # without waiting its busy timeout, when other connections are opening it at the same moment: try
    # again for as long as the busy timeout would have waited.
    deadline = time.monotonic() + 30.0
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            break
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)
    cursor.close()
