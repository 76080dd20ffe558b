"""Every benchmark, one after the other, each in its own process with a time limit; output also saved.

python -m bench.run_all            # the sizes the README names (about 10 minutes on 2 cores)
python -m bench.run_all --quick    # small sizes, about a minute
python -m bench.run_all --only parse,store
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime

from bench._common import DATA, REPO

FULL = {
    "parse": ["--tests", "100000", "--mb", "100", "--sizes", "25,50,100", "--repeat", "3", "--history-tests", "2000"],
    "store": ["--tests", "10000", "--runs", "200"],
    "flakemap": ["--tests", "2000", "--runs", "200", "--repeat", "2"],
    "profile_analyze": ["--tests", "2000", "--runs", "200", "--top", "30"],
    "receiver": ["--runs", "3", "--rate", "300", "--seconds", "20"],
    "cli": [],
    "e2e-2": ["--runs", "60", "--workers", "2"],
    "e2e-4": ["--runs", "60", "--workers", "4"],
    "replay": ["--seed", "1"],
    "judging": ["--tests", "1000,10000,50000"],
}
QUICK = {
    "parse": [
        "--tests",
        "10000",
        "--mb",
        "10",
        "--sizes",
        "2.5,5,10",
        "--repeat",
        "1",
        "--history-tests",
        "300",
        "--history-runs",
        "50",
    ],
    "store": ["--tests", "1000", "--runs", "50"],
    "flakemap": ["--tests", "300", "--runs", "50"],
    "profile_analyze": ["--tests", "300", "--runs", "50", "--top", "15"],
    "receiver": ["--runs", "3", "--rate", "300", "--seconds", "3"],
    "cli": ["--repeat", "1"],
    "e2e-2": ["--runs", "12", "--workers", "2"],
    "e2e-4": ["--runs", "12", "--workers", "4"],
    "replay": ["--seed", "1", "--weeks", "1"],
    "judging": ["--tests", "1000,10000", "--quick"],
}
# targets that run one module with different arguments
MODULE = {"e2e-2": "e2e", "e2e-4": "e2e"}


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def git(*args: str) -> str:
    done = subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True)
    return done.stdout.strip()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.run_all", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", default=",".join(FULL), help="comma-separated: " + ", ".join(FULL))
    parser.add_argument("--timeout", type=float, default=600, help="seconds per benchmark")
    args = parser.parse_args(argv)
    plan = QUICK if args.quick else FULL
    names = [n.strip() for n in args.only.split(",") if n.strip()]
    unknown = [n for n in names if n not in plan]
    if unknown:
        parser.error(f"unknown benchmark(s): {', '.join(unknown)}")
    DATA.mkdir(parents=True, exist_ok=True)
    log_path = DATA / f"results-{datetime.now(UTC):%Y%m%dT%H%M%SZ}.txt"
    dirty = git("status", "--porcelain", "--", "bot", "workers")
    header = (
        f"# flaketally benchmarks {datetime.now(UTC):%Y-%m-%d %H:%M} UTC\n"
        f"revision {git('rev-parse', '--short', 'HEAD')}{' + uncommitted changes in bot/' if dirty else ''}; "
        f"Python {platform.python_version()}; {os.cpu_count()} CPUs; {platform.machine()}; load average {_load()}\n"
        "(other processes on the machine inflate wall times: compare the CPU-second figures where printed)\n"
    )
    failed = []
    with log_path.open("w") as log:

        def say(text: str) -> None:
            sys.stdout.write(text)
            sys.stdout.flush()
            log.write(text)
            log.flush()

        say(header)
        for name in names:
            module = MODULE.get(name, name)
            cmd = [sys.executable, "-m", f"bench.{module}", *plan[name]]
            say(f"\n$ python -m bench.{module} {' '.join(plan[name])}\n\n")
            start = time.perf_counter()
            proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            timer = threading.Timer(args.timeout, proc.kill)
            timer.start()
            try:
                assert proc.stdout is not None
                for line in proc.stdout:
                    say(line)
                proc.wait()
            finally:
                timer.cancel()
            seconds = time.perf_counter() - start
            if proc.returncode != 0:
                failed.append(name)
                say(f"\n!! bench.{name} exited {proc.returncode} after {seconds:.0f} s\n")
            else:
                say(f"\n({name}: {seconds:.0f} s; load average now {_load()})\n")
    print(f"\nsaved in {log_path}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
