"""The weekly digest delivered: scheduled on rq's cron scheduler, posted once per installation and ISO week
in the repository the organisation names (else its ``.github``), last week's issue closed once with a link
to the new one, nothing posted where the installation cannot post (a warning on ``/readyz``), and each
organisation's issue built from its own data only. Real Redis, the store on SQLite and PostgreSQL, the
fake GitHub; the figures are checked against what each test planted, counted on its own."""

from __future__ import annotations

import asyncio
import logging
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from bot.cli import main
from bot.config.load import CONFIG_PATH
from bot.core.digest import week_start
from bot.digest.post import LABEL, digest_repository
from bot.digest.schedule import CATCH_UP, due_week, last_firing, week_covered
from bot.render.digest import digest_title, week_of_title
from bot.store import records as rec
from bot.store.digests import DigestState, digest_of
from tests.github_fake import FakeGitHub, FakeIssue, zip_of
from tests.test_end_to_end import App, app, junit
from tests.test_web import serving
from workers import jobs
from workers.scheduler import build_scheduler

__all__ = ["app"]  # the fixture

WEEK, LAST_WEEK, NEXT_MONDAY = "2026-W10", "2026-W09", week_start("2026-W11")
EVENT = 15 * 1.50  # developer time per flaky event at the default rates (compute is under a cent)


def flaky_commits(app: App, github: FakeGitHub, installation: int, repo: str, repo_id: int, days: list[float]) -> None:
    """One pull request run per day (days from the week's Monday): test_apply_coupon fails on attempt 1 and
    passes on its rerun (a flaky event); test_total passes. Commit SHAs depend only on the day, so two
    organisations planting the same days share them."""
    for day in days:
        github.now = week_start(WEEK).timestamp() + day * 86400
        sha = f"{int(day * 10) + 100:040x}"
        run = github.add_run(repo, head_sha=sha, pull_requests=[7], attempts=2)
        for attempt, coupon in ((1, "fail"), (2, "pass")):
            github.add_job(
                run, attempt=attempt, name="test (3.11)", conclusion="success" if coupon == "pass" else "failure"
            )
            report = zip_of({"j.xml": junit(test_apply_coupon=coupon, test_total="pass")})
            github.add_artifact(run, "junit-results", report, attempt=attempt)
        jobs.process_workflow_run(installation, repo, repo_id, run.id, 2)


def digest_issues(github: FakeGitHub, repo: str) -> list[FakeIssue]:
    return [i for i in github.issues.values() if i.repo == repo and LABEL in i.labels]


def force_due(scheduler: object) -> None:
    """Make the scheduler's digest tick due now (rq computes its next time from the real clock)."""
    for cron_job in scheduler.get_jobs():  # type: ignore[attr-defined]
        if cron_job.name == "flaketally-digest-tick":
            cron_job.next_enqueue_time = datetime.now(UTC) - timedelta(seconds=1)


# --- the schedule ------------------------------------------------------------------------------------


def test_a_firing_covers_the_last_whole_iso_week_before_it() -> None:
    monday_nine = datetime(2026, 3, 9, 9, 0, tzinfo=UTC)  # Monday of 2026-W11
    assert last_firing("0 9 * * 1", "UTC", monday_nine) == monday_nine
    assert last_firing("0 9 * * 1", "UTC", monday_nine - timedelta(minutes=1)) == monday_nine - timedelta(weeks=1)
    assert week_covered(monday_nine) == "2026-W10"
    # Monday 09:00 in Auckland is Sunday 20:00 UTC: the UTC week it falls in is not over, so the one before
    auckland = last_firing("0 9 * * 1", "Pacific/Auckland", monday_nine)
    assert auckland.astimezone(UTC) == datetime(2026, 3, 8, 20, 0, tzinfo=UTC)
    assert week_covered(auckland) == "2026-W09"
    # half-hour zones land on a quarter-hour tick
    kolkata = last_firing("30 9 * * 1", "Asia/Kolkata", monday_nine)
    assert kolkata.astimezone(UTC) == datetime(2026, 3, 9, 4, 0, tzinfo=UTC)


def test_a_digest_is_due_within_a_day_of_its_firing_only() -> None:
    monday_nine = datetime(2026, 3, 9, 9, 0, tzinfo=UTC)
    assert due_week("0 9 * * 1", "UTC", monday_nine - timedelta(minutes=1)) is None  # last week's firing: too old
    assert due_week("0 9 * * 1", "UTC", monday_nine) == "2026-W10"
    assert due_week("0 9 * * 1", "UTC", monday_nine + CATCH_UP) == "2026-W10"
    assert due_week("0 9 * * 1", "UTC", monday_nine + CATCH_UP + timedelta(minutes=1)) is None
    # across the change to summer time in Berlin (2026-03-29): still 09:00 local, 07:00 UTC
    after = last_firing("0 9 * * 1", "Europe/Berlin", datetime(2026, 3, 30, 8, 0, tzinfo=UTC))
    assert after.astimezone(UTC) == datetime(2026, 3, 30, 7, 0, tzinfo=UTC)


