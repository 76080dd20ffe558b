"""What every benchmark shares: where data goes, measuring a child process, printing a table."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA = Path(os.environ.get("FLAKETALLY_BENCH_DATA", "/tmp/flaketally-bench"))
MB = 1_000_000
MIB = 1 << 20


@dataclass(frozen=True, slots=True)
class Measured:
    seconds: float  # wall
    max_rss: int  # bytes
    returncode: int
    cpu: float = 0.0  # user + system seconds of the child: what another process on the machine cannot inflate much
    tree_rss: int = 0  # bytes: the highest sum of the resident sets of the child and its descendants, sampled


def _tree(pid: int) -> list[int]:
    """``pid`` and its descendants, now."""
    found, todo = [], [pid]
    while todo:
        one = todo.pop()
        found.append(one)
        try:
            for task in os.listdir(f"/proc/{one}/task"):
                todo += [int(c) for c in Path(f"/proc/{one}/task/{task}/children").read_text().split()]
        except OSError:
            continue
    return found


def _rss(pid: int) -> int:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


class TreeRss:
    """The peak of a process tree's summed resident sets, sampled every 10 ms in a thread (a tool that reads
    with several processes is charged for all of them; pages they share are counted once a process, so
    this overstates a forking tool, never understates it)."""

    def __init__(self, pid: int) -> None:
        self.pid, self.peak, self.done = pid, 0, threading.Event()
        self.thread = threading.Thread(target=self._sample, daemon=True)
        self.thread.start()

    def _sample(self) -> None:
        while not self.done.wait(0.01):
            self.peak = max(self.peak, sum(_rss(p) for p in _tree(self.pid)))

    def stop(self) -> int:
        self.done.set()
        self.thread.join()
        return self.peak


TIME = Path("/usr/bin/time")


def measure(cmd: Sequence[str], *, stdout: Path | None = None, timeout: float = 600) -> Measured:
    """Run one command; its wall time and the peak resident set of that process alone.

    The peak comes from GNU ``/usr/bin/time`` when it is there. ``ru_maxrss`` of a child that *this*
    process forks starts at this process's own RSS (Linux carries the forking process's high-water mark
    over ``fork`` and ``exec``), so the ``wait4`` fallback is a floor of this process's size, not exact.
    """
    with tempfile.TemporaryDirectory() as tmp, stdout.open("wb") if stdout else open(os.devnull, "wb") as out:
        err_path, rss_path = Path(tmp, "stderr"), Path(tmp, "rss")
        full = [str(TIME), "-o", str(rss_path), "-f", "%M %U %S", *cmd] if TIME.exists() else list(cmd)
        with err_path.open("wb") as err:
            start = time.perf_counter()
            proc = subprocess.Popen(full, stdout=out, stderr=err)
            timer = threading.Timer(timeout, proc.kill)
            timer.start()
            sampler = TreeRss(proc.pid) if Path("/proc").is_dir() else None
            try:
                _, status, usage = os.wait4(proc.pid, 0)
            finally:
                timer.cancel()
                tree = sampler.stop() if sampler else 0
            seconds = time.perf_counter() - start
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        if code not in (0, 1):
            sys.stderr.write(err_path.read_text(errors="replace")[-4000:])
            what = f"stopped after {timeout:.0f} s" if seconds >= timeout else f"exited {code}"
            raise RuntimeError(f"{' '.join(cmd[:4])} ... {what}")
        cpu = usage.ru_utime + usage.ru_stime
        if TIME.exists():
            kib, user, system = rss_path.read_text().splitlines()[-1].split()
            rss, cpu = int(kib) * 1024, float(user) + float(system)
        else:  # ru_maxrss is KiB on Linux, bytes on macOS
            rss = usage.ru_maxrss if sys.platform == "darwin" else usage.ru_maxrss * 1024
    return Measured(seconds, rss, code, cpu, max(tree, rss))


def peak_rss() -> int:
    """This process's peak resident set in bytes: VmHWM, which (unlike ru_maxrss) starts afresh at exec."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return usage if sys.platform == "darwin" else usage * 1024


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A plain aligned table: numbers right, text left."""
    cells = [[str(h) for h in headers], *[[_cell(v) for v in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    numeric = [all(_is_number(row[i]) for row in rows) for i in range(len(headers))]
    lines = []
    for n, row in enumerate(cells):
        parts = [c.rjust(w) if numeric[i] else c.ljust(w) for i, (c, w) in enumerate(zip(row, widths, strict=True))]
        lines.append("  ".join(parts).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _is_number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.2f}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, int) and not isinstance(value, bool):
        return f"{value:,}"
    return str(value)


def mb(n: float) -> float:
    return n / MB


def ratio(a: float, b: float) -> str:
    return f"{a / b:.2f}x" if b else "n/a"


def flaketally_cmd() -> list[str]:
    """``flaketally`` from the running interpreter's environment."""
    return [sys.executable, "-c", "import sys; from bot.cli import main; sys.exit(main())"]


WRITE_METHODS = ("POST", "PATCH", "PUT", "DELETE")  # what GitHub counts as content-creating


def owner_of(path: str) -> str:
    """The account a GitHub API path is about (``/repos/OWNER/...``): the installation, where each account
    has its own; "" for other paths."""
    parts = path.lstrip("/").split("/")
    return parts[1] if len(parts) > 1 and parts[0] == "repos" else ""


def peak_writes(writes: Sequence[tuple[float, str]]) -> tuple[int, int]:
    """The most writes one installation made in any 60 and in any 3,600 seconds (sliding windows, as GitHub
    counts), from (time, installation) pairs."""
    times: dict[str, list[float]] = {}
    for when, installation in writes:
        times.setdefault(installation, []).append(when)
    peaks = [0, 0]
    for moments in times.values():
        moments.sort()
        for slot, span in enumerate((60.0, 3600.0)):
            start = 0
            for end, moment in enumerate(moments):
                while moment - moments[start] >= span:
                    start += 1
                peaks[slot] = max(peaks[slot], end - start + 1)
    return peaks[0], peaks[1]
