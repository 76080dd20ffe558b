"""Memory of local test runs: which tests both passed and failed on the same code lately, so a failure of
one of them reads as possibly flaky rather than as broken by the change just made (``flaketally run`` and
``hunt`` print the notes; ``flaketally memory`` lists, forgets and switches it).

The code a run ran on is its working tree's fingerprint (``bot.local.fingerprint``). A test is flaky here
when one fingerprint holds both a pass and a failure of it within ``WINDOW``, unless it has passed
``CLEAN_RUNS`` runs in a row since its last failure; a failure on another fingerprint is not flakiness,
since the code changed. A failure is noted only on a tree where the test also passed: after a change to a
tracked file the fingerprint is new, and the failure may well be the change's. Each attempt of a test is one
run (a runner's retry is a run of its own).

The store is a SQLite file in the repository's git common directory, so a repository's worktrees share it.
Only tests that failed within the window are kept, each with at most ``MAX_RUNS`` runs; a suite of passing
tests stores nothing. Nothing is recorded inside CI, when memory is off, or when the tree has no fingerprint.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sqlite3
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.core.display import display_id
from bot.core.results import Outcome, TestResult
from bot.local.fingerprint import common_dir
from bot.local.fingerprint import fingerprint as fingerprint

WINDOW = timedelta(days=7)
MAX_RUNS = 50  # runs kept per test, the newest
CLEAN_RUNS = 5  # passes in a row since its last failure that settle a flaky test
STORE = Path("flaketally") / "memory.db"  # under the git common directory
CI_VARIABLES = ("CI", "GITHUB_ACTIONS")
EXIT_CLEAN, EXIT_USAGE = 0, 2

_SCHEMA = """
CREATE TABLE IF NOT EXISTS runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    test TEXT NOT NULL,
    shown TEXT NOT NULL,
    at REAL NOT NULL,
    fingerprint TEXT NOT NULL,
    failed INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS runs_by_test ON runs (test, at, seq);
