"""The transport under the GitHub port: one installation's authenticated githubkit client, with our own
bounded retries, pagination and the pause between content-creating requests.

- With ``redis`` the installation token (and the App's JWT) are cached in Redis, so forked rq jobs share
  one token instead of each minting their own.
- 5xx, network errors and rate limits are retried here (githubkit's ``auto_retry`` is off: it sleeps
  60 s on ``retry-after: 0`` and its sleep cannot be replaced), honouring ``retry-after`` and
  ``x-ratelimit-reset``, within a total wait per call; beyond it :class:`GitHubUnavailable` tells the
  job to come back later.
"""

from __future__ import annotations

import functools
import logging
import re
import ssl
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final, TypeVar, cast

import httpx
from githubkit import AppInstallationAuthStrategy, GitHub
from githubkit.cache import BaseCacheStrategy, MemCacheStrategy, RedisCacheStrategy
from githubkit.exception import GitHubException, RequestError, RequestFailed
from githubkit.response import Response

from bot import __version__
from bot.github.budget import UNLIMITED, Writes
from bot.github.errors import GitHubError, GitHubUnavailable
from bot.github.limits import DEFAULT_API_URL, MAX_PAGES
from bot.github.parsing import page_items
from bot.render.markdown import truncate

if TYPE_CHECKING:
    from githubkit.versions import RestVersionSwitcher
    from redis import Redis

log = logging.getLogger(__name__)

USER_AGENT: Final = f"flaketally/{__version__}"
REDIS_PREFIX: Final = "flaketally:github"
_NEXT_LINK = re.compile(r'<([^<>]+)>;\s*rel="next"')

T = TypeVar("T")


@functools.cache
def _ssl_context() -> ssl.SSLContext:
    """One TLS context per process: githubkit builds an httpx client per request outside ``with``,
    and loading the CA bundle each time costs more than the request."""
    return httpx.create_ssl_context()


class Budget:
    """The wait one port call may spend on retries, in total."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.spent = 0.0


class Client:
    """One installation's connection to GitHub. Use it as a context manager (or call :meth:`close`) to
    keep one HTTP connection pool for many calls; without, each request opens its own client."""

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
        mutation_interval: float = 0.0,
        timeout: float = 30.0,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.time,
        writes: Writes = UNLIMITED,
    ) -> None:
        cache: BaseCacheStrategy = (
            RedisCacheStrategy(redis, prefix=REDIS_PREFIX) if redis is not None else MemCacheStrategy()
        )
        self.app_id = app_id
        self._api = httpx.URL(api_url.rstrip("/") + "/")
        self._on_response = on_response
        self._max_wait = max_wait
        self._max_retries = max_retries
        self._mutation_interval = mutation_interval
        self.writes = writes
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

    @property
    def rest(self) -> RestVersionSwitcher:
        return self._gh.rest

    # -- life cycle

    def __enter__(self) -> Client:
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
    def opened(self) -> Iterator[None]:
        """Keep githubkit's client open across a streamed response."""
        if self._open:
            yield
            return
        with self:
            yield

    # -- requests

    def budget(self) -> Budget:
        return Budget(self._max_wait)

    def _observe(self, response: httpx.Response) -> None:
        if self._on_response is None:
            return
        try:
            self._on_response(response.status_code, header_int(response.headers.get("x-ratelimit-remaining")))
        except Exception:
            log.warning("on_response callback failed", exc_info=True)

    def json(self, response: Response[Any]) -> object:
        try:
            return cast(object, response.json())
        except ValueError:
            raise GitHubError(
                f"unreadable JSON from {response.raw_request.method} {response.raw_request.url.path}",
                status=response.status_code,
            ) from None

    def mutate(self, request: Callable[[], Response[Any]], budget: Budget) -> Response[Any]:
        """A content-creating request: one slot of the installation's write budget (``bot.github.budget``),
        at least ``mutation_interval`` after the previous one."""
        self.writes.spend()
        if self._last_mutation is not None:
            pause = self._last_mutation + self._mutation_interval - self._clock()
            if pause > 0:
                self._sleep(pause)
        try:
            return self.send(request, budget)
        finally:
            self._last_mutation = self._clock()

    def pages(
        self,
        first: Callable[[], Response[Any]],
        *,
        key: str | None,
        budget: Budget,
        limit: int | None = None,
    ) -> list[object]:
        """Every item of a listing, following ``Link: rel="next"`` (to this API only), bounded."""
        items: list[object] = []
        response = self.send(first, budget)
        version = response.raw_request.headers.get("X-GitHub-Api-Version")
        headers = {"X-GitHub-Api-Version": version} if version else None
        for page in range(1, MAX_PAGES + 1):
            items.extend(page_items(self.json(response), key))
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
            response = self.send(request, budget)
        log.warning("listing cut", extra={"path": response.raw_request.url.path, "pages": MAX_PAGES})
        return items

    def _same_api(self, url: httpx.URL) -> bool:
        return url.scheme == self._api.scheme and url.netloc == self._api.netloc and url.path.startswith(self._api.path)

    def send(self, request: Callable[[], T], budget: Budget) -> T:
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
                retry_after = header_int(response.headers.get("retry-after"))
                return max(retry_after or 0, self._backoff(attempt)), GitHubUnavailable(problem)
            return None, GitHubError(problem, status=status)
        if isinstance(exc, RequestError) and isinstance(exc.exc, httpx.TransportError):
            return self._backoff(attempt), GitHubUnavailable(f"network: {exc.exc!r}")
        cause = exc.exc if isinstance(exc, RequestError) else exc
        return None, GitHubError(f"request failed: {cause!r}")

    def _rate_limit_wait(self, response: httpx.Response, message: str, attempt: int) -> float | None:
        headers = response.headers
        retry_after = header_int(headers.get("retry-after"))
        if retry_after is not None:
            return max(float(retry_after), self._backoff(attempt))
        if headers.get("x-ratelimit-remaining") == "0":
            reset = header_int(headers.get("x-ratelimit-reset"))
            if reset is not None:
                return max(reset - self._clock() + 1, self._backoff(attempt))
            return max(60.0, self._backoff(attempt))
        if response.status_code == 429 or "secondary rate limit" in message.lower():
            return max(60.0, self._backoff(attempt))
        return None


def header_int(value: str | None) -> int | None:
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
