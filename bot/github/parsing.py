"""Reading GitHub's responses: each parser reads only what the app uses, with ``obj[key]`` for what it
needs and ``obj.get(key)`` for what may be absent, and checks the types. A response is outside input
like any other: a malformed one is a :class:`GitHubError`. The contract test runs these over GitHub's
official examples."""

from __future__ import annotations

import base64
from collections.abc import Mapping

from bot.github.errors import GitHubError
from bot.github.models import Artifact, Comment, Issue, Job, RunAttempt, RunSummary


def _malformed(where: str, problem: str) -> GitHubError:
    return GitHubError(f"unexpected response from GitHub: {where} {problem}")


def _obj(value: object, where: str) -> Mapping[str, object]:
    if not isinstance(value, Mapping):
        raise _malformed(where, "is not an object")
    return value


def _list(value: object, where: str) -> list[object]:
    if not isinstance(value, list):
        raise _malformed(where, "is not a list")
    return value


def _need(obj: Mapping[str, object], key: str, where: str) -> object:
    try:
        return obj[key]
    except KeyError:
        raise _malformed(f"{where}.{key}", "is missing") from None


def _int(obj: Mapping[str, object], key: str, where: str) -> int:
    value = _need(obj, key, where)
    if isinstance(value, bool) or not isinstance(value, int):
        raise _malformed(f"{where}.{key}", "is not an integer")
    return value


def _opt_int(obj: Mapping[str, object], key: str, where: str) -> int | None:
    value = obj.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise _malformed(f"{where}.{key}", "is not an integer")
    return value


def _str(obj: Mapping[str, object], key: str, where: str) -> str:
    value = _need(obj, key, where)
    if not isinstance(value, str):
        raise _malformed(f"{where}.{key}", "is not a string")
    return value


def _opt_str(obj: Mapping[str, object], key: str, where: str) -> str | None:
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _malformed(f"{where}.{key}", "is not a string")
    return value


def _bool(obj: Mapping[str, object], key: str, where: str) -> bool:
    value = _need(obj, key, where)
    if not isinstance(value, bool):
        raise _malformed(f"{where}.{key}", "is not a boolean")
    return value


def parse_artifact(value: object, where: str = "artifact") -> Artifact:
    obj = _obj(value, where)
    return Artifact(
        id=_int(obj, "id", where),
        name=_str(obj, "name", where),
        size_in_bytes=_int(obj, "size_in_bytes", where),
        expired=_bool(obj, "expired", where),
        created_at=_opt_str(obj, "created_at", where),
    )


def parse_run_attempt(value: object, where: str = "workflow_run") -> RunAttempt:
    obj = _obj(value, where)
    pulls, bases = [], []
    for i, item in enumerate(_list(obj.get("pull_requests") or [], f"{where}.pull_requests")):
        pull = _obj(item, f"{where}.pull_requests[{i}]")
        pulls.append(_int(pull, "number", f"{where}.pull_requests[{i}]"))
        base = pull.get("base")
        if isinstance(base, Mapping) and isinstance(base.get("sha"), str):
            bases.append(str(base["sha"]))
    head_repo = obj.get("head_repository")
    return RunAttempt(
        id=_int(obj, "id", where),
        run_attempt=_opt_int(obj, "run_attempt", where) or 1,
        head_sha=_str(obj, "head_sha", where),
        head_branch=_opt_str(obj, "head_branch", where),
        event=_str(obj, "event", where),
        status=_opt_str(obj, "status", where),
        conclusion=_opt_str(obj, "conclusion", where),
        path=_str(obj, "path", where),
        name=_opt_str(obj, "name", where),
        html_url=_str(obj, "html_url", where),
        run_number=_int(obj, "run_number", where),
        run_started_at=_opt_str(obj, "run_started_at", where),
        updated_at=_str(obj, "updated_at", where),
        pull_requests=tuple(pulls),
        head_repo_full_name=(
            _opt_str(_obj(head_repo, f"{where}.head_repository"), "full_name", f"{where}.head_repository")
            if head_repo is not None
            else None
        ),
        base_shas=tuple(dict.fromkeys(bases)),
    )


def parse_run_summary(value: object, where: str = "workflow_run") -> RunSummary:
    obj = _obj(value, where)
    return RunSummary(
        id=_int(obj, "id", where),
        run_attempt=_opt_int(obj, "run_attempt", where) or 1,
        path=_str(obj, "path", where),
        event=_str(obj, "event", where),
        status=_opt_str(obj, "status", where),
        conclusion=_opt_str(obj, "conclusion", where),
        run_started_at=_opt_str(obj, "run_started_at", where),
    )


