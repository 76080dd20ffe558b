"""``flaketally check PATH... --db URL``: a gate in CI for teams without the App. The reports just written
are compared with the history the store keeps, and kept, so the next run is compared with this one.

Each test is compared in each execution context it ran in (``bot.core.identity``), by the one judge
(``bot.core.judge``, default thresholds), twice:

- before: its stored history without the reports just read; after: with them. The reports are stored
  first and their observations then taken out of the history again for before, so a check run twice on
  the same reports says the same twice: a report already stored counts as read now, not as history.
- newly flaky (exit 1): flaky after and not flaky before (any other verdict, or no observation in that
  context before).
- a known flake got worse (exit 3): flaky before and after, and the Wilson lower bound of its flip score
  after is above its flip score before. The flip score is what the flaky verdict rests on (the failure rate
  is not: a broken test fails every run and is not flaky); the bound is the judge's own (95 %), so the
  rise is more than the noise of the new sample. A flake that flakes once more at its usual rate does not
  trip it: flaky on 2 of 20 commits (score 0.123), a 21st commit failing then passing gives 0.186 with a
  bound of 0.079; the 21st failing, passing, failing, passing gives 0.272, bound 0.139 > 0.123: worse.
- Both at once: exit 1, and stderr names both. Neither: 0. Exit 2: a usage error (the folder of ``--db``
  does not exist, the store cannot be reached). Exit 4: a path that does not exist, no ``*.xml`` in the
  paths, or no usable report among them (nothing of them stored).

Each newly flaky or worse test is one line on stdout: its display id, its context, the figures before and
after and the judge's evidence. Under GitHub Actions (``GITHUB_ACTIONS=true``) each is also a workflow
command (``::error`` newly flaky, ``::warning`` worse; ``file``/``line`` when the report or the failure's
trace says them), and a Markdown table is appended to the file ``GITHUB_STEP_SUMMARY`` names.

Reports are read one after the other (not on several cores as ``analyze`` does): what each added to the
history is recorded as it is stored, which worker processes could not report back.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from bot.core.analysis import FileWarning
from bot.core.cost import Rates
from bot.core.display import source_location, stored_display_id
from bot.core.identity import ExecutionContext, RunIdentity
from bot.core.judge import judge
from bot.core.observations import LETTER, TestHistory
from bot.core.results import Report
from bot.core.verdicts import CommitVerdict, HistoryJudgement, TestVerdict
from bot.local.files import report_files
from bot.local.reader import read_and_store
from bot.render.markdown import code, neutralise, plain

if TYPE_CHECKING:
    from bot.store import Store

EXIT_CLEAN, EXIT_NEWLY_FLAKY, EXIT_USAGE, EXIT_WORSE, EXIT_NO_REPORT = 0, 1, 2, 3, 4
NEWLY_FLAKY, WORSE = "newly flaky", "got worse"

# what one report added to one test's history: commit, attempt, run id, start time, outcome letters
_Added = tuple[str, int, int | None, str | None, str]


@dataclass(slots=True)
class _Recorder:
    """Stores each report it is given (``read_and_store`` calls ``ingest``) and remembers what it added to
    each test's history in each context, so that the history can be read without it again."""

    store: Store
    added: dict[tuple[str, str], Counter[_Added]] = field(default_factory=dict)
    keys: set[str] = field(default_factory=set)
    new: int = 0

    def ingest(self, report: Report, run: RunIdentity) -> bool:
        key = run.report_key(report.digest)
        if key not in self.keys:  # a copy of a report read twice is one report, as it is in the store
            self.keys.add(key)
            context = run.context.key()
            for result in report.results:
                letters = "".join(LETTER[a.outcome] for a in result.attempts)
                counter = self.added.setdefault((result.id, context), Counter())
                counter[(run.commit, run.attempt, run.run_id, run.started_at, letters)] += 1
        new = self.store.ingest(report, run)
        self.new += new
        return new

    def before(self, history: TestHistory) -> TestHistory | None:
        """``history`` without what the reports read added to it (the newest of equal observations taken
        out); None when nothing is left: the test had not run in this context before."""
        taken = Counter(self.added.get((history.test_id, history.context), Counter()))
        kept = []
        for obs in reversed(history.observations):
            added = (obs.commit, obs.attempt, obs.run_id, obs.started_at, obs.outcomes)
            if taken[added] > 0:
                taken[added] -= 1
            else:
                kept.append(obs)
        kept.reverse()
        return dataclasses.replace(history, observations=kept) if kept else None


