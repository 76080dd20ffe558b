"""Every word a failure can be called on a pull request, and every gate conclusion, through the App: a
default branch with a history, then one pull-request commit per word. The check run and the comment of each
are golden files (tests/golden/words/); regenerate them with FLAKETALLY_UPDATE_GOLDEN=1 and read the diff.

The default branch ``main`` ran four commits (pushes). On it ``test_broken`` failed every time,
``test_regress`` passed twice and then failed twice, and every other test passed. ``test_known`` both
passed and failed on one commit of another branch the day before (known flaky). The pull request's base is
main's last commit.
"""

from __future__ import annotations

import hashlib

import pytest

from bot.core.baseline import Word
from bot.core.findings import NOTHING_NEW, CommitReport
from bot.pipeline.attempt import process_workflow_run
from bot.store import Store
from tests.github_fake import FakeGitHub, FakeRun, zip_of
from tests.test_end_to_end import check_text, golden
from tests.test_end_to_end import junit as pytest_report

REPO = "acme/widgets"
PR = 7
TESTS = ("test_broken", "test_regress", "test_new", "test_known", "test_flaky", "test_failing", "test_fresh")
MAIN = {
    "test_broken": "FFFF",
    "test_regress": "PPFF",
}


def sha(label: str) -> str:
    return hashlib.sha1(label.encode()).hexdigest()


def push(store: Store, github: FakeGitHub, label: str, attempts: list[dict[str, str]], branch: str = "main") -> FakeRun:
    run = github.add_run(REPO, head_sha=sha(label), head_branch=branch, event="push", attempts=len(attempts))
    for n, outcomes in enumerate(attempts, 1):
        github.add_job(run, attempt=n, name="test (3.11)")
        github.add_artifact(run, "junit-results", zip_of({"junit.xml": pytest_report(**outcomes)}), attempt=n)
    process(store, github, run)
    github.now += 3600
    return run


def process(store: Store, github: FakeGitHub, run: FakeRun) -> CommitReport:
    with github.port() as gh:
        report = process_workflow_run(
            store,
            gh,
            installation_id=77,
            repo=REPO,
            repo_id=1,
            run_id=run.id,
            attempt=len(run.attempts),
            default_branch="main",
        )
    assert report is not None
    return report


def history(store: Store, github: FakeGitHub) -> None:
    for i in range(4):
        outcomes = {t: ("fail" if MAIN.get(t, "PPPP")[i] == "F" else "pass") for t in TESTS if t != "test_fresh"}
        push(store, github, f"main {i}", [outcomes])
    push(store, github, "other branch", [{"test_known": "fail"}, {"test_known": "pass"}], branch="spike")


# the pull-request commit of each word: the attempts, each the tests that fail in it
SCENARIOS: dict[Word, list[set[str]]] = {
    Word.FLAKY: [{"test_flaky"}, set()],
    Word.FAILING: [{"test_failing"}, {"test_failing"}],
    Word.BROKEN: [{"test_broken"}],
    Word.REGRESSION: [{"test_regress"}],
    Word.NEW_FAILURE: [{"test_new"}],
    Word.KNOWN_FLAKY: [{"test_known"}],
    Word.UNDETERMINED: [{"test_fresh"}],
}
CONCLUSION = {
    Word.FLAKY: "success",
    Word.FAILING: "failure",
    Word.BROKEN: "neutral",
    Word.REGRESSION: "neutral",
    Word.NEW_FAILURE: "failure",
    Word.KNOWN_FLAKY: "neutral",
    Word.UNDETERMINED: "failure",
}


def pull_request(github: FakeGitHub, word: Word) -> FakeRun:
    attempts = SCENARIOS[word]
    run = github.add_run(
        REPO, head_sha=sha(f"pr {word}"), pull_requests=[PR], attempts=len(attempts), base_sha=sha("main 3")
    )
    for n, failing in enumerate(attempts, 1):
        outcomes = {t: ("fail" if t in failing else "pass") for t in TESTS}
        github.add_job(run, attempt=n, name="test (3.11)", conclusion="failure" if failing else "success")
        github.add_artifact(run, "junit-results", zip_of({"junit.xml": pytest_report(**outcomes)}), attempt=n)
    return run