def parse_job(value: object, attempt: int, where: str = "job") -> Job:
    """``attempt`` is the attempt that was listed: GitHub's job object may leave ``run_attempt`` out."""
    obj = _obj(value, where)
    labels = []
    for i, label in enumerate(_list(obj.get("labels") or [], f"{where}.labels")):
        if not isinstance(label, str):
            raise _malformed(f"{where}.labels[{i}]", "is not a string")
        labels.append(label)
    return Job(
        id=_int(obj, "id", where),
        name=_str(obj, "name", where),
        run_attempt=_opt_int(obj, "run_attempt", where) or attempt,
        status=_str(obj, "status", where),
        conclusion=_opt_str(obj, "conclusion", where),
        started_at=_opt_str(obj, "started_at", where),
        completed_at=_opt_str(obj, "completed_at", where),
        labels=tuple(labels),
        runner_name=_opt_str(obj, "runner_name", where),
        html_url=_opt_str(obj, "html_url", where),
    )


def parse_comment(value: object, where: str = "comment") -> Comment:
    obj = _obj(value, where)
    user = obj.get("user")
    login = kind = None
    if user is not None:
        user_obj = _obj(user, f"{where}.user")
        login = _opt_str(user_obj, "login", f"{where}.user")
        kind = _opt_str(user_obj, "type", f"{where}.user")
    return Comment(id=_int(obj, "id", where), body=_opt_str(obj, "body", where) or "", user_login=login, user_type=kind)


def parse_issue(value: object, where: str = "issue") -> Issue:
    obj = _obj(value, where)
    return Issue(
        number=_int(obj, "number", where),
        title=_str(obj, "title", where),
        state=_str(obj, "state", where),
        body=_opt_str(obj, "body", where) or "",
    )


def parse_pull(value: object, where: str = "pull_request") -> tuple[int, str]:
    """A pull request's number and state (``open``, ``closed``)."""
    obj = _obj(value, where)
    return _int(obj, "number", where), _str(obj, "state", where)


def parse_check_run(value: object, where: str = "check_run") -> tuple[int, str, int | None]:
    """A check run's id, name and the id of the App that owns it (when given)."""
    obj = _obj(value, where)
    app = obj.get("app")
    app_id = _opt_int(_obj(app, f"{where}.app"), "id", f"{where}.app") if app is not None else None
    return _int(obj, "id", where), _str(obj, "name", where), app_id


def parse_created_id(value: object, what: str) -> int:
    """The ``id`` of what a POST created (a check run, a comment)."""
    return _int(_obj(value, what), "id", what)


def page_items(value: object, key: str | None) -> list[object]:
    """The items of one page of a listing: the page itself, or its ``key`` member."""
    return _list(_need(_obj(value, "page"), key, "page") if key is not None else value, key or "page")


def parse_file_text(value: object, where: str = "content") -> str | None:
    """The text of a ``repos/get-content`` answer for a file (base64 in ``content``); None when the
    answer is not a file (a directory is a list; a submodule or symlink names another ``type``)."""
    if not isinstance(value, dict) or value.get("type") != "file":
        return None
    obj = _obj(value, where)
    encoded = _str(obj, "content", where)
    if _opt_str(obj, "encoding", where) not in (None, "base64"):
        raise GitHubError(f"{where}: encoding {obj.get('encoding')!r} is not base64", status=200)
    try:
        return base64.b64decode(encoded.replace("\\n", "").replace("\n", ""), validate=True).decode("utf-8")
    except (ValueError, UnicodeDecodeError) as exc:
        raise GitHubError(f"{where}: the content cannot be read: {exc}", status=200) from None


def parse_ref_sha(value: object, where: str = "ref") -> str:
    """The commit a ``git/ref`` answer points at (``object.sha``)."""
    target = _obj(_need(_obj(value, where), "object", where), f"{where}.object")
    return _str(target, "sha", f"{where}.object")


def parse_blob_sha(value: object, where: str = "content") -> str | None:
    """The blob sha of a ``repos/get-content`` answer for a file (None for anything else)."""
    if not isinstance(value, dict) or value.get("type") != "file":
        return None
    return _str(_obj(value, where), "sha", where)


def parse_permission(value: object, where: str = "permission") -> str:
    """A collaborator's ``role_name`` (``maintain``, ``triage``…), else their ``permission``."""
    obj = _obj(value, where)
    role = obj.get("role_name")
    return role if isinstance(role, str) and role else _str(obj, "permission", where)
