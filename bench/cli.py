"""How the command feels: ``flaketally --help`` and ``flaketally analyze`` on each real-runners history
(about 50 reports each, ``../shared/corpus/real-runners/<runner>``), beside flakemap 0.3.7 on the same
folder. Wall time is the median of ``--repeat`` runs of each child process.

flakemap lives in its own virtualenv (see ``bench.flakemap``; ``--install`` makes it):

    python -m bench.cli
    python -m bench.cli --repeat 7

Aims (issue 9): ``--help`` at most 150 ms; ``analyze`` no slower than flakemap on any history.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from bench._common import REPO, table
from bench.flakemap import FLAKEMAP_VENV, install

CORPUS = REPO.parent / "shared" / "corpus" / "real-runners"
FLAKETALLY = [str(Path(sys.executable).parent / "flaketally")]


# as a user's machine runs them: Python keeps its compiled bytecode (some sandboxes and CI images set
# PYTHONDONTWRITEBYTECODE, which makes every start compile the editable checkout's modules again while
# flakemap's, installed by pip, were compiled at install time)
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def wall(cmd: list[str], repeat: int) -> float:
    """The median wall time of ``repeat`` runs, after one unmeasured run that warms the caches."""
    subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=CHILD_ENV)
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=CHILD_ENV)
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.cli", description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--install", action="store_true", help="make flakemap's virtualenv when missing")
    args = parser.parse_args(argv)
    flakemap = FLAKEMAP_VENV / "bin" / "flakemap"
    if not flakemap.exists():
        if not args.install:
            print(f"bench.cli: flakemap is not at {flakemap}; run with --install", file=sys.stderr)
            return 2
        install(FLAKEMAP_VENV)
    if not CORPUS.is_dir():
        print(f"bench.cli: {CORPUS} is absent", file=sys.stderr)
        return 2
    helped = wall([*FLAKETALLY, "--help"], args.repeat)
    flakemap_help = wall([str(flakemap), "--help"], args.repeat)
    rows: list[list[object]] = [["--help", f"{helped * 1000:.0f} ms", f"{flakemap_help * 1000:.0f} ms", "", ""]]
    slower = 0
    for runner in sorted(p.name for p in CORPUS.iterdir() if p.is_dir()):
        folder = CORPUS / runner
        reports = sum(1 for _ in folder.rglob("*.xml"))
        ours = wall([*FLAKETALLY, "analyze", str(folder)], args.repeat)
        theirs = wall([str(flakemap), str(folder), "--json"], args.repeat)
        slower += ours > theirs
        ratio = f"{theirs / ours:.2f}x"
        rows.append([f"analyze {runner}", f"{ours * 1000:.0f} ms", f"{theirs * 1000:.0f} ms", ratio, reports])
    print(f"bench.cli: median of {args.repeat} runs of each child process")
    print(table(["what", "flaketally", "flakemap 0.3.7", "flakemap / flaketally", "reports"], rows))
    print(f"--help {helped * 1000:.0f} ms (aim <= 150 ms); analyze slower than flakemap on {slower} histories (aim 0)")
    return 0 if helped <= 0.150 and slower == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
