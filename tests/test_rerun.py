"""Automatic reruns (``rerun: failed-jobs``): each rule, once per run however the delivery comes, and the
rerun's attempt settling the verdicts (golden files tests/golden/rerun.*.md)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.core.baseline import Word
from bot.core.rerun import RerunFacts, decide_rerun
from bot.pipeline.attempt import PublishLock, process_workflow_run
from bot.store import Store
from tests.github_fake import EPOCH, FakeGitHub, FakeRun, zip_of
from tests.support.concurrent import together
from tests.test_end_to_end import check_text, golden
from tests.test_end_to_end import junit as pytest_report

REPO = "acme/widgets"
CONFIG = ".github/flaketally.yml"
NOW = datetime.fromtimestamp(EPOCH, UTC) + timedelta(hours=1)  # an hour after the fake's runs


# --- the rules -------------------------------------------------------------------------------------


def facts(**changes: object) -> RerunFacts:
    base: dict[str, object] = {
        "enabled": True,
        "attempt": 1,
        "latest_attempt": 1,
        "conclusion": "failure",
        "started_at": NOW - timedelta(hours=1),
        "now": NOW,
        "failed": [("t::a", Word.UNDETERMINED), ("t::b", Word.UNDETERMINED)],
        "jobs_without_report": [],
        "max_failed_tests": 3,
    }
    base.update(changes)
    return RerunFacts(**base)  # type: ignore[arg-type]


def test_an_eligible_run_is_rerun_and_says_why() -> None:
    decision = decide_rerun(facts())
    assert decision is not None and decision.rerun
    assert decision.line == "rerun requested: 2 failed tests, both undetermined"
    one = decide_rerun(facts(failed=[("t::a", Word.NEW_FAILURE)]))
    assert one is not None and one.line == "rerun requested: 1 failed test (new failure)"


@pytest.mark.parametrize(
    ("changes", "line"),
    [
        (
            {"failed": [(f"t::{i}", Word.UNDETERMINED) for i in range(7)]},
            "no rerun: 7 tests failed, over the limit of 3",
        ),
        (
            {"jobs_without_report": ["test (windows)"]},
            "no rerun: job `test (windows)` failed without a report (a crash is a real failure, not a flake)",
        ),
        ({"conclusion": "cancelled"}, "no rerun: the run was cancelled"),
        ({"conclusion": "timed_out"}, "no rerun: the run timed out"),
        ({"started_at": NOW - timedelta(days=31)}, "no rerun: the run is older than GitHub's 30-day limit for reruns"),
        ({"latest_attempt": 2}, "no rerun: attempt 2 has run already"),
        (
            {"failed": [("t::a", Word.BROKEN), ("t::b", Word.REGRESSION)]},
            "no rerun: no test failed that a rerun could settle (2 tests broken on the default branch not counted)",
        ),
    ],
    ids=["over the limit", "job without report", "cancelled", "timed out", "too old", "rerun already", "broken"],
)
def test_each_rule_that_stops_a_rerun_is_said(changes: dict[str, object], line: str) -> None:
    decision = decide_rerun(facts(**changes))
    assert decision is not None and not decision.rerun
    assert decision.line == line


def test_broken_tests_do_not_count_toward_the_limit() -> None:
    failed = [("t::a", Word.UNDETERMINED), *((f"t::b{i}", Word.BROKEN) for i in range(5))]
    decision = decide_rerun(facts(failed=failed))
    assert decision is not None and decision.rerun
    assert (
        decision.line
        == "rerun requested: 1 failed test (undetermined) (5 tests broken on the default branch not counted)"
    )


@pytest.mark.parametrize(
    "changes",
    [{"enabled": False}, {"attempt": 2, "latest_attempt": 2}, {"conclusion": "success"}],
    ids=["not opted in", "not the first attempt", "nothing failed"],
)
def test_no_decision_is_taken_when_there_is_nothing_to_decide(changes: dict[str, object]) -> None:
    assert decide_rerun(facts(**changes)) is None


# --- through the App -------------------------------------------------------------------------------


def failed_run(github: FakeGitHub, *, report: bool = True, conclusion: str = "failure") -> FakeRun:
    run = github.add_run(REPO, pull_requests=[7], conclusion=conclusion)
    github.add_job(run, attempt=1, name="test (3.11)", conclusion="failure")
    if report:
        content = pytest_report(test_apply_coupon="fail", test_total="pass")
        github.add_artifact(run, "junit-results", zip_of({"junit.xml": content}), attempt=1)
    return run


def process(store: Store, github: FakeGitHub, run: FakeRun, attempt: int = 1) -> None:
    with github.port() as gh:
        process_workflow_run(
            store, gh, installation_id=77, repo=REPO, repo_id=1, run_id=run.id, attempt=attempt, now=NOW
        )


def summary_of(github: FakeGitHub, run: FakeRun, attempt: int) -> str:
    (check,) = [c for c in github.check_runs.values() if c.external_id == f"{run.id}:{attempt}"]
    return str(check.output["summary"]).replace("\\", "")


def test_not_opted_in_no_rerun_and_no_line(store: Store, github: FakeGitHub) -> None:
    run = failed_run(github)
    process(store, github, run)
    assert github.reruns == [] and "Automatic rerun" not in summary_of(github, run, 1)


def test_a_failed_job_without_a_report_is_not_rerun(store: Store, github: FakeGitHub) -> None:
    github.add_file(REPO, CONFIG, "rerun: failed-jobs\n")
    run = failed_run(github, report=False)
    process(store, github, run)
    assert github.reruns == []
    assert "Automatic rerun: no rerun: job `test (3.11)` failed without a report" in summary_of(github, run, 1)


def test_a_cancelled_run_is_not_rerun(store: Store, github: FakeGitHub) -> None:
    github.add_file(REPO, CONFIG, "rerun: failed-jobs\n")
    run = failed_run(github, conclusion="cancelled")
    process(store, github, run)
    assert github.reruns == [] and "no rerun: the run was cancelled" in summary_of(github, run, 1)


def test_one_rerun_request_however_often_the_delivery_comes_and_however_many_workers(
    store: Store, github: FakeGitHub, redis_url: str
) -> None:
    github.add_file(REPO, CONFIG, "rerun: failed-jobs\n")
    run = failed_run(github)

    def deliver(own: Store, lock: PublishLock) -> None:
        with github.port() as gh:
            process_workflow_run(
                own, gh, installation_id=77, repo=REPO, repo_id=1, run_id=run.id, attempt=1, now=NOW, publish_lock=lock
            )

    together(store.url, redis_url, [deliver, deliver])
    process(store, github, run)  # and the delivery once more
    assert github.reruns == [(REPO, run.id)]
    # attempt 1 is superseded by the rerun it asked for: that attempt's check run will answer, and nothing
    # else is written meanwhile (GitHub's write budget)
    sent = [r.route for r in github.requests if r.method in ("POST", "PATCH") and r.route != "token"]
    assert sent == ["rerun_failed_jobs"]


def test_the_automatic_rerun_settles_the_verdicts(store: Store, github: FakeGitHub) -> None:
    github.add_file(REPO, CONFIG, "rerun: failed-jobs\n")
    run = failed_run(github)
    process(store, github, run)
    assert github.reruns == [(REPO, run.id)]
    # GitHub runs attempt 2 of the failed job: the test passes
    github.add_attempt(run, conclusion="success")
    github.add_job(run, attempt=2, name="test (3.11)")
    content = pytest_report(test_apply_coupon="pass", test_total="pass")
    github.add_artifact(run, "junit-results", zip_of({"junit.xml": content}), attempt=2)
    process(store, github, run, attempt=2)
    assert github.reruns == [(REPO, run.id)]  # attempt 2 asks nothing more
    (comment,) = github.comments_on(REPO, 7)
    assert "**flaky**" in comment.body and "passed on the automatic rerun" in comment.body
    checks = sorted(github.check_runs.values(), key=lambda c: c.id)
    assert [(c.external_id, c.conclusion) for c in checks] == [(f"{run.id}:2", "success")]  # attempt 2 answers
    assert "Automatic rerun: rerun requested: 1 failed test (undetermined)" in summary_of(github, run, 2)
    golden("rerun.comment.md", comment.body)
    golden("rerun.check.md", check_text(github, checks[-1].id))


def test_a_reruns_measured_minutes_are_shared_among_the_flaky_tests_it_proved() -> None:
    from bot.core.cost import Rates, RerunTiming, measured_share

    timings = {(9, 2): RerunTiming(6.0, 14.0), (9, 3): RerunTiming(3.0, None)}
    sharers = {(9, 2): 2, (9, 3): 1}
    both = measured_share([(9, 2), (9, 3)], timings, sharers)
    assert both is not None and (both.rerun_minutes, both.wait_minutes, both.reruns) == (6.0, 14.0, 2)
    assert round(both.compute(Rates()), 3) == 0.048
    assert measured_share([(9, 4)], timings, sharers) is None  # no timing known: nothing measured


def test_reruns_github_gave_no_job_times_for_are_not_said_to_have_taken_none() -> None:
    """A replay (or jobs without times) measures the wait but not the jobs: no "0.0 minutes from the jobs API"."""
    from bot.core.cost import Rates, RerunTiming, measured_share

    untimed = measured_share([(9, 2)], {(9, 2): RerunTiming(None, 50.0)}, {(9, 2): 1})
    assert untimed is not None and (untimed.rerun_minutes, untimed.wait_minutes) == (None, 50.0)
    assert untimed.compute(Rates()) == 0.0


def test_the_repositorys_limit_of_failed_tests_is_used(store: Store, github: FakeGitHub) -> None:
    github.add_file(REPO, CONFIG, "rerun: failed-jobs\nrerun_limits:\n  max_failed_tests: 1\n")
    run = github.add_run(REPO, pull_requests=[7])
    github.add_job(run, attempt=1, name="test (3.11)", conclusion="failure")
    content = pytest_report(test_apply_coupon="fail", test_total="fail")
    github.add_artifact(run, "junit-results", zip_of({"junit.xml": content}), attempt=1)
    process(store, github, run)
    assert github.reruns == []
    assert "Automatic rerun: no rerun: 2 tests failed, over the limit of 1" in summary_of(github, run, 1)
