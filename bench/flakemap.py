"""``flaketally analyze`` end to end against flakemap 0.3.7 on the same generated history.

Both run as child processes on the same folder: ``flaketally analyze DIR --db FRESH.db --format json``
(a new SQLite file every time) and ``flakemap DIR --json``. Wall time and peak RSS of each child come
from GNU ``/usr/bin/time`` (see ``bench._common.measure``). The verdicts of both are checked against
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
    measured: dict[str, list[Measured]] = {"flaketally": [], "flakemap": []}
    for i in range(args.repeat):
        db = out / "flaketally.db"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{db}{suffix}").unlink(missing_ok=True)
        measured["flaketally"].append(
            measure(
                [*flaketally_cmd(), "analyze", str(root), "--db", str(db), "--format", "json"],
                stdout=out / "flaketally.json",
                timeout=args.timeout,
            )
        )
        measured["flakemap"].append(
            measure(
                [str(flakemap), str(root), "--json"],
                stdout=out / "flakemap.json",
                timeout=args.timeout,
            )
        )
        ft, fm = measured["flaketally"][-1], measured["flakemap"][-1]
        print(
            f"run {i + 1}: flaketally {ft.seconds:.2f} s wall / {ft.cpu:.2f} s CPU, "
            f"flakemap {fm.seconds:.2f} s wall / {fm.cpu:.2f} s CPU"
        )

    best = {k: min(v, key=lambda m: m.seconds) for k, v in measured.items()}
    cpu = {k: min(m.cpu for m in v) for k, v in measured.items()}
    peak = {k: max(m.max_rss for m in v) for k, v in measured.items()}
    ft_counts, ft_flaky = verdicts_flaketally(out / "flaketally.json")
    fm_counts, fm_flaky = verdicts_flakemap(out / "flakemap.json")
    fm_planted = {t.replace("::", ".") for t in planted}  # flakemap names a test classname.name
    outputs = {"flaketally": out / "flaketally.json", "flakemap": out / "flakemap.json"}

    rows = []
    for tool, found, wanted, counts in (
        ("flaketally", ft_flaky, planted, ft_counts),
        (f"flakemap {version.split()[-1]}", fm_flaky, fm_planted, fm_counts),
    ):
        key = tool.split()[0]
        m = best[key]
        rows.append(
            [
                tool,
                m.seconds,
                cpu[key],
                spec.results / m.seconds,
                mb(size) / m.seconds,
                mb(peak[key]),
                mb(outputs[key].stat().st_size),
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
                "peak RSS MB",
                "output MB",
                "planted flaky found",
                "false flaky",
                "verdicts",
            ],
            rows,
        )
    )
    ft, fm = best["flaketally"], best["flakemap"]
    print(
        f"\nflaketally is {fm.seconds / ft.seconds:.2f}x flakemap's speed (target >= 5x: "
        f"{'met' if fm.seconds / ft.seconds >= 5 else 'NOT met'}); "
        f"peak RSS flaketally/flakemap {ratio(peak['flaketally'], peak['flakemap'])} "
        f"({'less' if peak['flaketally'] < peak['flakemap'] else 'MORE'} memory)"
    )
    print(
        f"on CPU time (user+sys, less sensitive to other load): flaketally is "
        f"{cpu['flakemap'] / cpu['flaketally']:.2f}x flakemap's speed"
    )
    print(f"target ~250,000 results/s end to end: flaketally does {spec.results / ft.seconds:,.0f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
