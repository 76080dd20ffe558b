"""The one GitHub port: every request Flaketally makes to GitHub goes through this module.

Domain code gets small frozen dataclasses of plain data and never sees githubkit or httpx. The port
is synchronous (rq jobs are) and:

- authenticates as one installation of the App; with ``redis`` the installation token (and the App's
  JWT) are cached in Redis, so forked rq jobs share one token instead of each minting their own;
- reads only the fields the app needs from each response and checks their types: a response is
  outside input like any other, and a malformed one is a :class:`GitHubError`;
- retries 5xx, network errors and rate limits itself (githubkit's ``auto_retry`` is off: it sleeps 60 s
  on ``retry-after: 0`` and its sleep cannot be replaced), honouring ``retry-after`` and
  ``x-ratelimit-reset``, within a total wait per call; beyond it :class:`GitHubUnavailable` tells the
  job to come back later;
- refuses, before GitHub does, request bodies GitHub would refuse (:class:`CheckOutput`,
  :class:`Annotation`, comment bodies), and sends more than 50 annotations in consecutive requests.
"""

from __future__ import annotations

import functools
import logging
import re
import ssl
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Final, Literal, TypeVar, cast, get_args

import httpx
from githubkit import AppInstallationAuthStrategy, GitHub
from githubkit.cache import BaseCacheStrategy, MemCacheStrategy, RedisCacheStrategy
from githubkit.exception import GitHubException, RequestError, RequestFailed
from githubkit.response import Response

from bot import __version__
from bot.markdown import truncate

if TYPE_CHECKING:
    from redis import Redis

log = logging.getLogger(__name__)

DEFAULT_API_URL: Final = "https://api.github.com"
USER_AGENT: Final = f"flaketally/{__version__}"
REDIS_PREFIX: Final = "flaketally:github"

# GitHub's limits (GITHUB.md, openapi-subset.json).
MAX_PER_PAGE: Final = 100
MAX_OUTPUT_TEXT: Final = 65_535  # check run output.summary and output.text, characters
MAX_TITLE: Final = 255  # annotation title; also applied to the output title, for which GitHub names no limit
MAX_ANNOTATION_BYTES: Final = 65_535  # annotation message and raw_details: "64 KB"
ANNOTATIONS_PER_REQUEST: Final = 50
MAX_COMMENT: Final = 65_536  # issue and comment bodies, characters
MAX_RUNS_FOR_SHA: Final = 1_000  # GitHub returns at most 1,000 runs for a search
MAX_PAGES: Final = 100  # a bound on any listing, so a looping Link header cannot keep a job busy

DOWNLOAD_CHUNK: Final = 1 << 16

AnnotationLevel = Literal["notice", "warning", "failure"]
CheckStatus = Literal["queued", "in_progress", "completed"]
# "stale" is in GitHub's enum but only GitHub may set it.
CheckConclusion = Literal["action_required", "cancelled", "failure", "neutral", "success", "skipped", "timed_out"]
_LEVELS: Final = frozenset(get_args(AnnotationLevel))
_STATUSES: Final = frozenset(get_args(CheckStatus))
_CONCLUSIONS: Final = frozenset(get_args(CheckConclusion))

_OWNER = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})"
_REPO = re.compile(rf"({_OWNER})/([A-Za-z0-9._-]{{1,100}})")
_SHA = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
_NEXT_LINK = re.compile(r'<([^<>]+)>;\s*rel="next"')

T = TypeVar("T")


# --- errors -------------------------------------------------------------------------------------


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


# --- what the app reads ------------------------------------------------------------------------


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


# --- what the app sends ------------------------------------------------------------------------


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
        if self.level not in _LEVELS:
            raise ValueError(f"annotation level must be one of {sorted(_LEVELS)}, not {self.level!r}")
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


