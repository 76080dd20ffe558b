"""Reading local report files into the store, on several cores when there are many."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from bot.core.analysis import FileWarning
from bot.core.identity import RunIdentity
from bot.core.junit import parse
from bot.core.results import Report, ReportRefused
from bot.local.files import identify

if TYPE_CHECKING:
    from bot.store import Store

Progress = Callable[[int, int, str], None]


@dataclass(slots=True)
class Read:
    """What reading and storing one file gave: small, so it crosses a process boundary cheaply."""

    path: str
    warnings: list[FileWarning]
    ids: set[str]
    refused: bool = False
    new: bool = False
    collided_failures: int = 0  # names shared by several tests, one of which failed: not judged


class Ingests(Protocol):
    def ingest(self, report: Report, run: RunIdentity) -> bool: ...


def read_and_store(
    store: Ingests, path: Path, repo: str, write_lock: AbstractContextManager[Any] | None = None
) -> Read:
    """Parse one report, tell its run, store it (holding ``write_lock`` while storing, when given)."""
    try:
        with path.open("rb") as stream:
            report = parse(stream)
    except ReportRefused as exc:
        return Read(str(path), [FileWarning(str(path), str(exc))], set(), refused=True)
    except OSError as exc:
        return Read(str(path), [FileWarning(str(path), f"cannot be read: {exc.strerror or exc}")], set(), refused=True)
    run, problems = identify(path, report, repo)
    problems += [FileWarning(str(path), c.describe()) for c in report.collisions]
    with write_lock or nullcontext():
        new = store.ingest(report, run)
    failed = sum(1 for c in report.collisions if c.failed)
    return Read(str(path), problems, {r.id for r in report.results}, new=new, collided_failures=failed)


_worker_store: Store | None = None
_worker_lock: AbstractContextManager[Any] | None = None


def _worker_start(url: str, lock: AbstractContextManager[Any] | None) -> None:
    global _worker_store, _worker_lock
    from bot.store import Store

    _worker_store = Store(url)  # migrated already by the parent
    _worker_lock = lock


def _worker_read(path: Path, repo: str) -> Read:
    assert _worker_store is not None
    return read_and_store(_worker_store, path, repo, _worker_lock)


# Below this many files one process reads them all: starting others would cost more than it saves.
PARALLEL_FROM = 16


def read_all(store: Store, files: Sequence[Path], repo: str, progress: Progress | None) -> Iterator[Read]:
    """Every file read and stored, in the order given; on several cores when there are many files and
    the store is one that several processes can share (a file or a server, not SQLite in memory)."""
    import multiprocessing  # only here: the in-memory analysis never needs it, and it costs start-up time
    from concurrent.futures import ProcessPoolExecutor

    processes = min(os.cpu_count() or 1, 4)
    url = store.engine.url
    shareable = url.get_backend_name() != "sqlite" or url.database not in (None, "", ":memory:")
    forkable = "fork" in multiprocessing.get_all_start_methods()
    if processes < 2 or len(files) < PARALLEL_FROM or not shareable or not forkable:
        for index, path in enumerate(files, 1):
            if progress:
                progress(index, len(files), str(path))
            yield read_and_store(store, path, repo)
        return
    context = multiprocessing.get_context("fork")  # the CLI has no threads; fork keeps start-up cheap
    # SQLite has one writer at a time, and a writer that finds it busy sleeps in steps of up to 100 ms:
    # taking turns on a lock instead keeps the processes parsing, not sleeping.
    lock = context.Lock() if store.engine.dialect.name == "sqlite" else None
    start = (url.render_as_string(hide_password=False), lock)
    with ProcessPoolExecutor(processes, mp_context=context, initializer=_worker_start, initargs=start) as pool:
        for index, read in enumerate(pool.map(_worker_read, files, [repo] * len(files), chunksize=4), 1):
            if progress:
                progress(index, len(files), read.path)
            yield read
