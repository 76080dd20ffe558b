"""``flaketally run``: run the test command, and when a few of its tests failed, run it once more. A test
that failed and then passed cleanly on that rerun is a flaky pass: the run is green and the pass is kept.

The command runs without a shell. Before each attempt the report at ``--junit`` is deleted, so a report
is only ever the one that attempt wrote; a missing, empty, malformed or testless report, a non-zero exit
with no failed test (a crash, or a step outside the tests) and a runner killed by a signal end the run
with exit 3, and nothing is rerun after them. SIGINT and SIGTERM sent to ``flaketally run`` are passed on
to the command (a SIGINT only when the terminal did not send it to the command already) and latched:
nothing starts after one. When and how the failures are rerun is ``bot.local.run_rules``. A rerun clears
a test only when the rerun exits 0, its report counts no failure its testcases omit, and the test ran
once and passed.

What the App and ``flaketally analyze`` see: ``--junit`` keeps the first run's report, byte for byte; the
rerun's report is kept beside it as ``<stem>.rerun-1.xml`` and tied to the same commit, so a flaky pass is
a test that failed and passed on one commit, which the judge calls flaky. The App takes the commit and
attempt of both files from the workflow run they were uploaded by. ``flaketally analyze`` takes them from
each report, else a ``meta.json`` beside it, else the report is its own commit (``bot.local.files``):
the rerun's report is given, as attributes of its first ``<testsuite>``, the commit the first report is
read as and the next attempt, unless it is read as that commit already. The first report is never
rewritten, and the rerun's results are not merged into it as retries: a merged file beside the first one
would count the first run's failures twice.

Exit codes: 0 green (flaky passes included), 1 a test failed, 2 usage error, 3 no usable report, a crash,
or a runner killed by a signal; the code is named on stderr in one line.
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any, TypeAlias

from bot.core.results import Outcome, Report, TestResult
from bot.local.files import identify
from bot.local.run_rules import (
    Unusable,
    failed_tests,
    linked,
    names,
    not_a_report,
    plural,
    read_report,
    rerun_command,
    shown,
    step_summary,
    unreported_failures,
    warning_command,
    why_not_rerun,
)

EXIT_GREEN, EXIT_RED, EXIT_USAGE, EXIT_NO_VERDICT = 0, 1, 2, 3
_FORWARDED = (signal.SIGINT, signal.SIGTERM)
_Handler: TypeAlias = Callable[[int, FrameType | None], Any] | int | signal.Handlers | None


def rerun_report(junit: Path, n: int) -> Path:
    """Where the report of rerun ``n`` is kept: ``<stem>.rerun-<n>.xml`` beside ``junit``."""
    return junit.with_name(f"{junit.stem}.rerun-{n}{junit.suffix}")


@dataclass(slots=True)
class Ran:
    """One attempt of the command: its exit code (negative: killed by that signal; None: not started) and
    its report, or why there is none."""

    exit_code: int | None
    report: Report | None = None
    data: bytes = b""
    problem: str = ""


@dataclass(frozen=True, slots=True)
class Finished:
    """How a run ended: its exit code, and the reports of its first run and its rerun when they were usable."""

    code: int
    first: Report | None = None
    rerun: Report | None = None


class Signals:
    """SIGINT and SIGTERM while ``flaketally run`` runs: passed on to the running command and latched.
    Installed only from the main thread (Python allows no other); elsewhere the defaults stand."""

    def __init__(self) -> None:
        self.received: int | None = None
        self._process: subprocess.Popen[bytes] | None = None
        self._passed_on = False
        self._saved: dict[int, _Handler] = {}

    def __enter__(self) -> Signals:
        for number in _FORWARDED:
            try:
                self._saved[number] = signal.signal(number, self._handle)
            except ValueError:  # not the main thread
                break
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        for number, previous in self._saved.items():
            if previous is not None:  # None: a handler not set from Python, which cannot be put back
                signal.signal(number, previous)

    def _handle(self, number: int, frame: FrameType | None) -> None:
        if self.received is None:
            self.received = number
        process = self._process
        if process is None or process.returncode is not None:
            return
        if number != signal.SIGINT or not _terminal_sent_it():
            self._passed_on = True
            process.send_signal(number)

    def run(self, argv: list[str]) -> int | None:
        """Run ``argv`` to its end and return its exit code; None, starting nothing, once a signal came."""
        if self.received is not None:
            return None
        process = subprocess.Popen(argv)
        self._process = process
        try:
            if self.received is not None and not self._passed_on:  # it came while the command started
                process.send_signal(self.received)
            return process.wait()
        finally:
            self._process = None


def _terminal_sent_it() -> bool:
    """Whether a SIGINT may have come from the terminal (Ctrl-C), which sends it to the command as well:
    this process is in the terminal's foreground process group."""
    for fd in (0, 1, 2):
        try:
            if os.isatty(fd) and os.tcgetpgrp(fd) == os.getpgrp():
                return True
        except OSError:
            continue
    return False


def _say(code: int, text: str) -> int:
    print(f"flaketally run: exit {code}: {text}", file=sys.stderr, flush=True)
    return code


