"""GitHub's write budget: the content-creating requests one installation may make, shared by every worker.

GitHub's secondary limits allow about 80 content-creating requests (POST, PATCH, PUT, DELETE) a minute and
500 an hour (GITHUB.md). That budget, not CPU, bounds how many runs the App can answer, so it is counted in
one place for all the processes serving an installation: a log of the writes of the last hour in Redis
(a sorted set of send times), read and appended by one Lua script, so two workers never both take the
last slot.

A caller takes the slots it needs before it sends (``ensure``); the transport then spends one per write
(``spend``), and what was taken and not spent is given back (``release``). Callers wait in line: a waiter
holds a ticket, and slots go to the oldest live ticket first, so a backlog drains in the order it built up
and a newcomer that only tries (``ensure(..., wait=False)``) never takes a slot from someone waiting.
Nobody waits while holding a repository's publish lock: the pipeline tries under the lock, and when the
budget is short it lets go of the lock, waits, and tries again (``bot.pipeline.attempt``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Final, Protocol

from bot.github.errors import GitHubUnavailable
from bot.github.limits import WRITES_PER_HOUR, WRITES_PER_MINUTE

if TYPE_CHECKING:
    from redis import Redis

TICKET_TTL: Final = 30.0  # a waiter that has not looked for this long is gone (its process died)
POLL: Final = 1.0  # a waiter looks again at least this often, which keeps its ticket alive

# KEYS: the log of sends (member -> time), the waiting line (ticket -> arrival), the line's last looks.
# ARGV: now, slots wanted, per minute, per hour, ticket ('' to only try), member prefix, ticket ttl.
# A write exactly a minute (an hour) old no longer counts against the minute (the hour).
# Returns 0 when the slots were taken, else the seconds to wait before they could be.
_TAKE: Final = """
local log, line, seen = KEYS[1], KEYS[2], KEYS[3]
local now, n = tonumber(ARGV[1]), tonumber(ARGV[2])
local per_minute, per_hour = tonumber(ARGV[3]), tonumber(ARGV[4])
local ticket, prefix, ttl = ARGV[5], ARGV[6], tonumber(ARGV[7])
redis.call('ZREMRANGEBYSCORE', log, '-inf', now - 3600)
for _, t in ipairs(redis.call('ZRANGE', line, 0, -1)) do
  local last = tonumber(redis.call('HGET', seen, t) or '0')
  if last < now - ttl and t ~= ticket then
    redis.call('ZREM', line, t)
    redis.call('HDEL', seen, t)
  end
end
if ticket ~= '' then
  redis.call('HSET', seen, ticket, now)
  if not redis.call('ZSCORE', line, ticket) then
    redis.call('ZADD', line, now, ticket)
  end
  local head = redis.call('ZRANGE', line, 0, 0)[1]
  if head ~= ticket then
    return tostring(1.0)
  end
elseif redis.call('ZCARD', line) > 0 then
  return tostring(-1)
end
local minute = redis.call('ZCOUNT', log, '(' .. (now - 60), '+inf')
local hour = redis.call('ZCARD', log)
local wait = 0
if minute + n > per_minute then
  local skip = minute + n - per_minute - 1
  local oldest = redis.call('ZRANGEBYSCORE', log, '(' .. (now - 60), '+inf', 'WITHSCORES', 'LIMIT', skip, 1)
  wait = math.max(wait, tonumber(oldest[2]) + 60 - now)
end
if hour + n > per_hour then
  local oldest = redis.call('ZRANGE', log, hour + n - per_hour - 1, hour + n - per_hour - 1, 'WITHSCORES')
  wait = math.max(wait, tonumber(oldest[2]) + 3600 - now)
end
if wait > 0 then
  return tostring(wait)
end
for i = 1, n do
  redis.call('ZADD', log, now, prefix .. ':' .. i)
end
if ticket ~= '' then
  redis.call('ZREM', line, ticket)
  redis.call('HDEL', seen, ticket)
end
redis.call('EXPIRE', log, 3700)
redis.call('EXPIRE', line, 3700)
redis.call('EXPIRE', seen, 3700)
return '0'
"""


class BudgetExhausted(GitHubUnavailable):
    """The installation's write budget did not allow the request within the time a job may wait."""


