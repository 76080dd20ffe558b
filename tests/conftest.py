"""Shared fixtures: real SQLite, PostgreSQL and Redis; the ``../shared`` folder when it is there."""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import pytest
from psycopg import sql

from bot.store import Store
from tests.support import services
from workers import jobs

if TYPE_CHECKING:
    import redis

pytest_plugins = ["tests.conftest_github"]

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("FLAKETALLY_SHARED", ROOT.parent / "shared"))
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def shared_path(*parts: str) -> Path:
    """A path under ../shared, or a skip that names the missing folder."""
    path = SHARED.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent: this contract test reads the shared corpus in place")
    return path


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    services.stop_all()


@pytest.fixture(autouse=True)
def fresh_worker_state() -> Iterator[None]:
    """Each test starts with a worker that has read nothing: what one test configured (its store, its
    Redis, its fake GitHub) never reaches the next."""
    jobs.reset()
    yield
    jobs.reset()


@pytest.fixture(scope="session")
def postgres_server() -> str:
    try:
        return services.postgres_admin_url()
    except services.MissingService as exc:
        pytest.exit(str(exc), returncode=3)


@pytest.fixture(scope="session")
def redis_server() -> str:
    try:
        return services.redis_url()
    except services.MissingService as exc:
        pytest.exit(str(exc), returncode=3)


@pytest.fixture
def postgres_url(postgres_server: str) -> Iterator[str]:
    """A fresh, empty database for one test, dropped afterwards."""
    name = f"flaketally_test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    base = postgres_server.rsplit("/", 1)[0]
    yield f"{base}/{name}"
    with psycopg.connect(postgres_server, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'flaketally.db'}"
    return str(request.getfixturevalue("postgres_url"))


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    opened = Store.open(store_url)
    yield opened
    opened.close()


@pytest.fixture
def redis_url(redis_server: str) -> Iterator[str]:
    """An empty Redis database (db 15 of the server, or ``FLAKETALLY_TEST_REDIS_DB``, so that two suites can
    run side by side), flushed before and after each test."""
    import redis

    url = redis_server.rsplit("/", 1)[0] + "/" + os.environ.get("FLAKETALLY_TEST_REDIS_DB", "15")
    client = redis.Redis.from_url(url)
    client.flushdb()
    yield url
    client.flushdb()
    client.close()


@pytest.fixture
def conn(redis_url: str) -> Iterator[redis.Redis]:
    """A client of that database."""
    import redis

    client = redis.Redis.from_url(redis_url)
    yield client
    client.close()
