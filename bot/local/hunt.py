"""``flaketally hunt``: run the suite N times on one checkout and judge every test on those runs as one
commit, each run an attempt of the same code. Only chance differs between the runs, so a test that passed
and failed is flaky, one that failed every run is broken, and one that passed every run is stable (counted,
not shown). What N runs could not have seen is said too: the chance that a test failing with probability p
looks consistent on all of them.

Each run is CMD without a shell, ``{run}`` (1..N) and ``{junit}`` (the ``--junit`` template with ``{run}``
replaced) replaced in every word; the report's folder is made and a stale report deleted first. A run
whose report is missing, malformed or empty is named and left out.

With ``--parallel K`` the copies share one working directory, where a fixed port, path or database makes
them collide. So what is found flaky is run again one run at a time (runs N+1 on: N of them, more when a
test failed so rarely in parallel that N might miss it; the tests selected by node id when the runner is
pytest, else the whole command) and demoted to ``suspect`` when it passes every one of those runs:
demoted, not dropped, as a few clean runs are weak evidence of innocence.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import re
import shlex
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from bot.core.display import display_id
from bot.core.junit import parse
from bot.core.observations import LETTER, Observation
from bot.core.results import ReportRefused, TestResult
from bot.core.verdicts import CommitVerdict, commit_judgement

EXIT_CLEAN, EXIT_FOUND, EXIT_USAGE, EXIT_NO_REPORT = 0, 1, 2, 3
HUNT_COMMIT = "hunt"  # the one commit every run is an attempt of: the checkout does not change
MISS_RATES = (0.02, 0.05, 0.10)
DECIDED = 0.95  # the chance a sequential rerun would reproduce a test failing as often as in parallel
SHOWN_RUNS = 10  # run numbers listed in one line of evidence before "…"
COLLISION = "likely a collision between parallel copies (fixed port, path or database), not flakiness"
FLAKY, SUSPECT, BROKEN, FAILED, STABLE = "flaky", "suspect", "broken", "failed", "stable"
FOUND = (FLAKY, BROKEN, FAILED)  # the verdicts that make the exit code 1
_WORDS = {CommitVerdict.FLAKY: FLAKY, CommitVerdict.FAILING: BROKEN, CommitVerdict.PASSING: STABLE}
_SHOWN_ORDER = {FLAKY: 0, BROKEN: 1, FAILED: 2, SUSPECT: 3, STABLE: 4}
_PYTEST = frozenset({"pytest", "py.test", "pytest.exe", "py.test.exe"})
# pytest options whose value is the next word: a path there is the option's, not a test to replace
_PYTEST_VALUES = frozenset(
    {
        *("-p", "-k", "-m", "-c", "-o", "-W", "-n", "--rootdir", "--confcutdir", "--basetemp", "--ignore"),
        *("--ignore-glob", "--deselect", "--junit-xml", "--junitxml", "--override-ini", "--cov", "--cov-config"),
        *("--cov-report", "--log-file", "--html", "--inifile", "--import-mode"),
    }
)
_NODE_ID = re.compile(r"^[^\s:][^:]*\.py::")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


@dataclass(frozen=True, slots=True)
class Plan:
    """What the command line asked for, checked."""

    command: tuple[str, ...]  # with ``{run}`` and ``{junit}`` still in it
    junit: str
    runs: int
    parallel: int


def plan_of(args: argparse.Namespace) -> Plan | str:
    """The hunt asked for, or the one line that says why it cannot run (a usage error)."""
    command = list(args.cmd)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        return "hunt needs the test command after its options: flaketally hunt --runs N -- CMD ARGS..."
    if args.runs < 1:
        return f"--runs must be 1 or more, not {args.runs}"
    if args.parallel < 1:
        return f"--parallel must be 1 or more, not {args.parallel}"
    if not args.junit.strip():
        return "--junit must name where each run writes its report"
    if args.parallel > 1 and "{run}" not in args.junit:
        return "with --parallel above 1 every run needs its own report: put {run} in --junit"
    if args.parallel > 1 and not any("{run}" in word or "{junit}" in word for word in command):
        return "with --parallel above 1 every copy must write its own report: put {junit} or {run} in CMD"
    return Plan(tuple(command), args.junit, args.runs, args.parallel)


@dataclass(frozen=True, slots=True)
class HuntRun:
    """One run of the command: what ran, where its report is, and the tests the report holds (None, with
    the reason in ``problem``, when the run is left out)."""

    number: int
    argv: tuple[str, ...]
    report: Path
    exit_code: int | None  # None: it could not be started
    results: list[TestResult] | None
    problem: str = ""
    output: str = ""  # the last line it printed
    collisions: tuple[str, ...] = ()  # testcases sharing one name: not judged (``Collision.describe``)


def expand(command: Sequence[str], junit: str, number: int) -> tuple[tuple[str, ...], Path]:
    """Run ``number``'s words and report: ``{run}`` replaced in the template, then ``{junit}`` (that
    report) and ``{run}`` in every word. Other braces are left as they are: nothing is formatted."""
    report = junit.replace("{run}", str(number))
    argv = tuple(word.replace("{junit}", report).replace("{run}", str(number)) for word in command)
    return argv, Path(report)


def run_once(command: Sequence[str], junit: str, number: int) -> HuntRun:
    """Run the command once, as run ``number``, and read the report it wrote."""
    argv, report = expand(command, junit, number)
    try:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.unlink(missing_ok=True)  # a report left by an earlier hunt must not pass for this run's
    except OSError as exc:
        return HuntRun(number, argv, report, None, None, f"cannot prepare {report}: {exc.strerror or exc}")
    try:
        done = subprocess.run(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, check=False
        )
    except OSError as exc:
        return HuntRun(number, argv, report, None, None, f"cannot start {argv[0]}: {exc.strerror or exc}")
    lines = done.stdout.decode("utf-8", "replace").strip().splitlines()
    output = lines[-1].strip()[:200] if lines else ""
    try:
        with report.open("rb") as stream:
            read = parse(stream)
    except FileNotFoundError:
        return HuntRun(number, argv, report, done.returncode, None, f"no report at {report}", output)
    except OSError as exc:
        return HuntRun(number, argv, report, done.returncode, None, f"{report}: {exc.strerror or exc}", output)
    except ReportRefused as exc:
        return HuntRun(number, argv, report, done.returncode, None, f"{report}: {exc}", output)
    if not read.results:
        return HuntRun(number, argv, report, done.returncode, None, f"{report} holds no test", output)
    collisions = tuple(c.describe() for c in read.collisions)
    return HuntRun(number, argv, report, done.returncode, read.results, "", output, collisions)


def hunt_runs(command: Sequence[str], junit: str, numbers: Sequence[int], parallel: int) -> list[HuntRun]:
    """Every run, in the order of ``numbers``, ``parallel`` at once. The pool takes them in that order: the
    first ``parallel`` start together, and each later one when an earlier one has finished."""
    if parallel <= 1 or len(numbers) <= 1:
        return [run_once(command, junit, number) for number in numbers]
    with ThreadPoolExecutor(max_workers=min(parallel, len(numbers)), thread_name_prefix="hunt") as pool:
        return list(pool.map(lambda number: run_once(command, junit, number), numbers))


def results_by_run(runs: Iterable[HuntRun]) -> dict[int, list[TestResult]]:
    """Each usable run's test results by run number, in run order: what the hunt judges, and where a
    record of local runs (``bot.local.recall``) can take them from."""
    return {run.number: run.results for run in runs if run.results is not None}


@dataclass(frozen=True, slots=True)
class Finding:
    """One test over the hunt's runs, with the evidence of its verdict in one line."""

    test: TestResult  # as first seen, for its name
    verdict: str  # FLAKY, SUSPECT, BROKEN, FAILED (its only run), STABLE
    ran: tuple[int, ...]  # the runs that ran it (not only skipped it)
    failed: tuple[int, ...]  # those in which an attempt of it failed
    evidence: str
    message: str = ""  # its first failure's, the first line

    @property
    def shown(self) -> str:
        """The test as its runner names it (``bot.core.display``)."""
        t = self.test
        return display_id(t.classname, t.name, t.file, t.project)