def _note(text: str) -> None:
    print(f"flaketally run: {text}", file=sys.stderr, flush=True)


def run_command(args: argparse.Namespace) -> int:
    """``flaketally run [--junit PATH] [--max-reruns N] [--rerun-scope command|test] -- CMD...``."""
    argv = list(args.cmd)
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        return _say(EXIT_USAGE, "no command given: flaketally run --junit junit.xml -- pytest --junitxml=junit.xml")
    if args.max_reruns < 0:
        return _say(EXIT_USAGE, f"--max-reruns must be 0 or more, not {args.max_reruns}")
    junit = Path(args.junit)
    if junit.suffix.lower() != ".xml":
        return _say(EXIT_USAGE, f"--junit {junit} must name a .xml file (flaketally analyze reads *.xml)")
    again = rerun_report(junit, 1)
    for path in (junit, again):
        refused = not_a_report(path)
        if refused:
            return _say(EXIT_USAGE, refused)
    again.unlink(missing_ok=True)  # an earlier run's rerun: it must not be read beside this run's report
    tree = _tree_before()
    with Signals() as signals:
        finished = _run(argv, junit, again, args, signals)
    if finished.first is not None and tree is not None:
        _remember(results_of_run(finished.first, finished.rerun), tree)
    return finished.code


def _tree_before() -> str | None:
    """The working tree's fingerprint before the command writes its report (outside CI only)."""
    from bot.local.recall import fingerprint, in_ci

    return None if in_ci() else fingerprint(Path.cwd())


def _remember(results: list[TestResult], tree: str) -> None:
    """The run into the memory of local runs (``bot.local.recall``), and its notes on stderr: a failing test
    that both passed and failed on this code lately may be flaky rather than broken by the change."""
    from bot.local.recall import remember

    for note in remember(results, Path.cwd(), tree=tree):
        print(f"flaketally: {note}", file=sys.stderr)


def _attempt(argv: list[str], junit: Path, signals: Signals) -> Ran:
    """Delete the report, run the command, read the report it wrote."""
    junit.unlink(missing_ok=True)
    try:
        code = signals.run(argv)
    except OSError as exc:
        return Ran(None, problem=f"{argv[0]} could not be started: {exc.strerror or exc}")
    if code is None:
        return Ran(None, problem="a signal came before it started")
    try:
        report, data = read_report(junit)
    except Unusable as exc:
        return Ran(code, problem=str(exc))
    return Ran(code, report, data)


def _no_verdict(ran: Ran, signals: Signals, what: str, after: str) -> int | None:
    """Exit 3 when the attempt gave nothing to judge (a signal, a kill, no usable report), else None."""
    if signals.received is not None:
        name = signal.Signals(signals.received).name
        return _say(EXIT_NO_VERDICT, f"stopped by {name}, which the command got too; {after}")
    if ran.exit_code is None:
        return _say(EXIT_NO_VERDICT, f"{ran.problem}; {after}")
    if ran.exit_code < 0:
        name = signal.Signals(-ran.exit_code).name if -ran.exit_code in signal.valid_signals() else "a signal"
        return _say(EXIT_NO_VERDICT, f"{what} was killed by {name}; {after}")
    if ran.report is None:
        return _say(EXIT_NO_VERDICT, f"{ran.problem}; {after}")
    return None


def _run(argv: list[str], junit: Path, again: Path, args: argparse.Namespace, signals: Signals) -> Finished:
    first = _attempt(argv, junit, signals)
    stop = _no_verdict(first, signals, f"the command ({argv[0]})", "nothing rerun")
    if stop is not None:
        return Finished(stop, first.report)
    assert first.report is not None and first.exit_code is not None
    failed = failed_tests(first.report)
    if not failed:
        if first.exit_code == 0:
            return Finished(_say(EXIT_GREEN, f"{plural(len(first.report.results), 'test')}, none failed"), first.report)
        crash = (
            f"the command exited {first.exit_code} but no test in {junit} failed: a crash, or a step outside the "
            "tests; nothing rerun"
        )
        return Finished(_say(EXIT_NO_VERDICT, crash), first.report)
    why = why_not_rerun(first.report, first.data, args.max_reruns)
    if why:
        return Finished(_say(EXIT_RED, f"{names(failed)} failed; not rerun: {why}"), first.report)
    command, whole = argv, None
    if args.rerun_scope == "test":
        command, whole = rerun_command(argv, failed, first.exit_code, Path.cwd())
        _note(f"rerunning the whole command: {whole}" if whole else f"rerunning {names(failed)} alone")
    else:
        _note(f"{names(failed)} failed: rerunning the command once")
    second = _rerun(command, junit, again, first, signals)
    stop = _no_verdict(second, signals, "the rerun", f"{names(failed)} failed on the first run")
    if stop is not None:
        return Finished(stop, first.report, second.report)
    return Finished(_verdict(first, second, failed, [junit, again]), first.report, second.report)


