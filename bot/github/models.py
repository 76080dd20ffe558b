"""What Flaketally reads from GitHub: small frozen dataclasses of plain data, and GitHub's vocabularies
for check runs. Domain code sees these, never githubkit or httpx."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal, get_args

AnnotationLevel = Literal["notice", "warning", "failure"]
CheckStatus = Literal["queued", "in_progress", "completed"]
# "stale" is in GitHub's enum but only GitHub may set it.
CheckConclusion = Literal["action_required", "cancelled", "failure", "neutral", "success", "skipped", "timed_out"]
LEVELS: Final = frozenset(get_args(AnnotationLevel))
STATUSES: Final = frozenset(get_args(CheckStatus))
CONCLUSIONS: Final = frozenset(get_args(CheckConclusion))


@dataclass(frozen=True, slots=True)
class Artifact:
    id: int
    name: str
    size_in_bytes: int
    expired: bool
    created_at: str | None


@dataclass(frozen=True, slots=True)
class RunAttempt:
    id: int
    run_attempt: int
    head_sha: str
    head_branch: str | None
    event: str
    status: str | None
    conclusion: str | None
    path: str
    name: str | None
    html_url: str
    run_number: int
    run_started_at: str | None
    updated_at: str
    pull_requests: tuple[int, ...]
    head_repo_full_name: str | None
    base_shas: tuple[str, ...] = ()  # the base commits of its pull requests (not given for forks)


@dataclass(frozen=True, slots=True)
class RunSummary:
    """A run of a commit, from the runs listing: its latest attempt."""

    id: int
    run_attempt: int
    path: str
    event: str
    status: str | None
    conclusion: str | None
    run_started_at: str | None


@dataclass(frozen=True, slots=True)
class Job:
    id: int
    name: str
    run_attempt: int
    status: str
    conclusion: str | None
    started_at: str | None
    completed_at: str | None
    labels: tuple[str, ...]
    runner_name: str | None
    html_url: str | None


@dataclass(frozen=True, slots=True)
class Comment:
    id: int
    body: str
    user_login: str | None
    user_type: str | None


@dataclass(frozen=True, slots=True)
class Issue:
    """An issue as a listing gives it (the digest finds its own by label and title)."""

    number: int
    title: str
    state: str  # open, closed
    body: str


@dataclass(frozen=True, slots=True)
class RepoFile:
    """A file of a repository's default branch as GitHub answered a (conditional) request for it.

    ``state``: ``found`` (``text`` holds it), ``unchanged`` (the ETag sent still matches: 304, which costs
    no rate limit), ``absent`` (404), or ``not_a_file`` (a directory, a submodule)."""

    state: str
    text: str | None = None
    etag: str | None = None