def judge_runs(results: Mapping[int, Sequence[TestResult]]) -> list[Finding]:
    """Every test judged over the runs given as one commit (``commit_judgement``), the verdicts worth
    reading first."""
    first: dict[str, TestResult] = {}
    seen: dict[str, list[Observation]] = {}
    for order, number in enumerate(sorted(results)):
        for result in results[number]:
            first.setdefault(result.id, result)
            letters = "".join(LETTER[a.outcome] for a in result.attempts)
            seconds = sum(a.duration for a in result.attempts)
            observation = Observation(
                order, HUNT_COMMIT, number, None, None, letters, seconds, result.message, result.details
            )
            seen.setdefault(result.id, []).append(observation)
    findings = [_finding(first[test], observations, len(results)) for test, observations in seen.items()]
    return sorted(findings, key=lambda f: (_SHOWN_ORDER[f.verdict], f.shown))


def _finding(test: TestResult, observations: Sequence[Observation], usable: int) -> Finding:
    judged = commit_judgement(HUNT_COMMIT, observations)
    ran = tuple(o.attempt for o in observations if o.outcomes.replace("S", ""))
    failed = tuple(o.attempt for o in observations if o.failed)
    verdict = _WORDS.get(judged.verdict, FAILED)
    if not ran:
        verdict, evidence = STABLE, "skipped in every run"
    elif verdict == BROKEN:
        evidence = f"failed all {_plural(len(ran), 'run')}"
    elif verdict == FAILED:
        evidence = "failed its only run: one run cannot tell flaky from broken"
    elif verdict == STABLE:
        evidence = f"passed all {_plural(len(ran), 'run')}"
    else:
        evidence = f"failed {len(failed)} of {len(ran)} runs: {_numbers(failed)}"
        retried = sum(1 for o in observations if o.failed and "P" in o.outcomes)
        if retried:
            evidence += f"; in {retried} of them it failed, then passed on a retry in the same report"
    if ran and len(ran) < usable:
        evidence += f" (skipped or absent in {usable - len(ran)} of the {usable} usable runs)"
    message = next((o.message for o in observations if o.failed and o.message), "")
    return Finding(test, verdict, ran, failed, evidence + _first_failure(message), message)


