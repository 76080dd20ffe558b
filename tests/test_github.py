"""The GitHub port against the suite's fake GitHub: every method, paging, batching, retries, refusals."""

from __future__ import annotations

import base64
import io
import json
import math
from typing import Any

import pytest
import redis

from bot.github.errors import ArtifactGone, ArtifactTooLarge, GitHubError, GitHubUnavailable
from bot.github.limits import MAX_ANNOTATION_BYTES, MAX_COMMENT, MAX_OUTPUT_TEXT
from bot.github.models import Job, RunSummary
from bot.github.parsing import (
    parse_artifact,
    parse_check_run,
    parse_comment,
    parse_file_text,
    parse_issue,
    parse_job,
    parse_pull,
    parse_run_attempt,
    parse_run_summary,
)
from bot.github.payloads import Annotation, CheckOutput, split_repo
from tests.conftest import shared_path
from tests.github_fake import SHA, FakeGitHub, private_key_pem, zip_of

REPO = "acme/widgets"
OTHER_SHA = "b" * 40


def note(n: int) -> Annotation:
    return Annotation("tests/test_mod.py", n + 1, n + 1, "failure", f"failure {n}", title=f"test_{n}")


# --- reading --------------------------------------------------------------------------------------


def test_list_artifacts_follows_every_page(github: FakeGitHub) -> None:
    run = github.add_run(REPO)
    other = github.add_run(REPO)
    for i in range(230):
        github.add_artifact(run, f"junit-{i}", b"PK")
    github.add_artifact(other, "elsewhere", b"PK")
    artifacts = github.port().list_artifacts(REPO, run.id)
    assert [a.name for a in artifacts] == [f"junit-{i}" for i in range(230)]
    assert artifacts[0].size_in_bytes == 2 and artifacts[0].expired is False
    assert artifacts[0].created_at == "2026-01-01T00:05:00Z"
    pages = github.calls("list_artifacts")
    assert [c.params for c in pages] == [
        {"per_page": "100"},
        {"per_page": "100", "page": "2"},
        {"per_page": "100", "page": "3"},
    ]
    assert all(c.authorization and c.authorization.startswith("token ghs_") for c in pages)


def test_expired_artifacts_are_listed(github: FakeGitHub) -> None:
    run = github.add_run(REPO)
    github.add_artifact(run, "old", b"PK", expired=True)
    assert [a.expired for a in github.port().list_artifacts(REPO, run.id)] == [True]


def test_get_run_attempt(github: FakeGitHub) -> None:
    run = github.add_run(REPO, 163, pull_requests=[7, 9], head_repo="fork/widgets", attempts=2)
    attempt = github.port().get_run_attempt(REPO, 163, 2)
    assert attempt.id == 163 and attempt.run_attempt == 2
    assert attempt.head_sha == SHA and attempt.head_branch == "feature" and attempt.event == "pull_request"
    assert attempt.pull_requests == (7, 9) and attempt.head_repo_full_name == "fork/widgets"
    assert attempt.run_started_at == run.attempts[2].run_started_at == "2026-01-01T01:00:00Z"
    assert (attempt.status, attempt.conclusion, attempt.path) == ("completed", "failure", ".github/workflows/ci.yml")
    assert github.calls("get_run_attempt")[0].path == "/repos/acme/widgets/actions/runs/163/attempts/2"


def test_list_jobs_of_one_attempt_across_pages(github: FakeGitHub) -> None:
    run = github.add_run(REPO, attempts=2)
    github.add_job(run, attempt=1, name="first try")
    for i in range(130):
        github.add_job(run, attempt=2, name=f"test ({i})", conclusion="failure" if i == 3 else "success")
    jobs = github.port().list_jobs(REPO, run.id, 2)
    assert len(jobs) == 130 and len(github.calls("list_jobs")) == 2
    assert jobs[3] == Job(
        id=jobs[3].id,
        name="test (3)",
        run_attempt=2,
        status="completed",
        conclusion="failure",
        started_at="2026-01-01T01:00:10Z",
        completed_at="2026-01-01T01:02:10Z",
        labels=("ubuntu-latest",),
        runner_name="GitHub Actions 2",
        html_url=f"https://github.com/acme/widgets/actions/runs/{run.id}/job/{jobs[3].id}",
    )


