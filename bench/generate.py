"""Synthetic pytest-style JUnit reports, deterministic for a seed.

Two shapes:

- a *history*: ``<commit>/<attempt>/report.xml`` + ``meta.json`` like ``shared/corpus/real-runners/pytest``,
  with a share of flaky tests (each fails at random with its own probability), a few skipped ones and
  about a third of the commits run twice (a CI "re-run"), plus ``truth.json`` naming the planted tests;
- one *big report* (~100k testcases, tens to hundreds of MB) with realistic failure bodies and
  ``<system-out>`` text, for parse throughput and memory.

A history also gets a ``report.meta.json`` beside each report (``--no-flakemap-sidecar`` leaves it
out): flakemap reads that file before ``meta.json`` and, without a ``run_id`` and ``sequence``, takes
the first folder (the commit) as the run and orders runs by file mtime, so both attempts of a commit
would merge into one run whose every test it excludes as ambiguous. Flaketally reads only ``meta.json``.

    python -m bench.generate history /tmp/flaketally-bench/h --tests 2000 --runs 200
    python -m bench.generate big /tmp/flaketally-bench/big.xml --tests 100000 --mb 100
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bot.core.identity import ExecutionContext, RunIdentity
from bot.core.results import Attempt, Outcome, Report, TestResult

BASE_TIME = datetime(2026, 1, 5, 8, 0, tzinfo=UTC)
RUN_SPACING = timedelta(minutes=20)

_MODULES = ("api", "auth", "billing", "cache", "cli", "db", "export", "jobs", "search", "storage", "sync", "ui")
_VERBS = ("creates", "rejects", "updates", "lists", "retries", "expires", "parses", "renders", "streams", "merges")
_OBJECTS = ("invoice", "session", "upload", "token", "report", "webhook", "user", "order", "queue", "snapshot")
_PARAMS = ("sqlite", "postgres", "s3", "local", "utf8", "latin1", "small", "large")

_FAILURES = (
    ("AssertionError: assert {a} == {b}", "assert response.status_code == {b}", "AssertionError"),
    ("TimeoutError: no answer after {t:.3f}s", "result = worker.wait(timeout={t:.2f})", "TimeoutError"),
    ("ConnectionResetError: [Errno 104] Connection reset by peer", "conn.send(payload)", "ConnectionResetError"),
    ("AssertionError: assert 'ready' == 'pending'", "assert job.state == 'ready'", "AssertionError"),
    ("KeyError: 'item-{a}'", "value = cache['item-{a}']", "KeyError"),
)

_FRAMES = (
    "{mod}/conftest.py:{n}: in {obj}_client\n    return make_client(timeout=0.25, retries=0)",
    "src/app/{mod}/service.py:{n}: in handle\n    result = self.backend.fetch(key, deadline=deadline)",
    "src/app/http.py:{n}: in request\n    response = self._session.send(prepared, timeout=self.timeout)",
    "../venv/lib/python3.11/site-packages/urllib3/connectionpool.py:{n}: in urlopen\n"
    "    httplib_response = self._make_request(conn, method, url, **kw)",
    "src/app/{mod}/models.py:{n}: in save\n    self.session.flush()  # ← the {obj} row is locked here",
    "../venv/lib/python3.11/site-packages/sqlalchemy/engine/base.py:{n}: in _execute_context\n"
    "    self.dialect.do_execute(cursor, statement, parameters, context)",
)

_LOG_LINES = (
    "2026-01-05 08:{m:02d}:{s:02d},{ms:03d} INFO     app.{mod}:service.py:{n} handled {obj} id={a} in {t:.3f}s",
    "2026-01-05 08:{m:02d}:{s:02d},{ms:03d} DEBUG    app.{mod}:cache.py:{n} cache miss for key '{obj}:{a}'",
    "2026-01-05 08:{m:02d}:{s:02d},{ms:03d} WARNING  app.{mod}:retry.py:{n} attempt {b} of 3 failed: <timeout>",
    "2026-01-05 08:{m:02d}:{s:02d},{ms:03d} INFO     app.http:client.py:{n} POST /api/{obj}s -> {b}03 ({t:.3f}s)",
    "created fixture {obj}_{a} with settings {{'region': 'eu-west-1', 'flags': ['{mod}', 'beta']}} — ok",
)


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _attr(text: str) -> str:
    return _escape(text).replace('"', "&quot;").replace("\n", "&#10;")


def _fill(rng: random.Random, template: str) -> str:
    return template.format(
        a=rng.randrange(1, 9999),
        b=rng.randrange(1, 6),
        n=rng.randrange(10, 900),
        t=rng.uniform(0.05, 9),
        m=rng.randrange(60),
        s=rng.randrange(60),
        ms=rng.randrange(1000),
        mod=rng.choice(_MODULES),
        obj=rng.choice(_OBJECTS),
    )


class _Text:
    """Pools of escaped text lines, to build large bodies fast."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.frames = [_escape(_fill(rng, rng.choice(_FRAMES))) for _ in range(512)]
        self.logs = [_escape(_fill(rng, rng.choice(_LOG_LINES))) for _ in range(1024)]

    def _lines(self, pool: list[str], size: int) -> str:
        if size <= 0:
            return ""
        mean = sum(len(x) for x in pool[:64]) / 64 + 1
        return "\n".join(self.rng.choices(pool, k=max(1, round(size / mean))))

    def system_out(self, size: int) -> str:
        return self._lines(self.logs, size)

    def failure(self, test: str, size: int) -> tuple[str, str]:
        """The message attribute (escaped) and the failure body (escaped) of about ``size`` bytes."""
        rng = self.rng
        message_t, line_t, kind = rng.choice(_FAILURES)
        values = {"a": rng.randrange(100, 599), "b": rng.choice((200, 201, 204)), "t": rng.uniform(0.1, 5)}
        message = message_t.format(**values)
        head = (
            f"self = &lt;tests.{test} object at 0x7f{rng.randrange(1 << 32):08x}&gt;\n\n"
            f"    def {test.rsplit('.', 1)[-1]}(self):\n"
            f"        payload = build_payload(size={values['a']})\n"
            f"&gt;       {_escape(line_t.format(**values))}\n"
            f"E       {_escape(message)}\n"
        )
        module = "/".join(test.split(".")[:-1])
        tail = f"\n\ntests/{module}.py:{rng.randrange(20, 400)}: {kind}"
        frames = self._lines(self.frames, size - len(head) - len(tail))
        return _attr(message), head + ("\n" + frames if frames else "") + tail


