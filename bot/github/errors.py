"""What can go wrong when Flaketally talks to GitHub, as the callers need to tell it apart."""

from __future__ import annotations


class GitHubError(Exception):
    """GitHub refused the request for good (a 4xx that is not a rate limit) or answered nonsense."""

    def __init__(self, message: str, *, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class GitHubUnavailable(Exception):
    """Transient: 5xx, network trouble or a rate limit outlasted the wait budget. Retry the job later,
    not before ``retry_after`` seconds when it is known."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class ArtifactGone(GitHubError):
    """The artifact expired (410) or was deleted (404): name it in the check run."""


class ArtifactTooLarge(GitHubError):
    """The archive is larger than the download cap; nothing beyond the cap was written."""