def test_list_runs_for_sha_is_bounded(github: FakeGitHub) -> None:
    for _ in range(250):
        github.add_run(REPO)
    github.add_run(REPO, head_sha=OTHER_SHA)
    runs = github.port().list_runs_for_sha(REPO, SHA, limit=120)
    assert len(runs) == 120 and len(github.calls("list_runs")) == 2
    assert runs[0] == RunSummary(
        runs[0].id, 1, ".github/workflows/ci.yml", "pull_request", "completed", "failure", "2026-01-01T00:00:00Z"
    )
    assert runs == sorted(runs, key=lambda r: r.id, reverse=True)
    assert github.calls("list_runs")[0].params == {"head_sha": SHA, "exclude_pull_requests": "true", "per_page": "100"}


def test_pulls_for_commit_gives_the_open_ones(github: FakeGitHub) -> None:
    github.add_pull(REPO, SHA, 12, state="closed")
    github.add_pull(REPO, SHA, 15)
    assert github.port().pulls_for_commit(REPO, SHA) == [15]
    assert github.port().pulls_for_commit(REPO, OTHER_SHA) == []


# --- artifacts ------------------------------------------------------------------------------------


def test_download_follows_the_redirect_without_credentials(github: FakeGitHub) -> None:
    run = github.add_run(REPO)
    content = zip_of({"junit.xml": b"<testsuite/>" * 2000})
    artifact = github.add_artifact(run, "junit", content)
    dest = io.BytesIO()
    assert github.port().download_artifact(REPO, artifact.id, dest, max_bytes=1 << 20) == len(content)
    assert dest.getvalue() == content
    (api,) = github.calls("download_artifact")
    (blob,) = github.calls("blob")
    assert api.authorization and api.authorization.startswith("token ")
    assert blob.authorization is None  # httpx drops Authorization on the cross-origin hop


def test_download_refuses_early_on_content_length(github: FakeGitHub) -> None:
    artifact = github.add_artifact(github.add_run(REPO), "junit", b"x" * 50_000)
    dest = io.BytesIO()
    with pytest.raises(ArtifactTooLarge):
        github.port().download_artifact(REPO, artifact.id, dest, max_bytes=10_000)
    assert dest.getvalue() == b""


def test_download_refuses_while_streaming_without_content_length(github: FakeGitHub) -> None:
    artifact = github.add_artifact(github.add_run(REPO), "junit", b"x" * 50_000, content_length=False)
    dest = io.BytesIO()
    with pytest.raises(ArtifactTooLarge):
        github.port().download_artifact(REPO, artifact.id, dest, max_bytes=10_000)
    assert len(dest.getvalue()) <= 10_000


def test_expired_and_missing_artifacts_are_gone(github: FakeGitHub) -> None:
    artifact = github.add_artifact(github.add_run(REPO), "junit", b"PK", expired=True)
    port = github.port()
    with pytest.raises(ArtifactGone) as gone:
        port.download_artifact(REPO, artifact.id, io.BytesIO(), max_bytes=1000)
    assert gone.value.status == 410
    with pytest.raises(ArtifactGone) as missing:
        port.download_artifact(REPO, 999_999, io.BytesIO(), max_bytes=1000)
    assert missing.value.status == 404
    assert github.sleeps == []


def test_a_failing_blob_is_retried_with_a_fresh_url(github: FakeGitHub) -> None:
    artifact = github.add_artifact(github.add_run(REPO), "junit", b"PK-zip")
    github.fail_next("blob", status=503)
    dest = io.BytesIO()
    assert github.port().download_artifact(REPO, artifact.id, dest, max_bytes=1000) == 6
    assert len(github.calls("download_artifact")) == 2 and github.sleeps == [1.0]


# --- check runs -----------------------------------------------------------------------------------