# --- a history -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HistorySpec:
    tests: int = 2000
    runs: int = 200
    flaky_fraction: float = 0.01
    skipped_fraction: float = 0.01
    rerun_fraction: float = 1 / 3  # commits run a second time, failed or not
    message_bytes: int = 600  # size of one failure body
    seed: int = 1
    runner: str = "pytest"
    os: str = "ubuntu-latest"

    @property
    def results(self) -> int:
        return self.tests * self.runs

    def slug(self) -> str:
        return f"history-{self.tests}x{self.runs}-f{self.flaky_fraction:g}-m{self.message_bytes}-s{self.seed}"


@dataclass(frozen=True, slots=True)
class Case:
    classname: str
    name: str
    base_seconds: float
    fail_p: float  # 0 for a stable test
    skipped: bool

    @property
    def flaky(self) -> bool:
        return 0 < self.fail_p < 1


@dataclass(frozen=True, slots=True)
class Run:
    commit: str
    attempt: int
    run_index: int

    @property
    def timestamp(self) -> datetime:
        return BASE_TIME + self.run_index * RUN_SPACING


class HistoryPlan:
    """The tests, the runs and each run's outcomes; the same for XML files and in-memory reports."""

    def __init__(self, spec: HistorySpec) -> None:
        self.spec = spec
        rng = random.Random(f"plan:{spec.seed}")
        flaky = set(rng.sample(range(spec.tests), round(spec.tests * spec.flaky_fraction)))
        rest = [i for i in range(spec.tests) if i not in flaky]
        skipped = set(rng.sample(rest, round(spec.tests * spec.skipped_fraction)))
        self.cases: list[Case] = []
        per_module = 25
        for i in range(spec.tests):
            module = f"{_MODULES[(i // per_module) % len(_MODULES)]}.test_{i // per_module:04d}"
            name = f"test_{_VERBS[i % len(_VERBS)]}_{i:05d}"
            if i % 7 == 3:
                name += f"[{_PARAMS[i % len(_PARAMS)]}]"
            self.cases.append(
                Case(
                    classname=f"tests.{module}",
                    name=name,
                    base_seconds=rng.lognormvariate(-5, 1.5),
                    fail_p=rng.uniform(0.05, 0.35) if i in flaky else 0.0,
                    skipped=i in skipped,
                )
            )
        self.runs: list[Run] = []
        commit = 0
        while len(self.runs) < spec.runs:
            sha = hashlib.sha1(f"{spec.seed}:commit:{commit}".encode()).hexdigest()
            self.runs.append(Run(sha, 1, len(self.runs)))
            if len(self.runs) < spec.runs and rng.random() < spec.rerun_fraction:
                self.runs.append(Run(sha, 2, len(self.runs)))
            commit += 1
        self.flaky = [i for i, c in enumerate(self.cases) if c.flaky]

    def outcomes(self, run: Run) -> tuple[list[float], set[int]]:
        """Per test: its duration in this run; and the indices of the tests that failed."""
        rng = random.Random(f"run:{self.spec.seed}:{run.run_index}")
        jitter = _uniforms(rng, len(self.cases))
        durations = [c.base_seconds * (0.8 + 0.4 * r) for c, r in zip(self.cases, jitter, strict=True)]
        failed = {i for i in self.flaky if rng.random() < self.cases[i].fail_p}
        return durations, failed

    def truth(self) -> dict[str, object]:
        return {
            "spec": asdict(self.spec),
            "commits": len({r.commit for r in self.runs}),
            "runs": len(self.runs),
            "flaky": [f"{self.cases[i].classname}::{self.cases[i].name}" for i in self.flaky],
            "skipped": [f"{c.classname}::{c.name}" for c in self.cases if c.skipped],
        }

    # in memory, for the store benchmark

    def report(self, run: Run) -> tuple[Report, RunIdentity]:
        durations, failed = self.outcomes(run)
        rng = random.Random(f"messages:{self.spec.seed}:{run.run_index}")
        results = []
        for i, (case, seconds) in enumerate(zip(self.cases, durations, strict=True)):
            if case.skipped:
                attempt = Attempt(Outcome.SKIPPED, 0.0)
            elif i in failed:
                message = rng.choice(_FAILURES)[0].format(a=rng.randrange(100, 599), b=201, t=seconds)
                attempt = Attempt(Outcome.FAILED, seconds, message)
            else:
                attempt = Attempt(Outcome.PASSED, round(seconds, 3))
            results.append(TestResult(case.classname, case.name, (attempt,)))
        digest = hashlib.sha256(f"{self.spec.slug()}:{run.run_index}".encode()).hexdigest()
        report = Report(digest=digest, results=results, timestamp=run.timestamp.isoformat())
        identity = RunIdentity(
            repo="bench/history",
            commit=run.commit,
            attempt=run.attempt,
            context=ExecutionContext(job=self.spec.runner, os=self.spec.os),
            source=f"{run.commit}/{run.attempt}/report.xml",
            run_index=run.run_index,
            started_at=run.timestamp.isoformat(timespec="milliseconds"),
        )
        return report, identity

    def reports(self) -> Iterator[tuple[Report, RunIdentity]]:
        for run in self.runs:
            yield self.report(run)

    # as files

    def xml(self, run: Run, text: _Text) -> str:
        spec = self.spec
        durations, failed = self.outcomes(run)
        parts = []
        for i, (case, seconds) in enumerate(zip(self.cases, durations, strict=True)):
            head = f'<testcase classname="{case.classname}" name="{case.name}" time="{seconds:.3f}"'
            if case.skipped:
                parts.append(
                    f'{head}><skipped type="pytest.skip" message="not on this platform">'
                    f"tests/{case.classname[6:].replace('.', '/')}.py:12: not on this platform</skipped></testcase>"
                )
            elif i in failed:
                message, body = text.failure(f"{case.classname[6:]}.{case.name}", spec.message_bytes)
                parts.append(f'{head}><failure message="{message}">{body}</failure></testcase>')
            else:
                parts.append(f"{head} />")
        total = sum(durations)
        skipped = sum(1 for c in self.cases if c.skipped)
        return (
            '<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests">'
            f'<testsuite name="pytest" errors="0" failures="{len(failed)}" skipped="{skipped}" '
            f'tests="{len(self.cases)}" time="{total:.3f}" timestamp="{run.timestamp.isoformat()}" '
            f'hostname="runner-{run.run_index % 4}">' + "".join(parts) + "</testsuite></testsuites>"
        )

    def write(self, root: Path, *, flakemap_sidecar: bool = True) -> dict[str, int]:
        """Write every run under ``root``; the number of files and bytes written."""
        text = _Text(random.Random(f"text:{self.spec.seed}"))
        written = 0
        for run in self.runs:
            folder = root / run.commit / str(run.attempt)
            folder.mkdir(parents=True, exist_ok=True)
            data = self.xml(run, text).encode()
            (folder / "report.xml").write_bytes(data)
            written += len(data)
            meta = {
                "runner": self.spec.runner,
                "commit": run.commit,
                "attempt": run.attempt,
                "run_index": run.run_index,
                "os": self.spec.os,
            }
            (folder / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
            if flakemap_sidecar:
                sidecar = {
                    "run_id": f"{run.commit[:12]}-{run.attempt}",
                    "commit": run.commit,
                    "runner": self.spec.runner,
                    "os": self.spec.os,
                    "sequence": run.run_index,
                }
                (folder / "report.meta.json").write_text(json.dumps(sidecar) + "\n")
        (root / "truth.json").write_text(json.dumps(self.truth(), indent=2) + "\n")
        return {"files": len(self.runs), "bytes": written}


def _uniforms(rng: random.Random, n: int) -> list[float]:
    r = rng.random
    return [r() for _ in range(n)]


def ensure_history(spec: HistorySpec, root: Path | None = None, *, flakemap_sidecar: bool = True) -> Path:
    """The history for ``spec`` under ``root`` (default: a folder named after the spec), written once."""
    from bench._common import DATA

    root = root or DATA / spec.slug()
    stamp = root / "spec.json"
    wanted = json.dumps({**asdict(spec), "flakemap_sidecar": flakemap_sidecar}, sort_keys=True)
    if stamp.is_file() and stamp.read_text() == wanted:
        return root
    if root.exists():
        import shutil

        shutil.rmtree(root)
    root.mkdir(parents=True)
    HistoryPlan(spec).write(root, flakemap_sidecar=flakemap_sidecar)
    stamp.write_text(wanted)
    return root


# --- one big report --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class BigSpec:
    tests: int = 100_000
    mb: float = 100  # target size, 10^6 bytes
    fail_fraction: float = 0.1
    system_out_fraction: float = 0.5
    failure_to_output: float = 10  # a failure body is this many times a system-out's size
    seed: int = 1

    def slug(self) -> str:
        return f"big-{self.tests}-{self.mb:g}MB-s{self.seed}.xml"


_CASE_OVERHEAD = 110  # bytes of a testcase element without text, roughly


def write_big_report(path: Path, spec: BigSpec) -> int:
    """One pytest report of about ``spec.mb`` MB with ``spec.tests`` testcases; the bytes written."""
    rng = random.Random(f"big:{spec.seed}")
    text = _Text(rng)
    per_test = spec.mb * 1_000_000 / spec.tests - _CASE_OVERHEAD
    out_size = max(0, round(per_test / (spec.system_out_fraction + spec.fail_fraction * spec.failure_to_output)))
    fail_size = round(out_size * spec.failure_to_output)
    written = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("wb") as f:

        def put(s: str) -> None:
            nonlocal written
            data = s.encode()
            written += len(data)
            f.write(data)

        put(
            '<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests">'
            f'<testsuite name="pytest" errors="0" failures="0" skipped="0" tests="{spec.tests}" time="0" '
            'timestamp="2026-01-05T08:00:00+00:00" hostname="runner-0">'
        )
        batch: list[str] = []
        for i in range(spec.tests):
            module = f"{_MODULES[(i // 40) % len(_MODULES)]}.test_{i // 40:05d}"
            name = f"test_{_VERBS[i % len(_VERBS)]}_{_OBJECTS[(i // 10) % len(_OBJECTS)]}_{i:06d}"
            parts = [f'<testcase classname="tests.{module}" name="{name}" time="{rng.uniform(0, 2):.3f}">']
            if rng.random() < spec.fail_fraction:
                message, body = text.failure(f"{module}.{name}", fail_size)
                parts.append(f'<failure message="{message}">{body}</failure>')
            if rng.random() < spec.system_out_fraction:
                parts.append(f"<system-out>{text.system_out(out_size)}</system-out>")
            parts.append("</testcase>")
            batch.append("".join(parts))
            if len(batch) >= 1000:
                put("\n".join(batch) + "\n")
                batch = []
        put("\n".join(batch) + "</testsuite></testsuites>\n")
    return written


def ensure_big_report(spec: BigSpec, path: Path | None = None) -> Path:
    from bench._common import DATA

    path = path or DATA / spec.slug()
    stamp = path.with_suffix(".spec.json")
    wanted = json.dumps(asdict(spec), sort_keys=True)
    if not (path.is_file() and stamp.is_file() and stamp.read_text() == wanted):
        write_big_report(path, spec)
        stamp.write_text(wanted)
    return path


# --- command line ----------------------------------------------------------------------------


_H, _B = HistorySpec(), BigSpec()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.generate", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="what", required=True)
    h = sub.add_parser("history", help="<commit>/<attempt>/report.xml + meta.json")
    h.add_argument("out", type=Path)
    h.add_argument("--tests", type=int, default=_H.tests)
    h.add_argument("--runs", type=int, default=_H.runs)
    h.add_argument("--flaky", type=float, default=_H.flaky_fraction, help="fraction of flaky tests")
    h.add_argument("--skipped", type=float, default=_H.skipped_fraction, help="fraction skipped")
    h.add_argument("--reruns", type=float, default=_H.rerun_fraction, help="fraction of commits run twice")
    h.add_argument("--message-bytes", type=int, default=_H.message_bytes, help="failure body size")
    h.add_argument("--seed", type=int, default=_H.seed)
    h.add_argument("--no-flakemap-sidecar", action="store_true", help="write no report.meta.json")
    b = sub.add_parser("big", help="one big report")
    b.add_argument("out", type=Path)
    b.add_argument("--tests", type=int, default=_B.tests)
    b.add_argument("--mb", type=float, default=_B.mb, help="target size in MB (10^6 bytes)")
    b.add_argument("--fail", type=float, default=_B.fail_fraction, help="fraction of failing testcases")
    b.add_argument(
        "--system-out", type=float, default=_B.system_out_fraction, help="fraction of testcases with <system-out>"
    )
    b.add_argument("--seed", type=int, default=_B.seed)
    args = parser.parse_args(argv)
    if args.what == "history":
        spec = HistorySpec(args.tests, args.runs, args.flaky, args.skipped, args.reruns, args.message_bytes, args.seed)
        args.out.mkdir(parents=True, exist_ok=True)
        plan = HistoryPlan(spec)
        done = plan.write(args.out, flakemap_sidecar=not args.no_flakemap_sidecar)
        commits = len({r.commit for r in plan.runs})
        print(
            f"{done['files']} reports on {commits} commits, {spec.results:,} results, "
            f"{len(plan.flaky)} flaky tests, {done['bytes'] / 1e6:.1f} MB in {args.out}"
        )
    else:
        size = write_big_report(args.out, BigSpec(args.tests, args.mb, args.fail, args.system_out, seed=args.seed))
        print(f"{args.tests:,} testcases, {size / 1e6:.1f} MB in {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
