"""Each artifact is read as the attempt that uploaded it, however late its attempt is processed."""

from __future__ import annotations

import sqlalchemy as sa

from bot.pipeline.attempt import process_workflow_run
from bot.store import Store
from bot.store.schema import reports
from tests.github_fake import FakeGitHub, zip_of

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


def test_attempt_1_processed_after_attempt_2_ran_takes_only_its_own_artifact(store: Store, github: FakeGitHub) -> None:
    run = github.add_run(REPO, pull_requests=[7], attempts=2)
    github.add_job(run, attempt=1, conclusion="failure")
    github.add_job(run, attempt=2)
    # one artifact name for both attempts, as most workflows write it: only the time tells them apart
    github.add_artifact(run, "junit", junit("fail"), attempt=1)
    github.add_artifact(run, "junit", junit("pass"), attempt=2)
    with github.port() as gh:
        first = process_workflow_run(store, gh, installation_id=77, repo=REPO, repo_id=1, run_id=run.id, attempt=1)
        assert stored(store) == [(1, "junit")]  # attempt 2's upload is not read as attempt 1's
        assert first is not None and first.findings[0].verdict.value == "undetermined"
        second = process_workflow_run(store, gh, installation_id=77, repo=REPO, repo_id=1, run_id=run.id, attempt=2)
    assert stored(store) == [(1, "junit"), (2, "junit")]
    assert second is not None and [f.verdict.value for f in second.findings] == ["flaky"]
