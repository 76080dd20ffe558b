"""``flaketally analyze`` end to end against flakemap 0.3.7 on the same generated history.

All run as child processes on the same folder: ``flaketally analyze DIR --format json`` (what a user types:
judged in memory, on every core), the same with ``--db FRESH.db`` (a new SQLite file every time) and
``flakemap DIR --json``. Wall and CPU time come from GNU ``/usr/bin/time``; peak memory is the highest sum
of the resident sets of the tool's processes (``bench._common.TreeRss``), so the reading processes count.
The verdicts of each are checked against
the planted flaky tests in ``truth.json``.

flakemap lives in its own virtualenv (it is not a dependency of the project):

    python3 -m venv /tmp/flakemap-venv && /tmp/flakemap-venv/bin/pip install flakemap==0.3.7
    python -m bench.flakemap                          # 2,000 tests x 200 runs (~35 MB)
    python -m bench.flakemap --install                # make that venv first if it is missing
    python -m bench.flakemap --tests 500 --runs 50 --repeat 3
"""

from __future__ import annotations

import argparse
import json
import subprocess
from collections import Counter
from pathlib import Path

from bench._common import DATA, Measured, flaketally_cmd, mb, measure, ratio, table
from bench.generate import HistorySpec, ensure_history

FLAKEMAP_VENV = Path("/tmp/flakemap-venv")
FLAKEMAP_VERSION = "0.3.7"


def install(venv: Path) -> None:
    subprocess.run(["python3", "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", f"flakemap=={FLAKEMAP_VERSION}"], check=True)


def folder_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.rglob("*.xml"))


def verdicts_flaketally(path: Path) -> tuple[Counter[str], set[str]]:
    doc = json.loads(path.read_text())
    tests = doc["tests"]
    return Counter(t["verdict"] for t in tests), {t["id"] for t in tests if t["verdict"] == "flaky"}


def verdicts_flakemap(path: Path) -> tuple[Counter[str], set[str]]:
    doc = json.loads(path.read_text())
    tests = doc["tests"]
    return Counter(t["classification"] for t in tests), {t["test"] for t in tests if t["classification"] == "flaky"}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.flakemap", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tests", type=int, default=2000)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--flaky", type=float, default=0.01)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=1, help="runs of each tool; the best is compared")
    parser.add_argument("--venv", type=Path, default=FLAKEMAP_VENV, help="flakemap's own virtualenv")
    parser.add_argument("--install", action="store_true", help="create --venv with flakemap if it is missing")
    parser.add_argument("--timeout", type=float, default=300, help="seconds per child process")
    args = parser.parse_args(argv)

    flakemap = args.venv / "bin" / "flakemap"
    if not flakemap.exists():
        if not args.install:
            parser.error(
                f"no {flakemap}: run with --install, or: python3 -m venv {args.venv} && "
                f"{args.venv}/bin/pip install flakemap=={FLAKEMAP_VERSION}"
            )
        install(args.venv)
    version = subprocess.run([str(flakemap), "--version"], capture_output=True, text=True, check=True).stdout.strip()

    spec = HistorySpec(tests=args.tests, runs=args.runs, flaky_fraction=args.flaky, seed=args.seed)
    root = ensure_history(spec)
    size = folder_bytes(root)
    truth = json.loads((root / "truth.json").read_text())
    planted = set(truth["flaky"])
    print(
        f"## End to end: {spec.tests:,} tests x {spec.runs} runs on {truth['commits']} commits = "
        f"{spec.results:,} results, {mb(size):.1f} MB of XML in {root}; {len(planted)} planted flaky\n"
    )

    out = DATA / "e2e"
    out.mkdir(parents=True, exist_ok=True)
    db = out / "flaketally.db"
    # what a user types (judged in memory), the same with the reports kept in a new SQLite file, and flakemap
    tools = {
        "flaketally": [*flaketally_cmd(), "analyze", str(root), "--format", "json"],
        "flaketally --db": [*flaketally_cmd(), "analyze", str(root), "--db", str(db), "--format", "json"],
        "flakemap": [str(flakemap), str(root), "--json"],
    }
    outputs = {tool: out / f"{tool.replace(' --', '-')}.json" for tool in tools}
    measured: dict[str, list[Measured]] = {tool: [] for tool in tools}
    for i in range(args.repeat):
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        for tool, cmd in tools.items():
            measured[tool].append(measure(cmd, stdout=outputs[tool], timeout=args.timeout))
        print(
            f"run {i + 1}: "
            + ", ".join(f"{tool} {m[-1].seconds:.2f} s wall / {m[-1].cpu:.2f} s CPU" for tool, m in measured.items())
        )

    best = {k: min(v, key=lambda m: m.seconds) for k, v in measured.items()}
    cpu = {k: min(m.cpu for m in v) for k, v in measured.items()}
    peak = {k: max(m.tree_rss for m in v) for k, v in measured.items()}
    fm_planted = {t.replace("::", ".") for t in planted}  # flakemap names a test classname.name
    rows = []
    for tool in tools:
        if tool == "flakemap":
            counts, found = verdicts_flakemap(outputs[tool])
            wanted, name = fm_planted, f"flakemap {version.split()[-1]}"
        else:
            counts, found = verdicts_flaketally(outputs[tool])
            wanted, name = planted, tool
        m = best[tool]
        rows.append(
            [
                name,
                m.seconds,
                cpu[tool],
                spec.results / m.seconds,
                mb(size) / m.seconds,
                mb(peak[tool]),
                mb(outputs[tool].stat().st_size),
                f"{len(found & wanted)}/{len(wanted)}",
                len(found - wanted),
                ", ".join(f"{v} {k}" for k, v in sorted(counts.items())),
            ]
        )
    print()
    print(
        table(
            [
                "tool",
                "wall s",
                "CPU s",
                "results/s",
                "MB/s",
                "peak RSS MB (all its processes)",
                "output MB",
                "planted flaky found",
                "false flaky",
                "verdicts",
            ],
            rows,
        )
    )
    fm = best["flakemap"]
    print()
    for tool in ("flaketally", "flaketally --db"):
        speed = fm.seconds / best[tool].seconds
        print(
            f"{tool} is {speed:.2f}x flakemap's speed (target >= 5x: {'met' if speed >= 5 else 'NOT met'}); "
            f"peak RSS {tool}/flakemap {ratio(peak[tool], peak['flakemap'])} "
            f"({'less' if peak[tool] < peak['flakemap'] else 'MORE'} memory); "
            f"on CPU seconds (all cores together) {cpu['flakemap'] / cpu[tool]:.2f}x"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
