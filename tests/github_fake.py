"""One fake of GitHub's HTTP for the whole suite, on respx.

:class:`FakeGitHub` holds state (runs with attempts, jobs, artifacts with their zip bytes, check runs,
issue comments, pull requests of commits), answers every endpoint the app uses the way GitHub does
(shapes after the official examples in ``../shared/github/rest/examples``, as small inline dicts; a
contract test in ``tests/test_github.py`` checks them against the examples), records every request,
and can be told to fail the next requests of an endpoint. Anything it has no route for is recorded as
unexpected and fails the test when the fake is closed: the network is blocked.

    with FakeGitHub() as github:            # or the ``github`` fixture (tests/conftest_github.py)
        run = github.add_run("acme/widgets", head_sha=SHA, pull_requests=[7])
        github.add_job(run, attempt=1, name="test", conclusion="failure")
        github.add_artifact(run, "junit", zip_bytes)
        port = github.port()                # a GitHubPort wired to the fake, sleeps recorded
        ...
        github.calls("create_check_run")   # recorded requests, with their JSON bodies
        github.check_runs[id].annotations  # state as GitHub would hold it
"""

from __future__ import annotations

import base64
import functools
import hashlib
import io
import itertools
import json
import secrets
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from types import TracebackType
from typing import Any

import httpx
import jwt
import respx
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from bot.github.port import GitHubPort

API_URL = "https://api.github.com"
BLOB_URL = "https://blob.actions.test"
SHA = "3484a3f0c5e9d7b1a2f4e6c8d0b2a4c6e8f0a2b4"
EPOCH = 1_767_225_600.0  # 2026-01-01T00:00:00Z: the fake clock starts here

ROUTES = (
    "token",
    "repo_installation",
    "list_artifacts",
    "download_artifact",
    "blob",
    "get_run",
    "get_run_attempt",
    "list_jobs",
    "list_runs",
    "pulls_for_commit",
    "rerun_failed_jobs",
    "get_content",
    "put_content",
    "permission",
    "get_ref",
    "create_ref",
    "update_ref",
    "list_pulls",
    "create_pull",
    "update_pull",
    "list_check_runs",
    "create_check_run",
    "update_check_run",
    "list_comments",
    "create_comment",
    "update_comment",
    "list_issues",
    "create_issue",
    "update_issue",
    "get_app",
    "list_installations",
    "list_deliveries",
    "redeliver",
    "manifest_conversion",
)

# the routes the App reaches with its own JWT (not an installation's token)
APP_ROUTES = ("token", "repo_installation", "get_app", "list_installations", "list_deliveries", "redeliver")
# what app.yml asks for (tests/test_actions.py checks the manifest against the buttons' needs)
APP_PERMISSIONS = {
    "actions": "write",
    "checks": "write",
    "issues": "write",
    "pull_requests": "write",
    "contents": "write",
    "metadata": "read",
}

_CONCLUSIONS = {"action_required", "cancelled", "failure", "neutral", "success", "skipped", "timed_out"}