def _rerun(command: list[str], junit: Path, again: Path, first: Ran, signals: Signals) -> Ran:
    """The rerun, with the first report kept aside while it runs and put back at ``--junit`` after; the
    rerun's own report moved to ``again`` and tied to the first report's commit."""
    aside = junit.with_name(f".{junit.name}.first-run")  # not *.xml: never read as a report of its own
    os.replace(junit, aside)
    try:
        second = _attempt(command, junit, signals)
        if junit.exists():
            os.replace(junit, again)
        if second.report is not None:
            _tie(again, second.report, second.data, junit, first)
    finally:
        os.replace(aside, junit)
    return second


def _tie(again: Path, rerun: Report, data: bytes, junit: Path, first: Ran) -> None:
    """Write into the rerun's report the commit the first report is read as, and the next attempt, unless
    it is read as that commit already (module docstring)."""
    assert first.report is not None
    own, _ = identify(junit, first.report, "local")
    theirs, _ = identify(again, rerun, "local")
    if theirs.commit == own.commit:
        return
    tied = linked(data, own.commit, own.attempt + 1)
    if tied is None:
        _note(f"{again} could not be tied to the first run's commit: flaketally analyze judges it on its own")
        return
    again.write_bytes(tied)


def _verdict(first: Ran, second: Ran, failed: list[TestResult], reports: list[Path]) -> int:
    """Green when the rerun cleared every failed test; otherwise red, saying why (exit 3 for a rerun that
    failed with no failed test: a crash)."""
    assert first.report is not None and second.report is not None
    rerun = {r.id: r for r in second.report.results}
    omitted = unreported_failures(second.data)
    clean = second.exit_code == 0 and not omitted
    cleared = {t.id for t in failed if clean and _passed_once(rerun.get(t.id))}
    final = results_of_run(first.report, second.report)
    flaky = [r for r in final if r.id in cleared]
    if flaky:
        _announce(flaky, reports)
    newly = [r for r in failed_tests(second.report) if r.id not in {t.id for t in failed}]
    if second.exit_code != 0 and not omitted and not failed_tests(second.report):
        return _say(
            EXIT_NO_VERDICT,
            f"the rerun exited {second.exit_code} but no test in its report failed: a crash, or a step outside "
            f"the tests; {names(failed)} failed on the first run",
        )
    if len(cleared) == len(failed) and not newly and clean:
        count = plural(len(flaky), "flaky pass", "flaky passes")
        return _say(EXIT_GREEN, f"{count} ({names(flaky)}); reports: {', '.join(map(str, reports))}")
    reasons = [_not_cleared(t, rerun.get(t.id)) for t in failed if t.id not in cleared]
    reasons += [f"{shown(r)} failed on the rerun (it passed on the first run)" for r in newly]
    if second.exit_code != 0:
        reasons.append(f"the rerun exited {second.exit_code}")
    if omitted:
        reasons.append(f"the rerun's report counts {omitted} failure(s) or error(s) none of its testcases records")
    return _say(EXIT_RED, "; ".join(dict.fromkeys(r for r in reasons if r)))


def _passed_once(result: TestResult | None) -> bool:
    return result is not None and len(result.attempts) == 1 and result.outcome is Outcome.PASSED


def _not_cleared(test: TestResult, rerun: TestResult | None) -> str:
    """Why a failed test was not cleared by the rerun ("" when it passed cleanly on a rerun that failed)."""
    if rerun is None:
        return f"{shown(test)} is not in the rerun's report"
    if rerun.outcome.is_failure:
        return f"{shown(test)} failed on the rerun too"
    if len(rerun.attempts) > 1:
        return f"{shown(test)} passed on the rerun only after the runner retried it"
    if not _passed_once(rerun):
        return f"{shown(test)} was {rerun.outcome.value} on the rerun"
    return ""


def results_of_run(first: Report, rerun: Report | None) -> list[TestResult]:
    """Each test of the run as it finally stands: a test that failed on either run with the attempts of
    both runs in order, every other test as the first run saw it, and the tests only the rerun ran as it saw
    them. A memory of local runs (``bot.local.recall``, outside CI) is to record this at the end of
    ``run_command``, the one place every run passes."""
    if rerun is None:
        return list(first.results)
    again = {r.id: r for r in rerun.results}
    final = []
    for result in first.results:
        later = again.pop(result.id, None)
        if later is not None and (result.outcome.is_failure or later.outcome.is_failure):
            details = result.details or later.details
            result = replace(result, attempts=result.attempts + later.attempts, details=details)
        final.append(result)
    return final + list(again.values())


def _announce(flaky: list[TestResult], reports: list[Path]) -> None:
    """Name each flaky pass on stderr; in GitHub Actions also annotate it and add a step-summary table."""
    for result in flaky:
        _note(f"flaky pass: {shown(result)} failed, then passed on the rerun")
    if os.environ.get("GITHUB_ACTIONS") != "true":
        return
    for result in flaky:
        print(warning_command(result), flush=True)
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if not summary:
        _note("GITHUB_STEP_SUMMARY is not set: no step summary written")
        return
    try:
        with open(summary, "a", encoding="utf-8") as stream:
            stream.write(step_summary(flaky, [str(p) for p in reports]))
    except OSError as exc:
        _note(f"the step summary {summary} could not be written: {exc.strerror or exc}")
