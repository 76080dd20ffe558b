"""Judging one attempt as a repository grows (issue 14): seconds per attempt at 1,000, 10,000 and 50,000
tests with 30 days of history at 100 runs a day on PostgreSQL, against the 1 s aim; and the store's size,
per failure and per pass.

The history (``--days`` x ``--runs-a-day`` reports, one context, 0.5% of the tests flaky at 5-35%, a
failed run rerun once as attempt 2 of its commit) is built as rows directly, as ``Store.ingest`` lays them
out (one shared manifest; failures as observations; pass times of a test on a commit it failed on), for
speed: every report shares a few precomputed duration arrays. The last ``--attempts`` reports go through
``Store.ingest``; each of them is then judged by ``bot.pipeline.assess`` itself (default options, the 0.5%
remembered as known flaky; no GitHub call), so the figure is what a worker spends: the reads, the findings
of the tests that failed on the commit, and the known-flaky memory of the rest. Wall and CPU seconds (of
this process: PostgreSQL's own CPU is not in it) per attempt, median and max, beside the aim. A database is
made for the run and dropped after.

    python -m bench.judging                       # 1,000, 10,000 and 50,000 tests
    python -m bench.judging --tests 1000,10000 --quick
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import cast

import sqlalchemy as sa

from bench._common import table
from bot.core.identity import ExecutionContext, RunIdentity
from bot.core.results import Attempt, Outcome, Report, TestResult
from bot.core.times import stored_time
from bot.pipeline.assess import assess
from bot.pipeline.port import Port
from bot.pipeline.scope import Options, Scope
from bot.store import Store, codec, normalise_url
from bot.store import records as rec
from bot.store.layout import Split
from bot.store.schema import contexts, manifests, observations, pass_times, reports

REPO = "bench/judging"
AIM_SECONDS = 1.0
CONTEXT = ExecutionContext(job="test", os="ubuntu-latest")
NOW = datetime(2026, 3, 31, tzinfo=UTC)


class History:
    """The generated repository: its tests, flaky ones with their failure rates, runs in time order."""

    def __init__(self, tests: int, days: int, per_day: int, seed: int = 14, trace_bytes: int = 0) -> None:
        self.rng = random.Random(seed)
        self.trace_bytes = trace_bytes
        self.names = [f"tests.pkg{i // 500}.test_mod::test_{i:06}" for i in range(tests)]
        flaky = self.rng.sample(range(tests), max(1, tests // 200))
        self.rates = {i: self.rng.uniform(0.05, 0.35) for i in flaky}
        self.base = [self.rng.uniform(0.001, 0.5) for _ in range(tests)]
        self.runs = days * per_day
        self.start = NOW - timedelta(days=days)
        self.step = timedelta(days=days) / self.runs

    def trace(self, i: int, n: int) -> str:
        """The stack trace of test ``i`` failing in run ``n``: about ``trace_bytes`` (none when 0)."""
        if not self.trace_bytes:
            return ""
        frame = (
            f'  File "tests/pkg{i // 500}/test_mod.py", line {i % 997 + 10}, in test_{i:06}\n    assert status == 200\n'
        )
        text = f"Traceback (most recent call last): run {n}\n" + frame * (self.trace_bytes // len(frame) + 1)
        return text[: self.trace_bytes]

    def failing(self) -> list[int]:
        return sorted(i for i, p in self.rates.items() if self.rng.random() < p)

    def results(self, failed: list[int], n: int) -> list[TestResult]:
        bad = set(failed)
        return [
            _result(
                name, Outcome.FAILED if i in bad else Outcome.PASSED, self.base[i], self.trace(i, n) if i in bad else ""
            )
            for i, name in enumerate(self.names)
        ]

    def identity(self, n: int, attempt: int) -> RunIdentity:
        return RunIdentity(
            repo=REPO,
            commit=f"{n:040x}",
            attempt=attempt,
            context=CONTEXT,
            source=f"run{n}/{attempt}",
            run_id=n,
            started_at=stored_time(self.start + self.step * n + timedelta(minutes=attempt)),
            run_index=n * 10 + attempt,
        )


def _result(name: str, outcome: Outcome, seconds: float, details: str = "") -> TestResult:
    classname, test = name.split("::")
    attempt = Attempt(outcome, seconds, "boom" if outcome.is_failure else "")
    return TestResult(classname, test, (attempt,), details=details)


def build(store: Store, history: History, ingested: int) -> tuple[list[RunIdentity], int, int]:
    """Rows for every run but the last ``ingested``, then those through ``Store.ingest``: the ingested
    runs' identities, and the failures and passes stored."""
    first = history.results([], 0)
    with store.engine.begin() as conn:
        repo_key = store.repo_key(conn, REPO)
        context_id = store._id(conn, contexts, {"key": CONTEXT.key()}, {})
        ids = store._test_ids(conn, repo_key, first)
        manifest_id = store._manifest(conn, repo_key, Split.of(ids, first))
    durations = [
        codec.pack_ms([history.base[i] * history.rng.uniform(0.8, 1.2) for i in range(len(ids))]) for _ in range(8)
    ]
    failures = passes = 0
    bulk = history.runs - ingested
    report_rows: list[dict[str, object]] = []
    kept_rows: list[tuple[int, int, int]] = []  # (run, attempt, test index)
    timed_rows: list[tuple[int, int, int]] = []  # a pass of a test that failed in the other attempt
    for n in range(bulk):
        failed = history.failing()
        attempts = [failed, history.failing()] if failed else [failed]
        for attempt, failing in enumerate(attempts, 1):
            identity = history.identity(n, attempt)
            report_rows.append(_report_row(identity, repo_key, context_id, manifest_id, history, failing, durations))
            kept_rows += [(n, attempt, i) for i in failing]
            other = set(attempts[2 - attempt]) if len(attempts) == 2 else set()
            timed_rows += [(n, attempt, i) for i in sorted(other - set(failing))]
            failures += len(failing)
            passes += len(ids) - len(failing)
    with store.engine.begin() as conn:
        for start in range(0, len(report_rows), 500):
            conn.execute(reports.insert(), report_rows[start : start + 500])
        numbers = {
            (int(run_id), int(attempt)): int(rid)
            for rid, run_id, attempt in conn.execute(sa.select(reports.c.id, reports.c.run_id, reports.c.attempt))
        }
        rows = [
            {
                "report_id": numbers[(n, a)],
                "test_id": ids[i],
                "outcome": "failed",
                "attempts": f'[["F", {round(history.base[i], 3)}, "boom"]]',
                "duration": round(history.base[i], 3),
                "message": "boom",
                "details": history.trace(i, n) or None,
            }
            for n, a, i in kept_rows
        ]
        for start in range(0, len(rows), 5000):
            conn.execute(observations.insert(), rows[start : start + 5000])
        times = [
            {"report_id": numbers[(n, a)], "test_id": ids[i], "seconds": codec.stored_seconds(history.base[i])}
            for n, a, i in timed_rows
        ]
        for start in range(0, len(times), 5000):
            conn.execute(pass_times.insert(), times[start : start + 5000])
    judged = []
    for n in range(bulk, history.runs):
        identity = history.identity(n, 1)
        failed = history.failing()
        store.ingest(Report(digest=f"{n:064x}", results=history.results(failed, n)), identity)
        judged.append(identity)
        failures += len(failed)
        passes += len(ids) - len(failed)
    return judged, failures, passes


