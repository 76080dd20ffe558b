"""Reading local report files into the store, on several cores when there are many."""

from __future__ import annotations

import contextlib
import gc
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
from bot.local.memory import Columns, MemoryHistory, columns

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


def _read(path: Path, repo: str, lean: bool = False) -> tuple[Read, Report, RunIdentity] | Read:
    """Parse one report (``lean``: its single passes as tuples) and tell its run; a Read alone when it cannot
    be used."""
    try:
        with path.open("rb") as stream:
            report = parse(stream, lean=lean)
    except ReportRefused as exc:
        return Read(str(path), [FileWarning(str(path), str(exc))], set(), refused=True)
    except OSError as exc:
        return Read(str(path), [FileWarning(str(path), f"cannot be read: {exc.strerror or exc}")], set(), refused=True)
    run, problems = identify(path, report, repo)
    problems += [FileWarning(str(path), c.describe()) for c in report.collisions]
    failed = sum(1 for c in report.collisions if c.failed)
    return Read(str(path), problems, set(), collided_failures=failed), report, run


def read_and_store(
    store: Ingests, path: Path, repo: str, write_lock: AbstractContextManager[Any] | None = None
) -> Read:
    """Parse one report, tell its run, store it (holding ``write_lock`` while storing, when given)."""
    done = _read(path, repo)
    if isinstance(done, Read):
        return done
    read, report, run = done
    read.ids = {r.id for r in report.results}
    with write_lock or nullcontext():
        read.new = store.ingest(report, run)
    return read


_worker_store: Store | None = None
_worker_lock: AbstractContextManager[Any] | None = None
_worker_sent: set[str] = set()  # the tests a reading process has named to the judging one


def _worker_start(url: str | None, lock: AbstractContextManager[Any] | None) -> None:
    global _worker_store, _worker_lock
    gc.enable()  # forked from a judging process that holds it off (bot.core.collector): not ours to inherit
    _worker_sent.clear()
    if url is None:
        return
    from bot.store import Store

    _worker_store = Store(url)  # migrated already by the parent
    _worker_lock = lock


def _worker_read(path: Path, repo: str) -> Read:
    assert _worker_store is not None
    return read_and_store(_worker_store, path, repo, _worker_lock)


Columned = tuple[Read, RunIdentity | None, str, Columns | None]


def _worker_columns(path: Path, repo: str) -> Columned:
    """A report read for the judging process: its results as columns, each test named the first time only
    (what crosses between processes is what costs)."""
    done = _read(path, repo, lean=True)
    if isinstance(done, Read):
        return done, None, "", None
    read, report, run = done
    return read, run, report.digest, columns(report, _worker_sent)


# Below this many files, or this many bytes (about half a second of reading), one process reads them all:
# starting others would cost more than it saves.
PARALLEL_FROM = 16
PARALLEL_BYTES = 4 << 20


def _processes(files: Sequence[Path]) -> int:
    """How many processes to read with: 1 for a small input or where fork is missing (the CLI has no threads;
    fork keeps start-up cheap)."""
    processes = min(os.cpu_count() or 1, 4)
    if processes < 2 or len(files) < PARALLEL_FROM or _bytes(files) < PARALLEL_BYTES:
        return 1
    import multiprocessing  # only here: reading a few files never needs it, and it costs start-up time

    return processes if "fork" in multiprocessing.get_all_start_methods() else 1


def _bytes(files: Sequence[Path]) -> int:
    total = 0
    for path in files:
        with contextlib.suppress(OSError):  # a file that cannot be read is said so when it is read
            total += path.stat().st_size
            if total >= PARALLEL_BYTES:
                break
    return total


def _one_by_one(store: Ingests, files: Sequence[Path], repo: str, progress: Progress | None) -> Iterator[Read]:
    for index, path in enumerate(files, 1):
        if progress:
            progress(index, len(files), str(path))
        yield read_and_store(store, path, repo)


def read_all_into_memory(
    memory: MemoryHistory, files: Sequence[Path], repo: str, progress: Progress | None
) -> Iterator[Read]:
    """Every file read into ``memory``, in the order given; on several cores when there are many. The
    reading processes parse; this one only keeps columns, so the judging can start as the last file is read."""
    processes = _processes(files)
    if processes == 1:
        yield from _one_by_one(memory, files, repo, progress)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("fork")
    chunk = max(1, min(8, len(files) // (processes * 16)))  # small: the last chunks keep every process busy
    with ProcessPoolExecutor(processes, mp_context=context, initializer=_worker_start, initargs=(None, None)) as pool:
        done = pool.map(_worker_columns, files, [repo] * len(files), chunksize=chunk)
        for index, (read, run, digest, results) in enumerate(done, 1):
            if progress:
                progress(index, len(files), read.path)
            if run is not None and results is not None:
                read.new = memory.add(run, digest, results)
                read.ids = set(results.ids)
            yield read


def read_all(store: Store, files: Sequence[Path], repo: str, progress: Progress | None) -> Iterator[Read]:
    """Every file read and stored, in the order given; on several cores when there are many files and
    the store is one that several processes can share (a file or a server, not SQLite in memory)."""
    url = store.engine.url
    shareable = url.get_backend_name() != "sqlite" or url.database not in (None, "", ":memory:")
    processes = _processes(files)
    if processes == 1 or not shareable:
        yield from _one_by_one(store, files, repo, progress)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    context = multiprocessing.get_context("fork")
    # SQLite has one writer at a time, and a writer that finds it busy sleeps in steps of up to 100 ms:
    # taking turns on a lock instead keeps the processes parsing, not sleeping.
    lock = context.Lock() if store.engine.dialect.name == "sqlite" else None
    start = (url.render_as_string(hide_password=False), lock)
    with ProcessPoolExecutor(processes, mp_context=context, initializer=_worker_start, initargs=start) as pool:
        for index, read in enumerate(pool.map(_worker_read, files, [repo] * len(files), chunksize=4), 1):
            if progress:
                progress(index, len(files), read.path)
            yield read
