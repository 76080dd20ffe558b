"""The App end to end: a signed delivery → the real receiver → real Redis → a real rq worker → the store
(SQLite and PostgreSQL) → check run and PR comment on the fake GitHub (HTTP faked with respx).

Golden files in tests/golden/ hold every body sent; regenerate them with FLAKETALLY_UPDATE_GOLDEN=1
and read the diff before committing it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import hmac
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from rq import Queue, SimpleWorker

from bot.github.bodies import MARKER
from bot.github.errors import GitHubUnavailable
from bot.settings import Settings
from bot.store import Store
from bot.web.app import create_app
from tests.github_fake import SHA, FakeCheckRun, FakeGitHub, FakeRun, zip_of
from workers import jobs

SECRET = "It's a Secret to Everybody"
GOLDEN = Path(__file__).parent / "golden"
HOSTILE = Path(__file__).parent / "fixtures" / "hostile" / "injection-names.xml"
PR = 7


def junit(**outcomes: str) -> bytes:
    """A pytest-style report: name → "pass" | "fail"."""
    cases = []
    for name, outcome in outcomes.items():
        body = '<failure message="AssertionError: discount not applied">expected 90, got 100</failure>'
        cases.append(
            f'<testcase classname="tests.payments.test_checkout" name="{name}" file="tests/payments/test_checkout.py"'
            f' line="41" time="0.8">{body if outcome == "fail" else ""}</testcase>'
        )
    return f'<testsuite name="pytest" tests="{len(cases)}">{"".join(cases)}</testsuite>'.encode()


class App:
    """The receiver and one worker, wired to real Redis, a real store and the fake GitHub."""

    def __init__(self, github: FakeGitHub, redis_url: str, store_url: str) -> None:
        self.github = github
        self.settings = Settings(
            app_id=github.app_id,
            private_key=github.private_key,
            webhook_secret=SECRET,
            api_url=github.api_url,
            redis_url=redis_url,
            database_url=store_url,
        )
        self.redis = redis.Redis.from_url(redis_url)
        self.store = Store.open(store_url)
        self.web = create_app(self.settings, redis=self.redis)
        jobs.configure(
            self.settings,
            store=self.store,
            connection=self.redis,
            port_factory=lambda _settings, connection, installation, writes: github.port(
                installation_id=installation, on_response=jobs.response_metrics(connection), writes=writes
            ),
        )
        self.deliveries = 0

    def deliver(self, run: FakeRun, attempt: int, action: str = "completed") -> Any:
        return self.send(
            "workflow_run",
            {
                "action": action,
                "installation": {"id": self.github.installation_id},
                "repository": {"id": 1296269, "full_name": run.repo},
                "workflow_run": {
                    "id": run.id,
                    "run_attempt": attempt,
                    "head_sha": run.head_sha,
                    "pull_requests": [{"number": n} for n in run.pull_requests],
                },
            },
        )

    def send(self, event: str, payload: dict[str, Any]) -> httpx.Response:
        self.deliveries += 1
        body = json.dumps(payload).encode()
        return self.post(
            body,
            {
                "X-GitHub-Event": event,
                "X-GitHub-Delivery": f"delivery-{self.deliveries}",
                "X-Hub-Signature-256": "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest(),
                "Content-Type": "application/json",
            },
        )

    def post(self, body: bytes, headers: dict[str, str]) -> httpx.Response:
        async def send() -> httpx.Response:
            transport = httpx.ASGITransport(app=self.web)
            async with httpx.AsyncClient(transport=transport, base_url="http://flaketally.test") as client:
                return await client.post("/webhook", content=body, headers=headers)

        return asyncio.run(send())

    def work(self) -> None:
        queue = Queue(self.settings.queue_name, connection=self.redis)
        SimpleWorker([queue], connection=self.redis).work(burst=True)
        failed = queue.failed_job_registry
        assert failed.count == 0, [queue.fetch_job(j).exc_info for j in failed.get_job_ids()]  # type: ignore[union-attr]

    def close(self) -> None:
        self.store.close()
        self.redis.close()


@pytest.fixture
def app(github: FakeGitHub, redis_url: str, store_url: str) -> Iterator[App]:
    made = App(github, redis_url, store_url)
    yield made
    made.close()


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("FLAKETALLY_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} is missing: run with FLAKETALLY_UPDATE_GOLDEN=1 to write it"
    assert text == path.read_text(), f"{name} differs from its golden file"


def check_text(github: FakeGitHub, check_id: int) -> str:
    check = github.check_runs[check_id]
    out = check.output or {}
    parts = [
        f"conclusion: {check.conclusion}",
        f"title: {out.get('title')}",
        "",
        "## summary",
        out.get("summary", ""),
        "",
        "## text",
        out.get("text") or "",
        "",
        "## annotations",
    ]
    parts += [json.dumps(a, sort_keys=True, ensure_ascii=False) for a in check.annotations]
    return "\n".join(parts) + "\n"


def flaketally_checks(github: FakeGitHub) -> list[int]:
    return sorted(c.id for c in github.check_runs.values() if c.name == "Flaketally")


def pull_request_run(github: FakeGitHub, first: bytes) -> FakeRun:
    run = github.add_run("acme/widgets", head_sha=SHA, pull_requests=[PR], conclusion="failure")
    github.add_job(run, attempt=1, name="test (3.11)", conclusion="failure")
    github.add_artifact(run, "junit-results", zip_of({"reports/junit.xml": first}), attempt=1)
    return run


def rerun(github: FakeGitHub, run: FakeRun, second: bytes) -> None:
    github.add_attempt(run, conclusion="success")
    github.add_job(run, attempt=2, name="test (3.11)", conclusion="success")
    github.add_artifact(run, "junit-results", zip_of({"reports/junit.xml": second}), attempt=2)


def test_a_failure_that_passes_on_the_rerun_is_flaky_in_the_same_comment(app: App, github: FakeGitHub) -> None:
    run = pull_request_run(github, junit(test_apply_coupon="fail", test_total_with_tax="pass"))
    assert app.deliver(run, 1).status_code == 202
    app.work()

    (first_check,) = flaketally_checks(github)
    assert github.check_runs[first_check].conclusion == "failure"
    (comment,) = github.comments_on("acme/widgets", PR)
    assert "**undetermined**" in comment.body
    assert "test_apply_coupon" in comment.body
    golden("attempt1-undetermined.comment.md", comment.body)
    golden("attempt1-undetermined.check.md", check_text(github, first_check))

    rerun(github, run, junit(test_apply_coupon="pass", test_total_with_tax="pass"))
    assert app.deliver(run, 2).status_code == 202
    app.work()

    (edited,) = github.comments_on("acme/widgets", PR)  # the same comment, edited, never a second one
    assert edited.id == comment.id
    assert "**flaky**" in edited.body
    linked = f"[#163](https://github.com/acme/widgets/actions/runs/{run.id})"  # the run, as people know it
    assert f"failed on attempt 1 of {linked}" in edited.body and f"passed on attempt 2 of {linked}" in edited.body
    assert "USD so far" in edited.body
    checks = flaketally_checks(github)
    assert github.check_runs[checks[-1]].conclusion == "success"
    summary = github.check_runs[checks[-1]].output["summary"]
    assert summary.startswith(
        "Success: the only failure, `tests/payments/test_checkout.py::test_apply_coupon`, passed on a rerun of the "
        "same commit."
    )
    golden("attempt2-flaky.comment.md", edited.body)
    golden("attempt2-flaky.check.md", check_text(github, checks[-1]))
    assert len(github.calls("create_comment")) == 1


def test_a_failure_that_reproduces_on_the_rerun_is_failing(app: App, github: FakeGitHub) -> None:
    run = pull_request_run(github, junit(test_apply_coupon="fail"))
    app.deliver(run, 1)
    app.work()
    rerun(github, run, junit(test_apply_coupon="fail"))
    app.deliver(run, 2)
    app.work()

    check = github.check_runs[flaketally_checks(github)[-1]]
    assert check.conclusion == "failure"
    assert check.output["summary"].startswith(
        "Failure: `tests/payments/test_checkout.py::test_apply_coupon` failed on every attempt of 3484a3f."
    )
    (comment,) = github.comments_on("acme/widgets", PR)
    assert "**failing**" in comment.body
    assert "Look at your change" in comment.body
    golden("attempt2-failing.comment.md", comment.body)
    golden("attempt2-failing.check.md", check_text(github, flaketally_checks(github)[-1]))
    annotation = check.annotations[0]
    assert (annotation["path"], annotation["start_line"], annotation["annotation_level"]) == (
        "tests/payments/test_checkout.py",
        42,
        "failure",
    )


def test_reprocessing_an_attempt_changes_nothing(app: App, github: FakeGitHub) -> None:
    run = pull_request_run(github, junit(test_apply_coupon="fail"))
    app.deliver(run, 1)
    app.work()
    before = (app.store.counts(), len(github.calls("create_comment")), len(github.calls("create_check_run")))
    patches = len(github.calls("update_check_run"))
    jobs.process_workflow_run(github.installation_id, "acme/widgets", 1296269, run.id, 1)  # a second worker
    assert (app.store.counts(), len(github.calls("create_comment")), len(github.calls("create_check_run"))) == before
    assert len(github.calls("update_check_run")) == patches  # same verdicts: nothing sent again
    assert len(github.comments_on("acme/widgets", PR)) == 1
    assert len(github.check_runs[flaketally_checks(github)[0]].annotations) == 1


def test_a_redelivery_enqueues_nothing(app: App, github: FakeGitHub) -> None:
    run = pull_request_run(github, junit(test_apply_coupon="fail"))
    assert app.deliver(run, 1).status_code == 202
    app.deliveries -= 1  # the same X-GitHub-Delivery again
    again = app.deliver(run, 1)
    assert again.status_code == 200
    assert Queue(app.settings.queue_name, connection=app.redis).count == 1


def test_injected_names_render_inert(app: App, github: FakeGitHub) -> None:
    run = pull_request_run(github, HOSTILE.read_bytes())
    app.deliver(run, 1)
    app.work()
    (comment,) = github.comments_on("acme/widgets", PR)
    check = github.check_runs[flaketally_checks(github)[0]]
    texts = {"comment": comment.body, "summary": check.output["summary"], "text": check.output["text"]}
    for where, text in texts.items():
        assert text.count("<!-- flaketally:comment -->") == (1 if where == "comment" else 0), where
        assert len(text) <= 65_535
        # names and messages appear only inside code spans, fenced blocks and <code> elements of an HTML
        # block (all shown literally; in <code> HTML-escaped), or escaped
        live = re.sub(r"(?ms)^(`{3,})text\n.*?^\1$", "", text)
        live = re.sub(r"<code>[^<]*</code>", "", live)
        live = re.sub(r"(`+)(?:(?!\1).)+?\1", "", live)
        assert "evil" not in live and "xxxxxxxx" not in live, where
        for hostile in ("<img", "<script", "@octocat", "@org/team", "<!-- flaketally"):
            assert hostile not in live.replace(MARKER, ""), (where, hostile)
        for target in re.findall(r"\]\(([^)]*)\)", live):  # the only links are Flaketally's own, to GitHub
            assert target.startswith("https://github.com/acme/widgets/"), (where, target)
        for span in re.findall(r"(`+)((?:(?!\1).)+?)\1", text):
            assert "\n" not in span[1] and "|" not in span[1], (where, span)
    for annotation in check.annotations:
        assert len(annotation["title"]) <= 255
        assert "<!-- flaketally" not in annotation["message"]
    golden("injection.comment.md", comment.body)
    golden("injection.check.md", check_text(github, check.id))


def test_expired_artifacts_are_named_in_the_check_run(app: App, github: FakeGitHub) -> None:
    run = github.add_run("acme/widgets", head_sha=SHA, pull_requests=[PR])
    github.add_job(run, attempt=1, name="test (3.11)")
    github.add_artifact(run, "junit-old", zip_of({"junit.xml": junit(t="pass")}), attempt=1, expired=True)
    app.deliver(run, 1)
    app.work()
    check = github.check_runs[flaketally_checks(github)[0]]
    summary = check.output["summary"].replace("\\", "")  # Markdown escapes
    assert "Not judged: artifact 'junit-old' of attempt 1 has expired" in summary
    assert check.conclusion == "neutral"


def test_a_job_that_finally_fails_concludes_its_check_run_saying_so(app: App, github: FakeGitHub) -> None:
    run = pull_request_run(github, junit(test_apply_coupon="fail"))
    github.fail_next("list_artifacts", 100, status=502)
    with pytest.raises(GitHubUnavailable):  # outside rq: the last try; the delivery named the commit
        jobs.process_workflow_run(github.installation_id, "acme/widgets", 1296269, run.id, 1, head_sha=run.head_sha)
    (check_id,) = flaketally_checks(github)  # nothing was written before: the check run says why it stopped
    check = github.check_runs[check_id]
    assert (check.status, check.conclusion) == ("completed", "neutral")
    assert check.output["summary"].startswith("Neutral: Flaketally could not finish (GitHubUnavailable")


def test_a_deleted_installation_is_no_longer_processed(app: App, github: FakeGitHub) -> None:
    answer = app.send(
        "installation",
        {
            "action": "deleted",
            "installation": {"id": github.installation_id, "account": {"login": "acme"}},
            "repositories": [{"id": 1296269, "full_name": "acme/widgets"}],
        },
    )
    assert answer.status_code == 202
    app.work()
    run = pull_request_run(github, junit(test_apply_coupon="fail"))
    app.deliver(run, 1)
    app.work()
    assert flaketally_checks(github) == [] and github.comments_on("acme/widgets", PR) == []


def test_a_fork_pull_request_is_found_through_the_commit(app: App, github: FakeGitHub) -> None:
    run = github.add_run("acme/widgets", head_sha=SHA, pull_requests=[], head_repo="someone/widgets")
    github.add_job(run, attempt=1, name="test (3.11)", conclusion="failure")
    github.add_artifact(run, "junit-results", zip_of({"junit.xml": junit(test_apply_coupon="fail")}), attempt=1)
    github.add_pull("acme/widgets", SHA, 12)
    app.deliver(run, 1)
    app.work()
    (comment,) = github.comments_on("acme/widgets", 12)
    assert "test_apply_coupon" in comment.body


def test_the_comment_says_so_when_the_failures_are_gone(app: App, github: FakeGitHub) -> None:
    run = pull_request_run(github, junit(test_apply_coupon="fail"))
    app.deliver(run, 1)
    app.work()
    fixed = "ad1e5d0c5e9d7b1a2f4e6c8d0b2a4c6e8f0a2b4c"
    push = github.add_run("acme/widgets", head_sha=fixed, pull_requests=[PR], conclusion="success")
    github.add_job(push, attempt=1, name="test (3.11)")
    github.add_artifact(push, "junit-results", zip_of({"junit.xml": junit(test_apply_coupon="pass")}), attempt=1)
    app.deliver(push, 1)
    app.work()
    (comment,) = github.comments_on("acme/widgets", PR)
    assert "The failures reported here earlier are gone: no test failed on [ad1e5d0](" in comment.body
    golden("cleared.comment.md", comment.body)


def known_flaky_pull_request(app: App, github: FakeGitHub) -> FakeCheckRun:
    """test_apply_coupon flaked on main (failed, then passed on attempt 2), then fails once on a pull request."""
    earlier = "0bd1e5d0c5e9d7b1a2f4e6c8d0b2a4c6e8f0a2b4"
    main = github.add_run("acme/widgets", head_sha=earlier, event="push", conclusion="failure")
    github.add_job(main, attempt=1, name="test (3.11)", conclusion="failure")
    github.add_artifact(main, "junit-results", zip_of({"junit.xml": junit(test_apply_coupon="fail")}), attempt=1)
    rerun(github, main, junit(test_apply_coupon="pass"))
    app.deliver(main, 2)  # collects attempt 1 too
    app.work()
    github.now += 3 * 3600  # the pull request runs after both attempts on main
    run = pull_request_run(github, junit(test_apply_coupon="fail"))
    app.deliver(run, 1)
    app.work()
    return github.check_runs[flaketally_checks(github)[-1]]


def test_known_flaky_history_is_said_in_the_check_run_and_the_gate_is_neutral(app: App, github: FakeGitHub) -> None:
    check = known_flaky_pull_request(app, github)
    assert check.conclusion == "neutral"
    summary, text = check.output["summary"], check.output["text"]
    assert "failed 2 of 3 runs in the last 7 days and both passed and failed on the same code once" in text
    assert "| **known flaky** |" in summary  # the vocabulary's word, first in its row
    assert [a["annotation_level"] for a in check.annotations] == ["notice"]
    # nothing new for the author (the flake was said when it was found): no comment, the check run says it
    assert github.comments_on("acme/widgets", PR) == []


def test_with_comment_always_a_known_flaky_failure_is_commented_too(app: App, github: FakeGitHub) -> None:
    github.add_file("acme/widgets", ".github/flaketally.yml", "comment: always\n")
    known_flaky_pull_request(app, github)
    (comment,) = github.comments_on("acme/widgets", PR)
    assert "failed 2 of 3 runs in the last 7 days and both passed and failed on the same code once" in comment.body
    assert "| **known flaky** |" in comment.body
    golden("known-flaky.comment.md", comment.body)


def test_requested_writes_nothing_and_completed_creates_the_check_run_once_complete(
    app: App, github: FakeGitHub
) -> None:
    run = pull_request_run(github, junit(test_apply_coupon="pass"))
    answer = app.deliver(run, 1, action="requested")
    assert answer.status_code == 202 and answer.json() == {"ignored": "workflow_run.requested"}
    app.work()
    assert flaketally_checks(github) == []  # an in-progress check run nobody reads costs a write
    app.deliver(run, 1)
    app.work()
    (check_id,) = flaketally_checks(github)
    assert (github.check_runs[check_id].status, github.check_runs[check_id].conclusion) == ("completed", "success")
    assert len(github.calls("create_check_run")) == 1 and github.calls("update_check_run") == []
    assert github.comments_on("acme/widgets", PR) == []  # nothing to say: no comment


def test_rerequested_judges_again(app: App, github: FakeGitHub) -> None:
    run = pull_request_run(github, junit(test_apply_coupon="fail"))
    app.deliver(run, 1)
    app.work()
    (check_id,) = flaketally_checks(github)
    patches = len(github.calls("update_check_run"))
    answer = app.send(
        "check_run",
        {
            "action": "rerequested",
            "installation": {"id": github.installation_id},
            "repository": {"id": 1296269, "full_name": "acme/widgets"},
            "check_run": {"id": check_id, "head_sha": SHA},
        },
    )
    assert answer.status_code == 202
    app.work()
    assert flaketally_checks(github) == [check_id]
    assert len(github.calls("update_check_run")) == patches  # nothing new to say
    assert github.check_runs[check_id].conclusion == "failure"


def test_worker_jobs_show_in_metrics(app: App, github: FakeGitHub) -> None:
    run = pull_request_run(github, junit(test_apply_coupon="pass"))
    app.deliver(run, 1)
    app.work()

    async def scrape() -> str:
        transport = httpx.ASGITransport(app=app.web)
        async with httpx.AsyncClient(transport=transport, base_url="http://flaketally.test") as client:
            return (await client.get("/metrics")).text

    text = asyncio.run(scrape())
    assert 'flaketally_job_duration_seconds_count{function="process_workflow_run"} 1.0' in text
    assert 'flaketally_github_calls_total{status="200"}' in text
    assert 'flaketally_deliveries_total{event="workflow_run",outcome="enqueued"} 1.0' in text


def test_artifacts_are_attributed_to_their_attempt_by_name(app: App, github: FakeGitHub) -> None:
    run = github.add_run("acme/widgets", head_sha=SHA, pull_requests=[PR], attempts=2)
    github.add_job(run, attempt=1, name="test (3.11)", conclusion="failure")
    github.add_job(run, attempt=2, name="test (3.11)")
    # both uploaded late (created during attempt 2), but the names say which attempt wrote them
    github.add_artifact(run, "junit-attempt-1", zip_of({"j.xml": junit(test_apply_coupon="fail")}), attempt=2)
    github.add_artifact(run, "junit-attempt-2", zip_of({"j.xml": junit(test_apply_coupon="pass")}), attempt=2)
    github.add_artifact(run, "coverage", zip_of({"coverage.xml": b"<coverage/>"}), attempt=2)  # no JUnit: ignored
    app.deliver(run, 2)
    app.work()
    (comment,) = github.comments_on("acme/widgets", PR)
    assert "**flaky**" in comment.body
    assert "failed on attempt 1 of [#163](" in comment.body and "passed on attempt 2 of [#163](" in comment.body


def test_an_attempt_listing_no_jobs_keeps_the_context_of_the_run(app: App, github: FakeGitHub) -> None:
    run = pull_request_run(github, junit(test_apply_coupon="fail"))
    app.deliver(run, 1)
    app.work()
    github.add_attempt(run, conclusion="success")  # GitHub lists no job for this attempt
    github.add_artifact(run, "junit-results", zip_of({"reports/junit.xml": junit(test_apply_coupon="pass")}), attempt=2)
    app.deliver(run, 2)
    app.work()
    (comment,) = github.comments_on("acme/widgets", PR)
    assert "**flaky**" in comment.body  # one context: test (3.11), not the artifact's name


def test_artifact_name_patterns_choose_what_is_read(app: App, github: FakeGitHub) -> None:
    jobs.configure(
        dataclasses.replace(app.settings, artifact_patterns=("junit-*",)),
        store=app.store,
        connection=app.redis,
        port_factory=lambda _s, connection, installation, writes: github.port(
            installation_id=installation, writes=writes
        ),
    )
    run = pull_request_run(github, junit(test_apply_coupon="fail"))  # "junit-results": read
    e2e = github.add_artifact(run, "e2e-reports", zip_of({"e2e.xml": junit(test_checkout_e2e="fail")}), attempt=1)
    app.deliver(run, 1)
    app.work()
    (comment,) = github.comments_on("acme/widgets", PR)
    assert "test_apply_coupon" in comment.body and "test_checkout_e2e" not in comment.body
    downloads = [c.path for c in github.calls("download_artifact")]
    assert len(downloads) == 1 and f"/{e2e.id}/" not in downloads[0]  # never downloaded