def _report_row(
    identity: RunIdentity,
    repo_key: int,
    context_id: int,
    manifest_id: int,
    history: History,
    failing: list[int],
    durations: list[bytes],
) -> dict[str, object]:
    return {
        "key": identity.report_key(f"{identity.run_index:064x}"),
        "repo_id": repo_key,
        "context_id": context_id,
        "commit_sha": identity.commit,
        "attempt": identity.attempt,
        "run_id": identity.run_id,
        "run_index": identity.run_index,
        "started_at": identity.started_at,
        "source": identity.source,
        "digest": f"{identity.run_index:064x}",
        "artifact_id": None,
        "results": len(history.names),
        "manifest_id": manifest_id,
        "passed": len(history.names) - len(failing),
        "skipped": 0,
        "passed_seconds": sum(history.base) - sum(history.base[i] for i in failing),
        "passed_ms": durations[(identity.run_index or 0) % len(durations)],
    }


def judge_attempt(store: Store, repo_key: int, identity: RunIdentity) -> tuple[int, int]:
    """``bot.pipeline.assess`` of one attempt, as a worker calls it (default options, no GitHub call is
    made): its findings, and the tests it keeps known flaky."""
    scope = Scope(store, cast(Port, None), 0, REPO, 0, repo_key, Options())
    report = assess(scope, identity.commit, NOW)
    return len(report.findings), len(report.known_flaky_now)


