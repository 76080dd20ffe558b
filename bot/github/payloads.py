"""What Flaketally sends to GitHub, refused before GitHub would refuse it: annotations, check run
outputs and statuses, comment bodies, and the names and ids that go into request paths. The ``bounded``
constructors make any text fit."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from bot.github.limits import (
    ANNOTATIONS_PER_REQUEST,
    COMMIT_SHA,
    MAX_ANNOTATION_BYTES,
    MAX_COMMENT,
    MAX_OUTPUT_TEXT,
    MAX_TITLE,
    REPO_FULL_NAME,
)
from bot.github.models import CONCLUSIONS, LEVELS, STATUSES, AnnotationLevel
from bot.render.markdown import truncate


def fit_bytes(text: str, limit: int) -> str:
    """``text`` cut so its UTF-8 encoding is at most ``limit`` bytes; a cut text ends with ``…``."""
    encoded = text.encode("utf-8", "surrogatepass")
    if len(encoded) <= limit:
        return text
    ellipsis = "…".encode()
    return encoded[: max(0, limit - len(ellipsis))].decode("utf-8", "ignore") + "…"


def _utf8_len(text: str) -> int:
    return len(text.encode("utf-8", "surrogatepass"))


def _require_int(value: object, what: str, minimum: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(f"{what} must be an integer >= {minimum}, not {value!r}")


@dataclass(frozen=True, slots=True)
class Annotation:
    """One check-run annotation, refusing what GitHub would refuse. ``bounded`` makes any text fit."""

    path: str
    start_line: int
    end_line: int
    level: AnnotationLevel
    message: str
    title: str | None = None
    raw_details: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path:
            raise ValueError("annotation path must be a non-empty string")
        _require_int(self.start_line, "annotation start_line", 1)
        _require_int(self.end_line, "annotation end_line", self.start_line)
        if self.level not in LEVELS:
            raise ValueError(f"annotation level must be one of {sorted(LEVELS)}, not {self.level!r}")
        if not self.message:
            raise ValueError("annotation message must not be empty")
        if _utf8_len(self.message) > MAX_ANNOTATION_BYTES:
            raise ValueError(f"annotation message is over {MAX_ANNOTATION_BYTES} bytes")
        if self.title is not None and len(self.title) > MAX_TITLE:
            raise ValueError(f"annotation title is over {MAX_TITLE} characters")
        if self.raw_details is not None and _utf8_len(self.raw_details) > MAX_ANNOTATION_BYTES:
            raise ValueError(f"annotation raw_details is over {MAX_ANNOTATION_BYTES} bytes")

    @classmethod
    def bounded(
        cls,
        path: str,
        start_line: int | None,
        end_line: int | None,
        level: AnnotationLevel,
        message: str,
        title: str | None = None,
        raw_details: str | None = None,
    ) -> Annotation:
        """An annotation whose texts are cut to GitHub's limits and whose lines are made valid
        (missing or 0 becomes line 1; an end before the start becomes the start)."""
        start = start_line if start_line and start_line >= 1 else 1
        end = end_line if end_line and end_line >= start else start
        return cls(
            path=path,
            start_line=start,
            end_line=end,
            level=level,
            message=fit_bytes(message, MAX_ANNOTATION_BYTES) if message else "(no message)",
            title=truncate(title, MAX_TITLE) if title is not None else None,
            raw_details=fit_bytes(raw_details, MAX_ANNOTATION_BYTES) if raw_details is not None else None,
        )

    def to_json(self) -> dict[str, object]:
        body: dict[str, object] = {
            "path": self.path,
            "start_line": self.start_line,
            "end_line": self.end_line,
            "annotation_level": self.level,
            "message": self.message,
        }
        if self.title is not None:
            body["title"] = self.title
        if self.raw_details is not None:
            body["raw_details"] = self.raw_details
        return body


MAX_ACTIONS = 3


@dataclass(frozen=True, slots=True)
class CheckAction:
    """A button on a check run; a click comes back as ``check_run`` ``requested_action`` with ``identifier``."""

    label: str  # at most 20 characters
    description: str  # at most 40 characters
    identifier: str  # at most 20 characters

    def __post_init__(self) -> None:
        for name, limit in (("label", 20), ("description", 40), ("identifier", 20)):
            value = getattr(self, name)
            if not value or len(value) > limit:
                raise ValueError(f"check run action {name} must be 1 to {limit} characters: {value!r}")


@dataclass(frozen=True, slots=True)
class CheckOutput:
    """A check run's output. Any number of annotations: the port sends them 50 per request. ``actions``:
    the check run's buttons (at most three), sent with the output and replacing the earlier ones."""

    title: str
    summary: str
    text: str | None = None
    annotations: tuple[Annotation, ...] = ()
    actions: tuple[CheckAction, ...] = ()

    def __post_init__(self) -> None:
        if not self.title:
            raise ValueError("check output title must not be empty")
        if len(self.title) > MAX_TITLE:
            raise ValueError(f"check output title is over {MAX_TITLE} characters")
        if len(self.summary) > MAX_OUTPUT_TEXT:
            raise ValueError(f"check output summary is over {MAX_OUTPUT_TEXT} characters")
        if self.text is not None and len(self.text) > MAX_OUTPUT_TEXT:
            raise ValueError(f"check output text is over {MAX_OUTPUT_TEXT} characters")
        if not isinstance(self.annotations, tuple) or not all(isinstance(a, Annotation) for a in self.annotations):
            raise ValueError("check output annotations must be a tuple of Annotation")
        if len(self.actions) > MAX_ACTIONS:
            raise ValueError(f"a check run has at most {MAX_ACTIONS} actions")

    def actions_json(self) -> list[dict[str, str]]:
        return [{"label": a.label, "description": a.description, "identifier": a.identifier} for a in self.actions]

    @classmethod
    def bounded(
        cls,
        title: str,
        summary: str,
        text: str | None = None,
        annotations: Sequence[Annotation] = (),
        actions: Sequence[CheckAction] = (),
    ) -> CheckOutput:
        """An output whose texts are cut to GitHub's limits (an empty title becomes ``Flaketally``)."""
        return cls(
            title=truncate(title, MAX_TITLE) or "Flaketally",
            summary=truncate(summary, MAX_OUTPUT_TEXT),
            text=truncate(text, MAX_OUTPUT_TEXT) if text is not None else None,
            annotations=tuple(annotations),
            actions=tuple(actions),
        )

    def to_json(self, annotations: Sequence[Annotation]) -> dict[str, object]:
        body: dict[str, object] = {"title": self.title, "summary": self.summary}
        if self.text is not None:
            body["text"] = self.text
        if annotations:
            body["annotations"] = [a.to_json() for a in annotations]
        return body

    def batches(self) -> list[tuple[Annotation, ...]]:
        """The annotations in request-sized batches; one empty batch when there are none."""
        n = ANNOTATIONS_PER_REQUEST
        return [self.annotations[i : i + n] for i in range(0, len(self.annotations), n)] or [()]


