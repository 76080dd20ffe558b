"""``flaketally digest`` from the store: one installation's repositories only, its week's figures against
what the history planted (through the pipeline, the store on SQLite and PostgreSQL, and the fake GitHub)."""

from __future__ import annotations

import json
from datetime import date

import pytest

from bot.cli import main
from bot.config.quarantine import render_quarantine
from bot.config.schema import QUARANTINE_PATH
from bot.core.digest import week_start
from bot.core.quarantine import Entry
from bot.pipeline.attempt import process_workflow_run
from bot.store import Store
from bot.store import records as rec
from tests.github_fake import FakeGitHub, zip_of
from tests.test_end_to_end import junit

WEEK = "2026-W10"
COUPON = "tests/payments/test_checkout.py::test_apply_coupon"
EVENT = 15 * 1.50  # at the default rates, and under a cent of compute for 0.8 s


def _run(store: Store, github: FakeGitHub, installation: int, repo: str, n: int, day: float, flaky: bool) -> None:
    """A pull request's run on commit ``n``: test_apply_coupon fails, then passes on a rerun when ``flaky``;
    test_total always passes."""
    github.now = week_start(WEEK).timestamp() + day * 86400
    run = github.add_run(repo, head_sha=f"{n:040x}", pull_requests=[7], attempts=2 if flaky else 1)
    github.add_job(run, attempt=1, name="test (3.11)", conclusion="failure")
    github.add_artifact(
        run, "junit-results", zip_of({"j.xml": junit(test_apply_coupon="fail", test_total="pass")}), attempt=1
    )
    if flaky:
        github.add_job(run, attempt=2, name="test (3.11)", conclusion="success")
        github.add_artifact(
            run, "junit-results", zip_of({"j.xml": junit(test_apply_coupon="pass", test_total="pass")}), attempt=2
        )
    with github.port() as gh:
        process_workflow_run(
            store, gh, installation_id=installation, repo=repo, repo_id=n, run_id=run.id, attempt=2 if flaky else 1
        )


def test_a_digest_reads_only_its_installations_repositories(
    store: Store, github: FakeGitHub, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rec.record_installation(store, 77, "acme", rec.InstallationState.ACTIVE)
    rec.record_installation(store, 88, "globex", rec.InstallationState.ACTIVE)
    # acme: three flaky commits this week in two repositories, one the week before; a single failure
    for n, (repo, day, flaky) in enumerate(
        [("acme/api", 0.5, True), ("acme/api", 1.5, True), ("acme/web", 2.5, True), ("acme/web", -3, True)], 1
    ):
        _run(store, github, 77, repo, n, day, flaky)
    _run(store, github, 77, "acme/web", 5, 3.5, False)
    # globex: flaky all week long, in a repository of its own
    for n in range(10, 16):
        _run(store, github, 88, "globex/secret-service", n, 0.2 + n / 10, True)

    assert main(["digest", "--installation", "77", "--week", WEEK, "--db", store_url, "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    this, before = document["trend"][-1], document["trend"][-2]
    assert document["organisation"] == "acme" and document["repositories"] == 2
    assert (this["events"], before["events"]) == (3, 1)
    assert this["cost"] == pytest.approx(3 * EVENT, abs=0.01)
    assert (this["failed_runs"], this["all_flaky_runs"]) == (4, 3)
    assert sorted(t["repo"] for t in document["top"]) == ["acme/api", "acme/web"]
    assert [(u[0], u[3]) for u in document["undetermined"]] == [("acme/web", 1)]  # commit 5: one failure, no rerun

    assert main(["digest", "--installation", "77", "--week", WEEK, "--db", store_url]) == 0
    body = capsys.readouterr().out
    assert "globex" not in body and "secret-service" not in body
    assert "## Flaketally digest · acme · 2026-W10" in body

    assert main(["digest", "--installation", "77", "--week", "2026-10", "--db", store_url]) == 2
    assert "not an ISO week" in capsys.readouterr().err


def test_broken_tests_the_quarantine_and_what_to_add_to_it(
    store: Store, github: FakeGitHub, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    rec.record_installation(store, 77, "acme", rec.InstallationState.ACTIVE)
    github.add_file(
        "acme/web", QUARANTINE_PATH, render_quarantine([Entry(COUPON, "all", "flaky since March", date(2026, 3, 1))])
    )
    for n, day in enumerate((0.5, 1.5, 2.5), 20):  # pushes to main: test_total fails every time there
        github.now = week_start(WEEK).timestamp() + day * 86400
        run = github.add_run("acme/api", head_sha=f"{n:040x}", event="push", head_branch="main")
        github.add_job(run, attempt=1, name="test (3.11)", conclusion="failure")
        github.add_artifact(run, "junit-results", zip_of({"j.xml": junit(test_total="fail")}), attempt=1)
        with github.port() as gh:
            process_workflow_run(
                store,
                gh,
                installation_id=77,
                repo="acme/api",
                repo_id=1,
                run_id=run.id,
                attempt=1,
                default_branch="main",
            )
    _run(store, github, 77, "acme/web", 30, 3.0, True)  # flaky, and quarantined
    _run(store, github, 77, "acme/api", 31, 3.5, True)  # flaky, not quarantined

    assert main(["digest", "--installation", "77", "--week", WEEK, "--db", store_url]) == 0
    body = capsys.readouterr().out
    assert "### Broken on a default branch (1: failing on every recent run there: not flakes)" in body
    assert "- `tests/payments/test_checkout.py::test_total` in `acme/api`" in body
    # its single failures on main need no rerun: not among the tests left undetermined
    assert "Left undetermined most often" not in body
    assert "### In quarantine (1: 0 due to leave)" in body
    assert f"- `{COUPON}` in `acme/web` (all): flaky since March" in body
    suggestions = body.split("### Quarantine suggestions", 1)[1]
    assert f"`acme/api`: `{COUPON}`" in suggestions and "acme/web" not in suggestions