def _first_failure(message: str) -> str:
    return f"; first failure: {message}" if message else ""


def _numbers(runs: Sequence[int]) -> str:
    shown = ", ".join(str(n) for n in runs[:SHOWN_RUNS])
    return shown + (", …" if len(runs) > SHOWN_RUNS else "")


def pytest_start(command: Sequence[str]) -> int | None:
    """Where pytest's own arguments start when the command runs pytest (``pytest``, ``py.test``,
    ``python -m pytest``), else None."""
    name = Path(command[0]).name if command else ""
    if name in _PYTEST:
        return 1
    if name.startswith("python") and len(command) >= 3 and command[1:3] == ["-m", "pytest"]:
        return 3
    if name.startswith("python") and len(command) >= 2 and command[1] == "-mpytest":
        return 2
    return None


def select_tests(command: Sequence[str], node_ids: Sequence[str]) -> tuple[str, ...] | None:
    """The pytest command run on these node ids alone: the words naming its tests (an existing file or
    folder, or a node id, that is no option's value) dropped and the ids added. None when the command is
    not pytest, or a test has no pytest node id."""
    start = pytest_start(list(command))
    if start is None or not node_ids or not all(_NODE_ID.match(n) for n in node_ids):
        return None
    kept = list(command[:start])
    previous = ""
    for word in command[start:]:
        naming_tests = "::" in word or Path(word).exists()
        if word.startswith("-") or previous in _PYTEST_VALUES or not naming_tests:
            kept.append(word)
        previous = word
    return (*kept, *node_ids)