class Writes(Protocol):
    """What the pipeline and the transport ask of a write budget (``WriteBudget``, or ``UNLIMITED``)."""

    def ensure(self, n: int, *, wait: bool) -> bool: ...

    def spend(self) -> None: ...

    def release(self) -> None: ...


class _Unlimited:
    """No budget: the local CLI, and a port made without Redis."""

    def ensure(self, n: int, *, wait: bool) -> bool:
        return True

    def spend(self) -> None:
        return None

    def release(self) -> None:
        return None


UNLIMITED: Final[Writes] = _Unlimited()


class WriteBudget:
    """One installation's write budget, as one process holds part of it. One per job; not thread-safe."""

    def __init__(
        self,
        redis: Redis,
        installation_id: int,
        *,
        per_minute: int = WRITES_PER_MINUTE,
        per_hour: int = WRITES_PER_HOUR,
        max_wait: float = 600.0,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        """``max_wait``: the longest one ``ensure`` waits before it raises :class:`BudgetExhausted` (the job
        is then retried by rq, and its writes are not lost: they are decided again then)."""
        if per_minute < 1 or per_hour < per_minute:
            raise ValueError(f"a write budget needs 1 <= per_minute <= per_hour, not {per_minute}, {per_hour}")
        self._redis = redis
        self._keys = [f"flaketally:writes:{installation_id}:{part}" for part in ("log", "line", "seen")]
        self.per_minute, self.per_hour = per_minute, per_hour
        self._max_wait = max_wait
        self._clock, self._sleep = clock, sleep
        self._script = redis.register_script(_TAKE)
        self._held: list[str] = []  # members of the log taken and not spent yet

    @property
    def held(self) -> int:
        return len(self._held)

    def ensure(self, n: int, *, wait: bool) -> bool:
        """Hold at least ``n`` slots. Without ``wait``, True only when they could be taken at once (and
        nobody is waiting in line); with it, wait in line for them (raises :class:`BudgetExhausted` after
        ``max_wait``)."""
        missing = n - len(self._held)
        while missing > 0:
            step = min(missing, self.per_minute)
            if not self._take(step, wait):
                return False
            missing -= step
        return True

    def spend(self) -> None:
        """One content-creating request is about to be sent: from what is held, else taken now (waiting)."""
        if not self._held:
            self._take(1, wait=True)
        self._held.pop()

    def release(self) -> None:
        """Give back what was taken and not spent."""
        if self._held:
            self._redis.zrem(self._keys[0], *self._held)
            self._held.clear()

    def used(self) -> tuple[int, int]:
        """The installation's writes in the last minute and the last hour."""
        now = self._clock()
        minute = self._redis.zcount(self._keys[0], f"({now - 60!r}", "+inf")  # a write a minute old has aged out
        hour = self._redis.zcount(self._keys[0], f"({now - 3600!r}", "+inf")
        return int(minute), int(hour)

    def _take(self, n: int, wait: bool) -> bool:
        prefix = uuid.uuid4().hex
        ticket = uuid.uuid4().hex if wait else ""
        started = self._clock()
        while True:
            answer = float(self._script(keys=self._keys, args=self._args(n, ticket, prefix)))
            if answer == 0:
                self._held.extend(f"{prefix}:{i}" for i in range(1, n + 1))
                return True
            if not wait:
                return False
            if self._clock() - started + min(answer, POLL) > self._max_wait:
                self._redis.zrem(self._keys[1], ticket)
                self._redis.hdel(self._keys[2], ticket)
                raise BudgetExhausted(
                    f"GitHub's write budget ({self.per_minute} a minute, {self.per_hour} an hour) had no room "
                    f"for {n} request(s) within {self._max_wait:.0f} s"
                )
            self._sleep(min(answer, POLL))

    def _args(self, n: int, ticket: str, prefix: str) -> list[float | int | str]:
        return [self._clock(), n, self.per_minute, self.per_hour, ticket, prefix, TICKET_TTL]
