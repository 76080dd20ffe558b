"""What the store knows of an installation as a whole: the repositories its events named, its account and
the permissions it granted, its runs and tests across repositories (the weekly digest, the buttons,
recovery read these)."""

from __future__ import annotations

import json

import sqlalchemy as sa

from bot.store import Store
from bot.store.records import RunRecord, _run
from bot.store.schema import installations, repos, runs, tests


def installation_permissions(store: Store, installation_id: int) -> dict[str, str] | None:
    """What the installation granted, as its last installation event said; None when no event said."""
    with store.engine.connect() as conn:
        found = conn.execute(
            sa.select(installations.c.permissions).where(installations.c.id == installation_id)
        ).scalar()
    return {str(k): str(v) for k, v in json.loads(found).items()} if found else None


def test_names(store: Store, repo_key: int) -> list[tuple[str, str, str, str | None]]:
    """(stored id, classname, name, file) of every test the repository has reported."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(tests.c.test_id, tests.c.classname, tests.c.name, tests.c.file).where(tests.c.repo_id == repo_key)
        ).all()
    return [(str(r.test_id), str(r.classname), str(r.name), r.file) for r in rows]


def runs_since(store: Store, repo_key: int, since: str) -> list[RunRecord]:
    """Every attempt of the repository's runs that started at ``since`` (stored form) or later."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(runs)
            .where(runs.c.repo_id == repo_key, runs.c.run_started_at >= since)
            .order_by(runs.c.run_id, runs.c.attempt)
        ).all()
    return [_run(r) for r in rows]


def repos_of_installation(store: Store, installation_id: int) -> list[tuple[int, str]]:
    """(store key, full name) of the repositories an installation's events have named."""
    with store.engine.connect() as conn:
        rows = conn.execute(
            sa.select(repos.c.id, repos.c.full_name)
            .where(repos.c.installation_id == installation_id)
            .order_by(repos.c.full_name)
        ).all()
    return [(int(r.id), str(r.full_name)) for r in rows]


def installation_account(store: Store, installation_id: int) -> str | None:
    with store.engine.connect() as conn:
        found = conn.execute(sa.select(installations.c.account).where(installations.c.id == installation_id)).scalar()
    return str(found) if found is not None else None