def change(before: HistoryJudgement | None, after: HistoryJudgement) -> str | None:
    """``NEWLY_FLAKY``, ``WORSE`` or None: the two rules of the module docstring."""
    if after.verdict is not TestVerdict.FLAKY:
        return None
    if before is None or before.verdict is not TestVerdict.FLAKY:
        return NEWLY_FLAKY
    return WORSE if after.lower_bound > before.score else None


def figures(judgement: HistoryJudgement | None) -> str:
    """A verdict and its flip score in a few words: ``flaky, score 0.123, lower bound 0.040``."""
    if judgement is None:
        return "not seen before"
    j = judgement
    return f"{j.verdict.value}, score {j.score:.3f}, lower bound {j.lower_bound:.3f}"


@dataclass(frozen=True, slots=True)
class Change:
    """A test, in one context, that is newly flaky or whose flakiness got worse, with both judgements."""

    kind: str  # NEWLY_FLAKY or WORSE
    history: TestHistory  # after: with the reports just read
    before: HistoryJudgement | None  # None: not seen before in this context
    after: HistoryJudgement

    @property
    def name(self) -> str:
        h = self.history
        return stored_display_id(h.test_id, h.classname, h.name, h.file)

    @property
    def context(self) -> str:
        return ExecutionContext.from_key(self.history.context).display()

    @property
    def evidence(self) -> str:
        """What changed, the figures before, then after."""
        a, b = self.after, self.before
        if self.kind == NEWLY_FLAKY or b is None:
            return f"{figures(b)} → flaky: {a.evidence}"
        return (
            f"flaky, score {b.score:.3f} → {a.score:.3f}, lower bound {a.lower_bound:.3f} > {b.score:.3f}; "
            f"passed and failed on the same commit on {len(b.proof_commits)} → {len(a.proof_commits)} commits; "
            f"failed {b.failed_runs} of {b.runs} → {a.failed_runs} of {a.runs} runs"
        )

    def line(self) -> str:
        """The one line on stdout."""
        return neutralise(f"{self.kind}: {self.name} ({self.context}): {self.evidence}")

    def location(self) -> tuple[str | None, int | None]:
        """The test's file and line: the report's, else the latest failure's trace."""
        h = self.history
        failed = [o for o in h.observations if o.failed]
        return source_location(h.classname, h.file, h.line, failed[-1].details if failed else "")


@dataclass(slots=True)
class Check:
    """What ``check`` found: the changes, newly flaky first, and what was read."""

    changes: list[Change]
    warnings: list[FileWarning]
    files: int
    refused: int
    new_reports: int
    tests: int  # tests (in their contexts) compared

    @property
    def usable(self) -> int:
        return self.files - self.refused

    def count(self, kind: str) -> int:
        return sum(1 for c in self.changes if c.kind == kind)

    @property
    def code(self) -> int:
        if not self.usable:
            return EXIT_NO_REPORT
        if self.count(NEWLY_FLAKY):
            return EXIT_NEWLY_FLAKY
        return EXIT_WORSE if self.count(WORSE) else EXIT_CLEAN


def check(store: Store, files: Sequence[Path], repo: str = "local") -> Check:
    """Store the reports in ``files`` under ``repo`` and compare each of their tests' history before and
    after them (the module docstring)."""
    recorder = _Recorder(store)
    warnings: list[FileWarning] = []
    refused = 0
    seen: set[str] = set()
    for path in files:
        read = read_and_store(recorder, path, repo)
        warnings.extend(read.warnings)
        refused += read.refused
        seen |= read.ids
    histories = store.history(repo, seen) if seen else []
    changes = []
    for history in histories:
        earlier = recorder.before(history)
        before = _judged(earlier) if earlier is not None else None
        after = _judged(history)
        kind = change(before, after)
        if kind is not None:
            changes.append(Change(kind, history, before, after))
    changes.sort(key=lambda c: (c.kind != NEWLY_FLAKY, c.name, c.history.context))
    return Check(changes, warnings, len(files), refused, recorder.new, len(histories))


def _judged(history: TestHistory) -> HistoryJudgement:
    return judge(history, CommitVerdict.UNDETERMINED, Rates()).judgement


# GitHub Actions workflow commands: data and property values escaped as the runner unescapes them