@pytest.mark.parametrize("word", list(SCENARIOS), ids=lambda w: w.value.replace(" ", "-"))
def test_each_word_and_its_gate(store: Store, github: FakeGitHub, word: Word) -> None:
    history(store, github)
    run = pull_request(github, word)
    report = process(store, github, run)
    assert [f.word for f in report.findings] == [word]
    (check,) = [c for c in github.check_runs.values() if c.head_sha == run.head_sha]
    assert check.conclusion == CONCLUSION[word]
    name = word.value.replace(" ", "-")
    golden(f"words/{name}.check.md", check_text(github, check.id))
    if word in NOTHING_NEW:  # nothing new for the author: the check run says it, no comment is started
        assert github.comments_on(REPO, PR) == []
        github.add_file(REPO, ".github/flaketally.yml", "comment: always\n")
        process(store, github, run)
    (comment,) = github.comments_on(REPO, PR)
    assert f"| **{word.value}** |" in comment.body
    golden(f"words/{name}.comment.md", comment.body)


@pytest.mark.parametrize(("setting", "conclusion"), [("failure", "failure"), ("success", "success")])
def test_the_gate_for_a_test_broken_on_the_default_branch_is_the_repositorys_choice(
    store: Store, github: FakeGitHub, setting: str, conclusion: str
) -> None:
    github.add_file(REPO, ".github/flaketally.yml", f"gate:\n  broken: {setting}\n")
    history(store, github)
    run = pull_request(github, Word.BROKEN)
    process(store, github, run)
    (check,) = [c for c in github.check_runs.values() if c.head_sha == run.head_sha]
    assert check.conclusion == conclusion
    shown = "`tests/payments/test_checkout.py::test_broken`"
    assert check.output["summary"].startswith(f"{conclusion.capitalize()}: {shown} fails on main too")


def test_fail_on_new_flake_fails_a_pull_request_that_makes_a_stable_test_flaky(
    store: Store, github: FakeGitHub
) -> None:
    """test_flaky passed on all of main's runs; with five of them it is stable there."""
    github.add_file(REPO, ".github/flaketally.yml", "gate:\n  fail_on_new_flake: true\n")
    history(store, github)
    push(store, github, "main 4", [{t: "pass" for t in TESTS if t != "test_fresh"}])
    run = pull_request(github, Word.FLAKY)
    process(store, github, run)
    (check,) = [c for c in github.check_runs.values() if c.head_sha == run.head_sha]
    assert check.conclusion == "failure"
    shown = "`tests/payments/test_checkout.py::test_flaky`"
    assert check.output["summary"].startswith(f"Failure: {shown} was stable on main and is flaky on")


def test_the_most_severe_conclusion_wins_and_says_why(store: Store, github: FakeGitHub) -> None:
    """A broken test (neutral) beside a new failure (failure): failure, for the new failure."""
    history(store, github)
    run = github.add_run(REPO, head_sha=sha("pr both"), pull_requests=[PR], base_sha=sha("main 3"))
    github.add_job(run, attempt=1, name="test (3.11)", conclusion="failure")
    outcomes = {t: ("fail" if t in ("test_broken", "test_new") else "pass") for t in TESTS}
    github.add_artifact(run, "junit-results", zip_of({"junit.xml": pytest_report(**outcomes)}), attempt=1)
    report = process(store, github, run)
    assert [f.word for f in report.findings] == [Word.NEW_FAILURE, Word.BROKEN]
    assert report.gate.conclusion.value == "failure"
    assert report.gate.reason.startswith("Failure: tests/payments/test_checkout.py::test_new failed on")