@dataclass(frozen=True, slots=True)
class CheckOutput:
    """A check run's output. Any number of annotations: the port sends them 50 per request."""

    title: str
    summary: str
    text: str | None = None
    annotations: tuple[Annotation, ...] = ()

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

    @classmethod
    def bounded(
        cls, title: str, summary: str, text: str | None = None, annotations: Sequence[Annotation] = ()
    ) -> CheckOutput:
        """An output whose texts are cut to GitHub's limits (an empty title becomes ``Flaketally``)."""
        return cls(
            title=truncate(title, MAX_TITLE) or "Flaketally",
            summary=truncate(summary, MAX_OUTPUT_TEXT),
            text=truncate(text, MAX_OUTPUT_TEXT) if text is not None else None,
            annotations=tuple(annotations),
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


def bounded_comment_body(body: str) -> str:
    """A comment body cut to GitHub's limit."""
    return truncate(body, MAX_COMMENT)


def split_repo(repo: str) -> tuple[str, str]:
    """``owner/name`` as GitHub spells it, refused otherwise (it goes into URL paths)."""
    match = _REPO.fullmatch(repo) if isinstance(repo, str) else None
    if match is None or match.group(2) in (".", ".."):
        raise ValueError(f"not a repository full name (owner/name): {repo!r}")
    return match.group(1), match.group(2)


def _check_sha(sha: str) -> str:
    if not isinstance(sha, str) or not _SHA.fullmatch(sha):
        raise ValueError(f"not a commit SHA: {sha!r}")
    return sha


def _check_id(value: int, what: str) -> int:
    _require_int(value, what, 1)
    return value


# --- reading responses -------------------------------------------------------------------------
# Each parser reads only what the app uses, with ``obj[key]`` for what it needs and ``obj.get(key)``
# for what may be absent; the contract test runs them over GitHub's official examples.


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
    pulls = []
    for i, item in enumerate(_list(obj.get("pull_requests") or [], f"{where}.pull_requests")):
        pulls.append(_int(_obj(item, f"{where}.pull_requests[{i}]"), "number", f"{where}.pull_requests[{i}]"))
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


# --- the port ----------------------------------------------------------------------------------


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One TLS context per process: githubkit builds an httpx client per request outside ``with``,
    and loading the CA bundle each time costs more than the request."""
    return httpx.create_ssl_context()


class _Budget:
    """The wait one port call may spend on retries, in total."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.spent = 0.0


class GitHubPort:
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
        mutation_interval: float = 1.0,
        timeout: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
    ) -> None:
        """``max_wait``: seconds of retry waits one call may spend before it raises
        :class:`GitHubUnavailable`. ``mutation_interval``: GitHub asks for a pause of a second between
        content-creating requests. ``sleep`` and ``clock`` are replaceable for tests."""
        cache: BaseCacheStrategy = (
            RedisCacheStrategy(redis, prefix=REDIS_PREFIX) if redis is not None else MemCacheStrategy()
        )
        self._app_id = app_id
        self._api = httpx.URL(api_url.rstrip("/") + "/")
        self._on_response = on_response
        self._max_wait = max_wait
        self._max_retries = max_retries
        self._mutation_interval = mutation_interval
        self._sleep = sleep
        self._clock = clock
        self._last_mutation: float | None = None
        self._open = False
        self._gh = GitHub(
            AppInstallationAuthStrategy(app_id, private_key, installation_id),
            base_url=str(self._api),
            user_agent=USER_AGENT,
            timeout=timeout,
            ssl_verify=_ssl_context(),
            cache_strategy=cache,
            http_cache=False,  # hishel would store API responses (and with Redis, in Redis)
            auto_retry=False,
            event_hooks={"response": [self._observe]},
        )

    # -- life cycle

    def __enter__(self) -> GitHubPort:
        if not self._open:
            self._gh.__enter__()  # type: ignore[no-untyped-call]  # githubkit leaves it unannotated
            self._open = True
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._open:
            self._open = False
            self._gh.__exit__()

    @contextmanager
    def _client_open(self) -> Iterator[None]:
        """Keep githubkit's client open across a streamed response."""
        if self._open:
            yield
            return
        with self:
            yield

    # -- artifacts

    def list_artifacts(self, repo: str, run_id: int) -> list[Artifact]:
        owner, name = split_repo(repo)
        run_id = _check_id(run_id, "run_id")
        first = functools.partial(
            self._gh.rest.actions.list_workflow_run_artifacts, owner, name, run_id, per_page=MAX_PER_PAGE
        )
        items = self._pages(first, key="artifacts", budget=self._budget())
        return [parse_artifact(item, f"artifacts[{i}]") for i, item in enumerate(items)]

    def download_artifact(self, repo: str, artifact_id: int, dest: IO[bytes], max_bytes: int) -> int:
        """Stream the artifact's zip into ``dest``; return the bytes written.

        GitHub answers with a redirect to a short-lived blob URL, which httpx follows without the
        Authorization header (another origin). Refused as soon as ``Content-Length`` or the bytes
        received pass ``max_bytes``. :class:`ArtifactGone` on 410/404. After any error ``dest`` may hold
        part of the archive: discard it.
        """
        owner, name = split_repo(repo)
        artifact_id = _check_id(artifact_id, "artifact_id")
        request = functools.partial(
            self._gh.rest.actions.download_artifact, owner, name, artifact_id, "zip", stream=True
        )
        with self._client_open():
            try:
                response = self._send(request, self._budget())
            except GitHubError as exc:
                if exc.status in (404, 410):
                    raise ArtifactGone(
                        f"artifact {artifact_id} of {repo} is gone ({exc.status})", status=exc.status
                    ) from None
                raise
            raw = response.raw_response
            try:
                declared = _header_int(raw.headers.get("content-length"))
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

    def get_run_attempt(self, repo: str, run_id: int, attempt: int) -> RunAttempt:
        owner, name = split_repo(repo)
        request = functools.partial(
            self._gh.rest.actions.get_workflow_run_attempt,
            owner,
            name,
            _check_id(run_id, "run_id"),
            _check_id(attempt, "attempt"),
        )
        return parse_run_attempt(self._json(self._send(request, self._budget())))

    def list_jobs(self, repo: str, run_id: int, attempt: int) -> list[Job]:
        owner, name = split_repo(repo)
        first = functools.partial(
            self._gh.rest.actions.list_jobs_for_workflow_run_attempt,
            owner,
            name,
            _check_id(run_id, "run_id"),
            _check_id(attempt, "attempt"),
            per_page=MAX_PER_PAGE,
        )
        items = self._pages(first, key="jobs", budget=self._budget())
        return [parse_job(item, attempt, f"jobs[{i}]") for i, item in enumerate(items)]

    def list_runs_for_sha(self, repo: str, head_sha: str, limit: int = 100) -> list[RunSummary]:
        """The runs of a commit, newest first, at most ``limit`` (GitHub gives at most 1,000)."""
        owner, name = split_repo(repo)
        limit = max(1, min(limit, MAX_RUNS_FOR_SHA))
        first = functools.partial(
            self._gh.rest.actions.list_workflow_runs_for_repo,
            owner,
            name,
            head_sha=_check_sha(head_sha),
            exclude_pull_requests=True,
            per_page=min(limit, MAX_PER_PAGE),
        )
        items = self._pages(first, key="workflow_runs", budget=self._budget(), limit=limit)
        return [parse_run_summary(item, f"workflow_runs[{i}]") for i, item in enumerate(items)]

    def pulls_for_commit(self, repo: str, sha: str) -> list[int]:
        """The open pull requests a commit belongs to (``workflow_run.pull_requests`` is empty for forks)."""
        owner, name = split_repo(repo)
        first = functools.partial(
            self._gh.rest.repos.list_pull_requests_associated_with_commit,
            owner,
            name,
            _check_sha(sha),
            per_page=MAX_PER_PAGE,
        )
        items = self._pages(first, key=None, budget=self._budget())
        pulls = [parse_pull(item, f"pulls[{i}]") for i, item in enumerate(items)]
        return [number for number, state in pulls if state == "open"]

    def rerun_failed_jobs(self, repo: str, run_id: int) -> None:
        owner, name = split_repo(repo)
        request = functools.partial(
            self._gh.rest.actions.re_run_workflow_failed_jobs, owner, name, _check_id(run_id, "run_id")
        )
        self._mutate(request, self._budget())

    # -- check runs

    def find_check_run(self, repo: str, head_sha: str, name: str) -> int | None:
        """The newest check run of this App named ``name`` on the commit, if any."""
        owner, repo_name = split_repo(repo)
        first = functools.partial(
            self._gh.rest.checks.list_for_ref,
            owner,
            repo_name,
            _check_sha(head_sha),
            check_name=name,
            app_id=self._app_id,
            filter_="latest",
            per_page=MAX_PER_PAGE,
        )
        found = [
            parse_check_run(item, f"check_runs[{i}]")
            for i, item in enumerate(self._pages(first, key="check_runs", budget=self._budget()))
        ]
        ours = [run_id for run_id, run_name, app in found if run_name == name and app in (None, self._app_id)]
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
        _check_status(status, conclusion)
        if not name:
            raise ValueError("check run name must not be empty")
        if details_url is not None and not details_url.startswith(("https://", "http://")):
            raise ValueError(f"details_url must be an http(s) URL: {details_url!r}")
        batches = output.batches() if output is not None else [()]
        budget = self._budget()
        body: dict[str, object] = {"name": name, "head_sha": _check_sha(head_sha), "external_id": external_id}
        if details_url is not None:
            body["details_url"] = details_url
        if len(batches) == 1:
            body.update(_status_json(status, conclusion))
        else:
            body["status"] = "in_progress" if status == "completed" else status
        if output is not None:
            body["output"] = output.to_json(batches[0])
        create = functools.partial(self._gh.rest.checks.create, owner, repo_name, data=cast(Any, body))
        check_run_id = _int(_obj(self._json(self._mutate(create, budget)), "check_run"), "id", "check_run")
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
        _check_status(status, conclusion)
        batches = output.batches() if output is not None else [()]
        if output is None:
            body = _status_json(status, conclusion)
            update = functools.partial(
                self._gh.rest.checks.update,
                owner,
                repo_name,
                _check_id(check_run_id, "check_run_id"),
                data=cast(Any, body),
            )
            self._mutate(update, self._budget())
            return
        self._patch_batches(owner, repo_name, check_run_id, output, batches, status, conclusion, self._budget())

    def _patch_batches(
        self,
        owner: str,
        repo_name: str,
        check_run_id: int,
        output: CheckOutput,
        batches: Sequence[tuple[Annotation, ...]],
        status: CheckStatus | None,
        conclusion: CheckConclusion | None,
        budget: _Budget,
    ) -> None:
        check_run_id = _check_id(check_run_id, "check_run_id")
        for i, batch in enumerate(batches):
            body: dict[str, object] = {"output": output.to_json(batch)}
            if i == len(batches) - 1:
                body.update(_status_json(status, conclusion))
            update = functools.partial(
                self._gh.rest.checks.update, owner, repo_name, check_run_id, data=cast(Any, body)
            )
            self._mutate(update, budget)

    # -- comments

    def list_issue_comments(self, repo: str, number: int) -> list[Comment]:
        owner, name = split_repo(repo)
        first = functools.partial(
            self._gh.rest.issues.list_comments, owner, name, _check_id(number, "issue number"), per_page=MAX_PER_PAGE
        )
        items = self._pages(first, key=None, budget=self._budget())
        return [parse_comment(item, f"comments[{i}]") for i, item in enumerate(items)]

    def create_issue_comment(self, repo: str, number: int, body: str) -> int:
        owner, name = split_repo(repo)
        request = functools.partial(
            self._gh.rest.issues.create_comment,
            owner,
            name,
            _check_id(number, "issue number"),
            data={"body": check_comment_body(body)},
        )
        return _int(_obj(self._json(self._mutate(request, self._budget())), "comment"), "id", "comment")

    def update_issue_comment(self, repo: str, comment_id: int, body: str) -> None:
        owner, name = split_repo(repo)
        request = functools.partial(
            self._gh.rest.issues.update_comment,
            owner,
            name,
            _check_id(comment_id, "comment_id"),
            data={"body": check_comment_body(body)},
        )
        self._mutate(request, self._budget())

    # -- plumbing

    def _budget(self) -> _Budget:
        return _Budget(self._max_wait)

    def _observe(self, response: httpx.Response) -> None:
        if self._on_response is None:
            return
        try:
            self._on_response(response.status_code, _header_int(response.headers.get("x-ratelimit-remaining")))
        except Exception:
            log.warning("on_response callback failed", exc_info=True)

    def _json(self, response: Response[Any]) -> object:
        try:
            return cast(object, response.json())
        except ValueError:
            raise GitHubError(
                f"unreadable JSON from {response.raw_request.method} {response.raw_request.url.path}",
                status=response.status_code,
            ) from None

    def _mutate(self, request: Callable[[], Response[Any]], budget: _Budget) -> Response[Any]:
        """A content-creating request, at least ``mutation_interval`` after the previous one."""
        if self._last_mutation is not None:
            pause = self._last_mutation + self._mutation_interval - self._clock()
            if pause > 0:
                self._sleep(pause)
        try:
            return self._send(request, budget)
        finally:
            self._last_mutation = self._clock()

    def _pages(
        self,
        first: Callable[[], Response[Any]],
        *,
        key: str | None,
        budget: _Budget,
        limit: int | None = None,
    ) -> list[object]:
        """Every item of a listing, following ``Link: rel="next"`` (to this API only), bounded."""
        items: list[object] = []
        response = self._send(first, budget)
        version = response.raw_request.headers.get("X-GitHub-Api-Version")
        headers = {"X-GitHub-Api-Version": version} if version else None
        for page in range(1, MAX_PAGES + 1):
            data = self._json(response)
            page_items = _list(_need(_obj(data, "page"), key, "page") if key is not None else data, key or "page")
            items.extend(page_items)
            if limit is not None and len(items) >= limit:
                return items[:limit]
            next_url = _next_link(response.headers.get("link"))
            if next_url is None:
                return items
            if not self._same_api(next_url):
                raise GitHubError(f"pagination link leaves the API: {truncate(str(next_url), 200)}")
            if page == MAX_PAGES:
                break
            request = functools.partial(self._gh.request, "GET", next_url, headers=headers)
            response = self._send(request, budget)
        log.warning("listing cut", extra={"path": response.raw_request.url.path, "pages": MAX_PAGES})
        return items

    def _same_api(self, url: httpx.URL) -> bool:
        return url.scheme == self._api.scheme and url.netloc == self._api.netloc and url.path.startswith(self._api.path)

    def _send(self, request: Callable[[], T], budget: _Budget) -> T:
        """One request, retried on transient failures while the budget lasts."""
        attempt = 0
        while True:
            try:
                return request()
            except GitHubException as exc:
                cause = exc
                wait, problem = self._diagnose(exc, attempt)
            if wait is None:
                raise problem from cause
            if attempt >= self._max_retries or budget.spent + wait > budget.limit:
                raise GitHubUnavailable(
                    f"{problem} (after {attempt + 1} tries and {budget.spent:.0f} s of waiting; the next wait "
                    f"would be {wait:.0f} s, the budget is {budget.limit:.0f} s)",
                    retry_after=wait,
                ) from problem
            log.warning("github retry", extra={"problem": str(problem), "wait": wait, "attempt": attempt + 1})
            budget.spent += wait
            self._sleep(wait)
            attempt += 1

    def _backoff(self, attempt: int) -> float:
        return float(min(2**attempt, 30))

    def _diagnose(self, exc: GitHubException, attempt: int) -> tuple[float | None, Exception]:
        """How long to wait before trying again (``None``: do not) and what went wrong."""
        while (
            isinstance(exc, RequestError)
            and not isinstance(exc, RequestFailed)
            and isinstance(exc.exc, GitHubException)
        ):
            exc = exc.exc  # githubkit wraps errors raised while minting the token
        if isinstance(exc, RequestFailed):
            response = exc.response.raw_response
            status = response.status_code
            where = f"{response.request.method} {response.request.url.host}{response.request.url.path}"
            message = _error_message(response)
            problem = f"{where}: {status} {message}".rstrip()
            if status in (403, 429):
                wait = self._rate_limit_wait(response, message, attempt)
                if wait is not None:
                    return wait, GitHubUnavailable(f"{problem} (rate limited)")
                if response.request.url.host != self._api.host:
                    # the blob URL is valid for about a minute: ask GitHub for a fresh one
                    return self._backoff(attempt), GitHubUnavailable(problem)
            if status >= 500:
                retry_after = _header_int(response.headers.get("retry-after"))
                return max(retry_after or 0, self._backoff(attempt)), GitHubUnavailable(problem)
            return None, GitHubError(problem, status=status)
        if isinstance(exc, RequestError) and isinstance(exc.exc, httpx.TransportError):
            return self._backoff(attempt), GitHubUnavailable(f"network: {exc.exc!r}")
        cause = exc.exc if isinstance(exc, RequestError) else exc
        return None, GitHubError(f"request failed: {cause!r}")

    def _rate_limit_wait(self, response: httpx.Response, message: str, attempt: int) -> float | None:
        headers = response.headers
        retry_after = _header_int(headers.get("retry-after"))
        if retry_after is not None:
            return max(float(retry_after), self._backoff(attempt))
        if headers.get("x-ratelimit-remaining") == "0":
            reset = _header_int(headers.get("x-ratelimit-reset"))
            if reset is not None:
                return max(reset - self._clock() + 1, self._backoff(attempt))
            return max(60.0, self._backoff(attempt))
        if response.status_code == 429 or "secondary rate limit" in message.lower():
            return max(60.0, self._backoff(attempt))
        return None