def escape_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def workflow_command(c: Change) -> str:
    """``::error`` (newly flaky) or ``::warning`` (worse) naming the test, at its file and line if known."""
    file, line = c.location()
    properties = []
    if file:
        properties.append(f"file={escape_property(file)}")
        if line is not None:
            properties.append(f"line={line}")
    properties.append(f"title={escape_property(f'{c.kind}: {c.name}')}")
    return f"::{'error' if c.kind == NEWLY_FLAKY else 'warning'} {','.join(properties)}::{escape_data(c.line())}"


def headline(result: Check) -> str:
    """One sentence: what changed, in how many tests of how many reports."""
    new, worse = result.count(NEWLY_FLAKY), result.count(WORSE)
    found = []
    if new:
        found.append(f"{new} {'test' if new == 1 else 'tests'} newly flaky")
    if worse:
        found.append(f"{worse} known {'flake' if worse == 1 else 'flakes'} got worse")
    said = " and ".join(found) if found else "nothing changed"
    tests = f"{result.tests} {'test' if result.tests == 1 else 'tests'}"
    reports = f"{result.usable} {'report' if result.usable == 1 else 'reports'}"
    return f"{said[0].upper()}{said[1:]}: {tests} of {reports} compared with their history."


def step_summary(result: Check) -> str:
    """The Markdown appended to the step summary: the headline and a table of the changes."""
    lines = ["## Flaketally check", "", headline(result)]  # our own words and figures: nothing to escape
    if result.changes:
        lines += ["", "| Test | Context | Change | Before | After | Evidence |", "|---|---|---|---|---|---|"]
        for c in result.changes:
            cells = [code(c.name), plain(c.context), c.kind, figures(c.before), figures(c.after)]
            lines.append(f"| {' | '.join(cells)} | {plain(c.after.evidence)} |")
    return "\n".join(lines) + "\n"


def check_command(args: argparse.Namespace) -> int:
    """The command: ``check`` of ``args.paths`` against ``args.db``; the exit code of the module docstring."""
    files, missing = report_files(args.paths)
    if missing or not files:
        gone = ", ".join(w.path for w in missing)
        why = f"no such file or directory: {gone}" if gone else "no *.xml report in the paths given"
        print(f"flaketally: {why}", file=sys.stderr)
        return EXIT_NO_REPORT
    store = _open_store(args.db)
    if store is None:
        return EXIT_USAGE
    where = store.engine.url.render_as_string(hide_password=True)
    try:
        result = check(store, files, args.repo)
    finally:
        store.close()
    if not result.usable:
        why = f"; {result.warnings[0].path}: {result.warnings[0].message}" if result.warnings else ""
        print(f"flaketally: no usable report among the paths given ({result.refused} refused{why})", file=sys.stderr)
        return EXIT_NO_REPORT
    for warning in result.warnings:
        print(f"flaketally: {warning.path}: {warning.message}", file=sys.stderr)
    for c in result.changes:
        print(c.line())
    if os.environ.get("GITHUB_ACTIONS") == "true":
        _github_actions(result)
    print(f"flaketally: {result.new_reports} new of {result.usable} reports stored in {where}", file=sys.stderr)
    print(f"flaketally: {headline(result)}", file=sys.stderr)
    if result.count(NEWLY_FLAKY) and result.count(WORSE):
        print("flaketally: exit 1 (newly flaky), not 3 (worse): a new flake comes first", file=sys.stderr)
    return result.code


def _open_store(url: str) -> Store | None:
    """The store at ``url``, migrated; None, having said why, when it cannot be."""
    from bot.store import Store, StoreError

    if "://" not in url and not Path(url).expanduser().resolve().parent.is_dir():
        print(f"flaketally: the folder of --db {url} does not exist", file=sys.stderr)
        return None
    try:
        return Store.open(url)
    except StoreError as exc:
        print(f"flaketally: {exc}", file=sys.stderr)
        return None


def _github_actions(result: Check) -> None:
    """The workflow commands on stdout and the step summary appended to its file (said when it cannot be)."""
    for c in result.changes:
        print(workflow_command(c))
    summary = os.environ.get("GITHUB_STEP_SUMMARY")
    if not summary:
        print("flaketally: GITHUB_STEP_SUMMARY is not set: no step summary written", file=sys.stderr)
        return
    try:
        with open(summary, "a", encoding="utf-8") as out:
            out.write(step_summary(result))
    except OSError as exc:
        print(f"flaketally: the step summary {summary} cannot be written: {exc.strerror or exc}", file=sys.stderr)
