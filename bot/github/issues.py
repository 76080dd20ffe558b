"""The issues the App keeps in a repository: the weekly digest, one issue a week, found again by its label
and title, and the previous one closed with a line pointing at the next. ``GitHubPort`` has these methods;
they reach GitHub through its ``Client``."""

from __future__ import annotations

import functools

from bot.github.client import Client
from bot.github.limits import MAX_PER_PAGE
from bot.github.models import Issue
from bot.github.parsing import parse_issue
from bot.github.payloads import check_comment_body, check_id, split_repo

# the most recent issues of a label looked at: the digest's own, one a week, are among the first
ISSUES_LOOKED_AT = 100


class IssueWrites:
    _client: Client

    def list_issues(self, repo: str, label: str) -> list[Issue]:
        """The repository's issues (open and closed, not pull requests) with ``label``, newest first, at most
        ``ISSUES_LOOKED_AT``. :class:`GitHubError` 404 when the installation cannot reach the repository,
        410 when its issues are turned off."""
        owner, name = split_repo(repo)
        first = functools.partial(
            self._client.rest.issues.list_for_repo,
            owner,
            name,
            labels=label,
            state="all",
            sort="created",
            direction="desc",
            per_page=MAX_PER_PAGE,
        )
        items = self._client.pages(first, key=None, budget=self._client.budget(), limit=ISSUES_LOOKED_AT)
        found = []
        for i, item in enumerate(items):
            if isinstance(item, dict) and "pull_request" in item:
                continue  # the issues endpoint lists pull requests too
            found.append(parse_issue(item, f"issues[{i}]"))
        return found

    def create_issue(self, repo: str, title: str, body: str, labels: list[str]) -> int:
        """Open an issue; its number. GitHub creates a label it does not have yet."""
        owner, name = split_repo(repo)
        data = {"title": title[:256], "body": check_comment_body(body), "labels": labels}
        request = functools.partial(self._client.rest.issues.create, owner, name, data=data)
        return parse_issue(self._client.json(self._client.mutate(request, self._client.budget()))).number

    def close_issue(self, repo: str, number: int, body: str) -> None:
        """Close an issue as completed, its body replaced by ``body`` (one request)."""
        owner, name = split_repo(repo)
        data = {"state": "closed", "state_reason": "completed", "body": check_comment_body(body)}
        request = functools.partial(
            self._client.rest.issues.update, owner, name, check_id(number, "issue number"), data=data
        )
        self._client.mutate(request, self._client.budget())
