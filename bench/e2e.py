"""The whole App end to end under load: runs per minute with two rq workers against a slow fake GitHub.

Everything is real except GitHub: signed ``workflow_run`` ``completed`` deliveries go over HTTP to the
real receiver (``flaketally serve``), which enqueues into a real Redis; two real rq workers (forking,
with the scheduler, as ``flaketally worker`` runs them) process the jobs into a real store (a fresh
SQLite file, or a fresh PostgreSQL database) and post check runs and PR comments to the fake GitHub.

The fake GitHub is ``tests.github_fake.FakeGitHub`` (the suite's stateful fake) served over real HTTP on
127.0.0.1 by a small ASGI app under uvicorn in a child process: each request is turned back into the
``httpx.Request`` the fake's respx router expects (``https://api.github.com/...``), resolved there, and
answered after ``--latency`` seconds (50 ms) of ``asyncio.sleep``. The artifact download's 302 goes to a
second port of the same server standing for GitHub's blob host: it must be another origin, so that
httpx drops the Authorization header on the redirect as it does for the real blob host (the fake
refuses a blob request that carries one).

The fake holds ``--runs`` pull-request runs, each on its own head SHA and pull request, with one job and
one JUnit artifact (a ``--tests``-test pytest report with two failures); every third run has an attempt
2 on which one of the two failures passes. One delivery per attempt is sent, all at once (attempt 1 of
every run, then the attempts 2), and the clock runs from the first delivery to the last job's end.

The workers are ``flaketally worker`` itself with ``--worker-kind cli``. By default
(``instrumented``) they are the same loop (``workers.main.run_worker``'s ``configure`` + ``Worker.work``)
with timing wrapped around the pipeline's steps, the publish lock and every GitHub request, and a
``GitHubPort`` built as ``workers.jobs.github_port`` builds it, except that its ``sleep`` is counted
(the pauses ``mutation_interval`` asks for between POST/PATCH requests) and ``--mutation-interval``
can override the port's default of 0 s (the installation's write budget, ``bot.github.budget``, paces
writes across all workers instead; there is no setting for it).

    /work/venv/bin/python -m bench.e2e                          # 60 runs, 2 workers, SQLite
    /work/venv/bin/python -m bench.e2e --db postgresql          # a fresh PostgreSQL database
    /work/venv/bin/python -m bench.e2e --mutation-interval 0    # what the 1 s pauses cost
    /work/venv/bin/python -m bench.e2e --repos 4                # runs spread over 4 repositories
    /work/venv/bin/python -m bench.e2e --worker-kind cli        # the real `flaketally worker`

Exit 0 when every job finished, none failed, every run's last attempt has a concluded check run (and no
attempt more than one) and exactly one PR comment; 1 otherwise. Every process it starts is stopped, its
Redis database flushed and its PostgreSQL database dropped, even on failure or Ctrl-C. All traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import hashlib
import hmac
import json
import logging
import math
import os
import random
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager, suppress
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit
from xml.sax.saxutils import escape, quoteattr

import httpx

from bench._common import REPO, WRITE_METHODS, flaketally_cmd, owner_of, peak_writes, table
from bot.github.limits import WRITES_PER_MINUTE

SECRET = "bench-e2e-secret"
QUEUE = "flaketally-e2e"
APP_ID = 4242  # FakeGitHub's defaults
INSTALLATION_ID = 77
REPO_GITHUB_ID = 1296269
STATS_PREFIX = "bench:e2e:job:"
MAX_RUNS = 300
MAX_TESTS = 2000
MAX_TIMEOUT = 900.0
STOP_GRACE = 10.0
LOOPBACK = ("127.0.0.1", "localhost")
# (module, function): each step is wrapped where the pipeline looks it up
PHASES = (
    ("bot.pipeline.collect", "collect_run"),
    ("bot.pipeline.collect", "collect_other_runs"),
    ("bot.pipeline.attempt", "assess"),
    ("bot.pipeline.attempt", "publish"),
)


def free_port() -> int:
    with closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _pem_key() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()


# --- the runs ------------------------------------------------------------------------------------


def junit_report(tests: int, failing: Sequence[int], seed: int) -> bytes:
    """A pytest-style report (``--junitxml``, ``junit_family=xunit2``) of ``tests`` tests."""
    rng = random.Random(seed)
    cases, total = [], 0.0
    for n in range(tests):
        module = f"test_module_{n // 20:02d}"
        duration = rng.uniform(0.001, 0.4)
        total += duration
        body = ""
        if n in failing:
            trace = (
                f"def test_case_{n:03d}(client):\n        response = client.post('/checkout', json=CART)\n"
                f">       assert response.json()['total'] == 90\nE       assert 100 == 90\n\n"
                f"tests/{module}.py:{12 + n % 20 * 9}: AssertionError"
            )
            body = f'<failure message="assert 100 == 90">{escape(trace)}</failure>'
        cases.append(
            f"<testcase classname={quoteattr(f'tests.{module}')} name={quoteattr(f'test_case_{n:03d}')}"
            f' file="tests/{module}.py" line="{10 + n % 20 * 9}" time="{duration:.3f}">{body}</testcase>'
        )
    suite = (
        f'<testsuite name="pytest" errors="0" failures="{len(failing)}" skipped="0" tests="{tests}"'
        f' time="{total:.3f}" timestamp="2026-01-01T00:05:00.000000+00:00" hostname="runner-1">'
    )
    xml = f'<?xml version="1.0" encoding="utf-8"?><testsuites>{suite}{"".join(cases)}</testsuite></testsuites>'
    return xml.encode()


def build_fake(runs: int, tests: int, repos: int, seed: int, private_key: str) -> tuple[Any, list[dict[str, Any]]]:
    """The fake GitHub holding the runs, and the manifest of what it holds."""
    from tests.github_fake import FakeGitHub, zip_of

    fake = FakeGitHub(app_id=APP_ID, installation_id=INSTALLATION_ID)
    fake.private_key = private_key  # the fake checks the App's JWT against this key
    rng = random.Random(seed)
    manifest = []
    for i in range(runs):
        repo = "acme/widgets" if repos == 1 else f"acme/widgets-{i % repos}"
        sha = hashlib.sha1(f"flaketally-e2e-{seed}-{i}".encode()).hexdigest()
        pr = 100 + i
        run = fake.add_run(repo, head_sha=sha, pull_requests=[pr], run_number=i + 1, conclusion="failure")
        failing = rng.sample(range(tests), 2)
        fake.add_job(run, attempt=1, name="test (3.11)", conclusion="failure")
        fake.add_artifact(
            run, "junit-results", zip_of({"reports/junit.xml": junit_report(tests, failing, i)}), attempt=1
        )
        attempts = 1
        if i % 3 == 2:  # a rerun: the first failure again, the second passes (flaky)
            fake.add_attempt(run, conclusion="failure")
            fake.add_job(run, attempt=2, name="test (3.11)", conclusion="failure")
            fake.add_artifact(
                run, "junit-results", zip_of({"reports/junit.xml": junit_report(tests, failing[:1], i)}), attempt=2
            )
            attempts = 2
        manifest.append(
            {
                "repo": repo,
                "repo_id": REPO_GITHUB_ID + i % repos,
                "run_id": run.id,
                "head_sha": sha,
                "pr": pr,
                "attempts": attempts,
            }
        )
    return fake, manifest


# --- the fake GitHub over HTTP (child process) ---------------------------------------------------


class FakeServer:
    """ASGI: every request goes to the fake's respx router after ``latency`` seconds."""

    def __init__(self, fake: Any, manifest: list[dict[str, Any]], latency: float) -> None:
        from tests.github_fake import API_URL, BLOB_URL

        self.fake = fake
        self.manifest = manifest
        self.latency = latency
        self.api_url, self.blob_url = API_URL, BLOB_URL
        self.api_port = self.blob_port = 0
        self.statuses: Counter[str] = Counter()
        self.writes: list[tuple[float, str]] = []  # (when, installation) of each content-creating request

    async def __call__(self, scope: dict[str, Any], receive: Callable[..., Any], send: Callable[..., Any]) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            return
        body, more = b"", True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        path = scope.get("raw_path", scope["path"].encode()).decode("latin-1")
        if path.startswith("/__bench/"):
            status, headers, content = self._bench(path)
        else:
            base = self.blob_url if scope["server"][1] == self.blob_port else self.api_url
            query = scope["query_string"].decode("latin-1")
            request = httpx.Request(
                scope["method"],
                base + path + (f"?{query}" if query else ""),
                headers=[(k, v) for k, v in scope["headers"] if k.lower() != b"host"],
                content=body,
            )
            await asyncio.sleep(self.latency)
            response = self.fake._router.handler(request)  # respx resolves it to the fake's answer
            status, content = response.status_code, response.read()
            headers = [
                (k, self._local(k, v))
                for k, v in response.headers.multi_items()
                if k.lower() not in ("content-length", "transfer-encoding", "content-encoding")
            ]
            self.statuses[str(status)] += 1
            if scope["method"] in WRITE_METHODS and self.fake.requests and self.fake.requests[-1].route != "token":
                self.writes.append((time.time(), owner_of(path)))
        raw = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in headers]
        raw.append((b"content-length", str(len(content)).encode()))
        await send({"type": "http.response.start", "status": status, "headers": raw})
        await send({"type": "http.response.body", "body": content})

    def _local(self, key: str, value: str) -> str:
        """The blob redirect and pagination links, pointed at this server."""
        if key.lower() == "location":
            return value.replace(self.blob_url, f"http://127.0.0.1:{self.blob_port}")
        if key.lower() == "link":
            return value.replace(self.api_url, f"http://127.0.0.1:{self.api_port}")
        return value

    def _bench(self, path: str) -> tuple[int, list[tuple[str, str]], bytes]:
        fake = self.fake
        if path == "/__bench/manifest":
            data: Any = self.manifest
        elif path == "/__bench/state":
            data = {
                "check_runs": [
                    {
                        "repo": c.repo,
                        "head_sha": c.head_sha,
                        "name": c.name,
                        "status": c.status,
                        "conclusion": c.conclusion,
                        "external_id": c.external_id,
                        "id": c.id,
                        "annotations": len(c.annotations),
                        "summary": (c.output or {}).get("summary", ""),
                    }
                    for c in fake.check_runs.values()
                ],
                "comments": [
                    {
                        "repo": c.repo,
                        "issue_number": c.issue_number,
                        "length": len(c.body),
                        "marker": c.body.startswith("<!-- flaketally:comment -->"),
                        "flaky": c.body.count("**flaky**"),
                    }
                    for c in fake.comments.values()
                ],
                "routes": Counter(r.route for r in fake.requests),
                "statuses": self.statuses,
                "unexpected": fake.unexpected,
                "tokens_minted": fake.tokens_minted,
                "writes": self.writes,
            }
        else:
            return 404, [("content-type", "text/plain")], b"not found"
        return 200, [("content-type", "application/json")], json.dumps(data).encode()


