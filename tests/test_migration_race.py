"""Workers and a receiver started at the same moment on a fresh store: exactly one migrates, none fails.

Each round forks two processes that open the store as a worker does (``Store.open``, which migrates) and
one that opens it as the receiver does (no migration, ``SELECT 1`` for readiness), released together by
a barrier. Ten rounds on a fresh SQLite file and ten on a fresh PostgreSQL database.
"""

from __future__ import annotations

import multiprocessing
import traceback
from collections.abc import Iterator
from multiprocessing.queues import Queue
from multiprocessing.synchronize import Barrier
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from psycopg import sql

from bot.store import SCHEMA_HEAD, Store

ROUNDS = 10
WORKERS = 2
TIMEOUT = 60.0


def _open(url: str, migrate: bool, barrier: Barrier, results: Queue[tuple[str, object]]) -> None:
    try:
        store = Store(url)
        barrier.wait(TIMEOUT)
        if migrate:
            results.put(("migrated", store.migrate()))
        else:
            with store.engine.connect() as conn:
                conn.execute(sa.text("SELECT 1"))
            results.put(("ready", True))
        store.close()
    except BaseException:
        results.put(("error", traceback.format_exc()))


def start_together(url: str) -> list[tuple[str, object]]:
    context = multiprocessing.get_context("fork")
    barrier = context.Barrier(WORKERS + 1)
    results: Queue[tuple[str, object]] = context.Queue()
    processes = [context.Process(target=_open, args=(url, i < WORKERS, barrier, results)) for i in range(WORKERS + 1)]
    for p in processes:
        p.start()
    found = [results.get(timeout=TIMEOUT) for _ in processes]
    for p in processes:
        p.join(TIMEOUT)
        assert p.exitcode == 0
    return found


def check_round(url: str) -> None:
    found = start_together(url)
    errors = [detail for kind, detail in found if kind == "error"]
    assert not errors, errors[0]
    migrated = [bool(detail) for kind, detail in found if kind == "migrated"]
    assert sorted(migrated) == [False, True]  # one migrated, the other found the schema at the head
    store = Store(url)
    with store.engine.connect() as conn:
        assert Store.schema_version(conn) == SCHEMA_HEAD
    store.migrate()  # and a later start has nothing to do
    store.close()


@pytest.fixture
def fresh_databases(postgres_server: str) -> Iterator[list[str]]:
    names = [f"flaketally_race_{i}_{multiprocessing.current_process().pid}" for i in range(ROUNDS)]
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        for name in names:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    base = postgres_server.rsplit("/", 1)[0]
    yield [f"{base}/{name}" for name in names]
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        for name in names:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def test_a_fresh_sqlite_file_is_migrated_once_whoever_starts_first(tmp_path: Path) -> None:
    for n in range(ROUNDS):
        check_round(f"sqlite:///{tmp_path / f'race-{n}.db'}")


@pytest.mark.postgres
def test_a_fresh_postgresql_database_is_migrated_once_whoever_starts_first(fresh_databases: list[str]) -> None:
    for url in fresh_databases:
        check_round(url)
