"""Workers at the same moment: each job on a thread of its own, with its own store connections, released
together, publishing under the workers' Redis lock (as ``workers.jobs`` does)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

import redis

from bot.pipeline.attempt import PublishLock
from bot.store import Store

Job = Callable[[Store, PublishLock], None]


def together(store_url: str, redis_url: str, jobs: Sequence[Job], *, repo_id: int = 1) -> None:
    connection = redis.Redis.from_url(redis_url)
    barrier = threading.Barrier(len(jobs))
    errors: list[BaseException] = []

    @contextmanager
    def lock() -> Iterator[None]:
        with connection.lock(f"flaketally:lock:publish:{repo_id}", timeout=60, blocking_timeout=60):
            yield

    def worker(job: Job) -> None:
        own = Store(store_url)
        try:
            barrier.wait()
            job(own, lock)
        except BaseException as exc:  # reported by the caller's thread
            errors.append(exc)
        finally:
            own.close()

    threads = [threading.Thread(target=worker, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    connection.close()
    assert not errors, errors
    assert not any(t.is_alive() for t in threads), "a worker did not finish within 120 s"