def check_comment_body(body: str) -> str:
    if not isinstance(body, str) or not body:
        raise ValueError("comment body must be a non-empty string")
    if len(body) > MAX_COMMENT:
        raise ValueError(f"comment body is over {MAX_COMMENT} characters")
    return body


def split_repo(repo: str) -> tuple[str, str]:
    """``owner/name`` as GitHub spells it, refused otherwise (it goes into URL paths)."""
    match = REPO_FULL_NAME.fullmatch(repo) if isinstance(repo, str) else None
    if match is None or match.group(2) in (".", ".."):
        raise ValueError(f"not a repository full name (owner/name): {repo!r}")
    return match.group(1), match.group(2)


_BRANCH = re.compile(r"^(?!/)(?!.*//)(?!.*\.\.)(?!.*@\{)[A-Za-z0-9._/\-]{1,200}(?<![/.])$")


def check_branch(branch: str) -> str:
    """A branch name that is safe in a URL path and a ref (git's rules, narrowed)."""
    if not isinstance(branch, str) or not _BRANCH.fullmatch(branch) or branch.endswith(".lock"):
        raise ValueError(f"not a branch name: {branch!r}")
    return branch


def check_sha(sha: str) -> str:
    if not isinstance(sha, str) or not COMMIT_SHA.fullmatch(sha):
        raise ValueError(f"not a commit SHA: {sha!r}")
    return sha


def check_id(value: int, what: str) -> int:
    _require_int(value, what, 1)
    return value


def check_status(status: str | None, conclusion: str | None) -> None:
    if status is not None and status not in STATUSES:
        raise ValueError(f"check run status must be one of {sorted(STATUSES)}, not {status!r}")
    if conclusion is not None and conclusion not in CONCLUSIONS:
        raise ValueError(f"check run conclusion must be one of {sorted(CONCLUSIONS)}, not {conclusion!r}")
    if status == "completed" and conclusion is None:
        raise ValueError("a completed check run needs a conclusion")
    if conclusion is not None and status not in (None, "completed"):
        raise ValueError(f"a conclusion completes the check run: status {status!r} contradicts it")


def status_json(status: str | None, conclusion: str | None) -> dict[str, object]:
    if conclusion is not None:
        return {"status": "completed", "conclusion": conclusion}
    return {"status": status} if status is not None else {}
