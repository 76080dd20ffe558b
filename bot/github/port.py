"""The one GitHub port: every request Flaketally makes to GitHub is a method here.

``GitHubPort`` is GitHub as one installation of the App sees it, synchronous (rq jobs are). It takes and
returns the plain data of ``bot.github.models`` and ``bot.github.payloads``; the transport under it
(``bot.github.client``) authenticates, retries within a budget and pages. It refuses, before GitHub does,
request bodies GitHub would refuse, and sends more than 50 annotations in consecutive requests.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable, Sequence
from typing import IO, TYPE_CHECKING, Any, Final, cast

import httpx

from bot.github.budget import UNLIMITED, Writes
from bot.github.client import Budget, Client, header_int
from bot.github.errors import ArtifactGone, ArtifactTooLarge, GitHubError, GitHubUnavailable
from bot.github.issues import IssueWrites
from bot.github.limits import DEFAULT_API_URL, MAX_PER_PAGE, MAX_RUNS_FOR_SHA
from bot.github.models import (
    Artifact,
    CheckConclusion,
    CheckStatus,
    Comment,
    Job,
    RepoFile,
    RunAttempt,
    RunSummary,
)
from bot.github.parsing import (
    parse_artifact,
    parse_check_run,
    parse_comment,
    parse_created_id,
    parse_file_text,
    parse_job,
    parse_pull,
    parse_run_attempt,
    parse_run_summary,
)
from bot.github.payloads import (
    Annotation,
    CheckOutput,
    check_comment_body,
    check_id,
    check_sha,
    check_status,
    split_repo,
    status_json,
)
from bot.github.pulls import RepositoryWrites

if TYPE_CHECKING:
    from redis import Redis

DOWNLOAD_CHUNK: Final = 1 << 16


class GitHubPort(RepositoryWrites, IssueWrites):
    """GitHub as one installation of the App sees it. One port per thread; cheap to create.

    Use it as a context manager (or call :meth:`close`) to keep one HTTP connection pool for many
    calls; without, each request opens its own client.
    """

    def __init__(
        self,
        *,
        app_id: int,
        private_key: str,
        installation_id: int,
        api_url: str = DEFAULT_API_URL,
        redis: Redis | None = None,
        on_response: Callable[[int, int | None], None] | None = None,
        max_wait: float = 60.0,
        max_retries: int = 5,
        mutation_interval: float = 0.0,
        timeout: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        writes: Writes = UNLIMITED,
    ) -> None:
        """``max_wait``: seconds of retry waits one call may spend before it raises
        :class:`GitHubUnavailable`. ``writes``: the installation's write budget (``bot.github.budget``),
        which every content-creating request spends from; it paces them across all workers, so there is
        no pause between them here unless ``mutation_interval`` asks for one. ``sleep`` and ``clock`` are
        replaceable for tests."""
        self._client = Client(
            app_id=app_id,
            private_key=private_key,
            installation_id=installation_id,
            api_url=api_url,
            redis=redis,
            on_response=on_response,
            max_wait=max_wait,
            max_retries=max_retries,
            mutation_interval=mutation_interval,
            timeout=timeout,
            sleep=sleep,
            clock=clock,
            writes=writes,
        )

    @property
    def writes(self) -> Writes:
        return self._client.writes

    def __enter__(self) -> GitHubPort:
        self._client.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()

    # -- artifacts

    def list_artifacts(self, repo: str, run_id: int) -> list[Artifact]:
        owner, name = split_repo(repo)
        run_id = check_id(run_id, "run_id")
        first = functools.partial(
            self._client.rest.actions.list_workflow_run_artifacts, owner, name, run_id, per_page=MAX_PER_PAGE
        )
        items = self._client.pages(first, key="artifacts", budget=self._client.budget())
        return [parse_artifact(item, f"artifacts[{i}]") for i, item in enumerate(items)]

    def download_artifact(self, repo: str, artifact_id: int, dest: IO[bytes], max_bytes: int) -> int:
        """Stream the artifact's zip into ``dest``; return the bytes written.

        GitHub answers with a redirect to a short-lived blob URL, which httpx follows without the
        Authorization header (another origin). Refused as soon as ``Content-Length`` or the bytes
        received pass ``max_bytes``. :class:`ArtifactGone` on 410/404. After any error ``dest`` may hold
        part of the archive: discard it.
        """
        owner, name = split_repo(repo)
        artifact_id = check_id(artifact_id, "artifact_id")
        request = functools.partial(
            self._client.rest.actions.download_artifact, owner, name, artifact_id, "zip", stream=True
        )
        with self._client.opened():
            try:
                response = self._client.send(request, self._client.budget())
            except GitHubError as exc:
                if exc.status in (404, 410):
                    raise ArtifactGone(
                        f"artifact {artifact_id} of {repo} is gone ({exc.status})", status=exc.status
                    ) from None
                raise
            raw = response.raw_response
            try:
                declared = header_int(raw.headers.get("content-length"))
                if declared is not None and declared > max_bytes:
                    raise ArtifactTooLarge(f"artifact {artifact_id} of {repo} is {declared} bytes, over {max_bytes}")
                written = 0
                for chunk in raw.iter_bytes(DOWNLOAD_CHUNK):
                    written += len(chunk)
                    if written > max_bytes:
                        raise ArtifactTooLarge(f"artifact {artifact_id} of {repo} is over {max_bytes} bytes")
                    dest.write(chunk)
            except httpx.HTTPError as exc:
                raise GitHubUnavailable(f"download of artifact {artifact_id} of {repo} broke off: {exc!r}") from exc
            finally:
                raw.close()
        return written

    # -- runs and jobs

    def get_run(self, repo: str, run_id: int) -> RunAttempt:
        """The run as it stands: its latest attempt."""
        owner, name = split_repo(repo)
        request = functools.partial(self._client.rest.actions.get_workflow_run, owner, name, check_id(run_id, "run_id"))
        return parse_run_attempt(self._client.json(self._client.send(request, self._client.budget())))

    def get_run_attempt(self, repo: str, run_id: int, attempt: int) -> RunAttempt:
        owner, name = split_repo(repo)
        request = functools.partial(
            self._client.rest.actions.get_workflow_run_attempt,
            owner,
            name,
            check_id(run_id, "run_id"),
            check_id(attempt, "attempt"),
        )
        return parse_run_attempt(self._client.json(self._client.send(request, self._client.budget())))

    def list_jobs(self, repo: str, run_id: int, attempt: int) -> list[Job]:
        owner, name = split_repo(repo)
        first = functools.partial(
            self._client.rest.actions.list_jobs_for_workflow_run_attempt,
            owner,
            name,
            check_id(run_id, "run_id"),
            check_id(attempt, "attempt"),
            per_page=MAX_PER_PAGE,
        )
        items = self._client.pages(first, key="jobs", budget=self._client.budget())
        return [parse_job(item, attempt, f"jobs[{i}]") for i, item in enumerate(items)]

    def list_runs_for_sha(self, repo: str, head_sha: str, limit: int = 100) -> list[RunSummary]:
        """The runs of a commit, newest first, at most ``limit`` (GitHub gives at most 1,000)."""
        owner, name = split_repo(repo)
        limit = max(1, min(limit, MAX_RUNS_FOR_SHA))
        first = functools.partial(
            self._client.rest.actions.list_workflow_runs_for_repo,
            owner,
            name,
            head_sha=check_sha(head_sha),
            exclude_pull_requests=True,
            per_page=min(limit, MAX_PER_PAGE),
        )
        items = self._client.pages(first, key="workflow_runs", budget=self._client.budget(), limit=limit)
        return [parse_run_summary(item, f"workflow_runs[{i}]") for i, item in enumerate(items)]

    def pulls_for_commit(self, repo: str, sha: str) -> list[int]:
        """The open pull requests a commit belongs to (``workflow_run.pull_requests`` is empty for forks)."""
        owner, name = split_repo(repo)
        first = functools.partial(
            self._client.rest.repos.list_pull_requests_associated_with_commit,
            owner,
            name,
            check_sha(sha),
            per_page=MAX_PER_PAGE,
        )
        items = self._client.pages(first, key=None, budget=self._client.budget())
        pulls = [parse_pull(item, f"pulls[{i}]") for i, item in enumerate(items)]
        return [number for number, state in pulls if state == "open"]

    def rerun_failed_jobs(self, repo: str, run_id: int) -> None:
        owner, name = split_repo(repo)
        request = functools.partial(
            self._client.rest.actions.re_run_workflow_failed_jobs, owner, name, check_id(run_id, "run_id")
        )
        self._client.mutate(request, self._client.budget())

    # -- files

    def get_file(self, repo: str, path: str, etag: str | None = None) -> RepoFile:
        """A file of the repository's default branch. With ``etag`` (from an earlier answer) the request is
        conditional: GitHub answers 304 when the file is unchanged, and a 304 costs no rate limit."""
        owner, name = split_repo(repo)
        headers = {"If-None-Match": etag} if etag else None
        request = functools.partial(self._client.rest.repos.get_content, owner, name, path, headers=headers)
        try:
            response = self._client.send(request, self._client.budget())
        except GitHubError as exc:
            if exc.status == 404:
                return RepoFile("absent")
            raise
        if response.status_code == 304:
            return RepoFile("unchanged", etag=etag)
        text = parse_file_text(self._client.json(response), f"{repo}:{path}")
        if text is None:
            return RepoFile("not_a_file")
        return RepoFile("found", text, response.headers.get("etag"))

    # -- check runs

    def find_check_run(self, repo: str, head_sha: str, name: str) -> int | None:
        """The newest check run of this App named ``name`` on the commit, if any."""
        owner, repo_name = split_repo(repo)
        first = functools.partial(
            self._client.rest.checks.list_for_ref,
            owner,
            repo_name,
            check_sha(head_sha),
            check_name=name,
            app_id=self._client.app_id,
            filter_="latest",
            per_page=MAX_PER_PAGE,
        )
        found = [
            parse_check_run(item, f"check_runs[{i}]")
            for i, item in enumerate(self._client.pages(first, key="check_runs", budget=self._client.budget()))
        ]
        ours = [run_id for run_id, run_name, app in found if run_name == name and app in (None, self._client.app_id)]
        return max(ours) if ours else None

    def create_check_run(
        self,
        repo: str,
        head_sha: str,
        name: str,
        *,
        status: CheckStatus,
        external_id: str,
        details_url: str | None = None,
        output: CheckOutput | None = None,
        conclusion: CheckConclusion | None = None,
    ) -> int:
        """Create a check run; return its id. With more than 50 annotations the rest follow in
        PATCHes, and the run only takes the requested status and conclusion with the last one."""
        owner, repo_name = split_repo(repo)
        check_status(status, conclusion)
        if not name:
            raise ValueError("check run name must not be empty")
        if details_url is not None and not details_url.startswith(("https://", "http://")):
            raise ValueError(f"details_url must be an http(s) URL: {details_url!r}")
        batches = output.batches() if output is not None else [()]
        budget = self._client.budget()
        body: dict[str, object] = {"name": name, "head_sha": check_sha(head_sha), "external_id": external_id}
        if details_url is not None:
            body["details_url"] = details_url
        if len(batches) == 1:
            body.update(status_json(status, conclusion))
        else:
            body["status"] = "in_progress" if status == "completed" else status
        if output is not None:
            body["output"] = output.to_json(batches[0])
            body["actions"] = output.actions_json()
        create = functools.partial(self._client.rest.checks.create, owner, repo_name, data=cast(Any, body))
        check_run_id = parse_created_id(self._client.json(self._client.mutate(create, budget)), "check_run")
        if output is not None and len(batches) > 1:
            self._patch_batches(owner, repo_name, check_run_id, output, batches[1:], status, conclusion, budget)
        return check_run_id

    def update_check_run(
        self,
        repo: str,
        check_run_id: int,
        *,
        status: CheckStatus | None = None,
        conclusion: CheckConclusion | None = None,
        output: CheckOutput | None = None,
    ) -> None:
        """Update a check run. Annotations are appended by GitHub to those already there, 50 per
        request; the status and conclusion go with the last request."""
        owner, repo_name = split_repo(repo)
        if status is None and conclusion is None and output is None:
            raise ValueError("nothing to update: give a status, a conclusion or an output")
        check_status(status, conclusion)
        batches = output.batches() if output is not None else [()]
        if output is None:
            body = status_json(status, conclusion)
            update = functools.partial(
                self._client.rest.checks.update,
                owner,
                repo_name,
                check_id(check_run_id, "check_run_id"),
                data=cast(Any, body),
            )
            self._client.mutate(update, self._client.budget())
            return
        self._patch_batches(owner, repo_name, check_run_id, output, batches, status, conclusion, self._client.budget())

    def _patch_batches(
        self,
        owner: str,
        repo_name: str,
        check_run_id: int,
        output: CheckOutput,
        batches: Sequence[tuple[Annotation, ...]],
        status: CheckStatus | None,
        conclusion: CheckConclusion | None,
        budget: Budget,
    ) -> None:
        check_run_id = check_id(check_run_id, "check_run_id")
        for i, batch in enumerate(batches):
            body: dict[str, object] = {"output": output.to_json(batch)}
            if i == len(batches) - 1:
                body.update(status_json(status, conclusion))
                body["actions"] = output.actions_json()
            update = functools.partial(
                self._client.rest.checks.update, owner, repo_name, check_run_id, data=cast(Any, body)
            )
            self._client.mutate(update, budget)

    # -- comments

    def list_issue_comments(self, repo: str, number: int) -> list[Comment]:
        owner, name = split_repo(repo)
        first = functools.partial(
            self._client.rest.issues.list_comments, owner, name, check_id(number, "issue number"), per_page=MAX_PER_PAGE
        )
        items = self._client.pages(first, key=None, budget=self._client.budget())
        return [parse_comment(item, f"comments[{i}]") for i, item in enumerate(items)]

    def create_issue_comment(self, repo: str, number: int, body: str) -> int:
        owner, name = split_repo(repo)
        request = functools.partial(
            self._client.rest.issues.create_comment,
            owner,
            name,
            check_id(number, "issue number"),
            data={"body": check_comment_body(body)},
        )
        return parse_created_id(self._client.json(self._client.mutate(request, self._client.budget())), "comment")

    def update_issue_comment(self, repo: str, comment_id: int, body: str) -> None:
        owner, name = split_repo(repo)
        request = functools.partial(
            self._client.rest.issues.update_comment,
            owner,
            name,
            check_id(comment_id, "comment_id"),
            data={"body": check_comment_body(body)},
        )
        self._client.mutate(request, self._client.budget())


def installation_for_repo(*, app_id: int, private_key: str, repo: str, api_url: str = DEFAULT_API_URL) -> int:
    """The id of the App's installation that covers ``repo`` (asked as the App itself, with its JWT);
    :class:`GitHubError` (404) when the App is not installed there."""
    from githubkit import AppAuthStrategy, GitHub
    from githubkit.exception import RequestFailed

    owner, name = split_repo(repo)
    with GitHub(AppAuthStrategy(app_id, private_key), base_url=api_url.rstrip("/") + "/", auto_retry=False) as gh:
        try:
            answer = gh.rest.apps.get_repo_installation(owner, name)
        except RequestFailed as exc:
            status = exc.response.status_code
            raise GitHubError(f"the App is not installed on {repo} ({status})", status=status) from None
        found = parse_created_id(answer.json(), "installation")
    return found
