"""Which webhook event becomes which job, and the reading of each payload it needs.

``ROUTES`` is the one place that says it. Jobs are named by dotted path (``workers.jobs.*``) so the
receiver never imports worker code, with JSON-safe keyword arguments and a job id that makes the enqueue
idempotent. Everything in a payload is hostile until parsed: a missing or malformed field is a
:class:`BadPayload` naming it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from bot.github.limits import COMMIT_SHA

_FULL_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}/[A-Za-z0-9_.-]{1,100}")
_BRANCH = re.compile(r"[^\x00-\x20\x7f~^:?*\[\\]+")  # what git allows in a ref name, roughly


class BadPayload(Exception):
    """The delivery is signed but lacks a field the job needs; the message names the field."""


def _walk(payload: Mapping[str, Any], path: str) -> object:
    value: object = payload
    for key in path.split("."):
        if not isinstance(value, dict) or key not in value:
            raise BadPayload(f"{path} is missing")
        value = value[key]
    return value


def _int(payload: Mapping[str, Any], path: str) -> int:
    value = _walk(payload, path)
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise BadPayload(f"{path} is not a positive integer")
    return value


def _str(payload: Mapping[str, Any], path: str, pattern: re.Pattern[str]) -> str:
    value = _walk(payload, path)
    if not isinstance(value, str) or not pattern.fullmatch(value):
        raise BadPayload(f"{path} is not a valid value")
    return value


def _repositories(payload: Mapping[str, Any], key: str) -> list[dict[str, object]]:
    found = payload.get(key) or []
    if not isinstance(found, list):
        raise BadPayload(f"{key} is not a list")
    out: list[dict[str, object]] = []
    for n, item in enumerate(found):
        if not isinstance(item, dict):
            raise BadPayload(f"{key}[{n}] is not an object")
        out.append({"id": _int(item, "id"), "full_name": _str(item, "full_name", _FULL_NAME)})
    return out


def _account(payload: Mapping[str, Any]) -> str:
    account = _walk(payload, "installation.account")
    if isinstance(account, dict):
        for key in ("login", "slug"):  # an enterprise installation's account has a slug, not a login
            value = account.get(key)
            if isinstance(value, str) and 0 < len(value) <= 100:
                return value
    raise BadPayload("installation.account.login is missing")


def _branch(payload: Mapping[str, Any]) -> str | None:
    """The repository's default branch, when the payload names a plausible one (a git ref name)."""
    try:
        value = _walk(payload, "repository.default_branch")
    except BadPayload:
        return None
    if isinstance(value, str) and 0 < len(value) <= 255 and _BRANCH.fullmatch(value):
        return value
    return None


def installation_id_of(payload: Mapping[str, Any]) -> int | None:
    try:
        return _int(payload, "installation.id")
    except BadPayload:
        return None


# What each handled event enqueues: (payload, installation id, delivery id) -> (job id, keyword arguments).
# rq 3 allows only letters, digits, "_" and "-" in a job id (it uses ":" itself), hence the dashes.

JobSpec = tuple[str, dict[str, object]]


def _run_completed(p: Mapping[str, Any], installation_id: int, delivery: str) -> JobSpec:
    repo_id, run_id, attempt = _int(p, "repository.id"), _int(p, "workflow_run.id"), _int(p, "workflow_run.run_attempt")
    args: dict[str, object] = {
        "installation_id": installation_id,
        "repo": _str(p, "repository.full_name", _FULL_NAME),
        "repo_id": repo_id,
        "run_id": run_id,
        "attempt": attempt,
        "default_branch": _branch(p),
        "head_sha": _str(p, "workflow_run.head_sha", COMMIT_SHA),
    }
    return f"run-{repo_id}-{run_id}-{attempt}", args


def _check_rerequested(p: Mapping[str, Any], installation_id: int, delivery: str) -> JobSpec:
    repo_id, check_run_id = _int(p, "repository.id"), _int(p, "check_run.id")
    args: dict[str, object] = {
        "installation_id": installation_id,
        "repo": _str(p, "repository.full_name", _FULL_NAME),
        "repo_id": repo_id,
        "head_sha": _str(p, "check_run.head_sha", COMMIT_SHA),
        "check_run_id": check_run_id,
        "default_branch": _branch(p),
    }
    return f"rejudge-{repo_id}-{check_run_id}-{delivery}", args


