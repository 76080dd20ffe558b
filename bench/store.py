"""The store alone: ingest and judge time, and store size, for a generated history.

Reports are built in memory (``bot.core.results.Report``/``TestResult``/``Attempt``), not read from XML, so
nothing but the store and the judge is timed. Ingest = ``Store.ingest`` for every report (building a
report is not counted). Judge = ``Store.history(repo)`` and ``bot.core.judge.judge`` on every history,
timed apart. Sizes: SQLite's file plus its WAL after a ``wal_checkpoint(TRUNCATE)``; PostgreSQL's
``pg_database_size`` of a database made for the run (and dropped after), less that of the same
database freshly migrated.

    python -m bench.store                                   # 10,000 tests x 200 runs, both backends
    python -m bench.store --tests 2000 --runs 50 --backends sqlite
"""

from __future__ import annotations

import argparse
import gc
import os
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa

from bench._common import DATA, mb, peak_rss, table
from bench.generate import HistoryPlan, HistorySpec
from bot.core.cost import Rates
from bot.core.judge import judge
from bot.core.verdicts import CommitVerdict, TestVerdict
from bot.store import Store, normalise_url

REPO_NAME = "bench/history"


@dataclass(slots=True)
class Result:
    backend: str
    reports: int
    results: int
    ingest_s: float
    history_s: float
    judge_s: float
    histories: int
    flaky: int
    size: int
    size_note: str
    complete: bool


def run(store: Store, plan: HistoryPlan, budget: float) -> tuple[int, int, float, bool]:
    """Ingest every report of the plan (stopping at ``budget`` seconds of ingest): reports, results, seconds."""
    spent = 0.0
    reports = results = 0
    for report, identity in plan.reports():
        start = time.perf_counter()
        store.ingest(report, identity)
        spent += time.perf_counter() - start
        reports += 1
        results += len(report.results)
        if spent > budget and reports < len(plan.runs):
            return reports, results, spent, False
    return reports, results, spent, True


def judge_all(store: Store) -> tuple[float, float, int, int]:
    start = time.perf_counter()
    histories = store.history(REPO_NAME)
    middle = time.perf_counter()
    rates = Rates()
    judged = [judge(h, CommitVerdict.UNDETERMINED, rates) for h in histories]
    end = time.perf_counter()
    flaky = sum(1 for t in judged if t.judgement.verdict is TestVerdict.FLAKY)
    return middle - start, end - middle, len(histories), flaky


def bench_sqlite(plan: HistoryPlan, budget: float) -> Result:
    path = DATA / "store-bench.db"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)
    store = Store.open(str(path))
    try:
        reports, results, ingest_s, complete = run(store, plan, budget)
    finally:
        store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = sum(Path(f"{path}{s}").stat().st_size for s in ("", "-wal") if Path(f"{path}{s}").exists())
    store = Store(str(path))
    try:
        history_s, judge_s, histories, flaky = judge_all(store)
    finally:
        store.close()
    return Result(
        "sqlite",
        reports,
        results,
        ingest_s,
        history_s,
        judge_s,
        histories,
        flaky,
        size,
        "file + WAL after checkpoint",
        complete,
    )


def bench_postgres(plan: HistoryPlan, budget: float, admin_url: str) -> Result:
    name = f"flaketally_bench_{os.getpid()}"
    admin = sa.create_engine(normalise_url(admin_url), isolation_level="AUTOCOMMIT")
    url = admin_url.rsplit("/", 1)[0] + f"/{name}"
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}"'))
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    try:
        store = Store.open(url)
        try:
            with store.engine.connect() as conn:
                empty = int(conn.execute(sa.text("SELECT pg_database_size(current_database())")).scalar_one())
            reports, results, ingest_s, complete = run(store, plan, budget)
            with store.engine.connect() as conn:
                size = int(conn.execute(sa.text("SELECT pg_database_size(current_database())")).scalar_one())
            history_s, judge_s, histories, flaky = judge_all(store)
        finally:
            store.close()
    finally:
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()
    return Result(
        "postgresql",
        reports,
        results,
        ingest_s,
        history_s,
        judge_s,
        histories,
        flaky,
        size - empty,
        f"pg_database_size less the migrated empty db ({mb(empty):.1f} MB)",
        complete,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.store", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tests", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--flaky", type=float, default=0.01, help="fraction of flaky tests")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--backends", default="sqlite,postgresql")
    parser.add_argument(
        "--pg-url",
        default="postgresql://postgres@127.0.0.1:5432/test",
        help="a database to connect to for CREATE/DROP DATABASE",
    )
    parser.add_argument(
        "--ingest-budget",
        type=float,
        default=200,
        help="seconds of ingest per backend before stopping early (the figures then say so)",
    )
    args = parser.parse_args(argv)
    DATA.mkdir(parents=True, exist_ok=True)
    spec = HistorySpec(tests=args.tests, runs=args.runs, flaky_fraction=args.flaky, seed=args.seed)
    plan = HistoryPlan(spec)
    commits = len({r.commit for r in plan.runs})
    print(
        f"## Store: {spec.tests:,} tests x {spec.runs} runs on {commits} commits = {spec.results:,} results, "
        f"{len(plan.flaky)} flaky tests ({spec.flaky_fraction:.0%}), "
        f"{sum(c.skipped for c in plan.cases)} skipped\n"
    )
    results = []
    for backend in [b.strip() for b in args.backends.split(",") if b.strip()]:
        gc.collect()
        if backend == "sqlite":
            results.append(bench_sqlite(plan, args.ingest_budget))
        elif backend in ("postgresql", "postgres"):
            results.append(bench_postgres(plan, args.ingest_budget, args.pg_url))
        else:
            parser.error(f"unknown backend {backend!r}")
    metrics: list[tuple[str, object]] = [
        ("reports ingested", lambda r: r.reports),
        ("results ingested", lambda r: r.results),
        ("ingest s", lambda r: r.ingest_s),
        ("ingest results/s", lambda r: r.results / r.ingest_s),
        ("ingest ms/report", lambda r: 1000 * r.ingest_s / r.reports),
        ("history() s", lambda r: r.history_s),
        ("judge s", lambda r: r.judge_s),
        ("history() results/s", lambda r: r.results / r.history_s),
        ("judge results/s", lambda r: r.results / r.judge_s),
        ("history+judge results/s", lambda r: r.results / (r.history_s + r.judge_s)),
        ("histories (tests)", lambda r: r.histories),
        ("judged flaky", lambda r: r.flaky),
        ("store MB", lambda r: mb(r.size)),
        ("store bytes/result", lambda r: r.size / r.results),
    ]
    headers = ["", *[r.backend + ("" if r.complete else " (partial)") for r in results]]
    if len(results) == 2:
        headers.append(f"{results[1].backend}/{results[0].backend}")
    rows = []
    for label, get in metrics:
        values = [get(r) for r in results]  # type: ignore[operator]
        row = [label, *values]
        if len(values) == 2:
            row.append(f"{values[1] / values[0]:.2f}x" if values[0] else "n/a")
        rows.append(row)
    print(table(headers, rows))
    for r in results:
        print(f"{r.backend} size: {r.size_note}")
    if any(not r.complete for r in results):
        print("partial: ingest stopped at --ingest-budget seconds; judge figures are for what was ingested")
    print(f"peak RSS of this process: {mb(peak_rss()):.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