def test_find_check_run_is_ours_and_named(github: FakeGitHub) -> None:
    port = github.port()
    assert port.find_check_run(REPO, SHA, "Flaketally") is None
    github.add_check_run(REPO, SHA, "Flaketally", app_id=1)  # another App's check of the same name
    github.add_check_run(REPO, SHA, "Other")
    assert port.find_check_run(REPO, SHA, "Flaketally") is None
    ours = github.add_check_run(REPO, SHA, "Flaketally")
    assert port.find_check_run(REPO, SHA, "Flaketally") == ours.id
    assert github.calls("list_check_runs")[-1].params == {
        "check_name": "Flaketally",
        "filter": "latest",
        "per_page": "100",
        "app_id": str(github.app_id),
    }


def test_create_check_run_body(github: FakeGitHub) -> None:
    output = CheckOutput(
        "2 failed: 1 flaky, 1 real", "Failure: test_pdf_header failed on both attempts.", "details", (note(0),)
    )
    check_id = github.port().create_check_run(
        REPO,
        SHA,
        "Flaketally",
        status="completed",
        conclusion="failure",
        external_id="163/2",
        details_url="https://flaketally.example/runs/163",
        output=output,
    )
    assert github.bodies("create_check_run") == [
        {
            "name": "Flaketally",
            "head_sha": SHA,
            "external_id": "163/2",
            "details_url": "https://flaketally.example/runs/163",
            "status": "completed",
            "conclusion": "failure",
            "output": {
                "title": "2 failed: 1 flaky, 1 real",
                "summary": "Failure: test_pdf_header failed on both attempts.",
                "text": "details",
                "annotations": [
                    {
                        "path": "tests/test_mod.py",
                        "start_line": 1,
                        "end_line": 1,
                        "annotation_level": "failure",
                        "message": "failure 0",
                        "title": "test_0",
                    }
                ],
            },
            "actions": [],  # always sent with the output: it replaces the buttons an earlier update set
        }
    ]
    check = github.check_runs[check_id]
    assert (check.status, check.conclusion, len(check.annotations)) == ("completed", "failure", 1)


def test_create_with_many_annotations_appends_them_50_per_request(github: FakeGitHub) -> None:
    output = CheckOutput("t", "s", annotations=tuple(note(i) for i in range(120)))
    check_id = github.port().create_check_run(
        REPO, SHA, "Flaketally", status="completed", conclusion="neutral", external_id="x", output=output
    )
    (create,) = github.bodies("create_check_run")
    patches = github.bodies("update_check_run")
    assert len(patches) + 1 == math.ceil(120 / 50)
    assert create["status"] == "in_progress" and "conclusion" not in create  # not done before the last batch
    assert [len(b["output"]["annotations"]) for b in [create, *patches]] == [50, 50, 20]
    assert "conclusion" not in patches[0] and patches[-1]["conclusion"] == "neutral"
    check = github.check_runs[check_id]
    assert [a["message"] for a in check.annotations] == [f"failure {i}" for i in range(120)]
    assert check.conclusion == "neutral"


@pytest.mark.parametrize("count", [0, 1, 50, 51, 100, 101, 333])
def test_update_sends_ceil_n_over_50_requests(github: FakeGitHub, count: int) -> None:
    check = github.add_check_run(REPO, SHA, "Flaketally", status="in_progress", conclusion=None)
    output = CheckOutput("t", "s", annotations=tuple(note(i) for i in range(count)))
    github.port().update_check_run(REPO, check.id, conclusion="success", output=output)
    patches = github.bodies("update_check_run")
    assert len(patches) == max(1, math.ceil(count / 50))
    assert all(len(p["output"].get("annotations", [])) <= 50 for p in patches)
    assert [p.get("conclusion") for p in patches] == [None] * (len(patches) - 1) + ["success"]
    assert len(check.annotations) == count and check.conclusion == "success"


def test_update_status_only(github: FakeGitHub) -> None:
    check = github.add_check_run(REPO, SHA, "Flaketally", status="queued", conclusion=None)
    github.port().update_check_run(REPO, check.id, status="in_progress")
    assert github.bodies("update_check_run") == [{"status": "in_progress"}]
    with pytest.raises(ValueError, match="nothing to update"):
        github.port().update_check_run(REPO, check.id)


# --- request models -------------------------------------------------------------------------------