_IDENTIFIER = re.compile(r"^[\x21-\x7e]{1,20}$")  # what the App set in actions[]: printable, at most 20
_LOGIN = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})(?:\[bot\])?$")


def _check_action(p: Mapping[str, Any], installation_id: int, delivery: str) -> JobSpec:
    """A click on one of the check run's buttons (``requested_action.identifier``), by ``sender``."""
    repo_id, check_run_id = _int(p, "repository.id"), _int(p, "check_run.id")
    identifier = _str(p, "requested_action.identifier", _IDENTIFIER)
    args: dict[str, object] = {
        "installation_id": installation_id,
        "repo": _str(p, "repository.full_name", _FULL_NAME),
        "repo_id": repo_id,
        "head_sha": _str(p, "check_run.head_sha", COMMIT_SHA),
        "check_run_id": check_run_id,
        "identifier": identifier,
        "sender": _str(p, "sender.login", _LOGIN),
        "default_branch": _branch(p),
    }
    return f"action-{repo_id}-{check_run_id}-{delivery}", args


def _installation(p: Mapping[str, Any], installation_id: int, delivery: str) -> JobSpec:
    """``created`` lists the repositories granted, ``deleted`` the ones lost; other actions list none."""
    action = str(p["action"])
    listed = _repositories(p, "repositories")
    added, removed = (listed, []) if action == "created" else ([], listed) if action == "deleted" else ([], [])
    return _record_installation(p, installation_id, delivery, added, removed)


def _installation_repositories(p: Mapping[str, Any], installation_id: int, delivery: str) -> JobSpec:
    added, removed = _repositories(p, "repositories_added"), _repositories(p, "repositories_removed")
    return _record_installation(p, installation_id, delivery, added, removed)


def _permissions(p: Mapping[str, Any]) -> dict[str, str] | None:
    """What the installation granted (``installation.permissions``), when the event says."""
    installation = p.get("installation")
    found = installation.get("permissions") if isinstance(installation, dict) else None
    if not isinstance(found, dict):
        return None
    return {str(k)[:50]: str(v)[:20] for k, v in list(found.items())[:100] if isinstance(v, str)}


def _record_installation(
    p: Mapping[str, Any],
    installation_id: int,
    delivery: str,
    added: list[dict[str, object]],
    removed: list[dict[str, object]],
) -> JobSpec:
    args: dict[str, object] = {
        "installation_id": installation_id,
        "action": str(p["action"]),
        "account": _account(p),
        "repositories_added": added,
        "repositories_removed": removed,
        "permissions": _permissions(p),
    }
    return f"installation-{installation_id}-{delivery}", args


@dataclass(frozen=True, slots=True)
class JobRoute:
    function: str  # dotted path of the job function
    timeout: int  # rq job_timeout, seconds
    build: Callable[[Mapping[str, Any], int, str], JobSpec]


_INSTALLATION = JobRoute("workers.jobs.record_installation", 120, _installation)
_INSTALLATION_REPOSITORIES = JobRoute("workers.jobs.record_installation", 120, _installation_repositories)
# (event, action) -> job. Anything not here is answered 202 and ignored: ``workflow_run`` ``requested`` among
# them, since nothing is written to GitHub before an attempt's answer is known (GitHub's write budget).
ROUTES: Mapping[tuple[str, str], JobRoute] = {
    ("workflow_run", "completed"): JobRoute("workers.jobs.process_workflow_run", 900, _run_completed),
    ("check_run", "rerequested"): JobRoute("workers.jobs.rejudge", 600, _check_rerequested),
    ("check_run", "requested_action"): JobRoute("workers.jobs.act", 600, _check_action),
    ("installation", "created"): _INSTALLATION,
    ("installation", "deleted"): _INSTALLATION,
    ("installation", "suspend"): _INSTALLATION,
    ("installation", "unsuspend"): _INSTALLATION,
    ("installation", "new_permissions_accepted"): _INSTALLATION,
    ("installation_repositories", "added"): _INSTALLATION_REPOSITORIES,
    ("installation_repositories", "removed"): _INSTALLATION_REPOSITORIES,
}
