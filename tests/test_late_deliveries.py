"""However late or out of order attempts are processed: each artifact is read as the attempt that uploaded
it, and the check run GitHub shows (the newest of the commit) ends with the same judgement, sent once."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from bot.pipeline.attempt import process_workflow_run
from bot.store import Store
from bot.store.schema import reports
from tests.conftest import FIXTURES
from tests.github_fake import FakeGitHub, FakeRun, zip_of

REPO = "acme/widgets"


def junit(outcome: str) -> bytes:
    body = '<failure message="AssertionError: boom"/>' if outcome == "fail" else ""
    case = f'<testcase classname="tests.mod" name="test_coupon" file="tests/mod.py" line="4">{body}</testcase>'
    return zip_of({"junit.xml": f'<testsuite name="pytest">{case}</testsuite>'.encode()})


def stored(store: Store) -> list[tuple[int, str]]:
    """(attempt, artifact name) of every stored report."""
    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(reports.c.attempt, reports.c.source).order_by(reports.c.attempt)).all()
    return [(int(a), str(s).split("/")[0]) for a, s in rows]


def failed_then_passed(github: FakeGitHub) -> FakeRun:
    """A run whose attempt 1 failed and attempt 2 passed, each uploading an artifact named ``junit``: one
    name for both attempts, as most workflows write it, so only the time tells them apart."""
    run = github.add_run(REPO, pull_requests=[7], attempts=2)
    github.add_job(run, attempt=1, conclusion="failure")
    github.add_job(run, attempt=2)
    github.add_artifact(run, "junit", junit("fail"), attempt=1)
    github.add_artifact(run, "junit", junit("pass"), attempt=2)
    return run


def test_attempt_1_processed_after_attempt_2_ran_takes_only_its_own_artifact(store: Store, github: FakeGitHub) -> None:
    run = failed_then_passed(github)
    with github.port() as gh:
        first = process_workflow_run(store, gh, installation_id=77, repo=REPO, repo_id=1, run_id=run.id, attempt=1)
        assert stored(store) == [(1, "junit")]  # attempt 2's upload is not read as attempt 1's
        assert first is not None and first.findings[0].verdict.value == "undetermined"
        second = process_workflow_run(store, gh, installation_id=77, repo=REPO, repo_id=1, run_id=run.id, attempt=2)
    assert stored(store) == [(1, "junit"), (2, "junit")]
    assert second is not None and [f.verdict.value for f in second.findings] == ["flaky"]


def final_state(store: Store, github: FakeGitHub, order: list[int]) -> tuple[list[tuple[object, ...]], list[str]]:
    """Attempt 1 fails, attempt 2 passes; the attempts are processed in ``order``. What each check run and
    the pull request's comment finally say (GitHub keeps every annotation ever sent, so those are not
    compared)."""
    run = failed_then_passed(github)
    with github.port() as gh:
        for attempt in order:
            process_workflow_run(store, gh, installation_id=77, repo=REPO, repo_id=1, run_id=run.id, attempt=attempt)
    checks: list[tuple[object, ...]] = [
        (c.conclusion, c.output.get("title"), c.output.get("summary"), c.output.get("text"))
        for c in sorted(github.check_runs.values(), key=lambda c: c.id)
    ]
    return checks, [c.body for c in github.comments_on(REPO, 7)]


@pytest.mark.parametrize(
    ("order", "check_runs", "writes"),
    [([1, 2], 1, 2), ([2, 1], 1, 2), ([2, 1, 2, 1], 1, 2)],
    ids=["in order", "reversed", "redelivered"],
)
def test_the_check_run_github_shows_ends_the_same_whatever_the_order(
    store: Store, github: FakeGitHub, order: list[int], check_runs: int, writes: int
) -> None:
    checks, comments = final_state(store, github, order)
    conclusion, _, summary, _ = checks[-1]  # the newest: the one GitHub shows and branch protection reads
    assert conclusion == "success" and str(summary).startswith("Success: the only failure")
    # attempt 2 had run before any delivery was processed: attempt 1, superseded, writes no check run of its
    # own, in any order (its evidence is in attempt 2's), and one comment is written, once
    assert len(checks) == check_runs
    assert len(comments) == 1 and "**flaky**" in comments[0]
    sent = [r.route for r in github.requests if r.method in ("POST", "PATCH") and r.route != "token"]
    assert len(sent) == writes, sent  # a redelivery writes nothing GitHub holds already
    assert stored(store) == [(1, "junit"), (2, "junit")]  # nothing stored twice


def test_a_failed_test_sharing_its_name_is_named_and_fails_the_check_but_gets_no_verdict(
    store: Store, github: FakeGitHub
) -> None:
    """mocha writes no retries: of two tests named alike, one passed and one failed. Neither is called
    flaky; the check run names the collision, and the failure still fails the gate."""
    mocha = (FIXTURES / "collision" / "mocha-shared-title.xml").read_bytes()
    run = github.add_run(REPO, pull_requests=[7])
    github.add_job(run, attempt=1, conclusion="failure")
    github.add_artifact(run, "junit", zip_of({"mocha.xml": mocha}), attempt=1)
    with github.port() as gh:
        report = process_workflow_run(store, gh, installation_id=77, repo=REPO, repo_id=1, run_id=run.id, attempt=1)
    assert report is not None and report.findings == ()
    (check,) = github.check_runs.values()
    assert check.conclusion == "failure"
    summary = check.output["summary"].replace("\\", "")  # Markdown escapes
    assert summary.startswith("Failure: `applies the coupon::checkout applies the coupon` failed, and its name")
    assert "2 testcases named 'applies the coupon::checkout applies the coupon' in suite 'checkout'" in summary
    assert "flaky" not in check.output["title"] + summary
    (comment,) = github.comments_on(REPO, 7)
    assert "1 not judged (a name shared by several tests)" in comment.body