def recheck_sequentially(plan: Plan, findings: Sequence[Finding], out: TextIO) -> list[Finding]:
    """After a parallel hunt, what it found flaky run again one run at a time (runs N+1 on, as many as
    ``sequential_runs``), and each demoted to suspect when it passed every one of them."""
    flaky = [f for f in findings if f.verdict == FLAKY]
    if plan.parallel <= 1 or not flaky:
        return list(findings)
    count = sequential_runs(plan.runs, flaky)
    numbers = range(plan.runs + 1, plan.runs + count + 1)
    wanted = {f.test.id for f in flaky}
    selected = select_tests(plan.command, [f.shown for f in flaky])
    runs: list[HuntRun] = []
    what = f"sequential rerun of the {_plural(len(flaky), 'test')} found flaky: {count} runs, one at a time"
    if selected is not None:
        _say(out, f"{what} ({numbers[0]}–{numbers[-1]}), of {shlex.join(selected)}")
        first = run_once(selected, plan.junit, numbers[0])
        if first.results is not None and wanted <= {r.id for r in first.results}:
            runs = [first, *hunt_runs(selected, plan.junit, numbers[1:], 1)]
        else:
            why = first.problem or "a test selected is not in its report"
            _say(out, f"run {first.number} with the tests selected is not usable ({why}): the whole command instead")
    if not runs:
        _say(out, f"{what} ({numbers[0]}–{numbers[-1]}), of the whole command")
        runs = hunt_runs(plan.command, plan.junit, numbers, 1)
    _say_runs(runs, out)
    again = {f.test.id: f for f in judge_runs(results_by_run(runs))}
    return sorted(
        (_settled(f, again.get(f.test.id)) if f.verdict == FLAKY else f for f in findings),
        key=lambda f: (_SHOWN_ORDER[f.verdict], f.shown),
    )


def sequential_runs(runs: int, flaky: Sequence[Finding]) -> int:
    """How many sequential runs settle a parallel hunt's flaky tests: as many as the hunt's, and enough
    that each, failing as often as it did in parallel, fails in at least one of them with 95% chance."""
    rate = min(len(f.failed) / len(f.ran) for f in flaky)
    return max(runs, math.ceil(math.log(1 - DECIDED) / math.log(1 - rate)) if rate < 1 else runs)


def _settled(parallel: Finding, sequential: Finding | None) -> Finding:
    """A test found flaky in parallel, given what its sequential runs said."""
    counts = f"failed {len(parallel.failed)} of {len(parallel.ran)} parallel runs"
    if sequential is None or not sequential.ran:
        return dataclasses.replace(parallel, evidence=f"{parallel.evidence}; not run sequentially: kept flaky")
    if not sequential.failed:
        evidence = f"{counts}, passed all {len(sequential.ran)} sequential runs: {COLLISION}"
        return dataclasses.replace(parallel, verdict=SUSPECT, evidence=evidence)
    again = f"failed {len(sequential.failed)} of {len(sequential.ran)} sequential runs too"
    evidence = f"{counts}: {_numbers(parallel.failed)}; {again}: {_numbers(sequential.failed)}"
    return dataclasses.replace(parallel, evidence=evidence + _first_failure(parallel.message))


def _say(out: TextIO, line: str) -> None:
    print(line, file=out, flush=True)


