"""The store: SQLite by default, PostgreSQL when the URL names one, one code path for both."""

from __future__ import annotations

import fcntl
import sqlite3
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.engine import Connection, Engine

from bot.core.identity import RunIdentity
from bot.core.observations import TestHistory
from bot.core.results import Report, TestResult
from bot.store import codec
from bot.store.layout import Split, histories, history_rows, pass_time_rows, test_key
from bot.store.schema import contexts, manifests, observations, pass_times, reports, repos, tests

# The newest migration in migrations/versions (a test checks it against alembic's own view).
SCHEMA_HEAD = "0012"
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
            keys = {test_key(r.id): r for r in unknown}
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
            split = Split.of(ids, report.results)
            manifest_id = self._manifest(conn, repo_key, split)
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
                    manifest_id=manifest_id,
                    passed=len(split.passed),
                    skipped=len(split.skipped),
                    passed_seconds=sum(codec.stored_seconds(split.passed[i]) for i in sorted(split.passed)),
                    passed_ms=codec.pack_ms([split.passed.get(i, 0.0) for i in split.ran]),
                )
                .on_conflict_do_nothing()
                .returning(reports.c.id)
            ).scalar()
            if inserted is None:  # another worker stored it a moment ago
                return False
            if split.kept:
                conn.execute(
                    observations.insert(),
                    [
                        {
                            "report_id": inserted,
                            "test_id": test_pk,
                            "outcome": result.outcome.value,
                            "attempts": codec.attempts_text(result),
                            "duration": sum(a.duration for a in result.attempts),
                            "message": result.message,
                            "details": result.details or None,
                        }
                        for test_pk, result in split.kept
                    ],
                )
            siblings = sa.and_(
                reports.c.repo_id == repo_key, reports.c.commit_sha == run.commit, reports.c.context_id == context_id
            )
            times = pass_time_rows(conn, inserted, siblings, split)
            for start in range(0, len(times), _BATCH):
                conn.execute(self._insert(pass_times).on_conflict_do_nothing(), times[start : start + _BATCH])
        return True

    def _manifest(self, conn: Connection, repo_key: int, split: Split) -> int:
        """The id of the manifest of these tests and skips, stored when no report held them before."""
        skipped = sorted(split.skipped)
        digest = codec.ids_digest(split.ran, skipped)
        values = {
            "tests": len(split.ran),
            "test_ids": codec.pack_ids(split.ran),
            "skipped_ids": codec.pack_ids(skipped),
        }
        return self._id(conn, manifests, {"repo_id": repo_key, "digest": digest}, values)

    # reading

    def history(
        self,
        repo: str,
        test_ids: Iterable[str] | None = None,
        since: str | None = None,
        *,
        timed: bool = True,
        failed_commits: bool = False,
        texts_on: Iterable[str] | None = None,
    ) -> list[TestHistory]:
        """Every stored observation of the repository's tests (or of the named ones), per test and context;
        with ``since`` (an ISO time in the stored form), only reports that started then or later, and
        undated ones. Only the named tests' rows are read, and each distinct manifest is decoded once.

        ``timed=False`` (judging, where only the seconds on a commit the test failed or retried on are
        added up) leaves a plain pass's seconds at 0.0 except there, and decodes no report's durations.

        ``failed_commits=True`` keeps only the observations on the commits where the test failed, per context
        (their ``order`` counts the reports read): enough for ``bot.core.verdicts.known_flaky`` to find a
        same-code pass and failure, not to judge a history.

        ``texts_on``: the commits whose failures keep their message and details (judging one commit shows
        only its own); on the others they are empty and not read. None (the default): every commit's.

        Reports are ordered by when they ran (``started_at``, then ``run_index``), then by commit, attempt
        and run, so the result does not depend on the order in which files were read or runs delivered.
        """
        wanted = set(test_ids) if test_ids is not None else None
        with self.engine.connect() as conn:
            repo_key = conn.execute(sa.select(repos.c.id).where(repos.c.full_name == repo)).scalar()
            if repo_key is None:
                return []
            texts = None if texts_on is None else set(texts_on)
            rows = history_rows(conn, repo_key, wanted, since, timed=timed, texts_on=texts)
        return histories(rows, timed=timed, failed_commits=failed_commits)

    def counts(self) -> dict[str, int]:
        with self.engine.connect() as conn:
            return {
                t.name: int(conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one())
                for t in (repos, contexts, tests, reports, observations)
            }


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