def fake_main(argv: Sequence[str]) -> int:
    import uvicorn

    parser = argparse.ArgumentParser(prog="bench.e2e _fake")
    parser.add_argument("--runs", type=int, required=True)
    parser.add_argument("--tests", type=int, required=True)
    parser.add_argument("--repos", type=int, required=True)
    parser.add_argument("--seed", type=int, required=True)
    parser.add_argument("--latency", type=float, required=True)
    parser.add_argument("--key", type=Path, required=True)
    parser.add_argument("--ports", type=Path, required=True, help="where to write the ports once bound")
    args = parser.parse_args(argv)
    fake, manifest = build_fake(args.runs, args.tests, args.repos, args.seed, args.key.read_text())
    server = FakeServer(fake, manifest, args.latency)
    sockets = []
    for _ in range(2):  # the API, and the blob host (another origin)
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        sockets.append(sock)
    server.api_port, server.blob_port = (int(s.getsockname()[1]) for s in sockets)
    tmp = args.ports.with_suffix(".tmp")
    tmp.write_text(json.dumps({"api": server.api_port, "blob": server.blob_port}))
    tmp.replace(args.ports)
    config = uvicorn.Config(server, log_level="warning", access_log=False, lifespan="on", timeout_keep_alive=30)
    uvicorn.Server(config).run(sockets=sockets)
    return 0