def _say_runs(runs: Sequence[HuntRun], out: TextIO) -> None:
    """Each run left out, named with why; each odd exit; each name collision once."""
    collisions: dict[str, None] = {}
    for run in runs:
        exited = "could not start" if run.exit_code is None else _exit_words(run.exit_code)
        if run.results is None:
            last = f"; its last output: {run.output}" if run.output else ""
            _say(out, f"left out: run {run.number} ({exited}): {run.problem}{last}")
            continue
        collisions.update(dict.fromkeys(run.collisions))
        if run.exit_code and not any(r.outcome.is_failure for r in run.results):
            _say(out, f"note: run {run.number} {exited} although its report holds no failure; read as it is")
    for text in collisions:
        _say(out, f"note: {text}")


def _exit_words(code: int) -> str:
    return f"killed by signal {-code}" if code < 0 else f"exited with code {code}"


def report_lines(findings: Sequence[Finding], usable: int) -> list[str]:
    """The verdicts with their evidence, then what ``usable`` runs could not see."""
    lines = []
    for f in findings:
        if f.verdict != STABLE:
            lines += [f.shown, f"  {f.verdict}: {f.evidence}"]
    counts = {v: sum(1 for f in findings if f.verdict == v) for v in _SHOWN_ORDER}
    named = [f"{counts[v]} {v}" for v in _SHOWN_ORDER if counts[v] and v != STABLE]
    named.append(f"{counts[STABLE]} stable (passed every run, not shown)")
    lines.append(f"{_plural(len(findings), 'test')} over {_plural(usable, 'usable run')}: {', '.join(named)}")
    lines.append(
        f"what {_plural(usable, 'run')} could not see: a test failing with probability p passes every run or fails "
        f"every run, and so looks consistent, with the miss chance (1 − p)^N + p^N, N = {usable} (the chance of "
        "seeing it, 1 − (1 − p)^N − p^N, is one minus that)"
    )
    lines += [f"  p = {p:.2f}: missed with probability {miss_chance(p, usable):.4f}" for p in MISS_RATES]
    return lines


def miss_chance(p: float, runs: int) -> float:
    """The chance that ``runs`` runs of a test failing with probability ``p`` all agree: (1 − p)^N + p^N."""
    return float((1 - p) ** runs + p**runs)


def _tree_before() -> str | None:
    """The working tree's fingerprint before the runs write their reports (outside CI only)."""
    from bot.local.recall import fingerprint, in_ci

    return None if in_ci() else fingerprint(Path.cwd())


def _remember(results: Mapping[int, Sequence[TestResult]], tree: str | None) -> None:
    """Each run into the memory of local runs (``bot.local.recall``): the hunt says what it found itself, so
    the notes are not printed again."""
    if tree is None:
        return
    from bot.local.recall import remember

    for number in sorted(results):
        remember(results[number], Path.cwd(), tree=tree)


def hunt_command(args: argparse.Namespace) -> int:
    """``flaketally hunt`` (the module docstring): 0 nothing flaky, 1 flaky or broken tests found, 2 a usage
    error, 3 no usable report."""
    plan = plan_of(args)
    if isinstance(plan, str):
        print(f"flaketally: {plan}", file=sys.stderr)
        return EXIT_USAGE
    out = sys.stdout
    at_once = "one at a time" if plan.parallel == 1 else f"{plan.parallel} at a time"
    _say(out, f"hunt: {_plural(plan.runs, 'run')} of {shlex.join(plan.command)}, {at_once}, reports at {plan.junit}")
    tree = _tree_before()
    runs = hunt_runs(plan.command, plan.junit, range(1, plan.runs + 1), plan.parallel)
    _say_runs(runs, out)
    results = results_by_run(runs)
    _remember(results, tree)
    if not results:
        writes = any("{junit}" in word for word in plan.command)
        hint = "" if writes else f" (CMD has no {{junit}}: it must write its report to {plan.junit} itself)"
        print(f"flaketally: no run wrote a usable report{hint}", file=sys.stderr)
        return EXIT_NO_REPORT
    findings = recheck_sequentially(plan, judge_runs(results), out)
    for line in report_lines(findings, len(results)):
        _say(out, line)
    return EXIT_FOUND if any(f.verdict in FOUND for f in findings) else EXIT_CLEAN