@contextmanager
def database(admin_url: str) -> Iterator[str]:
    name = f"flaketally_bench_judging_{os.getpid()}"
    admin = sa.create_engine(normalise_url(admin_url), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}"'))
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        yield admin_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _bytes(conn: sa.Connection, *tables: sa.Table) -> int:
    query = "SELECT sum(pg_total_relation_size(c)) FROM unnest(CAST(:names AS regclass[])) AS c"
    return int(conn.execute(sa.text(query), {"names": [t.name for t in tables]}).scalar_one())


def bench(admin_url: str, tests: int, days: int, per_day: int, attempts: int, trace_bytes: int = 0) -> list[object]:
    with database(admin_url) as url:
        store = Store.open(url)
        try:
            with store.engine.connect() as conn:
                empty = int(conn.execute(sa.text("SELECT pg_database_size(current_database())")).scalar_one())
            history = History(tests, days, per_day, trace_bytes=trace_bytes)
            began = time.perf_counter()
            judged, failures, passes = build(store, history, attempts)
            built = time.perf_counter() - began
            with store.engine.begin() as conn:
                conn.execute(sa.text("ANALYZE"))
            known = {history.names[i] for i in history.rates}
            repo_key = rec.repo_key(store, REPO)
            rec.set_known_flaky(store, repo_key, {(t, CONTEXT.key()) for t in known})
            walls, cpus, findings, kept = [], [], [], 0
            for identity in judged:
                wall, cpu = time.perf_counter(), time.process_time()
                found, kept = judge_attempt(store, repo_key, identity)
                findings.append(found)
                walls.append(time.perf_counter() - wall)
                cpus.append(time.process_time() - cpu)
            with store.engine.connect() as conn:
                size = int(conn.execute(sa.text("SELECT pg_database_size(current_database())")).scalar_one()) - empty
                per_failure = _bytes(conn, observations, pass_times) / max(1, failures)
                per_pass = _bytes(conn, reports, manifests) / max(1, passes)
                count = int(conn.execute(sa.select(sa.func.count()).select_from(reports)).scalar_one())
        finally:
            store.close()
    median = statistics.median(walls)
    return [
        tests,
        count,
        f"{statistics.median(findings):.0f}",
        kept,
        f"{built:.0f}",
        f"{median:.3f}",
        f"{max(walls):.3f}",
        f"{statistics.median(cpus):.3f}",
        f"{median / AIM_SECONDS:.2f}",
        f"{size / 1e6:.1f}",
        f"{per_failure:.0f}",
        f"{per_pass:.3f}",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.judging", description=__doc__)
    parser.add_argument("--tests", default="1000,10000,50000", help="comma-separated test counts")
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--runs-a-day", type=int, default=100)
    parser.add_argument("--attempts", type=int, default=5, help="the last runs, ingested and judged one by one")
    parser.add_argument("--quick", action="store_true", help="10 days (1,000 runs), 3 attempts judged")
    parser.add_argument("--trace-bytes", type=int, default=0, help="a stack trace of this size on every failure")
    parser.add_argument("--pg-url", default="postgresql://postgres@127.0.0.1:5432/test")
    args = parser.parse_args(argv)
    days, attempts = (10, 3) if args.quick else (args.days, args.attempts)
    rows = [
        bench(args.pg_url, int(n), days, args.runs_a_day, attempts, args.trace_bytes)
        for n in args.tests.split(",")
        if n.strip()
    ]
    print(
        f"judging one attempt on PostgreSQL: {days} days x {args.runs_a_day} runs a day (failed runs rerun once), "
        f"0.5% of tests flaky at 5-35%, a {args.trace_bytes:,}-byte stack trace on each failure; "
        f"aim {AIM_SECONDS:.0f} s per attempt at 50,000 tests\n"
    )
    headers = [
        "tests",
        "reports",
        "findings (median)",
        "known flaky",
        "build s",
        "median s/attempt",
        "max s/attempt",
        "median CPU s",
        "ratio to aim",
        "store MB",
        "B/failure",
        "B/pass",
    ]
    print(table(headers, rows))
    print(
        "\nB/failure: observations and pass_times per failed result; B/pass: reports and manifests per passing "
        "result (a report's passed_ms durations included). CPU s: this process only."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