CREATE TABLE IF NOT EXISTS noted (test TEXT PRIMARY KEY, shown TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS settings (name TEXT PRIMARY KEY, value TEXT NOT NULL);
"""
_PRUNE = (
    "DELETE FROM runs WHERE at < :cutoff",
    "DELETE FROM runs WHERE seq IN (SELECT seq FROM (SELECT seq, ROW_NUMBER() OVER "
    "(PARTITION BY test ORDER BY at DESC, seq DESC) AS n FROM runs) WHERE n > :cap)",
    "DELETE FROM runs WHERE test NOT IN (SELECT test FROM runs WHERE failed = 1)",
)


@dataclass(frozen=True, slots=True)
class Flaky:
    """A test that both passed and failed on one fingerprint within the window."""

    test: str  # the stored id
    shown: str  # as its runner prints it
    runs: int  # in the window
    failures: int
    both: int  # fingerprints holding both a pass and a failure of it

    def describe(self) -> str:
        """The finding in one line: the counts, without advice."""
        return (
            f"{self.shown} failed {self.failures} of {self.runs} runs in the last {WINDOW.days} days "
            f"and both passed and failed on the same code {_times(self.both)}"
        )

    def note(self) -> str:
        """What to print after a failure of it: the finding and what to do about it."""
        return (
            f"{self.describe()}: it may be flaky rather than broken by this change; "
            "run it again before you change code for it"
        )


def _times(count: int) -> str:
    return {1: "once", 2: "twice"}.get(count, f"{count} times")


def in_ci(environ: Mapping[str, str] | None = None) -> bool:
    """Whether this runs in CI (``CI`` or ``GITHUB_ACTIONS`` set; ``CI=false`` or ``0`` is not CI)."""
    env = os.environ if environ is None else environ
    return any(env.get(name, "").strip().lower() not in ("", "0", "false") for name in CI_VARIABLES)


def judge(test: str, shown: str, runs: Sequence[tuple[str, bool]]) -> Flaky | None:
    """The test as flaky, or None, from its runs in the window, oldest first (each its fingerprint and
    whether it failed): flaky when a fingerprint holds both outcomes and fewer than ``CLEAN_RUNS`` passes
    followed its last failure."""
    failed_last = max((i for i, (_, failed) in enumerate(runs) if failed), default=None)
    if failed_last is None or len(runs) - 1 - failed_last >= CLEAN_RUNS:
        return None
    outcomes: dict[str, set[bool]] = {}
    for tree, failed in runs:
        outcomes.setdefault(tree, set()).add(failed)
    both = sum(1 for seen in outcomes.values() if len(seen) == 2)
    if not both:
        return None
    return Flaky(test, shown, len(runs), sum(1 for _, failed in runs if failed), both)


@contextlib.contextmanager
def _store(common: Path) -> Iterator[sqlite3.Connection]:
    """The repository's memory, created on first use, in one write transaction (committed on leaving)."""
    path = common / STORE
    path.parent.mkdir(parents=True, exist_ok=True)
    connection = sqlite3.connect(path, timeout=10.0, isolation_level=None)
    try:
        connection.executescript(_SCHEMA)
        connection.execute("BEGIN IMMEDIATE")
        yield connection
        connection.execute("COMMIT")
    except BaseException:
        if connection.in_transaction:
            connection.execute("ROLLBACK")
        raise
    finally:
        connection.close()


def _is_on(connection: sqlite3.Connection) -> bool:
    row = connection.execute("SELECT value FROM settings WHERE name = 'memory'").fetchone()
    return row is None or row[0] != "off"


def _cutoff(now: datetime | None) -> tuple[float, float]:
    """Now and the window's start, as the timestamps stored."""
    at = (now or datetime.now(UTC)).timestamp()
    return at, at - WINDOW.total_seconds()


def _prune(connection: sqlite3.Connection, cutoff: float) -> None:
    for statement in _PRUNE:
        connection.execute(statement, {"cutoff": cutoff, "cap": MAX_RUNS})


def _histories(connection: sqlite3.Connection, cutoff: float, tests: set[str] | None = None) -> list[Flaky]:
    """The flaky tests among the stored runs in the window (of ``tests`` when given)."""
    runs: dict[str, list[tuple[str, bool]]] = {}
    shown: dict[str, str] = {}
    rows = connection.execute(
        "SELECT test, shown, fingerprint, failed FROM runs WHERE at >= ? ORDER BY test, at, seq", (cutoff,)
    )
    for test, name, tree, failed in rows:
        if tests is None or test in tests:
            runs.setdefault(test, []).append((tree, bool(failed)))
            shown[test] = name  # the latest name it was shown by
    found = (judge(test, shown[test], history) for test, history in runs.items())
    return [f for f in found if f is not None]


def _record(connection: sqlite3.Connection, results: Sequence[TestResult], tree: str, at: float) -> None:
    """One run per attempt that passed or failed, for the tests that failed now or within the window."""
    failing = {row[0] for row in connection.execute("SELECT DISTINCT test FROM runs WHERE failed = 1")}
    rows: list[tuple[str, str, float, str, int]] = []
    for result in results:
        attempts = [a.outcome for a in result.attempts if a.outcome is not Outcome.SKIPPED]
        if result.id not in failing and not any(o.is_failure for o in attempts):
            continue
        shown = display_id(result.classname, result.name, result.file, result.project)
        rows.extend((result.id, shown, at, tree, int(o.is_failure)) for o in attempts)
    connection.executemany("INSERT INTO runs (test, shown, at, fingerprint, failed) VALUES (?, ?, ?, ?, ?)", rows)


def _notes(connection: sqlite3.Connection, results: Sequence[TestResult], cutoff: float, tree: str) -> list[str]:
    """After a run was recorded: a note for each test that failed now, is flaky, and passed on this very
    code in the window (after a change to the code a failure may be the change's: no note; issue 13), kept
    as noted; and once, for a test noted before that passed now and is flaky no more, that it is no longer
    flaky."""
    final = {r.id: r for r in results}
    flaky = {f.test: f for f in _histories(connection, cutoff, set(final))}
    noted = {row[0] for row in connection.execute("SELECT test FROM noted")}
    passed_here = {
        row[0]
        for row in connection.execute(
            "SELECT DISTINCT test FROM runs WHERE fingerprint = ? AND failed = 0 AND at >= ?", (tree, cutoff)
        )
    }
    notes = []
    for test, result in final.items():
        if result.outcome.is_failure and test in flaky and test in passed_here:
            notes.append(flaky[test].note())
            connection.execute("INSERT OR REPLACE INTO noted VALUES (?, ?)", (test, flaky[test].shown))
        elif result.outcome is Outcome.PASSED and test in noted and test not in flaky:
            shown = display_id(result.classname, result.name, result.file, result.project)
            notes.append(_settled(connection, test, shown, cutoff))
            connection.execute("DELETE FROM noted WHERE test = ?", (test,))
    return notes


def _settled(connection: sqlite3.Connection, test: str, shown: str, cutoff: float) -> str:
    """The one note saying a test is no longer flaky, with why."""
    rows = connection.execute("SELECT failed FROM runs WHERE test = ? AND at >= ? ORDER BY at, seq", (test, cutoff))
    outcomes = [bool(row[0]) for row in rows]
    last = max((i for i, failed in enumerate(outcomes) if failed), default=None)
    since = 0 if last is None else len(outcomes) - 1 - last
    if since >= CLEAN_RUNS:
        why = f"it passed the last {since} runs in a row since its last failure"
    else:
        why = f"nothing in the last {WINDOW.days} days has it both passing and failing on the same code"
    return f"{shown} is no longer flaky: {why}"


def remember(
    results: Sequence[TestResult], cwd: Path, *, now: datetime | None = None, tree: str | None = None
) -> list[str]:
    """Record a local run of ``results`` and return the notes to print (``Flaky.note`` for each flaky test
    that failed now; once, that a test noted before is no longer flaky). ``tree`` is the working tree's
    fingerprint taken before the tests ran (a run writes files, its report among them, that may change the
    untracked names); without it, ``fingerprint(cwd)`` now. Nothing is recorded, and no note given, inside
    CI, when memory is off or when the tree has no fingerprint; a store that cannot be written is warned
    about on stderr, never raised, so the test command's own result stands."""
    common = None if in_ci() else common_dir(cwd)
    tree = tree or (fingerprint(cwd) if common is not None else None)
    if common is None or tree is None:
        return []
    at, cutoff = _cutoff(now)
    try:
        with _store(common) as connection:
            if not _is_on(connection):
                return []
            _prune(connection, cutoff)
            _record(connection, results, tree, at)
            _prune(connection, cutoff)
            return _notes(connection, results, cutoff, tree)
    except (sqlite3.Error, OSError) as exc:
        print(f"flaketally: memory of local runs not recorded ({common / STORE}: {exc})", file=sys.stderr)
        return []


def flaky_tests(cwd: Path, *, now: datetime | None = None) -> list[Flaky] | None:
    """The remembered flaky tests of the repository, the most failing first; None outside a repository."""
    common = common_dir(cwd)
    if common is None:
        return None
    _, cutoff = _cutoff(now)
    with _store(common) as connection:
        found = _histories(connection, cutoff)
    return sorted(found, key=lambda f: (-f.failures, -f.failures / f.runs, -f.both, f.shown, f.test))


def forget(cwd: Path, test: str | None = None) -> bool:
    """Forget the repository's runs, or one test's (by its shown or its stored id); the on/off setting
    stays. False outside a repository."""
    common = common_dir(cwd)
    if common is None:
        return False
    with _store(common) as connection:
        for table in ("runs", "noted"):
            if test is None:
                connection.execute(f"DELETE FROM {table}")
            else:
                connection.execute(f"DELETE FROM {table} WHERE test = ? OR shown = ?", (test, test))
    return True


def switch(cwd: Path, on: bool) -> Path | None:
    """Turn recording on or off (the stored runs are kept); the store's path, None outside a repository."""
    common = common_dir(cwd)
    if common is None:
        return None
    with _store(common) as connection:
        connection.execute("INSERT OR REPLACE INTO settings VALUES ('memory', ?)", ("on" if on else "off",))
        return common / STORE


def is_on(cwd: Path) -> bool:
    """Whether local runs are recorded in this repository (on by default, and outside a repository)."""
    common = common_dir(cwd)
    if common is None or not (common / STORE).is_file():
        return True
    with _store(common) as connection:
        return _is_on(connection)


def memory_command(args: argparse.Namespace, *, cwd: Path | None = None, now: datetime | None = None) -> int:
    """``flaketally memory [list | reset [TEST] | on | off]`` in the working directory's repository."""
    where = cwd or Path.cwd()
    action: str = args.action
    test: str | None = args.test
    if test is not None and action != "reset":
        print(f"flaketally: memory {action} takes no TEST (only reset does)", file=sys.stderr)
        return EXIT_USAGE
    if common_dir(where) is None:
        print(f"flaketally: memory: {where} is not inside a git repository", file=sys.stderr)
        return EXIT_USAGE
    try:
        if action == "reset":
            forget(where, test)
        elif action in ("on", "off"):
            path = switch(where, action == "on")
            if action == "on":
                print(f"memory is on: local test runs are recorded in {path}")
            else:
                print(f"memory is off: local test runs are not recorded (the runs in {path} are kept)")
        else:
            _print_list(flaky_tests(where, now=now) or [], is_on(where))
    except (sqlite3.Error, OSError) as exc:
        print(f"flaketally: memory: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_CLEAN


def _print_list(found: Sequence[Flaky], on: bool) -> None:
    for flaky in found:
        print(flaky.describe())
    if not found:
        print(f"no test both passed and failed on the same code in the last {WINDOW.days} days")
    if not on:
        print("memory is off: local test runs are not recorded (flaketally memory on)")
