"""What the App writes to a repository besides check runs and comments: a branch, a file committed on it, the
pull request from it (the quarantine's changes), and who may ask for that (a collaborator's permission).
``GitHubPort`` has these methods; they reach GitHub through its ``Client``."""

from __future__ import annotations

import base64
import functools

from bot.github.client import Client
from bot.github.errors import GitHubError
from bot.github.parsing import parse_blob_sha, parse_file_text, parse_permission, parse_pull, parse_ref_sha
from bot.github.payloads import check_branch, check_comment_body, check_id, check_sha, split_repo


class RepositoryWrites:
    _client: Client

    def permission_of(self, repo: str, user: str) -> str:
        """``admin``, ``maintain``, ``write``, ``triage``, ``read`` or ``none``: what ``user`` may do in the
        repository (the role name when GitHub gives one)."""
        owner, name = split_repo(repo)
        request = functools.partial(self._client.rest.repos.get_collaborator_permission_level, owner, name, user)
        try:
            answer = self._client.json(self._client.send(request, self._client.budget()))
        except GitHubError as exc:
            if exc.status == 404:
                return "none"
            raise
        return parse_permission(answer, f"{repo} permission of {user}")

    def branch_sha(self, repo: str, branch: str) -> str | None:
        """The commit a branch points at; None when there is no such branch."""
        owner, name = split_repo(repo)
        request = functools.partial(self._client.rest.git.get_ref, owner, name, f"heads/{check_branch(branch)}")
        try:
            answer = self._client.json(self._client.send(request, self._client.budget()))
        except GitHubError as exc:
            if exc.status == 404:
                return None
            raise
        return parse_ref_sha(answer, f"{repo} heads/{branch}")

    def point_branch(self, repo: str, branch: str, sha: str) -> None:
        """Create ``branch`` at ``sha``, or move it there (a branch left from a closed pull request)."""
        owner, name = split_repo(repo)
        ref = f"heads/{check_branch(branch)}"
        if self.branch_sha(repo, branch) is None:
            create = functools.partial(
                self._client.rest.git.create_ref, owner, name, data={"ref": f"refs/{ref}", "sha": check_sha(sha)}
            )
            self._client.mutate(create, self._client.budget())
        else:
            move = functools.partial(
                self._client.rest.git.update_ref, owner, name, ref, data={"sha": check_sha(sha), "force": True}
            )
            self._client.mutate(move, self._client.budget())

    def file_at(self, repo: str, path: str, ref: str) -> tuple[str | None, str | None]:
        """A file's text on a branch and its blob sha (to replace it); (None, None) when it is absent."""
        owner, name = split_repo(repo)
        request = functools.partial(self._client.rest.repos.get_content, owner, name, path, ref=check_branch(ref))
        try:
            answer = self._client.json(self._client.send(request, self._client.budget()))
        except GitHubError as exc:
            if exc.status == 404:
                return None, None
            raise
        return parse_file_text(answer, f"{repo}:{path}@{ref}"), parse_blob_sha(answer, f"{repo}:{path}@{ref}")

    def write_file(self, repo: str, path: str, branch: str, text: str, message: str, blob: str | None) -> None:
        """Commit ``text`` as ``path`` on ``branch`` (``blob``: the sha of the file it replaces)."""
        owner, name = split_repo(repo)
        data: dict[str, str] = {
            "message": message,
            "content": base64.b64encode(text.encode("utf-8")).decode("ascii"),
            "branch": check_branch(branch),
        }
        if blob:
            data["sha"] = blob
        request = functools.partial(
            self._client.rest.repos.create_or_update_file_contents, owner, name, path, data=data
        )
        self._client.mutate(request, self._client.budget())

    def open_pull(self, repo: str, branch: str) -> int | None:
        """The number of the open pull request from ``branch`` of the repository itself, if any."""
        owner, name = split_repo(repo)
        first = functools.partial(
            self._client.rest.pulls.list, owner, name, state="open", head=f"{owner}:{check_branch(branch)}"
        )
        items = self._client.pages(first, key=None, budget=self._client.budget())
        pulls = [parse_pull(item, f"pulls[{i}]") for i, item in enumerate(items)]
        return next((number for number, state in pulls if state == "open"), None)

    def create_pull(self, repo: str, branch: str, base: str, title: str, body: str) -> int:
        owner, name = split_repo(repo)
        data = {
            "title": title,
            "head": check_branch(branch),
            "base": check_branch(base),
            "body": check_comment_body(body),
        }
        request = functools.partial(self._client.rest.pulls.create, owner, name, data=data)
        return parse_pull(self._client.json(self._client.mutate(request, self._client.budget())), "pull")[0]

    def update_pull(self, repo: str, number: int, title: str, body: str) -> None:
        owner, name = split_repo(repo)
        request = functools.partial(
            self._client.rest.pulls.update,
            owner,
            name,
            check_id(number, "pull number"),
            data={"title": title, "body": check_comment_body(body)},
        )
        self._client.mutate(request, self._client.budget())
