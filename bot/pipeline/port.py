"""What the pipeline asks of GitHub: every call it may make, in one protocol.

Implemented by ``bot.github.port.GitHubPort`` (GitHub itself), ``bot.local.replay.LocalGitHub`` (a payload
and local zips) and, at the HTTP layer, by the suite's fake (``tests/github_fake.py``); a test checks that
the three offer the same calls. Adding a call means adding it here and to each of them.
"""

from __future__ import annotations

from typing import IO, Protocol

from bot.github.models import (
    Artifact,
    CheckConclusion,
    CheckStatus,
    Comment,
    Issue,
    Job,
    RepoFile,
    RunAttempt,
    RunSummary,
)
from bot.github.payloads import CheckOutput


class Port(Protocol):
    # runs, jobs and artifacts
    def get_run(self, repo: str, run_id: int) -> RunAttempt: ...

    def get_run_attempt(self, repo: str, run_id: int, attempt: int) -> RunAttempt: ...

    def list_jobs(self, repo: str, run_id: int, attempt: int) -> list[Job]: ...

    def list_artifacts(self, repo: str, run_id: int) -> list[Artifact]: ...

    def download_artifact(self, repo: str, artifact_id: int, dest: IO[bytes], max_bytes: int) -> int: ...

    def list_runs_for_sha(self, repo: str, head_sha: str, limit: int = 100) -> list[RunSummary]: ...

    def pulls_for_commit(self, repo: str, sha: str) -> list[int]: ...

    def rerun_failed_jobs(self, repo: str, run_id: int) -> None: ...

    # files of the default branch (the configuration)
    def get_file(self, repo: str, path: str, etag: str | None = None) -> RepoFile: ...

    # check runs
    def permission_of(self, repo: str, user: str) -> str: ...

    def branch_sha(self, repo: str, branch: str) -> str | None: ...

    def point_branch(self, repo: str, branch: str, sha: str) -> None: ...

    def file_at(self, repo: str, path: str, ref: str) -> tuple[str | None, str | None]: ...

    def write_file(self, repo: str, path: str, branch: str, text: str, message: str, blob: str | None) -> None: ...

    def open_pull(self, repo: str, branch: str) -> int | None: ...

    def create_pull(self, repo: str, branch: str, base: str, title: str, body: str) -> int: ...

    def update_pull(self, repo: str, number: int, title: str, body: str) -> None: ...

    def find_check_run(self, repo: str, head_sha: str, name: str) -> int | None: ...

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
    ) -> int: ...

    def update_check_run(
        self,
        repo: str,
        check_run_id: int,
        *,
        status: CheckStatus | None = None,
        conclusion: CheckConclusion | None = None,
        output: CheckOutput | None = None,
    ) -> None: ...

    # pull request comments
    def list_issue_comments(self, repo: str, number: int) -> list[Comment]: ...

    def create_issue_comment(self, repo: str, number: int, body: str) -> int: ...

    def update_issue_comment(self, repo: str, comment_id: int, body: str) -> None: ...

    # issues (the weekly digest)
    def list_issues(self, repo: str, label: str) -> list[Issue]: ...

    def create_issue(self, repo: str, title: str, body: str, labels: list[str]) -> int: ...

    def close_issue(self, repo: str, number: int, body: str) -> None: ...
