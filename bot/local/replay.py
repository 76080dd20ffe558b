"""``flaketally replay``: the whole pipeline for one delivery, against local artifact zips.

``LocalGitHub`` answers the pipeline's questions (``bot.pipeline.port.Port``) from the delivery's payload
and a folder of zips, and keeps the check runs, comments and rerun requests it is asked to make, so a user
sees them before registering an App.
"""

from __future__ import annotations

import hashlib
import itertools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from bot.github.errors import ArtifactGone
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
from bot.github.parsing import parse_run_attempt
from bot.github.payloads import CheckOutput


class ReplayError(Exception):
    """The payload or the artifacts folder cannot be used; the message says why."""


@dataclass
class PostedCheck:
    head_sha: str
    name: str
    status: str
    conclusion: str | None = None
    title: str = ""
    summary: str = ""
    text: str = ""
    annotations: list[dict[str, object]] = field(default_factory=list)


@dataclass
class PostedComment:
    number: int
    body: str
    edited: bool = False


class LocalGitHub:
    """The pipeline's GitHub port, answered from a payload and local zips; nothing leaves the machine."""

    def __init__(self, payload: dict[str, Any], artifacts: Path) -> None:
        try:
            self.repo = str(payload["repository"]["full_name"])
            self.run = parse_run_attempt(payload["workflow_run"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ReplayError(f"not a workflow_run delivery payload: {exc}") from None
        if not artifacts.is_dir():
            raise ReplayError(f"{artifacts}: not a folder of artifact zips")
        zips = sorted(artifacts.glob("*.zip"))
        if not zips:
            raise ReplayError(f"{artifacts}: no *.zip file")
        self.files = {_artifact_id(p): p for p in zips}
        self.checks: dict[int, PostedCheck] = {}
        self.comments: dict[int, PostedComment] = {}
        self.reruns: list[int] = []  # the run ids whose failed jobs it was asked to rerun
        self._ids = itertools.count(1)
        self.branches: dict[str, str] = {}
        self.written: dict[tuple[str, str], str] = {}
        self.pulls: dict[int, tuple[str, str, str]] = {}  # number → (branch, title, body)
        self.issues: dict[int, Issue] = {}  # a replay posts no digest; kept like the pull requests

    def get_run(self, repo: str, run_id: int) -> RunAttempt:
        return self.run

    def get_run_attempt(self, repo: str, run_id: int, attempt: int) -> RunAttempt:
        if attempt == self.run.run_attempt:
            return self.run
        return RunAttempt(**{**_fields(self.run), "run_attempt": attempt, "run_started_at": None})

    def list_jobs(self, repo: str, run_id: int, attempt: int) -> list[Job]:
        return []

    def list_artifacts(self, repo: str, run_id: int) -> list[Artifact]:
        return [
            Artifact(
                id=i, name=p.stem, size_in_bytes=p.stat().st_size, expired=False, created_at=self.run.run_started_at
            )
            for i, p in self.files.items()
        ]

    def download_artifact(self, repo: str, artifact_id: int, dest: IO[bytes], max_bytes: int) -> int:
        path = self.files.get(artifact_id)
        if path is None:
            raise ArtifactGone("no such artifact", status=404)
        data = path.read_bytes()[: max_bytes + 1]
        dest.write(data)
        return len(data)

    def list_runs_for_sha(self, repo: str, head_sha: str, limit: int = 100) -> list[RunSummary]:
        return []

    def pulls_for_commit(self, repo: str, sha: str) -> list[int]:
        return []

    def rerun_failed_jobs(self, repo: str, run_id: int) -> None:
        self.reruns.append(run_id)

    def get_file(self, repo: str, path: str, etag: str | None = None) -> RepoFile:
        return RepoFile("absent")  # a replay reads no configuration: the defaults apply

    def permission_of(self, repo: str, user: str) -> str:
        return "admin"  # a replay is run by the person who owns it

    # a replay holds no repository: branches and files start empty, and pull requests are recorded
    def branch_sha(self, repo: str, branch: str) -> str | None:
        return self.branches.get(branch)

    def point_branch(self, repo: str, branch: str, sha: str) -> None:
        self.branches[branch] = sha

    def file_at(self, repo: str, path: str, ref: str) -> tuple[str | None, str | None]:
        text = self.written.get((ref, path))
        return (text, hashlib.sha1(text.encode()).hexdigest()) if text is not None else (None, None)

    def write_file(self, repo: str, path: str, branch: str, text: str, message: str, blob: str | None) -> None:
        self.written[(branch, path)] = text

    def open_pull(self, repo: str, branch: str) -> int | None:
        return next((n for n, (b, _, _) in self.pulls.items() if b == branch), None)

    def create_pull(self, repo: str, branch: str, base: str, title: str, body: str) -> int:
        number = len(self.pulls) + 1
        self.pulls[number] = (branch, title, body)
        return number

    def update_pull(self, repo: str, number: int, title: str, body: str) -> None:
        self.pulls[number] = (self.pulls[number][0], title, body)

    def find_check_run(self, repo: str, head_sha: str, name: str) -> int | None:
        ours = [i for i, c in self.checks.items() if c.head_sha == head_sha and c.name == name]
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
        check_id = next(self._ids)
        self.checks[check_id] = PostedCheck(head_sha, name, status)
        self.update_check_run(repo, check_id, status=status, conclusion=conclusion, output=output)
        return check_id

    def update_check_run(
        self,
        repo: str,
        check_run_id: int,
        *,
        status: CheckStatus | None = None,
        conclusion: CheckConclusion | None = None,
        output: CheckOutput | None = None,
    ) -> None:
        check = self.checks[check_run_id]
        check.status = status or check.status
        check.conclusion = conclusion or check.conclusion
        if output is not None:
            check.title, check.summary, check.text = output.title, output.summary, output.text or ""
            check.annotations.extend(a.to_json() for a in output.annotations)

    def list_issue_comments(self, repo: str, number: int) -> list[Comment]:
        return [Comment(i, c.body, "flaketally[bot]", "Bot") for i, c in self.comments.items() if c.number == number]

    def create_issue_comment(self, repo: str, number: int, body: str) -> int:
        comment_id = next(self._ids)
        self.comments[comment_id] = PostedComment(number, body)
        return comment_id

    def update_issue_comment(self, repo: str, comment_id: int, body: str) -> None:
        # a comment posted by an earlier replay into the same store is edited: its number is the run's
        number = self.comments[comment_id].number if comment_id in self.comments else self._pull(comment_id)
        self.comments[comment_id] = PostedComment(number, body, edited=True)

    def list_issues(self, repo: str, label: str) -> list[Issue]:
        return sorted(self.issues.values(), key=lambda i: -i.number)

    def create_issue(self, repo: str, title: str, body: str, labels: list[str]) -> int:
        number = len(self.issues) + 1
        self.issues[number] = Issue(number, title, "open", body)
        return number

    def close_issue(self, repo: str, number: int, body: str) -> None:
        self.issues[number] = Issue(number, self.issues[number].title, "closed", body)

    def _pull(self, comment_id: int) -> int:
        return self.run.pull_requests[0] if self.run.pull_requests else 0


def _artifact_id(path: Path) -> int:
    """Stable across replays of the same zip, different for a zip of another attempt."""
    return int.from_bytes(hashlib.sha256(path.name.encode() + path.read_bytes()).digest()[:6], "big")


def _fields(run: RunAttempt) -> dict[str, Any]:
    return {name: getattr(run, name) for name in RunAttempt.__dataclass_fields__}


def load_payload(path: Path) -> dict[str, Any]:
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ReplayError(f"{path}: cannot be read as JSON ({exc})") from None
    if not isinstance(payload, dict) or payload.get("action") != "completed" or "workflow_run" not in payload:
        raise ReplayError(f"{path}: not a workflow_run completed delivery")
    return payload


def render(github: LocalGitHub) -> str:
    """What would have been posted, for a person to read."""
    out = []
    for check in github.checks.values():
        out += [
            f"=== check run {check.name!r} on {check.head_sha}: {check.status}, conclusion {check.conclusion}",
            f"title: {check.title}",
            "",
            check.summary,
            "",
            check.text,
            "",
            f"--- {len(check.annotations)} annotation(s)",
        ]
        out += [
            f"{a['annotation_level']} {a['path']}:{a['start_line']} {a.get('title', '')}\n    "
            + str(a["message"]).replace("\n", "\n    ")
            for a in check.annotations
        ]
        out.append("")
    out += [f"=== rerun of the failed jobs of run {run_id} requested" for run_id in github.reruns]
    for number, (branch, title, body) in github.pulls.items():
        out += [f"=== pull request #{number} from {branch}: {title}", body, ""]
    if not github.comments:
        out.append("=== no pull request comment: the payload names no pull request, or there is nothing to say")
    for comment in github.comments.values():
        out += [
            f"=== comment on pull request #{comment.number} ({'edited' if comment.edited else 'new'})",
            comment.body,
            "",
        ]
    return "\n".join(out) + "\n"