def _check_status(status: str | None, conclusion: str | None) -> None:
    if status is not None and status not in _STATUSES:
        raise ValueError(f"check run status must be one of {sorted(_STATUSES)}, not {status!r}")
    if conclusion is not None and conclusion not in _CONCLUSIONS:
        raise ValueError(f"check run conclusion must be one of {sorted(_CONCLUSIONS)}, not {conclusion!r}")
    if status == "completed" and conclusion is None:
        raise ValueError("a completed check run needs a conclusion")
    if conclusion is not None and status not in (None, "completed"):
        raise ValueError(f"a conclusion completes the check run: status {status!r} contradicts it")


def _status_json(status: str | None, conclusion: str | None) -> dict[str, object]:
    if conclusion is not None:
        return {"status": "completed", "conclusion": conclusion}
    return {"status": status} if status is not None else {}


def _header_int(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        return int(value.strip())
    except ValueError:
        return None


def _next_link(header: str | None) -> httpx.URL | None:
    if not header:
        return None
    match = _NEXT_LINK.search(header)
    return httpx.URL(match.group(1)) if match else None


def _error_message(response: httpx.Response) -> str:
    try:
        data = response.json()
    except (ValueError, httpx.ResponseNotRead):
        return ""
    message = data.get("message") if isinstance(data, dict) else None
    return truncate(message, 200) if isinstance(message, str) else ""

