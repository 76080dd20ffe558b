""" "No longer flaky" through the App, commit by commit: never while the history still says flaky, once when
enough clean runs rule the flakiness out.

A test fails and then passes on a rerun of one commit (proven flaky, known flaky for 7 days). Then two
commits a day on the same pull request, each run once:
- in one history the test keeps failing now and then, in single attempts (no second attempt, so never a
  same-code pair after the first commit): the 7-day memory runs dry, but it is never announced recovered;
- in the other it passes on every commit: once the proving pair has left the 30-day window and the clean
  runs bound its flip rate below 0.10, it is announced, once. The comment and check run of that commit are
  golden files (tests/golden/recovery.*.md).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

from bot.pipeline.attempt import process_workflow_run
from bot.store import Store
from tests.github_fake import FakeGitHub, zip_of
from tests.test_end_to_end import check_text, golden
from tests.test_end_to_end import junit as pytest_report

REPO = "acme/widgets"
PR = 12
HALF_DAY = 12 * 3600
COMMITS = 66  # 33 days: the proving pair leaves the 30-day window with about 60 clean runs inside it
SAID = "is no longer flaky"


def sha(n: int) -> str:
    return hashlib.sha1(f"commit {n}".encode()).hexdigest()


def run_commit(github: FakeGitHub, store: Store, n: int, outcomes: list[str]) -> tuple[str, int]:
    """One commit on the pull request, one attempt per outcome; returns the comment body and the check run
    of its last attempt as Flaketally left them."""
    run = github.add_run(REPO, head_sha=sha(n), pull_requests=[PR], attempts=len(outcomes), run_number=100 + n)
    for attempt, outcome in enumerate(outcomes, 1):
        github.add_job(run, attempt=attempt, name="test (3.11)", conclusion="failure" if outcome == "fail" else None)
        report = zip_of({"junit.xml": pytest_report(test_apply_coupon=outcome, test_total="pass")})
        github.add_artifact(run, "junit", report, attempt=attempt)
    with github.port() as gh:
        process_workflow_run(store, gh, installation_id=77, repo=REPO, repo_id=1, run_id=run.id, attempt=len(outcomes))
    github.now += HALF_DAY
    (comment,) = github.comments_on(REPO, PR)
    check = max(c.id for c in github.check_runs.values() if c.head_sha == sha(n))
    return comment.body, check


def history(github: FakeGitHub, store: Store, outcome: Callable[[int], str]) -> list[tuple[int, str, int]]:
    """The proving commit, then COMMITS single-attempt commits; (commit, comment, check run) of each commit
    whose comment or check run said the test is no longer flaky."""
    body, _ = run_commit(github, store, 0, ["fail", "pass"])
    assert "**flaky**" in body
    said = []
    for n in range(1, COMMITS + 1):
        body, check = run_commit(github, store, n, [outcome(n)])
        if SAID in body or SAID in check_text(github, check):
            said.append((n, body, check))
    return said


def test_a_flaky_test_failing_in_single_attempts_is_never_announced_recovered(store: Store, github: FakeGitHub) -> None:
    said = history(github, store, lambda n: "fail" if n % 4 == 0 else "pass")
    assert said == []
    body, _ = run_commit(github, store, COMMITS + 1, ["fail"])
    assert "**undetermined**" in body or "undetermined (known flaky)" in body  # judged, not forgotten


def test_a_flaky_test_that_runs_clean_long_enough_is_announced_once(store: Store, github: FakeGitHub) -> None:
    said = history(github, store, lambda n: "pass")
    assert len(said) == 1, [n for n, _, _ in said]
    n, body, check = said[0]
    assert 60 <= n <= COMMITS  # not before the pair has left the 30-day window (commit 60, day 30)
    golden("recovery.comment.md", body)
    golden("recovery.check.md", check_text(github, check))
