"""rq forks a process per job: a job must not talk to the database over its parent's connection."""

from __future__ import annotations

import multiprocessing

import pytest
import redis
import sqlalchemy as sa

from bot.settings import Settings
from bot.store import Store
from workers import jobs


def _backend_pid(store: Store) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one())


def _child(queue: multiprocessing.Queue) -> None:  # type: ignore[type-arg]
    store = jobs._context().store
    queue.put(_backend_pid(store))


@pytest.mark.postgres
def test_a_forked_job_opens_its_own_connection(postgres_url: str, redis_url: str) -> None:
    settings = Settings(app_id=1, private_key="", webhook_secret="s", redis_url=redis_url, database_url=postgres_url)
    store = Store.open(postgres_url)
    connection = redis.Redis.from_url(redis_url)
    jobs.configure(settings, store=store, connection=connection)
    parent = _backend_pid(store)  # a connection now waits in the pool, inherited by a fork
    context = multiprocessing.get_context("fork")
    queue = context.Queue()
    child = context.Process(target=_child, args=(queue,))
    child.start()
    child_pid = queue.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0
    assert child_pid != parent
    assert _backend_pid(store) == parent  # and the parent's own connection still works
    store.close()
    connection.close()
