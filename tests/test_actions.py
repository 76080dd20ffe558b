"""The check run's buttons, end to end (the receiver, a worker on real Redis, the store, the fake GitHub):
"Re-run failed jobs" and "Quarantine" come back as ``check_run`` ``requested_action`` and are done once,
for someone who may write to the repository, and the check run says who asked and what happened."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from bot.config.load import Source
from bot.config.quarantine import parse_quarantine
from bot.config.schema import QUARANTINE_PATH
from bot.pipeline.quarantine import ADD_BRANCH
from bot.store import Store
from tests.github_fake import FakeGitHub, FakeRun, zip_of
from tests.test_end_to_end import PR, App, app, flaketally_checks, junit, pull_request_run, rerun

__all__ = ["app"]  # the fixture

REPO = "acme/widgets"
# the keys of the official example (../shared/github/webhooks/check_run.requested_action.payload.json) that
# the receiver reads; tests/test_web.py checks the example itself routes to the same job
EXAMPLE: dict[str, Any] = {
    "action": "requested_action",
    "check_run": {"id": 0, "head_sha": "", "external_id": "", "name": "Flaketally", "status": "completed"},
    "requested_action": {"identifier": ""},
    "repository": {"id": 0, "full_name": "", "default_branch": "main"},
    "sender": {"login": "", "id": 1, "type": "User"},
}


def click(app: App, github: FakeGitHub, check_id: int, identifier: str, sender: str = "octocat") -> int:
    payload = copy.deepcopy(EXAMPLE)
    check = github.check_runs[check_id]
    payload["installation"] = {"id": github.installation_id}
    payload["repository"].update({"id": 1296269, "full_name": REPO, "default_branch": "main"})
    payload["check_run"].update({"id": check_id, "head_sha": check.head_sha, "external_id": check.external_id})
    payload["requested_action"] = {"identifier": identifier}
    payload["sender"]["login"] = sender
    status = app.send("check_run", payload).status_code
    app.work()
    return status


def buttons(github: FakeGitHub, check_id: int) -> list[str]:
    return [a["identifier"] for a in github.check_runs[check_id].actions]


def flaky_run(app: App, github: FakeGitHub, sha: str, test: str) -> FakeRun:
    run = github.add_run(REPO, head_sha=sha, pull_requests=[PR], conclusion="failure")
    github.add_job(run, attempt=1, name="test (3.11)", conclusion="failure")
    github.add_artifact(run, "junit-results", zip_of({"reports/junit.xml": junit(**{test: "fail"})}), attempt=1)
    app.deliver(run, 1)
    app.work()
    rerun(github, run, junit(**{test: "pass"}))
    app.deliver(run, 2)
    app.work()
    return run


def test_rerun_clicked_twice_requests_one_rerun_and_the_check_run_says_who(app: App, github: FakeGitHub) -> None:
    run = pull_request_run(github, junit(test_apply_coupon="fail"))
    app.deliver(run, 1)
    app.work()
    (check,) = flaketally_checks(github)
    assert buttons(github, check) == ["rerun"]  # nothing flaky yet: no quarantine button
    assert click(app, github, check, "rerun") == 202
    assert click(app, github, check, "rerun") == 202  # delivered again, or clicked again
    assert github.reruns == [(REPO, run.id)]
    summary = github.check_runs[check].output["summary"]
    assert "\\@octocat asked to re-run the failed jobs of this attempt: requested" in summary  # no mention


def test_quarantine_opens_one_pull_request_and_a_later_click_updates_it(app: App, github: FakeGitHub) -> None:
    flaky_run(app, github, "a" * 40, "test_apply_coupon")
    first = flaketally_checks(github)[-1]
    assert github.check_runs[first].conclusion == "success"
    assert buttons(github, first) == ["quarantine"]  # green: no rerun button
    click(app, github, first, "quarantine")
    click(app, github, first, "quarantine")  # the same click delivered twice
    (pull,) = github.pulls_opened(REPO)
    assert (pull.head, pull.base) == (ADD_BRANCH, "main")
    written = github.file_on(REPO, ADD_BRANCH, QUARANTINE_PATH)
    assert written is not None
    quarantine, problems = parse_quarantine(Source("pr", written))
    assert problems == []
    (entry,) = quarantine.entries
    assert entry.test == "tests/payments/test_checkout.py::test_apply_coupon"
    assert entry.context == ".github/workflows/ci.yml · test (3.11) · ubuntu-latest"
    assert entry.reason.startswith("passed and failed on the same commit on 1 of 1 commit")
    summary = github.check_runs[first].output["summary"]
    assert f"opened pull request #{pull.number}" in summary

    flaky_run(app, github, "b" * 40, "test_total_with_tax")
    second = flaketally_checks(github)[-1]
    click(app, github, second, "quarantine", sender="hubot")
    assert [p.number for p in github.pulls_opened(REPO)] == [pull.number]  # the same pull request, updated
    written = github.file_on(REPO, ADD_BRANCH, QUARANTINE_PATH)
    assert written is not None
    names = [e.test.rsplit("::", 1)[1] for e in parse_quarantine(Source("pr", written))[0].entries]
    assert names == ["test_apply_coupon", "test_total_with_tax"]
    assert "hubot" in github.pulls_opened(REPO)[0].body


def test_someone_who_may_not_write_is_refused(app: App, github: FakeGitHub) -> None:
    run = pull_request_run(github, junit(test_apply_coupon="fail"))
    app.deliver(run, 1)
    app.work()
    (check,) = flaketally_checks(github)
    github.permissions[(REPO, "visitor")] = "read"
    click(app, github, check, "rerun", sender="visitor")
    assert github.reruns == []
    assert "it needs write access to acme/widgets (read)" in github.check_runs[check].output["summary"]
    click(app, github, check, "rerun", sender="octocat")  # the refusal does not stand in a writer's way
    assert github.reruns == [(REPO, run.id)]


def test_a_button_the_installation_cannot_use_is_hidden_and_the_permission_named(app: App, github: FakeGitHub) -> None:
    permissions = {"actions": "read", "checks": "write", "contents": "read", "pull_requests": "write"}
    app.send(
        "installation",
        {
            "action": "new_permissions_accepted",
            "installation": {"id": github.installation_id, "account": {"login": "acme"}, "permissions": permissions},
            "sender": {"login": "octocat"},
        },
    )
    app.work()
    run = pull_request_run(github, junit(test_apply_coupon="fail"))
    app.deliver(run, 1)
    app.work()
    (check,) = flaketally_checks(github)
    assert buttons(github, check) == []
    summary = github.check_runs[check].output["summary"]
    assert 'No "Re-run failed jobs" button: it needs `actions: write`' in summary.replace("\\", "")


def test_the_manifest_grants_what_every_button_needs() -> None:
    from pathlib import Path

    import yaml

    from bot.github.bodies import NEEDS

    granted = yaml.safe_load((Path(__file__).parent.parent / "app.yml").read_text())["default_permissions"]
    assert {p for needs in NEEDS.values() for p in needs} <= {p for p, level in granted.items() if level == "write"}
    assert "check_run" in yaml.safe_load((Path(__file__).parent.parent / "app.yml").read_text())["default_events"]


def test_a_click_github_could_not_take_is_not_lost(store: Store, github: FakeGitHub) -> None:
    """GitHub unavailable while acting: the job fails (rq tries it again) and the click is not marked done."""
    from bot.github.errors import GitHubUnavailable
    from bot.pipeline.attempt import act, process_workflow_run

    run = pull_request_run(github, junit(test_apply_coupon="fail"))
    kwargs: dict[str, Any] = {"installation_id": 77, "repo": REPO, "repo_id": 1}
    with github.port() as gh:
        process_workflow_run(store, gh, run_id=run.id, attempt=1, **kwargs)
    (check,) = flaketally_checks(github)
    github.fail_next("rerun_failed_jobs", times=20, status=503)
    clicked: dict[str, Any] = {
        "head_sha": run.head_sha,
        "check_run_id": check,
        "identifier": "rerun",
        "sender": "octocat",
    }
    with github.port() as gh, pytest.raises(GitHubUnavailable):
        act(store, gh, **kwargs, **clicked)
    github.clear_faults()
    with github.port() as gh:
        line = act(store, gh, **kwargs, **clicked)
    assert line == "@octocat asked to re-run the failed jobs of this attempt: requested"
    assert github.reruns == [(REPO, run.id)]