# --- the instrumented worker (child process) -----------------------------------------------------

_job_stats: Counter[str] = Counter()
_depth = 0


def _timed_step(name: str, function: Callable[..., Any]) -> Callable[..., Any]:
    """Add the function's time to the job's stats, when it is not called from within another step."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        global _depth
        if _depth:
            return function(*args, **kwargs)
        _depth += 1
        started = time.perf_counter()
        try:
            return function(*args, **kwargs)
        finally:
            _depth -= 1
            _job_stats[name] += time.perf_counter() - started

    return wrapper


def instrument(connection: Any) -> None:
    """Wrap the pipeline's steps, the publish lock, every GitHub request and the job itself with timers;
    each job's figures go to a Redis hash when it ends. Only this process's (and its forks') code."""
    import importlib

    from rq import get_current_job

    from bot.github.client import Client
    from workers import jobs

    for module_name, name in PHASES:
        module = importlib.import_module(module_name)
        setattr(module, name, _timed_step(name, getattr(module, name)))

    original_lock = jobs._publish_lock

    @contextmanager
    def timed_lock(redis_connection: Any, repo_id: int) -> Iterator[None]:
        started = time.perf_counter()
        with original_lock(redis_connection, repo_id):
            _job_stats["lock_wait"] += time.perf_counter() - started
            yield

    jobs._publish_lock = timed_lock  # type: ignore[assignment]

    original_send = Client.send

    def timed_send(self: Any, request: Callable[[], Any], budget: Any) -> Any:
        started = time.perf_counter()
        try:
            return original_send(self, request, budget)
        finally:
            _job_stats["http"] += time.perf_counter() - started
            _job_stats["requests"] += 1

    Client.send = timed_send  # type: ignore[method-assign]

    original_job = jobs.process_workflow_run

    @functools.wraps(original_job)
    def timed_job(*args: Any, **kwargs: Any) -> Any:
        _job_stats.clear()
        started = time.perf_counter()
        try:
            return original_job(*args, **kwargs)
        finally:
            _job_stats["job"] = time.perf_counter() - started
            job = get_current_job()
            if job is not None:
                connection.hset(STATS_PREFIX + job.id, mapping={k: f"{v:.6f}" for k, v in _job_stats.items()})
                connection.expire(STATS_PREFIX + job.id, 3600)

    jobs.process_workflow_run = timed_job  # type: ignore[assignment]


def counted_sleep(seconds: float) -> None:
    _job_stats["port_sleep"] += max(0.0, seconds)
    time.sleep(seconds)


def worker_main(argv: Sequence[str]) -> int:
    import redis
    from rq import Queue, Worker

    from bot.github.budget import Writes
    from bot.github.port import GitHubPort
    from bot.settings import Settings
    from bot.web import metrics
    from workers import jobs

    parser = argparse.ArgumentParser(prog="bench.e2e _worker")
    parser.add_argument("--mutation-interval", type=float, default=None)
    args = parser.parse_args(argv)
    settings = Settings.from_env()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    connection = redis.Redis.from_url(settings.redis_url)
    interval = {} if args.mutation_interval is None else {"mutation_interval": args.mutation_interval}

    def port_factory(settings: Settings, connection: redis.Redis, installation_id: int, writes: Writes) -> GitHubPort:
        # as workers.jobs.github_port, with the sleep counted (and the interval overridden when asked)
        def on_response(status: int, remaining: int | None) -> None:
            metrics.record_github_call(connection, status)
            if remaining is not None:
                metrics.set_rate_limit_remaining(connection, remaining)

        started = time.perf_counter()
        port = GitHubPort(
            app_id=settings.app_id,
            private_key=settings.private_key,
            installation_id=installation_id,
            api_url=settings.api_url,
            redis=connection,
            on_response=on_response,
            sleep=counted_sleep,
            writes=writes,
            **interval,
        )
        _job_stats["port_setup"] += time.perf_counter() - started
        return port

    instrument(connection)
    jobs.configure(settings, connection=connection, port_factory=port_factory)
    queue = Queue(settings.queue_name, connection=connection)
    Worker([queue], connection=connection).work(with_scheduler=True)
    return 0


# --- the driver ----------------------------------------------------------------------------------


class Children:
    """Processes this benchmark started, each in its own session, stopped by their process group id."""

    def __init__(self, logs: Path) -> None:
        self.logs = logs
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(self, name: str, cmd: Sequence[str], env: dict[str, str]) -> subprocess.Popen[bytes]:
        log = (self.logs / f"{name}.log").open("wb")
        proc = subprocess.Popen(
            list(cmd), cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        log.close()
        self.procs.append((name, proc))
        return proc

    def check_alive(self) -> None:
        for name, proc in self.procs:
            if proc.poll() is not None:
                raise RuntimeError(f"{name} exited with {proc.returncode}; see its log below")

    def stop_all(self) -> None:
        """The workers first (a warm shutdown lets a running job end), then the receiver and the fake."""
        workers = [p for name, p in self.procs if name.startswith("worker")]
        self._stop(workers)
        self._stop([p for _, p in self.procs if p not in workers])

    def _stop(self, procs: Sequence[subprocess.Popen[bytes]]) -> None:
        for proc in procs:
            if proc.poll() is None:
                with suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + STOP_GRACE
        for proc in procs:
            with suppress(subprocess.TimeoutExpired):
                proc.wait(max(0.1, deadline - time.monotonic()))
        for proc in procs:
            # what is left of the session: the process itself, or an rq work horse (it calls setpgrp(), so
            # it leaves the worker's process group but stays in the session this benchmark started)
            for pid in [*(_session_members(proc.pid)), proc.pid]:
                with suppress(ProcessLookupError, PermissionError):
                    if pid != proc.pid or proc.poll() is None:
                        os.kill(pid, signal.SIGKILL)
            with suppress(subprocess.TimeoutExpired):
                proc.wait(5)

    def tails(self, lines: int = 25) -> str:
        out = []
        for name, _ in self.procs:
            path = self.logs / f"{name}.log"
            text = path.read_text(errors="replace").splitlines()[-lines:] if path.exists() else []
            out.append(f"--- {name} (last {len(text)} lines of {path.name})\n" + "\n".join(text))
        return "\n".join(out)


def _session_members(session: int) -> list[int]:
    """The processes of a session, from /proc (Linux)."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with suppress(OSError, ValueError, IndexError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[3]) == session:  # state, ppid, pgrp, session
                found.append(int(stat.parent.name))
    return found


def wait_for(what: str, check: Callable[[], bool], timeout: float, children: Children) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        children.check_alive()
        with suppress(Exception):
            if check():
                return
        time.sleep(0.1)
    raise RuntimeError(f"{what} not ready after {timeout:.0f} s")


def _http_ok(url: str) -> bool:
    return httpx.get(url, timeout=2).status_code == 200


def signed_delivery(entry: dict[str, Any], attempt: int) -> tuple[bytes, dict[str, str]]:
    payload = {
        "action": "completed",
        "installation": {"id": INSTALLATION_ID},
        "repository": {"id": entry["repo_id"], "full_name": entry["repo"]},
        "workflow_run": {
            "id": entry["run_id"],
            "run_attempt": attempt,
            "head_sha": entry["head_sha"],
            "status": "completed",
            "pull_requests": [{"number": entry["pr"]}],
        },
    }
    body = json.dumps(payload).encode()
    return body, {
        "X-GitHub-Event": "workflow_run",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest(),
        "Content-Type": "application/json",
    }


def _epoch(moment: datetime) -> float:
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def percentile(values: Sequence[float], p: float) -> float:
    """Nearest rank."""
    ordered = sorted(values)
    return ordered[max(0, math.ceil(p / 100 * len(ordered)) - 1)] if ordered else float("nan")


def _loopback(url: str, what: str) -> None:
    host = urlsplit(url).hostname
    if host not in LOOPBACK:
        raise SystemExit(f"bench.e2e: {what} must be on 127.0.0.1, not {host!r}")


@contextmanager
def postgres_database(admin_url: str) -> Iterator[str]:
    import psycopg
    from psycopg import sql

    name = f"flaketally_e2e_{os.getpid()}"
    with psycopg.connect(admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield admin_url.rsplit("/", 1)[0] + "/" + name
    finally:
        with psycopg.connect(admin_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def _terminate(signum: int, frame: object) -> None:
    raise SystemExit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.e2e", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=60, help=f"workflow runs (at most {MAX_RUNS})")
    parser.add_argument("--tests", type=int, default=200, help=f"tests per report (at most {MAX_TESTS})")
    parser.add_argument("--repos", type=int, default=1, help="repositories the runs are spread over")
    parser.add_argument("--workers", type=int, default=2, choices=range(1, 5), metavar="1-4")
    parser.add_argument("--worker-kind", choices=("instrumented", "cli"), default="instrumented")
    parser.add_argument(
        "--mutation-interval",
        type=float,
        default=None,
        help="override GitHubPort's mutation_interval (instrumented workers only; default: the port's own, 0 s)",
    )
    parser.add_argument("--latency", type=float, default=0.05, help="seconds the fake adds to every request")
    parser.add_argument("--db", choices=("sqlite", "postgresql"), default="sqlite")
    parser.add_argument(
        "--pg-url",
        default="postgresql://postgres@127.0.0.1:5432/test",
        help="a database to connect to for CREATE/DROP DATABASE",
    )
    parser.add_argument("--redis-url", default="redis://127.0.0.1:6379/13", help="a database of its own: flushed")
    parser.add_argument("--timeout", type=float, default=300.0, help=f"seconds for the jobs (at most {MAX_TIMEOUT})")
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args(argv)
    if not 1 <= args.runs <= MAX_RUNS or not 1 <= args.tests <= MAX_TESTS or not 1 <= args.repos <= args.runs:
        parser.error(f"--runs 1..{MAX_RUNS}, --tests 1..{MAX_TESTS}, --repos 1..runs")
    if not 0 < args.timeout <= MAX_TIMEOUT or not 0 <= args.latency <= 1:
        parser.error(f"--timeout 0..{MAX_TIMEOUT}, --latency 0..1")
    if args.mutation_interval is not None and args.worker_kind == "cli":
        parser.error("--mutation-interval needs --worker-kind instrumented (there is no setting for it)")
    _loopback(args.redis_url, "--redis-url")
    if args.db == "postgresql":
        _loopback(args.pg_url, "--pg-url")
    signal.signal(signal.SIGTERM, _terminate)
    scratch = Path(tempfile.mkdtemp(prefix="flaketally-e2e-"))
    children = Children(scratch)
    try:
        with postgres_database(args.pg_url) if args.db == "postgresql" else nullpath(scratch) as db_url:
            return run(args, db_url, scratch, children)
    except Exception as exc:
        print(f"bench.e2e: FAILED: {exc}\n{children.tails()}", file=sys.stderr)
        return 1
    except (KeyboardInterrupt, SystemExit):
        print("bench.e2e: interrupted; stopping what it started", file=sys.stderr)
        raise
    finally:
        children.stop_all()
        _flush(args.redis_url)
        shutil.rmtree(scratch, ignore_errors=True)


@contextmanager
def nullpath(scratch: Path) -> Iterator[str]:
    yield f"sqlite:///{scratch / 'flaketally.db'}"


def _flush(url: str) -> None:
    import redis

    with suppress(Exception), closing(redis.Redis.from_url(url)) as client:
        client.flushdb()


def run(args: argparse.Namespace, db_url: str, scratch: Path, children: Children) -> int:
    import redis
    from rq import Worker
    from rq.job import Job

    from bot.store import Store

    connection = redis.Redis.from_url(args.redis_url)
    connection.flushdb()
    Store.open(db_url).close()  # migrated once, before two workers race to do it
    key = _pem_key()
    key_file = scratch / "app-key.pem"
    key_file.write_text(key)
    ports_file = scratch / "ports.json"
    python = sys.executable
    base_env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "FLAKETALLY_"))}

    children.start(
        "fake-github",
        [
            python,
            "-m",
            "bench.e2e",
            "_fake",
            "--runs",
            str(args.runs),
            "--tests",
            str(args.tests),
            "--repos",
            str(args.repos),
            "--seed",
            str(args.seed),
            "--latency",
            str(args.latency),
            "--key",
            str(key_file),
            "--ports",
            str(ports_file),
        ],
        base_env,
    )
    wait_for("the fake GitHub", ports_file.exists, 60, children)
    ports = json.loads(ports_file.read_text())
    fake_url = f"http://127.0.0.1:{ports['api']}"
    wait_for("the fake GitHub", lambda: _http_ok(f"{fake_url}/__bench/manifest"), 30, children)
    manifest: list[dict[str, Any]] = httpx.get(f"{fake_url}/__bench/manifest", timeout=10).json()

    env = dict(
        base_env,
        GITHUB_APP_ID=str(APP_ID),
        GITHUB_APP_PRIVATE_KEY=key,
        GITHUB_WEBHOOK_SECRET=SECRET,
        GITHUB_API_URL=fake_url,
        REDIS_URL=args.redis_url,
        DATABASE_URL=db_url,
        FLAKETALLY_QUEUE=QUEUE,
    )
    receiver_port = free_port()
    receiver = f"http://127.0.0.1:{receiver_port}"
    children.start("receiver", [*flaketally_cmd(), "serve", "--host", "127.0.0.1", "--port", str(receiver_port)], env)
    wait_for("the receiver", lambda: _http_ok(f"{receiver}/readyz"), 30, children)
    for n in range(args.workers):
        if args.worker_kind == "cli":
            cmd = [*flaketally_cmd(), "worker"]
        else:
            cmd = [python, "-m", "bench.e2e", "_worker"]
            if args.mutation_interval is not None:
                cmd += ["--mutation-interval", str(args.mutation_interval)]
        children.start(f"worker-{n + 1}", cmd, env)
    wait_for("the workers", lambda: Worker.count(connection=connection) >= args.workers, 60, children)

    deliveries = [signed_delivery(e, 1) for e in manifest]
    deliveries += [signed_delivery(e, 2) for e in manifest if e["attempts"] == 2]
    job_ids: list[str] = []
    with httpx.Client(base_url=receiver, timeout=10) as client:
        started = time.time()
        for body, headers in deliveries:
            answer = client.post("/webhook", content=body, headers=headers)
            if answer.status_code != 202:
                raise RuntimeError(f"the receiver answered {answer.status_code}: {answer.text[:200]}")
            job_ids.append(answer.json()["enqueued"])
    sent = time.time()

    deadline = time.monotonic() + args.timeout
    jobs: list[Job | None] = []
    while True:
        children.check_alive()
        jobs = Job.fetch_many(job_ids, connection=connection)
        statuses = Counter(j.get_status(refresh=False).value if j else "missing" for j in jobs)
        if statuses["finished"] + statuses["failed"] == len(job_ids):
            break
        failing = [j for j in jobs if j is not None and j.retries_left is not None and j.retries_left < 3]
        if failing:  # rq retries after 10, 60 and 300 s: a failure here is a failure, do not wait it out
            result = failing[0].latest_result()
            why = (result.exc_string or "") if result is not None else ""
            raise RuntimeError(
                f"{len(failing)} job(s) failed and were scheduled for a retry ({dict(statuses)}); "
                f"{failing[0].id}, {time.time() - started:.0f} s in:\n{why[-1500:]}"
            )
        if time.monotonic() > deadline:
            raise RuntimeError(f"jobs not done after {args.timeout:.0f} s: {dict(statuses)}")
        time.sleep(0.2)
    seen_done = time.time()

    done = [j for j in jobs if j is not None]
    failed = [j for j in done if j.get_status(refresh=False).value == "failed"]
    retried = [j for j in done if j.retries_left is not None and j.retries_left < 3]
    durations = [_epoch(j.ended_at) - _epoch(j.started_at) for j in done if j.started_at and j.ended_at]
    last_end = max(_epoch(j.ended_at) for j in done if j.ended_at)
    wall = last_end - started
    state = httpx.get(f"{fake_url}/__bench/state", timeout=10).json()
    problems = verify(manifest, state)
    if failed:
        problems.append(f"{len(failed)} jobs failed, e.g. {failed[0].id}: {(failed[0].exc_info or '')[-600:]}")

    interval = "worker default (0 s)" if args.mutation_interval is None else f"{args.mutation_interval} s"
    print(
        f"bench.e2e: {args.runs} runs ({len(job_ids)} attempts) over {args.repos} repo(s), {args.tests} tests "
        f"per report, {args.workers} {args.worker_kind} workers, {args.db}, fake GitHub +{args.latency * 1000:.0f} "
        f"ms per request, mutation_interval {interval}"
    )
    rows: list[list[object]] = [
        ["runs processed", len(manifest)],
        ["jobs (attempts) processed", len(done)],
        ["wall s (first delivery to last job end)", wall],
        ["runs per minute", len(manifest) / wall * 60],
        ["jobs per minute", len(done) / wall * 60],
        ["sending the deliveries, s", sent - started],
        ["job p50 s (rq started_at..ended_at)", statistics.median(durations)],
        ["job p99 s", percentile(durations, 99)],
        ["job max s", max(durations)],
        ["sum of job s / wall (mean busy workers)", sum(durations) / wall],
        ["failed jobs", len(failed)],
        ["retried jobs", len(retried)],
        ["poller saw all done, s after last end", seen_done - last_end],
        ["GitHub requests served", sum(state["statuses"].values())],
        ["content-creating requests per attempt (aim <= 1.2)", len(state["writes"]) / len(job_ids)],
        [f"peak writes in a minute, one installation (budget {WRITES_PER_MINUTE})", peak_writes(state["writes"])[0]],
        ["installation tokens minted", state["tokens_minted"]],
    ]
    print(table(["figure", "value"], rows))
    print("requests by route: " + ", ".join(f"{k} {v}" for k, v in sorted(state["routes"].items())))
    if args.worker_kind == "instrumented":
        print(breakdown(connection, job_ids, durations))
    if problems:
        print("FAILED:\n  " + "\n  ".join(problems[:20]))
        return 1
    print(
        f"ok: every run's last attempt has a concluded Flaketally check run (the one GitHub shows), none is left "
        f"in progress, and exactly one PR comment; every rerun's flake is called flaky; {len(failed)} failed jobs"
    )
    return 0


def verify(manifest: list[dict[str, Any]], state: dict[str, Any]) -> list[str]:
    problems = [f"unexpected request to the fake: {u}" for u in state["unexpected"]]
    checks: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for c in state["check_runs"]:
        if c["name"] == "Flaketally":
            checks.setdefault((c["repo"], c["head_sha"]), []).append(c)
    comments = Counter((c["repo"], c["issue_number"]) for c in state["comments"] if c["marker"])
    flaky = {(c["repo"], c["issue_number"]): c["flaky"] for c in state["comments"] if c["marker"]}
    for e in manifest:
        ours = checks.get((e["repo"], e["head_sha"]), [])
        # at most one per attempt, and always the last attempt's: an attempt already superseded when it is
        # processed writes none of its own (GitHub's write budget)
        allowed = {f"{e['run_id']}:{n}" for n in range(1, e["attempts"] + 1)}
        ids = [c["external_id"] for c in ours]
        if f"{e['run_id']}:{e['attempts']}" not in ids or not set(ids) <= allowed or len(ids) != len(set(ids)):
            problems.append(f"run {e['run_id']}: check runs {ids}, wanted the last attempt's among {allowed}")
        unfinished = [c for c in ours if c["status"] != "completed" or not c["conclusion"]]
        if unfinished:
            problems.append(f"run {e['run_id']}: check run not concluded: {unfinished}")
        if comments[(e["repo"], e["pr"])] != 1:
            problems.append(f"run {e['run_id']}: {comments[(e['repo'], e['pr'])]} Flaketally comments on #{e['pr']}")
        newest = max(ours, key=lambda c: c["id"], default=None)
        if newest is not None and newest["external_id"] != f"{e['run_id']}:{e['attempts']}":
            problems.append(f"run {e['run_id']}: GitHub shows {newest['external_id']}, not the last attempt's")
        wanted_flaky = 1 if e["attempts"] == 2 else 0  # the failure that passed on attempt 2, whenever processed
        if flaky.get((e["repo"], e["pr"])) != wanted_flaky:
            problems.append(f"run {e['run_id']}: {flaky.get((e['repo'], e['pr']))} flaky rows, wanted {wanted_flaky}")
    return problems


def breakdown(connection: Any, job_ids: Sequence[str], durations: Sequence[float]) -> str:
    """Where a job's time goes, from the instrumented workers' per-job figures."""
    stats = []
    for job_id in job_ids:
        raw = connection.hgetall(STATS_PREFIX + job_id)
        stats.append({k.decode(): float(v) for k, v in raw.items()})
    stats = [s for s in stats if "job" in s]
    if not stats:
        return "no per-job figures"
    total = sum(s["job"] for s in stats)
    labels = {
        "collect_run": "collect_run (list, download, parse, ingest)",
        "collect_other_runs": "collect_other_runs (runs of the SHA)",
        "lock_wait": "waiting for the publish lock",
        "assess": "assess (history, verdicts)",
        "publish": "publish (POST check run, comment)",
    }
    rows: list[list[object]] = []
    accounted = 0.0
    for key, label in labels.items():
        values = [s.get(key, 0.0) for s in stats]
        accounted += sum(values)
        rows.append(
            [
                label,
                statistics.mean(values),
                statistics.median(values),
                max(values),
                f"{100 * sum(values) / total:.1f}%",
            ]
        )
    rest = [s["job"] - sum(s.get(k, 0.0) for k in labels) for s in stats]
    rows.append(
        [
            "rest (get run attempt, record run, port set-up)",
            statistics.mean(rest),
            statistics.median(rest),
            max(rest),
            f"{100 * sum(rest) / total:.1f}%",
        ]
    )
    rows.append(
        [
            "job function total",
            total / len(stats),
            statistics.median(s["job"] for s in stats),
            max(s["job"] for s in stats),
            "100.0%",
        ]
    )
    for key, label in (
        ("port_sleep", "  across steps: port sleeps (mutation pauses)"),
        ("http", "  across steps: GitHub requests (incl. latency)"),
        ("port_setup", "  in rest: constructing the GitHubPort"),
    ):
        values = [s.get(key, 0.0) for s in stats]
        rows.append(
            [
                label,
                statistics.mean(values),
                statistics.median(values),
                max(values),
                f"{100 * sum(values) / total:.1f}%",
            ]
        )
    requests = statistics.mean(s.get("requests", 0.0) for s in stats)
    overhead = statistics.mean(durations) - total / len(stats)
    return (
        table(["per job, s", "mean", "p50", "max", "share"], rows)
        + f"\nGitHub requests per job (port calls, a download counts once): {requests:.1f}; rq's own time per "
        f"job beyond the job function: {overhead:.3f} s"
    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "_fake":
        sys.exit(fake_main(sys.argv[2:]))
    if len(sys.argv) > 1 and sys.argv[1] == "_worker":
        sys.exit(worker_main(sys.argv[2:]))
    sys.exit(main())
