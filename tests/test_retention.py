"""The store's life cycle: ``flaketally migrate`` as the one way to change a production schema (and the
long-running processes refusing a store behind it), the retention period pruning old reports, runs and
jobs, and an installation's data deleted at once (``purge``) or a retention period after its deletion.
SQLite and PostgreSQL, through the App's worker job and the fake GitHub."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from bot.cli import main
from bot.config.load import CONFIG_PATH
from bot.core.digest import week_start
from bot.store import SCHEMA_HEAD, Store, StoreError
from bot.store import records as rec
from bot.store.digests import DigestState, digest_of, keep_digest
from bot.store.retention import prune, purge_installation
from bot.store.schema import config_files, installations, jobs, observations, reports, repos, runs, tests
from tests.github_fake import FakeGitHub
from tests.test_digest_post import WEEK, flaky_commits
from tests.test_end_to_end import App, app

__all__ = ["app"]  # the fixture

MONDAY = week_start(WEEK)


def counts(store: Store) -> dict[str, int]:
    with store.engine.connect() as conn:
        return {
            t.name: int(conn.execute(sa.select(sa.func.count()).select_from(t)).scalar_one())
            for t in (repos, reports, observations, tests, runs, jobs, installations, config_files)
        }


def rows_of(store: Store, table: sa.Table, column: sa.Column[int], value: int) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(table).where(column == value)).scalar_one())


# --- migrate ------------------------------------------------------------------------------------------


def test_migrate_twice_is_a_no_op(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["migrate", "--db", store_url]) == 0
    assert capsys.readouterr().out == f"flaketally: migrated the store from empty to {SCHEMA_HEAD}\n"
    assert main(["migrate", "--db", store_url]) == 0
    assert capsys.readouterr().out == f"flaketally: the store is already at {SCHEMA_HEAD}; nothing to do\n"


@pytest.mark.postgres
def test_the_processes_refuse_an_unmigrated_postgresql_store(
    postgres_url: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], github: FakeGitHub
) -> None:
    for name, value in {
        "GITHUB_APP_ID": str(github.app_id),
        "GITHUB_APP_PRIVATE_KEY": github.private_key,
        "GITHUB_WEBHOOK_SECRET": "s",
        "DATABASE_URL": postgres_url,
        "REDIS_URL": "redis://127.0.0.1:1/0",  # never reached: the store is checked first
    }.items():
        monkeypatch.setenv(name, value)
    for command in (["serve", "--port", "1"], ["worker", "--burst"], ["scheduler"]):
        assert main(command) == 2, command
        err = capsys.readouterr().err
        assert "is not migrated, behind" in err and "run `flaketally migrate`" in err, command
    with pytest.raises(StoreError, match="run `flaketally migrate`"):
        Store.open_current(postgres_url)
    assert main(["migrate"]) == 0
    Store.open_current(postgres_url).close()  # now it opens
    ahead = Store(postgres_url)
    with ahead.engine.begin() as conn:
        conn.execute(sa.text("UPDATE alembic_version SET version_num = '9999'"))
    ahead.close()
    with pytest.raises(StoreError, match="newer than this Flaketally"):
        Store.open_current(postgres_url)


def test_the_embedded_sqlite_store_migrates_itself(tmp_path: object) -> None:
    url = f"sqlite:///{tmp_path}/flaketally.db"
    store = Store.open_current(url)
    with store.engine.connect() as conn:
        assert Store.schema_version(conn) == SCHEMA_HEAD
    store.close()


# --- retention -----------------------------------------------------------------------------------------


def test_what_is_older_than_the_retention_period_is_pruned(app: App, github: FakeGitHub) -> None:
    rec.record_installation(app.store, 77, "acme", rec.InstallationState.ACTIVE)
    flaky_commits(app, github, 77, "acme/api", 1, [0.5, 1.5, 20.5])  # two in the week, one 20 days later
    before = counts(app.store)
    assert (before["reports"], before["runs"], before["jobs"]) == (6, 6, 6)  # 3 commits × 2 attempts
    assert str(prune(app.store, 90, now=MONDAY + timedelta(days=30))) == ("pruned 0 reports, 0 run attempts and 0 jobs")
    done = prune(app.store, 90, now=MONDAY + timedelta(days=92))  # the first two are older than 90 days
    assert (done.reports, done.runs, done.jobs, done.installations) == (4, 4, 4, ())
    after = counts(app.store)
    assert (after["reports"], after["runs"], after["jobs"]) == (2, 2, 2)
    assert after["observations"] == before["observations"] // 3
    (history,) = [h for h in app.store.history("acme/api") if h.name == "test_apply_coupon"]
    assert {o.commit for o in history.observations} == {f"{int(20.5 * 10) + 100:040x}"}  # the recent one


def test_purge_deletes_one_installation_and_nothing_of_another(
    app: App, github: FakeGitHub, capsys: pytest.CaptureFixture[str]
) -> None:
    github.other_installations.add(88)
    rec.record_installation(app.store, 77, "acme", rec.InstallationState.ACTIVE)
    rec.record_installation(app.store, 88, "globex", rec.InstallationState.ACTIVE)
    github.add_file("acme/.github", CONFIG_PATH, "comment: always\n")
    github.add_file("globex/.github", CONFIG_PATH, "comment: always\n")
    flaky_commits(app, github, 77, "acme/api", 1, [0.5, 1.5])
    flaky_commits(app, github, 88, "globex/api", 2, [0.5, 1.5])  # the same SHAs and test names
    keep_digest(app.store, 77, WEEK, DigestState.POSTED, "posted", repo="acme/.github", issue_number=1)
    keep_digest(app.store, 88, WEEK, DigestState.POSTED, "posted", repo="globex/.github", issue_number=2)
    globex_key = rec.repo_key(app.store, "globex/api")
    kept = rows_of(app.store, reports, reports.c.repo_id, globex_key)

    assert main(["purge", "--installation", "77", "--db", app.settings.database_url]) == 0
    assert capsys.readouterr().out == "flaketally: installation 77: deleted 1 repositories (acme/api) and 4 reports\n"
    with app.store.engine.connect() as conn:
        names = set(conn.execute(sa.select(repos.c.full_name)).scalars())
        sources = set(conn.execute(sa.select(config_files.c.source)).scalars())
        accounts = set(conn.execute(sa.select(installations.c.account)).scalars())
    assert names == {"globex/api"} and accounts == {"globex"}
    assert not any(s.startswith("acme/") for s in sources) and any(s.startswith("globex/") for s in sources)
    assert digest_of(app.store, 77, WEEK) is None and digest_of(app.store, 88, WEEK) is not None
    assert rows_of(app.store, reports, reports.c.repo_id, globex_key) == kept == 4
    assert [h.name for h in app.store.history("acme/api")] == []
    assert str(purge_installation(app.store, 77)) == "deleted 0 repositories (no repository) and 0 reports"


def test_a_deleted_installation_is_purged_a_retention_period_later_unless_it_comes_back(
    app: App, github: FakeGitHub
) -> None:
    rec.record_installation(app.store, 77, "acme", rec.InstallationState.ACTIVE)
    flaky_commits(app, github, 77, "acme/api", 1, [0.5])
    rec.record_installation(app.store, 77, "acme", rec.InstallationState.DELETED)
    soon, later = datetime.now(UTC) + timedelta(days=30), datetime.now(UTC) + timedelta(days=91)
    assert prune(app.store, 90, now=soon).installations == ()
    rec.record_installation(app.store, 77, "acme", rec.InstallationState.ACTIVE)  # installed again
    assert prune(app.store, 90, now=later).installations == ()
    assert rec.repo_key(app.store, "acme/api") and counts(app.store)["installations"] == 1

    rec.record_installation(app.store, 77, "acme", rec.InstallationState.DELETED)
    assert jobs_prune(app, later) == [77]
    assert counts(app.store)["repos"] == 0 and rec.installation_state(app.store, 77) is None


def jobs_prune(app: App, now: datetime) -> list[int]:
    """The scheduler's daily job, as the worker runs it."""
    from workers import jobs as worker_jobs

    return list(worker_jobs.prune_store(now.isoformat())["purged"])