def test_titles_name_their_week() -> None:
    assert digest_title(WEEK) == "Flaketally digest 2026-W10 (Mar 2 – Mar 8, 2026)"
    assert week_of_title(digest_title(WEEK)) == WEEK
    assert week_of_title("Flaketally digest is great") is None
    assert digest_repository("acme", "") == "acme/.github"
    assert digest_repository("acme", "ops") == "acme/ops"
    assert digest_repository("acme", "acme/reports") == "acme/reports"


# --- delivery ----------------------------------------------------------------------------------------


def test_scheduled_twice_by_two_schedulers_it_posts_one_issue_and_closes_last_weeks_once(
    app: App, github: FakeGitHub
) -> None:
    rec.record_installation(app.store, 77, "acme", rec.InstallationState.ACTIVE)
    flaky_commits(app, github, 77, "acme/api", 1, [0.5, 1.5])
    flaky_commits(app, github, 77, "acme/web", 2, [2.5, -4.0])  # the second in the week before
    old = github.add_issue("acme/.github", digest_title(LAST_WEEK), "last week's body", [LABEL])
    older = github.add_issue("acme/.github", digest_title("2026-W08"), "closed long ago", [LABEL], state="closed")
    now = (NEXT_MONDAY + timedelta(hours=9, minutes=5)).isoformat()

    schedulers = [build_scheduler(app.settings, app.redis, now=now) for _ in range(2)]
    for scheduler in schedulers:
        force_due(scheduler)
        assert len(scheduler.enqueue_jobs()) == 1  # each enqueues its tick
    app.work()  # two ticks, and the digest job they enqueued
    assert jobs.digest_tick(now) == {"enqueued": []}  # a tick again in the same week: already posted
    assert jobs.digest_tick((NEXT_MONDAY + timedelta(hours=13)).isoformat()) == {"enqueued": []}
    assert jobs.post_digest(77, WEEK)["state"] == "posted"  # the job retried: left alone
    app.work()

    (new,) = [i for i in digest_issues(github, "acme/.github") if i.number not in (old.number, older.number)]
    assert len(github.calls("create_issue")) == 1
    assert new.title == digest_title(WEEK) and new.labels == [LABEL] and new.state == "open"
    assert "| flaky events | 3 | 1 |" in new.body  # three flaky commits this week, one the week before
    assert f"| cost (USD) | {3 * EVENT:.2f} | {EVENT:.2f} |" in new.body
    assert new.body.endswith(f"Last week's digest: #{old.number}.")
    assert (old.state, old.closed, old.state_reason) == ("closed", 1, "completed")
    assert old.body == f"Closed: the digest of {WEEK} is #{new.number}.\n\nlast week's body"
    assert older.closed == 0  # already closed: never closed again
    assert len(github.calls("update_issue")) == 1
    kept = digest_of(app.store, 77, WEEK)
    assert kept is not None and (kept.state, kept.repo, kept.issue_number) == (
        DigestState.POSTED,
        "acme/.github",
        new.number,
    )


def test_an_issue_a_dead_try_left_is_kept_instead_of_opening_another(app: App, github: FakeGitHub) -> None:
    rec.record_installation(app.store, 77, "acme", rec.InstallationState.ACTIVE)
    flaky_commits(app, github, 77, "acme/api", 1, [0.5])
    left = github.add_issue("acme/.github", digest_title(WEEK), "posted, then the worker died", [LABEL])
    assert jobs.post_digest(77, WEEK) == {
        "state": "posted",
        "repo": "acme/.github",
        "issue": left.number,
        "line": f"the digest of acme for {WEEK} is acme/.github#{left.number}",
    }
    assert github.calls("create_issue") == []


def test_the_organisation_names_the_repository_and_the_schedule(app: App, github: FakeGitHub) -> None:
    rec.record_installation(app.store, 77, "acme", rec.InstallationState.ACTIVE)
    flaky_commits(app, github, 77, "acme/api", 1, [0.5])
    github.add_file("acme/.github", CONFIG_PATH, "digest:\n  repository: ops\n  schedule: '0 17 * * 5'\n")
    flaky_commits(app, github, 77, "acme/api", 1, [1.5])  # each run's job reads (and caches) the organisation's file
    friday = datetime(2026, 3, 13, 17, 0, tzinfo=UTC)  # Friday of W11: covers W10
    assert jobs.digest_tick(NEXT_MONDAY.replace(hour=9).isoformat()) == {"enqueued": []}  # not on Monday
    assert jobs.digest_tick(friday.isoformat()) == {"enqueued": [f"77:{WEEK}"]}
    app.work()
    (posted,) = digest_issues(github, "acme/ops")
    assert posted.title == digest_title(WEEK) and digest_issues(github, "acme/.github") == []