def test_output_refuses_what_github_refuses() -> None:
    CheckOutput("t", "s" * MAX_OUTPUT_TEXT, "x" * MAX_OUTPUT_TEXT)
    with pytest.raises(ValueError, match="summary"):
        CheckOutput("t", "s" * (MAX_OUTPUT_TEXT + 1))
    with pytest.raises(ValueError, match="text"):
        CheckOutput("t", "s", "x" * (MAX_OUTPUT_TEXT + 1))
    with pytest.raises(ValueError, match="title"):
        CheckOutput("t" * 256, "s")
    with pytest.raises(ValueError, match="title"):
        CheckOutput("", "s")


def test_annotation_refuses_what_github_refuses() -> None:
    Annotation("a.py", 1, 1, "notice", "m" * MAX_ANNOTATION_BYTES, title="t" * 255, raw_details="r")
    bad: list[dict[str, Any]] = [
        {"message": "é" * (MAX_ANNOTATION_BYTES // 2 + 1)},  # the limit is in bytes
        {"raw_details": "r" * (MAX_ANNOTATION_BYTES + 1)},
        {"title": "t" * 256},
        {"level": "error"},
        {"message": ""},
        {"path": ""},
        {"start_line": 0},
        {"start_line": 5, "end_line": 4},
    ]
    for change in bad:
        fields: dict[str, Any] = {"path": "a.py", "start_line": 1, "end_line": 1, "level": "notice", "message": "m"}
        fields.update(change)
        with pytest.raises(ValueError):
            Annotation(**fields)


def test_bounded_makes_any_text_fit() -> None:
    huge = "é" * 100_000
    annotation = Annotation.bounded("a.py", 0, None, "warning", huge, title=huge, raw_details=huge)
    assert (annotation.start_line, annotation.end_line) == (1, 1)
    assert len(annotation.message.encode()) <= MAX_ANNOTATION_BYTES and annotation.message.endswith("…")
    assert len(annotation.title or "") == 255
    assert Annotation.bounded("a.py", 7, 3, "notice", "").message == "(no message)"
    output = CheckOutput.bounded(huge, huge, huge, [annotation])
    assert len(output.title) == 255 and len(output.summary) == len(output.text or "") == MAX_OUTPUT_TEXT


def test_check_run_status_rules(github: FakeGitHub) -> None:
    port = github.port()
    with pytest.raises(ValueError, match="conclusion"):
        port.create_check_run(REPO, SHA, "F", status="completed", external_id="x")
    with pytest.raises(ValueError, match="contradicts"):
        port.create_check_run(REPO, SHA, "F", status="in_progress", conclusion="success", external_id="x")
    with pytest.raises(ValueError):
        port.create_check_run(REPO, SHA, "F", status="done", external_id="x")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="stale"):
        port.update_check_run(REPO, 1, conclusion="stale")  # type: ignore[arg-type]
    assert github.requests == []


def test_outside_names_never_reach_a_url(github: FakeGitHub) -> None:
    port = github.port()
    for repo in ("acme", "acme/../admin", "acme/widgets/extra", "../x/y", "acme/widgets?x=1", "acme/.."):
        with pytest.raises(ValueError):
            port.list_artifacts(repo, 1)
    with pytest.raises(ValueError):
        port.find_check_run(REPO, "main/../..", "F")
    with pytest.raises(ValueError):
        port.get_run_attempt(REPO, 1, 0)
    assert split_repo("octo-org/octo.repo_2") == ("octo-org", "octo.repo_2")
    assert github.requests == []


# --- comments and reruns --------------------------------------------------------------------------


def test_comments(github: FakeGitHub) -> None:
    for i in range(130):
        github.add_comment(REPO, 7, f"comment {i}", user_login="octocat", user_type="User")
    ours = github.add_comment(REPO, 7, "<!-- flaketally -->\nold")
    port = github.port()
    comments = port.list_issue_comments(REPO, 7)
    assert len(comments) == 131 and len(github.calls("list_comments")) == 2
    assert comments[0].user_login == "octocat" and comments[0].user_type == "User"
    assert comments[-1].id == ours.id and comments[-1].user_type == "Bot"
    port.update_issue_comment(REPO, ours.id, "<!-- flaketally -->\nnew")
    created = port.create_issue_comment(REPO, 8, "hello")
    assert github.comments[ours.id].body == "<!-- flaketally -->\nnew"
    assert [c.id for c in github.comments_on(REPO, 8)] == [created]
    assert github.bodies("create_comment") == [{"body": "hello"}]


def test_comment_bodies_over_the_limit_are_refused_before_sending(github: FakeGitHub) -> None:
    port = github.port()
    port.create_issue_comment(REPO, 7, "x" * MAX_COMMENT)
    with pytest.raises(ValueError, match="65536"):
        port.create_issue_comment(REPO, 7, "x" * (MAX_COMMENT + 1))
    with pytest.raises(ValueError):
        port.update_issue_comment(REPO, 1, "x" * (MAX_COMMENT + 1))
    assert len(github.calls("create_comment")) == 1


def test_rerun_failed_jobs(github: FakeGitHub) -> None:
    run = github.add_run(REPO, 163)
    github.port().rerun_failed_jobs(REPO, 163)
    assert github.reruns == [(REPO, run.id)]
    assert github.calls("rerun_failed_jobs")[0].path == "/repos/acme/widgets/actions/runs/163/rerun-failed-jobs"


def test_content_creating_requests_are_spaced(github: FakeGitHub) -> None:
    port = github.port(mutation_interval=1.0)
    port.create_issue_comment(REPO, 7, "a")
    port.create_issue_comment(REPO, 7, "b")
    port.list_issue_comments(REPO, 7)
    port.create_issue_comment(REPO, 7, "c")
    assert github.sleeps == [1.0, 1.0]


# --- faults ---------------------------------------------------------------------------------------


def test_5xx_is_retried_with_backoff(github: FakeGitHub) -> None:
    run = github.add_run(REPO)
    github.add_artifact(run, "junit", b"PK")
    github.fail_next("list_artifacts", 2, status=502)
    assert [a.name for a in github.port().list_artifacts(REPO, run.id)] == ["junit"]
    assert github.sleeps == [1.0, 2.0]
    assert len(github.calls("list_artifacts")) == 3


def test_secondary_rate_limit_honours_retry_after(github: FakeGitHub) -> None:
    github.secondary_limit_next("create_comment", retry_after=7)
    github.port().create_issue_comment(REPO, 7, "hello")
    assert github.sleeps == [7.0]
    assert len(github.comments_on(REPO, 7)) == 1


def test_retry_after_zero_is_not_a_minute(github: FakeGitHub) -> None:
    github.secondary_limit_next("list_comments", 2, retry_after=0, status=429)
    github.port().list_issue_comments(REPO, 7)
    assert github.sleeps == [1.0, 2.0]  # githubkit's own retry would sleep 60 s each time


def test_primary_rate_limit_waits_until_reset(github: FakeGitHub) -> None:
    github.add_run(REPO, 163)
    github.primary_limit_next("get_run_attempt", reset_in=30)
    assert github.port().get_run_attempt(REPO, 163, 1).id == 163
    assert github.sleeps == [31.0]  # until x-ratelimit-reset, plus a second for clock skew


def test_a_wait_beyond_the_budget_raises_unavailable(github: FakeGitHub) -> None:
    github.add_run(REPO, 163)
    github.primary_limit_next("get_run_attempt", reset_in=3600)
    with pytest.raises(GitHubUnavailable) as unavailable:
        github.port().get_run_attempt(REPO, 163, 1)
    assert unavailable.value.retry_after == 3601.0
    assert github.sleeps == []


def test_persistent_5xx_gives_up_within_the_budget(github: FakeGitHub) -> None:
    github.fail_next("list_jobs", 20, status=500)
    github.add_run(REPO, 163)
    with pytest.raises(GitHubUnavailable):
        github.port().list_jobs(REPO, 163, 1)
    assert github.sleeps == [1.0, 2.0, 4.0, 8.0, 16.0] and sum(github.sleeps) <= 60
    assert len(github.calls("list_jobs")) == 6


def test_the_budget_is_configurable(github: FakeGitHub) -> None:
    github.add_run(REPO, 163)
    github.secondary_limit_next("get_run_attempt", retry_after=90)
    assert github.port(max_wait=120).get_run_attempt(REPO, 163, 1).id == 163
    assert github.sleeps == [90.0]
    github.secondary_limit_next("get_run_attempt", retry_after=90)
    with pytest.raises(GitHubUnavailable):
        github.port().get_run_attempt(REPO, 163, 1)


def test_a_failing_token_endpoint_is_retried(github: FakeGitHub) -> None:
    github.add_run(REPO, 163)
    github.fail_next("token", status=502)
    assert github.port().get_run_attempt(REPO, 163, 1).id == 163
    assert github.sleeps == [1.0] and github.tokens_minted == 1


def test_permanent_errors_carry_the_status(github: FakeGitHub) -> None:
    with pytest.raises(GitHubError) as missing:
        github.port().get_run_attempt(REPO, 404, 1)
    assert missing.value.status == 404 and "Not Found" in str(missing.value)
    github.fail_next("create_comment", status=403)  # a 403 without rate-limit headers: permission
    with pytest.raises(GitHubError) as forbidden:
        github.port().create_issue_comment(REPO, 7, "x")
    assert forbidden.value.status == 403
    assert github.sleeps == []


def test_a_wrong_private_key_is_a_permanent_error(github: FakeGitHub) -> None:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    other = (
        rsa.generate_private_key(public_exponent=65537, key_size=2048)
        .private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
        .decode()
    )
    assert other != private_key_pem()
    with pytest.raises(GitHubError) as refused:
        github.port(private_key=other).list_issue_comments(REPO, 7)
    assert refused.value.status == 401 and github.tokens_minted == 0


def test_a_malformed_response_is_an_error(github: FakeGitHub, monkeypatch: pytest.MonkeyPatch) -> None:
    run = github.add_run(REPO)
    github.add_artifact(run, "junit", b"PK")
    monkeypatch.setattr(github, "artifact_json", lambda a: {"id": "1", "name": "x"})
    with pytest.raises(GitHubError, match=r"artifacts\[0\]\.id is not an integer"):
        github.port().list_artifacts(REPO, run.id)


def test_on_response_sees_every_response(github: FakeGitHub) -> None:
    seen: list[tuple[int, int | None]] = []
    artifact = github.add_artifact(github.add_run(REPO), "junit", b"PK")
    github.fail_next("download_artifact", status=502)
    github.port(on_response=lambda status, remaining: seen.append((status, remaining))).download_artifact(
        REPO, artifact.id, io.BytesIO(), max_bytes=100
    )
    assert [s for s, _ in seen] == [201, 502, 302, 200]  # token, fault, redirect, blob
    assert seen[2][1] is not None and seen[3][1] is None


def test_a_broken_metrics_callback_does_not_break_calls(github: FakeGitHub) -> None:
    seen: list[int] = []

    def broken(status: int, remaining: int | None) -> None:
        seen.append(status)
        raise RuntimeError("metrics down")

    github.add_comment(REPO, 7, "first")
    comments = github.port(on_response=broken).list_issue_comments(REPO, 7)
    assert seen == [201, 200]  # the callback raised on the token and on the listing
    assert [c.body for c in comments] == ["first"]  # and the call still answered


# --- tokens ---------------------------------------------------------------------------------------


def test_the_token_is_minted_once_and_shared_through_redis(github: FakeGitHub, redis_url: str) -> None:
    github.add_run(REPO, 163)
    client = redis.Redis.from_url(redis_url)
    try:
        first = github.port(redis=client)
        second = github.port(redis=redis.Redis.from_url(redis_url))
        first.get_run_attempt(REPO, 163, 1)
        second.get_run_attempt(REPO, 163, 1)
        second.list_jobs(REPO, 163, 1)
        assert github.tokens_minted == 1 and len(github.calls("token")) == 1
        assert len({c.authorization for c in github.requests if c.route != "token"}) == 1
        assert list(client.scan_iter(match="flaketally:github:*"))  # the token lives in Redis, prefixed
    finally:
        client.close()


def test_without_redis_each_port_keeps_its_own_token(github: FakeGitHub) -> None:
    github.add_run(REPO, 163)
    port = github.port()
    port.get_run_attempt(REPO, 163, 1)
    port.get_run_attempt(REPO, 163, 1)
    github.port().get_run_attempt(REPO, 163, 1)
    assert github.tokens_minted == 2


def test_enterprise_server_base_url() -> None:
    with FakeGitHub(api_url="https://ghe.example.com/api/v3") as ghes:
        run = ghes.add_run(REPO)
        artifact = ghes.add_artifact(run, "junit", b"PK-zip")
        with ghes.port() as port:
            assert [a.id for a in port.list_artifacts(REPO, run.id)] == [artifact.id]
            assert port.download_artifact(REPO, artifact.id, io.BytesIO(), 100) == 6
        assert [r.host for r in ghes.requests[:2]] == ["ghe.example.com", "ghe.example.com"]
        assert ghes.calls("token")[0].path == "/app/installations/77/access_tokens"


# --- contract: the fake's shapes against GitHub's official examples -------------------------------


class _Reads(dict[str, Any]):
    """A JSON object that records which keys a parser reads: ``path`` -> read with [] (required)?"""

    def __init__(self, data: dict[str, Any], path: str, seen: dict[str, bool]) -> None:
        super().__init__(data)
        self._path, self._seen = path, seen

    def _wrap(self, key: str, value: Any) -> Any:
        path = f"{self._path}.{key}" if self._path else key
        if isinstance(value, dict):
            return _Reads(value, path, self._seen)
        if isinstance(value, list):
            return [_Reads(v, f"{path}[]", self._seen) if isinstance(v, dict) else v for v in value]
        return value

    def __getitem__(self, key: str) -> Any:
        self._seen[self._key(key)] = True
        return self._wrap(key, super().__getitem__(key))

    def get(self, key: str, default: Any = None) -> Any:
        self._seen.setdefault(self._key(key), False)
        return self._wrap(key, super().get(key, default))

    def _key(self, key: str) -> str:
        return f"{self._path}.{key}" if self._path else key


def _lookup(obj: Any, path: str) -> tuple[bool, Any]:
    for part in path.split("."):
        many = part.endswith("[]")
        key = part.removesuffix("[]")
        if not isinstance(obj, dict) or key not in obj:
            return False, None
        obj = obj[key]
        if many:
            if not isinstance(obj, list) or not obj:
                return False, None
            obj = obj[0]
    return True, obj


def _kind(value: Any) -> str:
    return type(value).__name__


def _fake_shapes() -> dict[str, Any]:
    fake = FakeGitHub()
    run = fake.add_run(REPO, pull_requests=[7], attempts=1)
    job = fake.add_job(run)
    artifact = fake.add_artifact(run, "junit", b"PK")
    check = fake.add_check_run(REPO, SHA, "Flaketally")
    comment = fake.add_comment(REPO, 7, "hello")
    return {
        "artifact": fake.artifact_json(artifact),
        "run": fake.run_json(run, run.attempts[1]),
        "job": fake.job_json(run, job),
        "check_run": fake.check_run_json(check),
        "comment": fake.comment_json(comment),
        "pull": fake.pull_json(REPO, SHA, 7, "open"),
        "token": fake.token_json("ghs_x"),
        "issue": fake.issue_json(fake.add_issue(REPO, "Flaketally digest", "body", ["flaketally-digest"])),
    }


# (example file, list key or None for a bare list, "" for one object; parser; the fake's shape)
CONTRACT = [
    ("rest/examples/actions.list-workflow-run-artifacts.200.default.json", "artifacts", parse_artifact, "artifact"),
    ("rest/examples/actions.get-workflow-run-attempt.200.default.json", "", parse_run_attempt, "run"),
    ("rest/examples/actions.get-workflow-run.200.default.json", "", parse_run_attempt, "run"),
    ("webhooks/workflow_run.completed.with-pull-requests.payload.json", "workflow_run", parse_run_attempt, "run"),
    (
        "rest/examples/actions.list-jobs-for-workflow-run-attempt.200.default.json",
        "jobs",
        lambda o: parse_job(o, 1),
        "job",
    ),
    ("rest/examples/actions.list-workflow-runs-for-repo.200.default.json", "workflow_runs", parse_run_summary, "run"),
    ("rest/examples/repos.list-pull-requests-associated-with-commit.200.default.json", None, parse_pull, "pull"),
    ("rest/examples/checks.list-for-ref.200.default.json", "check_runs", parse_check_run, "check_run"),
    ("rest/examples/checks.create.201.example-of-completed-conclusion.json", "", parse_check_run, "check_run"),
    ("rest/examples/checks.update.200.default.json", "", parse_check_run, "check_run"),
    ("rest/examples/issues.list-comments.200.default.json", None, parse_comment, "comment"),
    ("rest/examples/issues.create-comment.201.default.json", "", parse_comment, "comment"),
    ("rest/examples/issues.list-for-repo.200.default.json", None, parse_issue, "issue"),
    ("rest/examples/issues.create.201.default.json", "", parse_issue, "issue"),
    ("rest/examples/issues.update.200.default.json", "", parse_issue, "issue"),
]


@pytest.mark.shared
@pytest.mark.parametrize(
    ("example", "key", "parser", "shape"), CONTRACT, ids=[c[0].rsplit("/", 1)[1] for c in CONTRACT]
)
def test_the_fake_answers_with_the_keys_the_port_reads(example: str, key: str | None, parser: Any, shape: str) -> None:
    data = json.loads(shared_path("github", *example.split("/")).read_text())
    fake = _fake_shapes()[shape]
    if key == "":
        items = [data]
    elif key is None:
        items = data
    elif example.startswith("webhooks/"):
        items = [data[key]]
    else:
        assert set(data) == {"total_count", key}  # the envelope the fake's listings use
        items = data[key]
    assert items, f"{example} has no item to read"
    seen: dict[str, bool] = {}
    for item in items:
        parser(_Reads(item, "", seen))  # GitHub's own example parses
    assert seen, "the parser read nothing"
    for path, required in sorted(seen.items()):
        in_example, example_value = _lookup(items[0], path)
        in_fake, fake_value = _lookup(fake, path)
        if required:
            assert in_example, f"the port needs {path}, which {example} lacks"
        if in_example:
            assert in_fake, f"the fake's {shape} lacks {path}, which the port reads and {example} has"
            if example_value is not None and fake_value is not None:
                assert _kind(fake_value) == _kind(example_value), f"{path}: {_kind(fake_value)} in the fake"


@pytest.mark.shared
def test_the_fake_token_has_the_keys_githubkit_reads() -> None:
    example = json.loads(
        shared_path("github", "rest", "examples", "apps.create-installation-access-token.201.default.json").read_text()
    )
    token = _fake_shapes()["token"]
    for key in ("token", "expires_at", "permissions", "repository_selection"):
        assert key in example and _kind(token[key]) == _kind(example[key])


@pytest.mark.shared
def test_a_runs_pull_requests_give_their_base_commits() -> None:
    payload = json.loads(
        shared_path("github", "webhooks", "workflow_run.completed.with-pull-requests.payload.json").read_text()
    )
    run = parse_run_attempt(payload["workflow_run"])
    assert (run.pull_requests, run.base_shas) == ((2,), ("f95f852bd8fca8fcc58a9a2d6c842781e32a215e",))


@pytest.mark.shared
def test_githubs_example_file_content_is_checked_and_a_directory_is_not_a_file() -> None:
    """GitHub's example of a file answer holds base64 that decodes to bytes that are not UTF-8 (its text is
    mangled): refused with a reason, not read as text. A directory is a list: not a file."""
    examples = shared_path("github", "rest", "examples")
    mangled = json.loads((examples / "repos.get-content.200.response-if-content-is-a-file.json").read_text())
    with pytest.raises(GitHubError, match="the content cannot be read: 'utf-8' codec"):
        parse_file_text(mangled)
    directory = json.loads((examples / "repos.get-content.200.response-if-content-is-a-directory.json").read_text())
    assert parse_file_text(directory) is None
    readable = {**mangled, "content": base64.b64encode(b"rerun: failed-jobs\n").decode()}
    assert parse_file_text(readable) == "rerun: failed-jobs\n"
