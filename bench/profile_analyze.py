"""Where ``flaketally analyze`` spends its time, on a generated history.

1. Phases, timed without a profiler, in this process, the same calls ``bot.local.analyze.analyze`` and the
   CLI make: import, open + migrate a fresh SQLite store, find files, parse, identify, ingest,
   ``history``, judge, render JSON.
2. ``cProfile`` of ``bot.cli.main(["analyze", DIR, "--db", FRESH, "--format", "json"])``: the top
   functions by cumulative and by own time. The profile is kept (``--out``) for ``snakeviz`` or
   ``python -m pstats``.

    python -m bench.profile_analyze                     # 2,000 tests x 200 runs
    python -m bench.profile_analyze --tests 500 --runs 50 --top 40
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import io
import os
import pstats
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from bench._common import DATA, REPO, mb, peak_rss, table
from bench.generate import HistorySpec, ensure_history


def fresh_db(name: str) -> Path:
    db = DATA / "profile" / name
    db.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    return db


def import_seconds() -> float:
    """A fresh interpreter's time to import the CLI, less its time to start with nothing to import."""

    def run(code: str) -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)
        return time.perf_counter() - start

    empty = min(run("pass") for _ in range(3))
    return min(run("import bot.cli") for _ in range(3)) - empty


class _Phases:
    """Wall and CPU seconds added up per phase, and the peak RSS (VmHWM) after each phase last ran."""

    def __init__(self) -> None:
        self.order: list[str] = []
        self.wall: dict[str, float] = {}
        self.cpu: dict[str, float] = {}
        self.rss: dict[str, int] = {}
        self.base_rss = peak_rss()

    def add(self, label: str, wall: float, cpu: float) -> None:
        if label not in self.wall:
            self.order.append(label)
            self.wall[label] = self.cpu[label] = 0.0
        self.wall[label] += wall
        self.cpu[label] += cpu
        self.rss[label] = peak_rss()

    @contextlib.contextmanager
    def timed(self, label: str) -> Iterator[None]:
        wall, cpu = time.perf_counter(), time.process_time()
        yield
        self.add(label, time.perf_counter() - wall, time.process_time() - cpu)


def phases(root: Path, results: int) -> None:
    """The steps of ``bot.local.analyze.analyze`` and the CLI, in its order (parse, identify, ingest per file)."""
    from bot.core.analysis import Analysis
    from bot.core.cost import Rates
    from bot.core.judge import judge
    from bot.core.junit import parse
    from bot.core.verdicts import CommitVerdict
    from bot.local.files import identify, report_files
    from bot.render.analysis import RENDERERS
    from bot.store import Store

    imported = import_seconds()
    p = _Phases()
    with p.timed("Store.open + migrate (fresh SQLite)"):
        store = Store.open(str(fresh_db("phases.db")))
    with p.timed("report_files"):
        files, _ = report_files([str(root)])
    seen: set[str] = set()
    for path in files:
        with p.timed("parse (bot.core.junit.parse, file read included)"), path.open("rb") as stream:
            report = parse(stream)
        with p.timed("identify (meta.json)"):
            run, _ = identify(path, report, "local")
        with p.timed("test ids of every result (analyze's `seen`)"):
            seen.update(r.id for r in report.results)
        with p.timed("Store.ingest"):
            store.ingest(report, run)
        del report
    with p.timed("Store.history"):
        histories = store.history("local", seen)
    rates = Rates()
    with p.timed("judge (commits, history, cost)"):
        tests = [judge(h, CommitVerdict.UNDETERMINED, rates) for h in histories]
    analysis = Analysis(policy=CommitVerdict.UNDETERMINED, rates=rates, tests=tests, files=len(files))
    with p.timed("render JSON"):
        text = RENDERERS["json"](analysis)
    store.close()
    total, total_cpu = imported + sum(p.wall.values()), imported + sum(p.cpu.values())
    rows: list[list[object]] = [
        [
            "import bot.cli (fresh interpreter)",
            imported,
            imported,
            f"{imported / total_cpu:.1%}",
            results / imported,
            "",
            "",
        ]
    ]
    rows += [
        [
            label,
            p.wall[label],
            p.cpu[label],
            f"{p.cpu[label] / total_cpu:.1%}",
            results / p.cpu[label],
            mb(p.rss[label]),
            mb(p.rss[label] - p.base_rss),
        ]
        for label in p.order
    ]
    rows.append(["total", total, total_cpu, "100%", results / total_cpu, mb(peak_rss()), mb(peak_rss() - p.base_rss)])
    print(table(["phase", "wall s", "CPU s", "CPU share", "results/CPU s", "peak RSS MB after", "peak grown MB"], rows))
    written = mb(len(text.encode()))
    print(
        f"(import: wall time of a fresh interpreter, counted as CPU too; JSON written: {written:.1f} MB; "
        "'peak grown' is VmHWM after the phase last ran, less before the store was opened)"
    )


def _where(key: tuple[str, int, str]) -> str:
    file, line, func = key
    if file == "~":
        return func
    for marker in ("site-packages/", "/lib/python3.11/"):
        if marker in file:
            file = file.split(marker, 1)[1]
            break
    else:
        with contextlib.suppress(ValueError):
            file = str(Path(file).relative_to(REPO))
    return f"{file}:{line} {func}"


def profile(root: Path, results: int, top: int, out: Path) -> None:
    from bot.cli import main

    db = fresh_db("profiled.db")
    profiler = cProfile.Profile()
    sink = io.StringIO()
    start = time.perf_counter()
    with contextlib.redirect_stdout(sink), open(os.devnull, "w") as devnull, contextlib.redirect_stderr(devnull):
        profiler.enable()
        main(["analyze", str(root), "--db", str(db), "--format", "json"])
        profiler.disable()
    wall = time.perf_counter() - start
    profiler.dump_stats(out)
    stats = pstats.Stats(profiler)
    entries = stats.stats  # type: ignore[attr-defined]
    total = max(ct for (_, _, _, ct, _) in entries.values())
    print(
        f"\nprofiled wall {wall:.2f} s (profiler overhead included; {results / wall:,.0f} results/s); "
        f"profile in {out}\n"
    )
    for title, index in (("cumulative", 3), ("own time", 2)):
        ranked = sorted(entries.items(), key=lambda kv: kv[1][index], reverse=True)[:top]
        rows = [[_where(k), nc, tt, ct, f"{ct / total:.1%}"] for k, (_, nc, tt, ct, _) in ranked]
        print(f"### top {top} by {title}\n")
        print(table(["function", "calls", "own s", "cumulative s", "cum share"], rows))
        print()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.profile_analyze",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--tests", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--flaky", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--top", type=int, default=30)
    parser.add_argument("--out", type=Path, default=DATA / "profile" / "analyze.prof")
    parser.add_argument("--no-profile", action="store_true", help="phases only")
    args = parser.parse_args(argv)
    spec = HistorySpec(tests=args.tests, runs=args.runs, flaky_fraction=args.flaky, seed=args.seed)
    root = ensure_history(spec)
    xml = sum(p.stat().st_size for p in root.rglob("*.xml"))
    print(
        f"## Profile of flaketally analyze: {spec.tests:,} tests x {spec.runs} runs = {spec.results:,} results, "
        f"{mb(xml):.1f} MB of XML\n"
    )
    phases(root, spec.results)
    if not args.no_profile:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        profile(root, spec.results, args.top, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