def test_nowhere_to_post_is_said_in_the_log_and_on_readyz(
    app: App, github: FakeGitHub, caplog: pytest.LogCaptureFixture
) -> None:
    rec.record_installation(app.store, 77, "acme", rec.InstallationState.ACTIVE)
    flaky_commits(app, github, 77, "acme/api", 1, [0.5])
    github.unreachable.add("acme/.github")
    with caplog.at_level(logging.WARNING):
        done = jobs.post_digest(77, WEEK)
    assert done["state"] == "not_posted" and github.calls("create_issue") == []
    assert "the installation cannot reach it (acme/.github)" in done["line"]
    assert done["line"] in caplog.text

    async def readyz() -> httpx.Response:
        async with serving(app.settings) as client:  # the receiver, its lifespan run (it closes its store)
            return await client.get("/readyz")

    answer = asyncio.run(readyz())
    assert answer.status_code == 200
    assert answer.text == f"ready\nwarning: {done['line']}\n"
    assert jobs.digest_tick(NEXT_MONDAY.replace(hour=10).isoformat()) == {"enqueued": []}  # not retried by itself

    github.unreachable.clear()
    github.issues_disabled.add("acme/.github")
    assert "its issues are turned off" in jobs.post_digest(77, WEEK)["line"]
    github.issues_disabled.clear()
    assert jobs.post_digest(77, WEEK)["state"] == "posted"  # asked again (digest --post): posted
    assert asyncio.run(readyz()).text == "ready\n"


def test_two_organisations_sharing_names_and_commits_see_only_their_own(app: App, github: FakeGitHub) -> None:
    github.other_installations.add(88)
    rec.record_installation(app.store, 77, "acme", rec.InstallationState.ACTIVE)
    rec.record_installation(app.store, 88, "globex", rec.InstallationState.ACTIVE)
    # the same repository name, test names and commit SHAs in both; globex flakes five times, acme twice
    flaky_commits(app, github, 77, "acme/api", 1, [0.5, 1.5])
    flaky_commits(app, github, 88, "globex/api", 2, [0.5, 1.5, 2.5, 3.5, 4.5])
    assert jobs.post_digest(77, WEEK)["state"] == jobs.post_digest(88, WEEK)["state"] == "posted"
    (acme,), (globex,) = digest_issues(github, "acme/.github"), digest_issues(github, "globex/.github")
    assert "| flaky events | 2 | 0 |" in acme.body and "| flaky events | 5 | 0 |" in globex.body
    assert f"| cost (USD) | {2 * EVENT:.2f} |" in acme.body and f"| cost (USD) | {5 * EVENT:.2f} |" in globex.body
    assert "globex" not in acme.body and "acme" not in globex.body
    assert "across 1 repository (" in acme.body and "across 1 repository (" in globex.body


def test_digest_post_from_the_command_line(
    app: App, github: FakeGitHub, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    rec.record_installation(app.store, 77, "acme", rec.InstallationState.ACTIVE)
    flaky_commits(app, github, 77, "acme/api", 1, [0.5])
    for name, value in {
        "GITHUB_APP_ID": str(github.app_id),
        "GITHUB_APP_PRIVATE_KEY": github.private_key,
        "GITHUB_WEBHOOK_SECRET": "s",
        "GITHUB_API_URL": github.api_url,
        "DATABASE_URL": app.settings.database_url,
        "REDIS_URL": app.settings.redis_url,
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setattr(
        jobs,
        "github_port",
        lambda _s, _c, installation, writes: github.port(installation_id=installation, writes=writes),
    )
    assert main(["digest", "--installation", "77", "--week", WEEK, "--post"]) == 0
    (posted,) = digest_issues(github, "acme/.github")
    assert capsys.readouterr().out == f"flaketally: the digest of acme for {WEEK} is acme/.github#{posted.number}\n"
    assert main(["digest", "--installation", "77", "--week", WEEK, "--post"]) == 0  # once a week
    assert len(github.calls("create_issue")) == 1
    assert main(["digest", "--installation", "99", "--week", WEEK, "--post"]) == 1
    assert "installation 99: installation not active" in capsys.readouterr().err