@functools.cache
def private_key_pem() -> str:
    """One RSA key per test session: the App's key, so the JWT githubkit signs is real."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


@functools.cache
def _public_key(pem: str) -> Any:
    return serialization.load_pem_private_key(pem.encode(), None).public_key()


def iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- state ---------------------------------------------------------------------------------------


@dataclass
class FakeJob:
    id: int
    run_id: int
    name: str
    run_attempt: int
    status: str = "completed"
    conclusion: str | None = "success"
    started_at: str | None = None
    completed_at: str | None = None
    labels: tuple[str, ...] = ("ubuntu-latest",)
    runner_name: str | None = "GitHub Actions 2"


@dataclass
class FakeAttempt:
    number: int
    status: str
    conclusion: str | None
    run_started_at: str
    updated_at: str
    jobs: list[FakeJob] = field(default_factory=list)


@dataclass
class FakeRun:
    repo: str
    id: int
    head_sha: str
    head_branch: str | None
    event: str
    path: str
    name: str
    run_number: int
    pull_requests: list[int]
    head_repo: str
    attempts: dict[int, FakeAttempt] = field(default_factory=dict)
    base_sha: str = "f" * 40  # the base commit of its pull requests

    @property
    def latest(self) -> FakeAttempt:
        return self.attempts[max(self.attempts)]


@dataclass
class FakeArtifact:
    id: int
    repo: str
    run_id: int
    head_sha: str
    name: str
    content: bytes
    expired: bool = False
    created_at: str = ""
    content_length: bool = True  # False: the blob is sent chunked, without Content-Length
    size_in_bytes: int | None = None  # what the listing claims; the content's length when None
    signature: str = field(default_factory=lambda: secrets.token_hex(8))


@dataclass
class FakePull:
    """A pull request the App opened (``pulls.create``), from a branch of the repository itself."""

    number: int
    repo: str
    head: str
    base: str
    title: str
    body: str
    state: str = "open"


@dataclass
class FakeCheckRun:
    id: int
    repo: str
    head_sha: str
    name: str
    app_id: int
    status: str = "queued"
    conclusion: str | None = None
    external_id: str = ""
    details_url: str | None = None
    output: dict[str, Any] = field(default_factory=dict)
    annotations: list[dict[str, Any]] = field(default_factory=list)
    actions: list[dict[str, Any]] = field(default_factory=list)  # the buttons, as the last request set them


@dataclass
class FakeComment:
    id: int
    repo: str
    issue_number: int
    body: str
    user_login: str = "flaketally[bot]"
    user_type: str = "Bot"


@dataclass
class FakeIssue:
    """An issue of a repository (the digest's): its labels, and how many times it was closed."""

    number: int
    repo: str
    title: str
    body: str
    labels: list[str]
    state: str = "open"
    state_reason: str | None = None
    closed: int = 0  # PATCHes that closed it


@dataclass(frozen=True)
class Recorded:
    """One request as the fake saw it. ``path`` is relative to the API base (blob: the blob path)."""

    route: str
    method: str
    host: str
    path: str
    params: dict[str, str]
    json: Any
    authorization: str | None
    at: float = 0.0  # the fake's clock when it came


# --- the fake ------------------------------------------------------------------------------------


class FakeGitHub:
    def __init__(self, *, api_url: str = API_URL, app_id: int = 4242, installation_id: int = 77) -> None:
        self.api_url = api_url.rstrip("/")
        self.app_id = app_id
        self.installation_id = installation_id
        self.private_key = private_key_pem()
        self.now = EPOCH
        self.sleeps: list[float] = []
        self.requests: list[Recorded] = []
        self.unexpected: list[str] = []
        self.tokens_minted = 0
        self.runs: dict[tuple[str, int], FakeRun] = {}
        self.artifacts: dict[int, FakeArtifact] = {}
        self.check_runs: dict[int, FakeCheckRun] = {}
        self.comments: dict[int, FakeComment] = {}
        self.pulls: dict[tuple[str, str], list[tuple[int, str]]] = {}
        self.reruns: list[tuple[str, int]] = []
        self.files: dict[tuple[str, str], str] = {}  # (repo, path) → text, on the default branch
        self.content_answers: list[tuple[str, str, int]] = []  # (repo, path, status) of each file request
        self.default_branch = "main"
        self.branches: dict[tuple[str, str], str] = {}  # (repo, branch) → commit, beside the default branch
        self.branch_files: dict[tuple[str, str, str], str] = {}  # (repo, branch, path) → text on that branch
        self.commits_written: list[tuple[str, str, str, str]] = []  # (repo, branch, path, message)
        self.opened: dict[int, FakePull] = {}  # pull requests the App opened, by number
        self.permissions: dict[tuple[str, str], str] = {}  # (repo, user) → role; anyone else may write
        self.other_installations: set[int] = set()  # installations besides ``installation_id`` that mint tokens
        # what the App itself sees with its JWT (``flaketally doctor``): its permissions, installations, deliveries
        self.app_permissions: dict[str, str] = dict(APP_PERMISSIONS)
        self.installed: list[dict[str, Any]] = [self.installation_json(installation_id, "acme")]
        self.deliveries: list[dict[str, Any]] = []
        self.redelivered: list[int] = []
        # ``flaketally register``: the codes GitHub would hand back from the manifest flow (each good once),
        # the codes turned into the App, and the webhook secret GitHub makes up for it
        self.manifest_codes: set[str] = set()
        self.manifest_converted: list[str] = []
        self.manifest_webhook_secret = "e340154128314309424b7c8e90325147d99fdafa"
        self.issues: dict[int, FakeIssue] = {}  # by number (numbers shared with pull requests, as on GitHub)
        self.unreachable: set[str] = set()  # repositories the installation cannot see: their issues are 404
        self.issues_disabled: set[str] = set()  # repositories whose issues are turned off: 410
        self._tokens: set[str] = set()
        self._faults: dict[str, list[Callable[[], httpx.Response]]] = {}
        self._ids = itertools.count(1001)
        self._remaining = 5000
        url = httpx.URL(self.api_url)
        self._host = url.host
        self._base = url.path.rstrip("/")
        self._router = respx.MockRouter(assert_all_called=False, assert_all_mocked=True)
        self._install_routes()

    # -- life cycle

    def __enter__(self) -> FakeGitHub:
        self._router.__enter__()
        return self

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        self._router.__exit__(kind, value, tb)
        if kind is None:
            self.assert_nothing_unexpected()

    def assert_nothing_unexpected(self) -> None:
        assert not self.unexpected, "requests the fake GitHub has no route for:\n" + "\n".join(self.unexpected)

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        """The port's sleep: recorded, and the fake clock moves on; nothing really waits."""
        self.sleeps.append(seconds)
        self.now += seconds

    def port(self, **overrides: Any) -> GitHubPort:
        """A GitHubPort for this installation, with the fake's sleep and clock."""
        settings: dict[str, Any] = {
            "app_id": self.app_id,
            "private_key": self.private_key,
            "installation_id": self.installation_id,
            "api_url": self.api_url,
            "sleep": self.sleep,
            "clock": self.clock,
            "mutation_interval": 0.0,
        }
        settings.update(overrides)
        return GitHubPort(**settings)

    # -- state builders

    def add_run(
        self,
        repo: str = "acme/widgets",
        run_id: int | None = None,
        *,
        head_sha: str = SHA,
        head_branch: str | None = "feature",
        event: str = "pull_request",
        path: str = ".github/workflows/ci.yml",
        name: str = "CI",
        run_number: int = 163,
        pull_requests: list[int] | tuple[int, ...] = (),
        head_repo: str | None = None,
        attempts: int = 1,
        status: str = "completed",
        conclusion: str | None = "failure",
        base_sha: str = "f" * 40,
    ) -> FakeRun:
        run = FakeRun(
            repo=repo,
            id=run_id or next(self._ids),
            head_sha=head_sha,
            head_branch=head_branch,
            event=event,
            path=path,
            name=name,
            run_number=run_number,
            pull_requests=list(pull_requests),
            head_repo=head_repo or repo,
            base_sha=base_sha,
        )
        self.runs[(repo, run.id)] = run
        for _ in range(attempts):
            self.add_attempt(run, status=status, conclusion=conclusion)
        return run

    def add_attempt(
        self, run: FakeRun, *, status: str = "completed", conclusion: str | None = "success"
    ) -> FakeAttempt:
        number = len(run.attempts) + 1
        started = self.now + 3600 * (number - 1)
        attempt = FakeAttempt(number, status, conclusion, iso(started), iso(started + 600))
        run.attempts[number] = attempt
        return attempt

    def add_job(
        self,
        run: FakeRun,
        *,
        attempt: int = 1,
        name: str = "test",
        status: str = "completed",
        conclusion: str | None = "success",
        labels: tuple[str, ...] = ("ubuntu-latest",),
        runner_name: str | None = "GitHub Actions 2",
        carried_from: int | None = None,
    ) -> FakeJob:
        """A job listed under ``attempt``. ``carried_from``: a job that a "re-run failed jobs" attempt did
        not run again; GitHub lists it under the new attempt with its own ``run_attempt`` and times."""
        ran = carried_from or attempt
        started = self.now + 3600 * (ran - 1) + 10
        job = FakeJob(
            id=next(self._ids),
            run_id=run.id,
            name=name,
            run_attempt=ran,
            status=status,
            conclusion=conclusion,
            started_at=iso(started),
            completed_at=iso(started + 120) if status == "completed" else None,
            labels=labels,
            runner_name=runner_name,
        )
        run.attempts[attempt].jobs.append(job)
        return job

    def add_artifact(
        self,
        run: FakeRun,
        name: str,
        content: bytes,
        *,
        expired: bool = False,
        attempt: int = 1,
        content_length: bool = True,
        size_in_bytes: int | None = None,
    ) -> FakeArtifact:
        """An artifact of ``run``, created while ``attempt`` ran (artifacts do not name their attempt)."""
        artifact = FakeArtifact(
            id=next(self._ids),
            repo=run.repo,
            run_id=run.id,
            head_sha=run.head_sha,
            name=name,
            content=content,
            expired=expired,
            created_at=iso(self.now + 3600 * (attempt - 1) + 300),
            content_length=content_length,
            size_in_bytes=size_in_bytes,
        )
        self.artifacts[artifact.id] = artifact
        return artifact

    def add_file(self, repo: str, path: str, text: str | None) -> None:
        """A file on ``repo``'s default branch (None: delete it)."""
        if text is None:
            self.files.pop((repo, path), None)
        else:
            self.files[(repo, path)] = text

    def add_pull(self, repo: str, sha: str, number: int, *, state: str = "open") -> None:
        self.pulls.setdefault((repo, sha), []).append((number, state))

    def add_comment(
        self, repo: str, number: int, body: str, *, user_login: str = "flaketally[bot]", user_type: str = "Bot"
    ) -> FakeComment:
        comment = FakeComment(next(self._ids), repo, number, body, user_login, user_type)
        self.comments[comment.id] = comment
        return comment

    def add_check_run(
        self,
        repo: str,
        head_sha: str,
        name: str,
        *,
        app_id: int | None = None,
        status: str = "completed",
        conclusion: str | None = "neutral",
    ) -> FakeCheckRun:
        check = FakeCheckRun(next(self._ids), repo, head_sha, name, app_id or self.app_id, status, conclusion)
        self.check_runs[check.id] = check
        return check

    # -- reading what happened

    def calls(self, route: str) -> list[Recorded]:
        assert route in ROUTES, f"no route named {route!r}"
        return [r for r in self.requests if r.route == route]

    def bodies(self, route: str) -> list[Any]:
        return [r.json for r in self.calls(route)]

    def comments_on(self, repo: str, number: int) -> list[FakeComment]:
        return [c for c in self.comments.values() if c.repo == repo and c.issue_number == number]

    # -- faults: the next ``times`` requests of ``route`` fail this way, then it answers again

    def fail_next(self, route: str, times: int = 1, *, status: int = 502) -> None:
        body = {"message": "Server Error"} if status >= 500 else {"message": "Fault"}
        self._fault(route, times, lambda: self._respond(status, body))

    def secondary_limit_next(self, route: str, times: int = 1, *, retry_after: int = 7, status: int = 403) -> None:
        body = {
            "message": "You have exceeded a secondary rate limit. Please wait a few minutes before you try again.",
            "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
        }
        self._fault(route, times, lambda: self._respond(status, body, {"retry-after": str(retry_after)}))

    def primary_limit_next(self, route: str, times: int = 1, *, reset_in: int = 30, status: int = 403) -> None:
        """``x-ratelimit-remaining: 0`` and ``x-ratelimit-reset`` ``reset_in`` seconds after the fake clock."""
        body = {
            "message": "API rate limit exceeded for installation ID 77.",
            "documentation_url": "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api",
        }

        def limited() -> httpx.Response:
            headers = {"x-ratelimit-remaining": "0", "x-ratelimit-reset": str(int(self.now) + reset_in)}
            return self._respond(status, body, headers, remaining=False)

        self._fault(route, times, limited)

    def clear_faults(self) -> None:
        """GitHub answers again: the faults not yet used are dropped."""
        self._faults.clear()

    def _fault(self, route: str, times: int, make: Callable[[], httpx.Response]) -> None:
        assert route in ROUTES, f"no route named {route!r}"
        self._faults.setdefault(route, []).extend([make] * times)

    # -- the shapes GitHub answers with (keys after the official examples)

    def _repo_url(self, repo: str) -> str:
        return f"{self.api_url}/repos/{repo}"

    def artifact_json(self, a: FakeArtifact) -> dict[str, Any]:
        url = f"{self._repo_url(a.repo)}/actions/artifacts/{a.id}"
        return {
            "id": a.id,
            "node_id": f"MDg6QXJ0aWZhY3Q{a.id}",
            "name": a.name,
            "size_in_bytes": a.size_in_bytes if a.size_in_bytes is not None else len(a.content),
            "url": url,
            "archive_download_url": f"{url}/zip",
            "expired": a.expired,
            "created_at": a.created_at,
            "expires_at": iso(self.now + 90 * 86400),
            "updated_at": a.created_at,
            "digest": "sha256:" + "0" * 64,
            "workflow_run": {
                "id": a.run_id,
                "repository_id": 1296269,
                "head_repository_id": 1296269,
                "head_branch": "feature",
                "head_sha": a.head_sha,
            },
        }

    def run_json(self, run: FakeRun, attempt: FakeAttempt) -> dict[str, Any]:
        url = f"{self._repo_url(run.repo)}/actions/runs/{run.id}"
        owner, _, name = run.head_repo.partition("/")
        return {
            "id": run.id,
            "name": run.name,
            "node_id": f"MDEyOldvcmtmbG93IFJ1b{run.id}",
            "check_suite_id": run.id + 1,
            "head_branch": run.head_branch,
            "head_sha": run.head_sha,
            "path": run.path,
            "run_number": run.run_number,
            "event": run.event,
            "display_title": "Fix the flaky thing",
            "status": attempt.status,
            "conclusion": attempt.conclusion,
            "workflow_id": 159038,
            "url": url,
            "html_url": f"https://github.com/{run.repo}/actions/runs/{run.id}",
            "pull_requests": [
                {
                    "url": f"{self._repo_url(run.repo)}/pulls/{n}",
                    "id": 279147437 + n,
                    "number": n,
                    "head": {"ref": run.head_branch, "sha": run.head_sha, "repo": {"id": 1, "url": "", "name": name}},
                    "base": {"ref": "main", "sha": run.base_sha, "repo": {"id": 1, "url": "", "name": name}},
                }
                for n in run.pull_requests
            ],
            "created_at": attempt.run_started_at,
            "updated_at": attempt.updated_at,
            "run_attempt": attempt.number,
            "run_started_at": attempt.run_started_at,
            "jobs_url": f"{url}/jobs",
            "artifacts_url": f"{url}/artifacts",
            "previous_attempt_url": f"{url}/attempts/{attempt.number - 1}" if attempt.number > 1 else None,
            "head_repository": {"id": 217723378, "name": name, "full_name": run.head_repo, "owner": {"login": owner}},
            "repository": {"id": 1296269, "name": run.repo.partition("/")[2], "full_name": run.repo},
        }

    def job_json(self, run: FakeRun, job: FakeJob) -> dict[str, Any]:
        return {
            "id": job.id,
            "run_id": run.id,
            "run_url": f"{self._repo_url(run.repo)}/actions/runs/{run.id}",
            "run_attempt": job.run_attempt,
            "node_id": f"MDEyOldvcmtmbG93IEpvY{job.id}",
            "head_sha": run.head_sha,
            "url": f"{self._repo_url(run.repo)}/actions/jobs/{job.id}",
            "html_url": f"https://github.com/{run.repo}/actions/runs/{run.id}/job/{job.id}",
            "status": job.status,
            "conclusion": job.conclusion,
            "started_at": job.started_at,
            "completed_at": job.completed_at,
            "name": job.name,
            "steps": [],
            "check_run_url": f"{self._repo_url(run.repo)}/check-runs/{job.id}",
            "labels": list(job.labels),
            "runner_id": 1,
            "runner_name": job.runner_name,
            "runner_group_id": 2,
            "runner_group_name": "GitHub Actions",
            "workflow_name": run.name,
            "head_branch": run.head_branch,
        }

    def check_run_json(self, c: FakeCheckRun) -> dict[str, Any]:
        return {
            "id": c.id,
            "head_sha": c.head_sha,
            "node_id": f"MDg6Q2hlY2tSdW4{c.id}",
            "external_id": c.external_id,
            "url": f"{self._repo_url(c.repo)}/check-runs/{c.id}",
            "html_url": f"https://github.com/{c.repo}/runs/{c.id}",
            "details_url": c.details_url,
            "status": c.status,
            "conclusion": c.conclusion,
            "started_at": iso(self.now),
            "completed_at": iso(self.now) if c.status == "completed" else None,
            "output": {
                "title": c.output.get("title"),
                "summary": c.output.get("summary"),
                "text": c.output.get("text"),
                "annotations_count": len(c.annotations),
                "annotations_url": f"{self._repo_url(c.repo)}/check-runs/{c.id}/annotations",
            },
            "name": c.name,
            "check_suite": {"id": 5},
            "app": {"id": c.app_id, "slug": "flaketally", "node_id": "MDExOkludGVncmF0aW9uMQ==", "name": "Flaketally"},
            "pull_requests": [],
        }

    def comment_json(self, c: FakeComment) -> dict[str, Any]:
        return {
            "id": c.id,
            "node_id": f"MDEyOklzc3VlQ29tbWVudD{c.id}",
            "url": f"{self._repo_url(c.repo)}/issues/comments/{c.id}",
            "html_url": f"https://github.com/{c.repo}/pull/{c.issue_number}#issuecomment-{c.id}",
            "body": c.body,
            "user": {
                "login": c.user_login,
                "id": 1,
                "node_id": "MDQ6VXNlcjE=",
                "type": c.user_type,
                "site_admin": False,
            },
            "created_at": iso(self.now),
            "updated_at": iso(self.now),
            "author_association": "NONE",
        }

    def add_issue(self, repo: str, title: str, body: str, labels: list[str], state: str = "open") -> FakeIssue:
        issue = FakeIssue(next(self._ids), repo, title, body, list(labels), state)
        self.issues[issue.number] = issue
        return issue

    def issue_json(self, issue: FakeIssue) -> dict[str, Any]:
        url = f"{self._repo_url(issue.repo)}/issues/{issue.number}"
        return {
            "id": 100000 + issue.number,
            "node_id": "MDU6SXNzdWUx",
            "url": url,
            "repository_url": self._repo_url(issue.repo),
            "html_url": f"https://github.com/{issue.repo}/issues/{issue.number}",
            "number": issue.number,
            "state": issue.state,
            "state_reason": issue.state_reason,
            "title": issue.title,
            "body": issue.body,
            "user": {"login": "flaketally[bot]", "id": 1, "type": "Bot"},
            "labels": [{"id": 208045946, "name": name, "color": "f29513", "default": False} for name in issue.labels],
            "locked": False,
            "comments": 0,
            "closed_at": iso(self.now) if issue.state == "closed" else None,
            "created_at": iso(self.now),
            "updated_at": iso(self.now),
            "author_association": "NONE",
        }

    def pull_json(self, repo: str, sha: str, number: int, state: str) -> dict[str, Any]:
        return {
            "url": f"{self._repo_url(repo)}/pulls/{number}",
            "id": 1000 + number,
            "node_id": "MDExOlB1bGxSZXF1ZXN0MQ==",
            "html_url": f"https://github.com/{repo}/pull/{number}",
            "number": number,
            "state": state,
            "locked": False,
            "title": "Amazing new feature",
            "user": {"login": "octocat", "id": 1, "type": "User"},
            "body": "Please pull these awesome changes in!",
            "head": {"label": "octocat:new-topic", "ref": "new-topic", "sha": sha},
            "base": {"label": "octocat:main", "ref": "main", "sha": "f" * 40},
            "draft": False,
        }

    def token_json(self, token: str) -> dict[str, Any]:
        # githubkit parses expires_at with "%Y-%m-%dT%H:%M:%SZ" against the real clock
        expires = datetime.now(UTC) + timedelta(hours=1)
        return {
            "token": token,
            "expires_at": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
            "permissions": {"actions": "write", "checks": "write", "issues": "write", "contents": "read"},
            "repository_selection": "all",
        }

    # -- routing

    def _install_routes(self) -> None:
        repo = r"/repos/(?P<owner>[^/]+)/(?P<name>[^/]+)"
        api: list[tuple[str, str, str, Callable[..., httpx.Response]]] = [
            ("token", "POST", r"/app/installations/(?P<installation>\d+)/access_tokens", self._token),
            ("repo_installation", "GET", rf"{repo}/installation", self._repo_installation),
            ("list_artifacts", "GET", rf"{repo}/actions/runs/(?P<run_id>\d+)/artifacts", self._list_artifacts),
            ("download_artifact", "GET", rf"{repo}/actions/artifacts/(?P<artifact_id>\d+)/zip", self._download),
            ("get_run", "GET", rf"{repo}/actions/runs/(?P<run_id>\d+)", self._get_run),
            ("get_run_attempt", "GET", rf"{repo}/actions/runs/(?P<run_id>\d+)/attempts/(?P<n>\d+)", self._attempt),
            ("list_jobs", "GET", rf"{repo}/actions/runs/(?P<run_id>\d+)/attempts/(?P<n>\d+)/jobs", self._jobs),
            ("list_runs", "GET", rf"{repo}/actions/runs", self._list_runs),
            ("pulls_for_commit", "GET", rf"{repo}/commits/(?P<sha>[0-9a-f]+)/pulls", self._pulls),
            ("rerun_failed_jobs", "POST", rf"{repo}/actions/runs/(?P<run_id>\d+)/rerun-failed-jobs", self._rerun),
            ("get_content", "GET", rf"{repo}/contents/(?P<path>.+)", self._content),
            ("put_content", "PUT", rf"{repo}/contents/(?P<path>.+)", self._put_content),
            ("get_ref", "GET", rf"{repo}/git/ref/heads/(?P<branch>.+)", self._get_ref),
            ("permission", "GET", rf"{repo}/collaborators/(?P<user>[^/]+)/permission", self._permission),
            ("create_ref", "POST", rf"{repo}/git/refs", self._create_ref),
            ("update_ref", "PATCH", rf"{repo}/git/refs/heads/(?P<branch>.+)", self._update_ref),
            ("list_pulls", "GET", rf"{repo}/pulls", self._list_pulls),
            ("create_pull", "POST", rf"{repo}/pulls", self._create_pull),
            ("update_pull", "PATCH", rf"{repo}/pulls/(?P<number>\d+)", self._update_pull),
            ("list_check_runs", "GET", rf"{repo}/commits/(?P<ref>[^/]+)/check-runs", self._list_checks),
            ("create_check_run", "POST", rf"{repo}/check-runs", self._create_check),
            ("update_check_run", "PATCH", rf"{repo}/check-runs/(?P<check_id>\d+)", self._update_check),
            ("list_comments", "GET", rf"{repo}/issues/(?P<number>\d+)/comments", self._list_comments),
            ("create_comment", "POST", rf"{repo}/issues/(?P<number>\d+)/comments", self._create_comment),
            ("update_comment", "PATCH", rf"{repo}/issues/comments/(?P<comment_id>\d+)", self._update_comment),
            ("get_app", "GET", r"/app", self._get_app),
            ("list_installations", "GET", r"/app/installations", self._list_installations),
            ("list_deliveries", "GET", r"/app/hook/deliveries", self._list_deliveries),
            ("redeliver", "POST", r"/app/hook/deliveries/(?P<delivery>\d+)/attempts", self._redeliver),
            ("manifest_conversion", "POST", r"/app-manifests/(?P<code>[^/]+)/conversions", self._manifest_conversion),
            ("list_issues", "GET", rf"{repo}/issues", self._list_issues),
            ("create_issue", "POST", rf"{repo}/issues", self._create_issue),
            ("update_issue", "PATCH", rf"{repo}/issues/(?P<number>\d+)", self._update_issue),
        ]
        for name, method, path, handler in api:
            self._router.route(
                method=method, scheme="https", host=self._host, path__regex=f"^{self._base}{path}$", name=name
            ).mock(side_effect=self._handle(name, handler))
        blob = httpx.URL(BLOB_URL)
        self._router.route(
            method="GET", host=blob.host, path__regex=r"^/artifacts/(?P<artifact_id>\d+)$", name="blob"
        ).mock(side_effect=self._handle("blob", self._blob))
        self._router.route(name="unexpected").mock(side_effect=self._unexpected)

    def _handle(self, route: str, handler: Callable[..., httpx.Response]) -> Callable[..., httpx.Response]:
        def side_effect(request: httpx.Request, **groups: str) -> httpx.Response:
            self._record(route, request)
            faults = self._faults.get(route)
            if faults:
                return faults.pop(0)()
            if route not in (*APP_ROUTES, "blob", "manifest_conversion") and not self._authorized(request):
                return self._respond(401, {"message": "Bad credentials"})
            try:
                return handler(request, **groups)
            except Exception as exc:  # a bug in the fake or a request it cannot read: fail the test
                self.unexpected.append(f"{request.method} {request.url}: the fake raised {exc!r}")
                return self._respond(400, {"message": f"fake GitHub could not handle this: {exc!r}"})

        return side_effect

    def _unexpected(self, request: httpx.Request) -> httpx.Response:
        self.unexpected.append(f"{request.method} {request.url}")
        return httpx.Response(404, json={"message": f"FakeGitHub has no route for {request.method} {request.url}"})

    def _record(self, route: str, request: httpx.Request) -> None:
        body = None
        if request.content:
            try:
                body = json.loads(request.content)
            except ValueError:
                body = request.content.decode("utf-8", "replace")
        path = request.url.path
        if request.url.host == self._host and path.startswith(self._base):
            path = path[len(self._base) :]
        self.requests.append(
            Recorded(
                route=route,
                method=request.method,
                host=request.url.host,
                path=path,
                params=dict(request.url.params),
                json=body,
                authorization=request.headers.get("authorization"),
                at=self.now,
            )
        )

    def _authorized(self, request: httpx.Request) -> bool:
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        return scheme.lower() in ("token", "bearer") and token in self._tokens

    def _respond(
        self,
        status: int,
        body: Any,
        headers: dict[str, str] | None = None,
        *,
        remaining: bool = True,
    ) -> httpx.Response:
        all_headers = {"x-github-api-version-selected": "2026-03-10"}
        if remaining:
            self._remaining = max(0, self._remaining - 1)
            all_headers.update(
                {
                    "x-ratelimit-limit": "5000",
                    "x-ratelimit-remaining": str(self._remaining),
                    "x-ratelimit-reset": str(int(self.now) + 3600),
                    "x-ratelimit-resource": "core",
                }
            )
        all_headers.update(headers or {})
        return httpx.Response(status, json=body, headers=all_headers)

    def _page(self, request: httpx.Request, items: list[Any], key: str | None) -> httpx.Response:
        per_page = min(int(request.url.params.get("per_page", "30")), 100)
        page = int(request.url.params.get("page", "1"))
        chunk = items[(page - 1) * per_page : page * per_page]
        last = max(1, -(-len(items) // per_page))
        links = []
        if page < last:
            links.append(f'<{request.url.copy_set_param("page", page + 1)}>; rel="next"')
            links.append(f'<{request.url.copy_set_param("page", last)}>; rel="last"')
        body: Any = chunk if key is None else {"total_count": len(items), key: chunk}
        return self._respond(200, body, {"link": ", ".join(links)} if links else None)

    # -- handlers

    def _app_jwt_refused(self, request: httpx.Request) -> httpx.Response | None:
        """None when the request carries the App's own JWT (RS256, ``iss`` the App, at most 10 minutes)."""
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer":
            return self._respond(401, {"message": "A JSON web token could not be decoded"})
        try:
            claims = jwt.decode(
                token, _public_key(self.private_key), algorithms=["RS256"], options={"require": ["iat", "exp", "iss"]}
            )
        except jwt.PyJWTError as exc:
            return self._respond(401, {"message": f"A JSON web token could not be decoded: {exc}"})
        if str(claims["iss"]) != str(self.app_id) or claims["exp"] - claims["iat"] > 600:
            return self._respond(401, {"message": "'Issuer' claim ('iss') must be an Integer"})
        return None

    def installation_json(self, installation_id: int, account: str, **changes: Any) -> dict[str, Any]:
        """An installation as ``GET /app/installations`` lists it (keys after the official example)."""
        return {
            "id": installation_id,
            "account": {"login": account, "id": installation_id, "type": "Organization"},
            "app_id": self.app_id,
            "app_slug": "flaketally",
            "target_type": "Organization",
            "permissions": dict(self.app_permissions),
            "events": ["check_run", "workflow_run"],
            "repository_selection": "all",
            "html_url": f"https://github.com/organizations/{account}/settings/installations/{installation_id}",
            "suspended_at": None,
            **changes,
        }

    def add_delivery(self, event: str, status_code: int, *, action: str | None = None) -> dict[str, Any]:
        """A webhook delivery as ``GET /app/hook/deliveries`` lists it, newest first."""
        code = status_code
        delivery = {
            "id": next(self._ids),
            "guid": f"0b989ba4-242f-11e5-81e1-{len(self.deliveries):012d}",
            "delivered_at": iso(self.now),
            "redelivery": False,
            "duration": 0.27,
            "status": "OK" if code < 400 else ("Invalid HTTP Response: " + str(code) if code else "Timed out"),
            "status_code": code,
            "event": event,
            "action": action,
            "installation_id": self.installation_id,
            "repository_id": 1296269,
        }
        self.deliveries.insert(0, delivery)
        return delivery

    def _get_app(self, request: httpx.Request) -> httpx.Response:
        refused = self._app_jwt_refused(request)
        if refused is not None:
            return refused
        body = {
            "id": self.app_id,
            "slug": "flaketally",
            "name": "Flaketally",
            "owner": {"login": "acme", "id": 1, "type": "Organization"},
            "html_url": "https://github.com/apps/flaketally",
            "permissions": dict(self.app_permissions),
            "events": ["check_run", "workflow_run"],
        }
        return self._respond(200, body, remaining=False)

    def _list_installations(self, request: httpx.Request) -> httpx.Response:
        refused = self._app_jwt_refused(request)
        return refused if refused is not None else self._page(request, list(self.installed), None)

    def _list_deliveries(self, request: httpx.Request) -> httpx.Response:
        refused = self._app_jwt_refused(request)
        if refused is not None:
            return refused
        count = int(request.url.params.get("per_page", "30"))
        return self._respond(200, self.deliveries[:count], remaining=False)

    def _redeliver(self, request: httpx.Request, delivery: str) -> httpx.Response:
        refused = self._app_jwt_refused(request)
        if refused is not None:
            return refused
        if not any(d["id"] == int(delivery) for d in self.deliveries):
            return self._respond(404, {"message": "Not Found"})
        self.redelivered.append(int(delivery))
        return self._respond(202, {}, remaining=False)

    def _manifest_conversion(self, request: httpx.Request, code: str) -> httpx.Response:
        """``apps/create-from-manifest`` (no authentication): a code of ``manifest_codes`` becomes the App, once;
        an unknown or used code is 404, as on GitHub. Keys after the official example."""
        if code not in self.manifest_codes:
            return self._respond(404, {"message": "Not Found", "status": "404"})
        self.manifest_codes.discard(code)
        self.manifest_converted.append(code)
        web = "https://github.com" if self.api_url == API_URL else self.api_url.removesuffix("/api/v3")
        body = {
            "id": self.app_id,
            "slug": "flaketally",
            "node_id": "MDM6QXBwNDI0Mg==",
            "owner": {"login": "acme", "id": 1, "node_id": "MDEyOk9yZ2FuaXphdGlvbjE=", "type": "Organization"},
            "name": "Flaketally",
            "description": "Tells flaky test failures from real ones.",
            "external_url": "https://github.com/apps/flaketally",
            "html_url": f"{web}/apps/flaketally",
            "created_at": iso(self.now),
            "updated_at": iso(self.now),
            "permissions": dict(self.app_permissions),
            "events": ["check_run", "workflow_run"],
            "client_id": "Iv1.8a61f9b3a7aba766",
            "client_secret": "1726be1638095a19edd134c77bde3aa2ece1e5d8",
            "webhook_secret": self.manifest_webhook_secret,
            "pem": self.private_key,
        }
        return self._respond(201, body)

    def _repo_installation(self, request: httpx.Request, owner: str, name: str) -> httpx.Response:
        refused = self._app_jwt_refused(request)
        if refused is not None:
            return refused
        if f"{owner}/{name}" not in {repo for repo, _ in self.runs} | {repo for repo, _ in self.files}:
            return self._respond(404, {"message": "Not Found"})
        account = {"login": owner, "id": 1, "type": "Organization"}
        return self._respond(200, {"id": self.installation_id, "account": account, "app_id": self.app_id})

    def _token(self, request: httpx.Request, installation: str) -> httpx.Response:
        refused = self._app_jwt_refused(request)
        if refused is not None:
            return refused
        if int(installation) != self.installation_id and int(installation) not in self.other_installations:
            return self._respond(404, {"message": "Not Found"})
        self.tokens_minted += 1
        minted = f"ghs_fake{self.tokens_minted:04d}{secrets.token_hex(12)}"
        self._tokens.add(minted)
        return self._respond(201, self.token_json(minted), remaining=False)

    def _run(self, owner: str, name: str, run_id: str) -> FakeRun | None:
        return self.runs.get((f"{owner}/{name}", int(run_id)))

    def _list_artifacts(self, request: httpx.Request, owner: str, name: str, run_id: str) -> httpx.Response:
        repo = f"{owner}/{name}"
        found = [self.artifact_json(a) for a in self.artifacts.values() if a.repo == repo and a.run_id == int(run_id)]
        return self._page(request, found, "artifacts")

    def _download(self, request: httpx.Request, owner: str, name: str, artifact_id: str) -> httpx.Response:
        artifact = self.artifacts.get(int(artifact_id))
        if artifact is None or artifact.repo != f"{owner}/{name}":
            return self._respond(404, {"message": "Not Found", "status": "404"})
        if artifact.expired:
            return self._respond(410, {"message": "Artifact has expired", "status": "410"})
        location = f"{BLOB_URL}/artifacts/{artifact.id}?sig={artifact.signature}&se=2026-01-01T00%3A01%3A00Z"
        return self._respond(302, None, {"location": location})

    def _blob(self, request: httpx.Request, artifact_id: str) -> httpx.Response:
        artifact = self.artifacts.get(int(artifact_id))
        if "authorization" in request.headers:
            return httpx.Response(403, text="AuthenticationFailed: foreign credentials")
        if artifact is None or request.url.params.get("sig") != artifact.signature:
            return httpx.Response(403, text="AuthenticationFailed: bad signature")
        headers = {"content-type": "application/zip"}
        if artifact.content_length:
            return httpx.Response(200, content=artifact.content, headers=headers)
        data = artifact.content
        chunks = (data[i : i + 4096] for i in range(0, len(data), 4096))
        return httpx.Response(200, content=chunks, headers=headers)

    def _get_run(self, request: httpx.Request, owner: str, name: str, run_id: str) -> httpx.Response:
        run = self._run(owner, name, run_id)
        if run is None or not run.attempts:
            return self._respond(404, {"message": "Not Found"})
        return self._respond(200, self.run_json(run, run.latest))

    def _attempt(self, request: httpx.Request, owner: str, name: str, run_id: str, n: str) -> httpx.Response:
        run = self._run(owner, name, run_id)
        if run is None or int(n) not in run.attempts:
            return self._respond(404, {"message": "Not Found"})
        return self._respond(200, self.run_json(run, run.attempts[int(n)]))

    def _jobs(self, request: httpx.Request, owner: str, name: str, run_id: str, n: str) -> httpx.Response:
        run = self._run(owner, name, run_id)
        if run is None or int(n) not in run.attempts:
            return self._respond(404, {"message": "Not Found"})
        return self._page(request, [self.job_json(run, j) for j in run.attempts[int(n)].jobs], "jobs")

    def _list_runs(self, request: httpx.Request, owner: str, name: str) -> httpx.Response:
        repo = f"{owner}/{name}"
        sha = request.url.params.get("head_sha")
        runs = sorted(
            (r for r in self.runs.values() if r.repo == repo and (sha is None or r.head_sha == sha)),
            key=lambda r: r.id,
            reverse=True,
        )
        return self._page(request, [self.run_json(r, r.latest) for r in runs], "workflow_runs")

    def _pulls(self, request: httpx.Request, owner: str, name: str, sha: str) -> httpx.Response:
        repo = f"{owner}/{name}"
        pulls = [self.pull_json(repo, sha, n, state) for n, state in self.pulls.get((repo, sha), [])]
        return self._page(request, pulls, None)

    def _rerun(self, request: httpx.Request, owner: str, name: str, run_id: str) -> httpx.Response:
        run = self._run(owner, name, run_id)
        if run is None:
            return self._respond(404, {"message": "Not Found"})
        self.reruns.append((run.repo, run.id))
        return self._respond(201, {})

    def file_on(self, repo: str, branch: str, path: str) -> str | None:
        """A file as a branch holds it: the default branch's files, or what was written on the branch."""
        if branch == self.default_branch:
            return self.files.get((repo, path))
        return self.branch_files.get((repo, branch, path))

    def pulls_opened(self, repo: str) -> list[FakePull]:
        return [p for p in self.opened.values() if p.repo == repo]

    def _content(self, request: httpx.Request, owner: str, name: str, path: str) -> httpx.Response:
        """``repos/get-content`` for a file, in the shape of GitHub's example, with a strong ETag; a
        matching ``If-None-Match`` is a 304, which GitHub does not count against the rate limit. ``ref``
        names a branch."""
        repo = f"{owner}/{name}"
        text = self.file_on(repo, request.url.params.get("ref", self.default_branch), path)
        if text is None:
            self.content_answers.append((repo, path, 404))
            return self._respond(404, {"message": "Not Found", "status": "404"})
        data = text.encode()
        blob = hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        etag = f'"{hashlib.sha256(data).hexdigest()}"'
        if request.headers.get("if-none-match") == etag:
            self.content_answers.append((repo, path, 304))
            return httpx.Response(304, headers={"etag": etag})
        self.content_answers.append((repo, path, 200))
        encoded = base64.b64encode(data).decode()
        body = {
            "type": "file",
            "encoding": "base64",
            "size": len(data),
            "name": path.rsplit("/", 1)[-1],
            "path": path,
            "content": "\n".join(encoded[i : i + 60] for i in range(0, len(encoded), 60)) + "\n",
            "sha": blob,
            "url": f"{self.api_url}/repos/{repo}/contents/{path}",
            "html_url": f"https://github.com/{repo}/blob/main/{path}",
            "download_url": f"https://raw.githubusercontent.com/{repo}/main/{path}",
        }
        return self._respond(200, body, {"etag": etag})

    def _permission(self, request: httpx.Request, owner: str, name: str, user: str) -> httpx.Response:
        """``repos/get-collaborator-permission-level``: ``permission`` is the legacy level, ``role_name`` the role."""
        role = self.permissions.get((f"{owner}/{name}", user), "write")
        legacy = {"maintain": "write", "triage": "read"}.get(role, role)
        body = {"permission": legacy, "role_name": role, "user": {"login": user, "id": 1, "type": "User"}}
        return self._respond(200, body)

    def _sha_of(self, repo: str, branch: str) -> str | None:
        if branch == self.default_branch:
            return "f" * 40
        return self.branches.get((repo, branch))

    def _ref_json(self, repo: str, branch: str, sha: str) -> dict[str, Any]:
        # the shape of git/get-ref's example
        return {
            "ref": f"refs/heads/{branch}",
            "node_id": "MDM6UmVmcmVmcy9oZWFkcy9mZWF0dXJlQQ==",
            "url": f"{self._repo_url(repo)}/git/refs/heads/{branch}",
            "object": {"type": "commit", "sha": sha, "url": f"{self._repo_url(repo)}/git/commits/{sha}"},
        }

    def _get_ref(self, request: httpx.Request, owner: str, name: str, branch: str) -> httpx.Response:
        repo = f"{owner}/{name}"
        sha = self._sha_of(repo, branch)
        if sha is None:
            return self._respond(404, {"message": "Not Found"})
        return self._respond(200, self._ref_json(repo, branch, sha))

    def _start_branch(self, repo: str, branch: str, sha: str) -> None:
        """A branch at the default branch's commit holds its files."""
        self.branches[(repo, branch)] = sha
        for key in [k for k in self.branch_files if k[:2] == (repo, branch)]:
            del self.branch_files[key]
        for (r, path), text in self.files.items():
            if r == repo:
                self.branch_files[(repo, branch, path)] = text

    def _create_ref(self, request: httpx.Request, owner: str, name: str) -> httpx.Response:
        repo, body = f"{owner}/{name}", json.loads(request.content)
        branch = str(body["ref"]).removeprefix("refs/heads/")
        if (repo, branch) in self.branches:
            return self._respond(422, {"message": "Reference already exists"})
        self._start_branch(repo, branch, str(body["sha"]))
        return self._respond(201, self._ref_json(repo, branch, str(body["sha"])))

    def _update_ref(self, request: httpx.Request, owner: str, name: str, branch: str) -> httpx.Response:
        repo, body = f"{owner}/{name}", json.loads(request.content)
        if (repo, branch) not in self.branches:
            return self._respond(422, {"message": "Reference does not exist"})
        if not body.get("force"):
            return self._respond(422, {"message": "Update is not a fast forward"})
        self._start_branch(repo, branch, str(body["sha"]))
        return self._respond(200, self._ref_json(repo, branch, str(body["sha"])))

    def _put_content(self, request: httpx.Request, owner: str, name: str, path: str) -> httpx.Response:
        """``repos/create-or-update-file-contents`` on a branch other than the default one (the App never
        writes to the default branch); the blob ``sha`` must match the file it replaces."""
        repo, body = f"{owner}/{name}", json.loads(request.content)
        branch = str(body.get("branch") or self.default_branch)
        if branch == self.default_branch or (repo, branch) not in self.branches:
            return self._respond(422, {"message": f"the fake refuses a write to {branch}"})
        current = self.branch_files.get((repo, branch, path))
        if current is not None:
            data = current.encode()
            if body.get("sha") != hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest():
                return self._respond(409, {"message": f"{path} does not match the sha given"})
        text = base64.b64decode(body["content"]).decode("utf-8")
        self.branch_files[(repo, branch, path)] = text
        self.commits_written.append((repo, branch, path, str(body["message"])))
        return self._respond(
            200 if current is not None else 201, {"content": {"path": path}, "commit": {"sha": "c" * 40}}
        )

    def _pull_json(self, pull: FakePull) -> dict[str, Any]:
        number = pull.number
        return {
            **self.pull_json(pull.repo, self.branches.get((pull.repo, pull.head), "0" * 40), number, pull.state),
            "title": pull.title,
            "body": pull.body,
            "head": {"label": f"{pull.repo.split('/')[0]}:{pull.head}", "ref": pull.head, "sha": "0" * 40},
            "base": {"label": f"{pull.repo.split('/')[0]}:{pull.base}", "ref": pull.base, "sha": "f" * 40},
        }

    def _list_pulls(self, request: httpx.Request, owner: str, name: str) -> httpx.Response:
        repo, params = f"{owner}/{name}", request.url.params
        found = [
            self._pull_json(p)
            for p in self.opened.values()
            if p.repo == repo
            and p.state == params.get("state", "open")
            and (params.get("head") is None or params["head"] == f"{owner}:{p.head}")
        ]
        return self._respond(200, found)

    def _create_pull(self, request: httpx.Request, owner: str, name: str) -> httpx.Response:
        repo, body = f"{owner}/{name}", json.loads(request.content)
        if any(p.repo == repo and p.head == body["head"] and p.state == "open" for p in self.opened.values()):
            return self._respond(422, {"message": "A pull request already exists"})
        number = next(self._ids)
        pull = FakePull(number, repo, str(body["head"]), str(body["base"]), str(body["title"]), str(body["body"]))
        self.opened[number] = pull
        return self._respond(201, self._pull_json(pull))

    def _update_pull(self, request: httpx.Request, owner: str, name: str, number: str) -> httpx.Response:
        pull, body = self.opened.get(int(number)), json.loads(request.content)
        if pull is None:
            return self._respond(404, {"message": "Not Found"})
        pull.title, pull.body = str(body.get("title", pull.title)), str(body.get("body", pull.body))
        return self._respond(200, self._pull_json(pull))

    def _list_checks(self, request: httpx.Request, owner: str, name: str, ref: str) -> httpx.Response:
        repo = f"{owner}/{name}"
        params = request.url.params
        found = [
            self.check_run_json(c)
            for c in sorted(self.check_runs.values(), key=lambda c: c.id, reverse=True)
            if c.repo == repo
            and c.head_sha == ref
            and (params.get("check_name") is None or c.name == params["check_name"])
            and (params.get("app_id") is None or c.app_id == int(params["app_id"]))
        ]
        return self._page(request, found, "check_runs")

    def _invalid(self, message: str) -> httpx.Response:
        return self._respond(422, {"message": "Validation Failed", "errors": [message], "status": "422"})

    def _check_output(self, output: Any) -> str | None:
        if output is None:
            return None
        if not isinstance(output, dict) or not isinstance(output.get("title"), str) or "summary" not in output:
            return "output needs a title and a summary"
        for key in ("summary", "text"):
            if len(output.get(key) or "") > 65_535:
                return f"output.{key} is too long (maximum is 65535 characters)"
        annotations = output.get("annotations") or []
        if len(annotations) > 50:
            return "only 50 annotations are accepted per request"
        for a in annotations:
            missing = {"path", "start_line", "end_line", "annotation_level", "message"} - set(a)
            if missing or a["annotation_level"] not in ("notice", "warning", "failure"):
                return f"annotation is invalid: {sorted(missing) or a['annotation_level']}"
            if len(a.get("title") or "") > 255:
                return "annotation title is too long"
        return None

    def _apply_status(self, check: FakeCheckRun, body: dict[str, Any]) -> str | None:
        status, conclusion = body.get("status"), body.get("conclusion")
        if conclusion is not None and conclusion not in _CONCLUSIONS:
            return f"conclusion {conclusion!r} is not included in the list"
        if status == "completed" and conclusion is None:
            return "conclusion is required when status is completed"
        if conclusion is not None:
            check.status, check.conclusion = "completed", conclusion
        elif status is not None:
            check.status = status
        return None

    def _apply_output(self, check: FakeCheckRun, output: dict[str, Any] | None) -> None:
        if output is not None:
            check.output = {k: output.get(k) for k in ("title", "summary", "text")}
            check.annotations.extend(output.get("annotations") or [])

    def _create_check(self, request: httpx.Request, owner: str, name: str) -> httpx.Response:
        body = json.loads(request.content)
        if not body.get("name") or not body.get("head_sha"):
            return self._invalid("name and head_sha are required")
        problem = self._check_output(body.get("output"))
        check = FakeCheckRun(next(self._ids), f"{owner}/{name}", body["head_sha"], body["name"], self.app_id)
        problem = problem or self._apply_status(check, body)
        if problem:
            return self._invalid(problem)
        check.external_id = body.get("external_id", "")
        check.details_url = body.get("details_url")
        self._apply_output(check, body.get("output"))
        if "actions" in body:
            check.actions = list(body["actions"])
        self.check_runs[check.id] = check
        return self._respond(201, self.check_run_json(check))

    def _update_check(self, request: httpx.Request, owner: str, name: str, check_id: str) -> httpx.Response:
        check = self.check_runs.get(int(check_id))
        if check is None or check.repo != f"{owner}/{name}":
            return self._respond(404, {"message": "Not Found"})
        body = json.loads(request.content)
        problem = self._check_output(body.get("output")) or self._apply_status(check, body)
        if problem:
            return self._invalid(problem)
        self._apply_output(check, body.get("output"))
        if "actions" in body:
            check.actions = list(body["actions"])
        return self._respond(200, self.check_run_json(check))

    def _list_comments(self, request: httpx.Request, owner: str, name: str, number: str) -> httpx.Response:
        found = [self.comment_json(c) for c in self.comments_on(f"{owner}/{name}", int(number))]
        return self._page(request, found, None)

    def _comment_body(self, request: httpx.Request) -> str | httpx.Response:
        body = json.loads(request.content).get("body")
        if not isinstance(body, str) or not body:
            return self._invalid("body is required")
        if len(body) > 65_536:
            return self._invalid("body is too long (maximum is 65536 characters)")
        return body

    def _create_comment(self, request: httpx.Request, owner: str, name: str, number: str) -> httpx.Response:
        body = self._comment_body(request)
        if isinstance(body, httpx.Response):
            return body
        comment = self.add_comment(f"{owner}/{name}", int(number), body)
        return self._respond(201, self.comment_json(comment))

    def _update_comment(self, request: httpx.Request, owner: str, name: str, comment_id: str) -> httpx.Response:
        comment = self.comments.get(int(comment_id))
        if comment is None or comment.repo != f"{owner}/{name}":
            return self._respond(404, {"message": "Not Found"})
        body = self._comment_body(request)
        if isinstance(body, httpx.Response):
            return body
        comment.body = body
        return self._respond(200, self.comment_json(comment))

    def _issue_gate(self, repo: str) -> httpx.Response | None:
        if repo in self.unreachable:
            return self._respond(404, {"message": "Not Found"})
        if repo in self.issues_disabled:
            return self._respond(410, {"message": "Issues are disabled for this repo"})
        return None

    def _list_issues(self, request: httpx.Request, owner: str, name: str) -> httpx.Response:
        repo, params = f"{owner}/{name}", request.url.params
        refused = self._issue_gate(repo)
        if refused is not None:
            return refused
        wanted = set(filter(None, params.get("labels", "").split(",")))
        state = params.get("state", "open")
        found = [
            self.issue_json(i)
            for i in sorted(self.issues.values(), key=lambda i: -i.number)
            if i.repo == repo and wanted <= set(i.labels) and state in ("all", i.state)
        ]
        return self._page(request, found, None)

    def _create_issue(self, request: httpx.Request, owner: str, name: str) -> httpx.Response:
        repo = f"{owner}/{name}"
        refused = self._issue_gate(repo)
        if refused is not None:
            return refused
        body, data = self._comment_body(request), json.loads(request.content)
        if isinstance(body, httpx.Response):
            return body
        title = data.get("title")
        if not isinstance(title, str) or not title:
            return self._invalid("title is required")
        issue = self.add_issue(repo, title, body, [str(label) for label in data.get("labels", [])])
        return self._respond(201, self.issue_json(issue))

    def _update_issue(self, request: httpx.Request, owner: str, name: str, number: str) -> httpx.Response:
        issue, data = self.issues.get(int(number)), json.loads(request.content)
        if issue is None or issue.repo != f"{owner}/{name}":
            return self._respond(404, {"message": "Not Found"})
        if "body" in data:
            body = self._comment_body(request)
            if isinstance(body, httpx.Response):
                return body
            issue.body = body
        if data.get("state") == "closed":
            issue.closed += 1
            issue.state, issue.state_reason = "closed", data.get("state_reason")
        return self._respond(200, self.issue_json(issue))


def zip_of(members: dict[str, bytes]) -> bytes:
    """A small deflated zip, for artifacts in tests."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buffer.getvalue()
