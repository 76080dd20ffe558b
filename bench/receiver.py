"""The webhook receiver under load: signed ``workflow_run`` ``completed`` deliveries at a steady rate.

Issue 14's aim: p99 under 25 ms at 300 deliveries a second, in three runs of three, none lost. Each run
(``--runs``, default 3) starts the real app (``bot.web.serve.serve``, uvicorn, one process) afresh in a
subprocess on a free port of 127.0.0.1, pointed at a real Redis database of its own (``--redis-db``,
default 14, flushed before and after), and drives it from an open-loop generator: request *i* is due at
``start + i / rate`` whatever the earlier ones did, over at most ``--connections`` keep-alive connections.
Every delivery has its own delivery id and run id, so each should enqueue exactly one job. Requests are
built and signed before the clock starts; the generator is a small raw HTTP/1.1 client on asyncio (see
``drive``).

Latency is measured from the moment a request was due, not from when a connection was free, so a
stalled server shows up in the percentiles instead of silently slowing the generator down. Printed per
run and over all runs: p50/p90/p99/max, the rate achieved, p99's ratio to the 25 ms aim, lost deliveries,
the server's CPU per delivery, the CPU the rest of the machine used meanwhile and the 1-minute load average
before and after; then "p99 under 25 ms in K of N runs". A run on a busy machine is flagged: its tail
measures the machine as much as the receiver. The benchmark fails (exit 1) when a delivery is lost: the
jobs in the queue must equal the 202 answers.

The server's figures depend on uvicorn's C parts: with ``httptools`` and ``uvloop`` installed (uvicorn
picks them up by itself) a delivery cost about 1.3-1.6 ms of server CPU here, without them about 2.1-2.5 ms.

The body is GitHub's own example (``../shared/github/webhooks/workflow_run.completed.payload.json``,
about 22 KB, plus an ``installation``) when that folder is there, else an inline payload padded to the
same size. At most 5 runs of at most 6,000 deliveries each.

    python -m bench.receiver                                     # 3 runs, 300/s for 20 s each
    python -m bench.receiver --runs 1 --seconds 5                # a quick look
    python -m bench.receiver --rate 500 --seconds 10 --connections 64
    REDIS_URL=redis://127.0.0.1:6379/0 python -m bench.receiver --redis-db 13
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import redis
from rq import Queue

from bench._common import table

ROOT = Path(__file__).resolve().parent.parent
SHARED = Path(os.environ.get("FLAKETALLY_SHARED", ROOT.parent / "shared"))
EXAMPLE = SHARED / "github" / "webhooks" / "workflow_run.completed.payload.json"
SECRET = "bench-secret"
QUEUE = "flaketally-bench"
MAX_REQUESTS = 6000  # a run's measured deliveries at most
MAX_RUNS = 5
AIM_P99_MS = 25.0  # issue 14: p99 under 25 ms at 300 deliveries a second, in three runs of three
BUSY_LOAD = 1.0
BUSY_CORES = 0.5
RUN_PLACEHOLDER = 987654321012345  # replaced by each delivery's own run id


def free_port() -> int:
    with closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def body_template() -> tuple[str, str]:
    """The JSON text with a placeholder for the run id, and where it came from."""
    if EXAMPLE.exists():
        payload: dict[str, Any] = json.loads(EXAMPLE.read_text())
        source = f"{EXAMPLE.name} ({EXAMPLE.stat().st_size:,} bytes)"
    else:
        payload = {
            "action": "completed",
            "repository": {"id": 300029405, "full_name": "octo-org/octo-repo"},
            "workflow_run": {"run_attempt": 1, "head_sha": "3484a3fb816e0859fd6e1cea078d76385ff50625"},
            "padding": "x" * 21_000,
        }
        source = "inline payload padded to ~22 KB"
    payload["installation"] = {"id": 4242}
    payload["workflow_run"]["id"] = RUN_PLACEHOLDER
    return json.dumps(payload), source


def start_server(port: int, redis_url: str, folder: Path) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "GITHUB_WEBHOOK_SECRET": SECRET,
        "REDIS_URL": redis_url,
        "DATABASE_URL": str(folder / "flaketally.db"),
        "FLAKETALLY_QUEUE": QUEUE,
    }
    code = (
        "from bot.web.serve import serve; from bot.settings import Settings; "
        f"serve(Settings.from_env(require_app=False), '127.0.0.1', {port})"
    )
    log = (folder / "server.log").open("wb")
    return subprocess.Popen([sys.executable, "-c", code], env=env, cwd=ROOT, stdout=log, stderr=log)


def wait_ready(port: int, server: subprocess.Popen[bytes], timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"the server exited with {server.returncode} before it was ready")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/readyz", timeout=1).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    raise RuntimeError(f"the server did not become ready within {timeout:.0f} s")


def request_bytes(template: str, run_id: int, port: int) -> bytes:
    """One signed delivery as raw HTTP/1.1 bytes, built before it is due."""
    body = template.replace(str(RUN_PLACEHOLDER), str(run_id)).encode()
    signature = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    head = (
        f"POST /webhook HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUser-Agent: GitHub-Hookshot/bench\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\nX-GitHub-Event: workflow_run\r\n"
        f"X-GitHub-Delivery: {uuid.uuid4()}\r\nX-Hub-Signature-256: {signature}\r\n\r\n"
    )
    return head.encode() + body


async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, request: bytes) -> int:
    """Send one request on a keep-alive connection and read its whole answer; the status code."""
    writer.write(request)
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    length = next((int(v) for k, _, v in (h.partition(":") for h in lines[1:]) if k.lower() == "content-length"), 0)
    await reader.readexactly(length)
    return int(lines[0].split()[1])


async def drive(port: int, template: str, rate: float, total: int, connections: int, first_run: int) -> dict[str, Any]:
    """Open loop: request i is due at start + i / rate; at most ``connections`` are in flight.

    A small raw HTTP/1.1 client rather than httpx, whose per-request CPU cost (about 2.5 ms here)
    would take the core the server needs on a 2-core machine and measure the generator instead.
    """
    due_queue: asyncio.Queue[tuple[float, bytes] | None] = asyncio.Queue()
    latencies: list[float] = []
    statuses: dict[int | str, int] = {}

    async def connection() -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            while (item := await due_queue.get()) is not None:
                due, request = item
                try:
                    key: int | str = await exchange(reader, writer, request)
                except (OSError, asyncio.IncompleteReadError) as exc:
                    key = type(exc).__name__
                    writer.close()
                    reader, writer = await asyncio.open_connection("127.0.0.1", port)
                latencies.append(time.perf_counter() - due)
                statuses[key] = statuses.get(key, 0) + 1
        finally:
            writer.close()

    requests = [request_bytes(template, first_run + i, port) for i in range(total)]
    workers = [asyncio.create_task(connection()) for _ in range(connections)]
    await asyncio.sleep(0.2)  # let the connections open before the clock starts
    start = time.perf_counter()
    for i, request in enumerate(requests):
        due = start + i / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        due_queue.put_nowait((due, request))
    for _ in workers:
        due_queue.put_nowait(None)
    await asyncio.gather(*workers)
    return {"latencies": latencies, "statuses": statuses, "elapsed": time.perf_counter() - start}


def cpu_seconds(pid: int) -> float:
    """User + system CPU time a process has used so far (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def busy_seconds() -> float:
    """CPU time every process on the machine has used so far, all cores (Linux ``/proc/stat``)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def load1() -> float:
    return os.getloadavg()[0]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * len(ordered)) - 1))]


@dataclass(frozen=True, slots=True)
class Run:
    """One run's figures: a fresh server, a warm-up, then the measured deliveries."""

    latencies_ms: list[float]
    statuses: dict[int | str, int]
    elapsed: float
    sent: int  # warm-up included
    accepted: int  # 202 answers, warm-up included
    queued: int  # jobs in the queue afterwards
    server_cpu: float  # seconds, warm-up included
    generator_cpu: float
    others_cpu: float  # seconds of CPU every other process used meanwhile (Redis among them), all cores
    load_before: float
    load_after: float
    server_log: str

    @property
    def lost(self) -> int:
        return self.accepted - self.queued

    @property
    def p99(self) -> float:
        return percentile(self.latencies_ms, 99)


def one_run(args: argparse.Namespace, conn: redis.Redis, redis_url: str, template: str, first_run: int) -> Run:
    """Start a server on a fresh database, warm it up, drive it, count the queue, stop it."""
    total = min(MAX_REQUESTS, int(args.rate * args.seconds))
    conn.flushdb()
    port = free_port()
    with tempfile.TemporaryDirectory(prefix="flaketally-bench-receiver-") as tmp:
        folder = Path(tmp)
        server = start_server(port, redis_url, folder)
        try:
            wait_ready(port, server)
            load_before = load1()
            started_cpu, client_start, busy_start = cpu_seconds(server.pid), time.process_time(), busy_seconds()
            warm = asyncio.run(drive(port, template, args.rate, args.warmup, args.connections, first_run))
            result = asyncio.run(drive(port, template, args.rate, total, args.connections, first_run + args.warmup))
            server_cpu, client_cpu = cpu_seconds(server.pid) - started_cpu, time.process_time() - client_start
            busy = busy_seconds() - busy_start
            load_after = load1()
            queued = Queue(QUEUE, connection=conn).count
        finally:
            server.terminate()  # the server we started, by its own handle
            try:
                server.wait(timeout=10)
            except subprocess.TimeoutExpired:
                server.kill()
                server.wait()
            server_log = (folder / "server.log").read_text(errors="replace")
    conn.flushdb()
    return Run(
        latencies_ms=[x * 1000 for x in result["latencies"]],
        statuses=result["statuses"],
        elapsed=result["elapsed"],
        sent=args.warmup + total,
        accepted=warm["statuses"].get(202, 0) + result["statuses"].get(202, 0),
        queued=queued,
        server_cpu=server_cpu,
        generator_cpu=client_cpu,
        others_cpu=max(0.0, busy - server_cpu - client_cpu),
        load_before=load_before,
        load_after=load_after,
        server_log=server_log,
    )


def row(name: str, ms: list[float], seconds: float, runs: list[Run]) -> list[object]:
    sent = sum(r.sent for r in runs)
    p99 = percentile(ms, 99)
    return [
        name,
        len(ms),
        round(len(ms) / seconds, 1),
        round(statistics.median(ms), 2),
        round(percentile(ms, 90), 2),
        round(p99, 2),
        round(max(ms), 2),
        f"{p99 / AIM_P99_MS:.2f}x",
        sum(r.lost for r in runs),
        round(sum(r.server_cpu for r in runs) / sent * 1000, 2),
        round(sum(r.others_cpu for r in runs) / sum(r.elapsed for r in runs), 2),
        " ".join(f"{r.load_before:.2f}>{r.load_after:.2f}" for r in runs),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rate", type=float, default=300.0, help="deliveries per second (default 300)")
    parser.add_argument("--seconds", type=float, default=20.0, help="duration of each run (default 20)")
    parser.add_argument("--runs", type=int, default=3, help="runs, each on a fresh server (default 3, at most 5)")
    parser.add_argument("--connections", type=int, default=32, help="concurrent connections at most (default 32)")
    parser.add_argument("--warmup", type=int, default=100, help="deliveries sent before measuring (default 100)")
    parser.add_argument("--redis-db", type=int, default=14, help="Redis database to use and flush (default 14)")
    args = parser.parse_args(argv)
    if not 1 <= args.runs <= MAX_RUNS:
        parser.error(f"--runs must be 1 to {MAX_RUNS}")
    total = min(MAX_REQUESTS, int(args.rate * args.seconds))

    base = os.environ.get("REDIS_URL", "redis://127.0.0.1:6379/0").rsplit("/", 1)[0]
    redis_url = f"{base}/{args.redis_db}"
    conn = redis.Redis.from_url(redis_url)
    template, source = body_template()
    print(
        f"receiver: {args.runs} run(s) of {total:,} signed workflow_run deliveries at a target of {args.rate:g}/s "
        f"over {args.connections} connections, each on a fresh server after {args.warmup} warm-up; body: {source}; "
        f"{os.cpu_count()} cores"
    )
    runs: list[Run] = []
    try:
        for n in range(args.runs):
            runs.append(one_run(args, conn, redis_url, template, 1 + n * (args.warmup + total)))
    finally:
        conn.flushdb()
        conn.close()

    print(
        table(
            [
                "run",
                "requests",
                "achieved/s",
                "p50 ms",
                "p90 ms",
                "p99 ms",
                "max ms",
                f"p99/{AIM_P99_MS:g}ms",
                "lost",
                "server CPU ms/delivery",
                "others' cores",
                "load 1-min before>after",
            ],
            [
                *(row(str(n + 1), r.latencies_ms, r.elapsed, [r]) for n, r in enumerate(runs)),
                *(
                    [row("all", [x for r in runs for x in r.latencies_ms], sum(r.elapsed for r in runs), runs)]
                    if len(runs) > 1
                    else []
                ),
            ],
        )
    )
    for n, r in enumerate(runs):
        print(
            f"run {n + 1} answers: {dict(sorted(r.statuses.items(), key=str))}; generator CPU {r.generator_cpu:.2f} s"
        )
    print(
        "others' cores: CPU the rest of the machine used during the run (Redis included), in cores; the load "
        "average includes this benchmark's own server and generator (about one core at 300/s)"
    )
    busy = [n + 1 for n, r in enumerate(runs) if r.load_before > BUSY_LOAD or r.others_cpu / r.elapsed > BUSY_CORES]
    if busy:
        print(
            f"NOTE: the machine was busy with other work during run(s) {', '.join(map(str, busy))} "
            f"(1-min load above {BUSY_LOAD:g} before it, or others using over {BUSY_CORES:g} core): "
            "their tail measures the machine as much as the receiver"
        )
    under = sum(r.p99 < AIM_P99_MS for r in runs)
    print(f"p99 under {AIM_P99_MS:g} ms in {under} of {len(runs)} runs")
    failed = [r for r in runs if r.lost or r.accepted != r.sent]
    for r in failed:
        print(
            f"FAIL: {r.lost} lost, {r.sent - r.accepted} not accepted of {r.sent}; server log tail:\n"
            + r.server_log[-2000:]
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
