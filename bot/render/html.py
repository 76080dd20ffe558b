"""``flaketally analyze --format html``: one self-contained page (a CI artifact opened from disk) with a test ×
commit heatmap, each test's verdict and evidence on click, the failure messages grouped and the cost ranking
as a chart.

The page loads nothing: its CSS and script are inline and its Content-Security-Policy allows only those two
(by hash), so a test name that slipped past escaping still could not run or fetch anything. Every text from
a report is escaped by Jinja's autoescape and bounded. Data is prepared here, in small typed functions; the
markup is in ``templates/``: ``base.html`` (head, styles with dark mode, header) is the layout other pages
(the weekly digest) extend, ``macros.html`` holds the heatmap and the bar chart.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from bot.core.analysis import Analysis, FileWarning, worst_first
from bot.core.cost import Cost
from bot.core.display import display_id, source_location
from bot.core.judge import TestAnalysis
from bot.core.observations import OUTCOME_WORDS, Observation
from bot.core.results import first_line
from bot.core.verdicts import CommitJudgement, CommitVerdict, TestVerdict, short
from bot.render.markdown import truncate
from bot.render.page import Header, Stat, bar_layout, money, printable, render_page

MAX_ROWS = 200  # heatmap rows: every finding first, then others up to this
MAX_COMMITS = 120  # heatmap columns: the most recent commits
MAX_BARS = 30  # tests in the cost chart and table
MAX_GROUPS = 50  # failure messages grouped
MAX_GROUP_TESTS = 10  # tests named per message
MAX_DETAIL_COMMITS = 30  # failing commits spelled out per test
MAX_CELL_REPORTS = 5  # reports spelled out in a cell's tooltip
LABEL_LIMIT = 200
MESSAGE_LIMIT = 300
TRACE_HEAD, TRACE_TAIL, TRACE_LIMIT = 10, 30, 4000


class CellState(StrEnum):
    """What a test did on a commit: the colour of its heatmap cell."""

    PASSED = "passed"
    FLAKY = "flaky"
    FAILING = "failing"
    UNDETERMINED = "undetermined"
    SKIPPED = "skipped"
    NOT_RUN = "not-run"

    @property
    def meaning(self) -> str:
        return _MEANINGS[self]


_MEANINGS = {
    CellState.PASSED: "every attempt passed",
    CellState.FLAKY: "passed and failed on the same commit",
    CellState.FAILING: "failed on every attempt (at least two)",
    CellState.UNDETERMINED: "a single failure, not run again",
    CellState.SKIPPED: "skipped on every attempt",
    CellState.NOT_RUN: "no report of this commit held the test",
}


_BY_VERDICT = {
    CommitVerdict.PASSING: CellState.PASSED,
    CommitVerdict.FLAKY: CellState.FLAKY,
    CommitVerdict.FAILING: CellState.FAILING,
    CommitVerdict.UNDETERMINED: CellState.UNDETERMINED,
}


@dataclass(frozen=True, slots=True)
class Cell:
    state: CellState
    title: str  # the tooltip: run ids, attempts, durations, the failure message


@dataclass(frozen=True, slots=True)
class Row:
    key: str  # names the row's detail: ``detail-<key>``
    label: str
    verdict: str
    finding: bool
    cells: tuple[Cell, ...]


@dataclass(frozen=True, slots=True)
class Heatmap:
    commits: tuple[str, ...]  # full shas, oldest first
    rows: tuple[Row, ...]
    omitted: str  # one line saying what was left out; empty when nothing was

    @property
    def states(self) -> tuple[CellState, ...]:
        return tuple(CellState)


@dataclass(frozen=True, slots=True)
class FailedCommit:
    commit: str
    verdict: str
    evidence: str


@dataclass(frozen=True, slots=True)
class Detail:
    """What a click on a heatmap row shows."""

    key: str
    label: str
    test_id: str
    context: str
    verdict: str
    evidence: str
    score: str
    lower_bound: str
    location: str | None  # file:line, from the report or the traceback
    message: str | None  # the latest failure's
    trace: str | None  # a bounded excerpt of the latest failure's text
    commits: tuple[FailedCommit, ...]
    more_commits: int
    passing_commits: int
    cost: str


@dataclass(frozen=True, slots=True)
class MessageGroup:
    """Failures whose message starts with the same line."""

    line: str
    failures: int
    tests: tuple[str, ...]
    more_tests: int


@dataclass(frozen=True, slots=True)
class CostRow:
    label: str
    events: int
    wasted_compute: str  # ``unknown (…)`` when no flaky event's reports gave a time
    developer_minutes: str
    compute: str
    developer: str
    total: str
    value: float


def excerpt(text: str, head: int = TRACE_HEAD, tail: int = TRACE_TAIL, limit: int = TRACE_LIMIT) -> str:
    """A stack trace bounded: its first and last lines (where the test and the error are), then cut to ``limit``."""
    lines = printable(text.expandtabs(4), keep_newlines=True).splitlines()
    if len(lines) > head + tail:
        lines = [*lines[:head], f"… {len(lines) - head - tail} lines left out …", *lines[-tail:]]
    return truncate("\n".join(lines), limit)


def label(t: TestAnalysis) -> str:
    """The test as its runner prints it, with its context when it is not the default one."""
    h = t.history
    shown = display_id(h.classname, h.name, h.file)
    if h.context != "default":
        shown = f"{shown} · {t.context.display()}"
    return printable(truncate(shown, LABEL_LIMIT))


def pick_rows(tests: Sequence[TestAnalysis], max_rows: int) -> list[TestAnalysis]:
    """Every test with a finding, worst first, then the others in their order, up to ``max_rows`` in all."""
    findings = worst_first(tests)
    others = [t for t in tests if not t.is_finding]
    return [*findings, *others][:max_rows]


def commit_order(tests: Iterable[TestAnalysis]) -> list[str]:
    """Every commit seen, in the order its first report ran."""
    first: dict[str, int] = {}
    for t in tests:
        for o in t.history.observations:
            if o.order < first.get(o.commit, o.order + 1):
                first[o.commit] = o.order
    return sorted(first, key=lambda sha: (first[sha], sha))


def cell_state(judged: CommitJudgement | None, observations: Sequence[Observation]) -> CellState:
    """The judge's verdict of the commit where the test failed on it, else whether it passed, was skipped or
    did not run."""
    if judged is not None:
        return _BY_VERDICT[judged.verdict]
    if not observations:
        return CellState.NOT_RUN
    if all(set(o.outcomes) <= {"S"} for o in observations):
        return CellState.SKIPPED
    return CellState.PASSED


def _report_line(o: Observation) -> str:
    run = f"run {o.run_id}, attempt {o.attempt}" if o.run_id is not None else f"attempt {o.attempt}"
    steps = ", then ".join(OUTCOME_WORDS.get(c, c) for c in o.outcomes)
    line = f"{run}: {steps} in {o.seconds:.2f} s"
    message = first_line(o.message, MESSAGE_LIMIT) if o.failed else ""
    return f"{line}\n  {printable(message)}" if message else line


def cell_title(commit: str, state: CellState, observations: Sequence[Observation]) -> str:
    """A cell's tooltip: the commit and what the test did there, report by report."""
    lines = [f"{short(commit)} · {state.value.replace('-', ' ')}"]
    lines += [_report_line(o) for o in observations[:MAX_CELL_REPORTS]]
    if len(observations) > MAX_CELL_REPORTS:
        lines.append(f"and {len(observations) - MAX_CELL_REPORTS} more reports")
    return "\n".join(lines)


def row(t: TestAnalysis, key: str, commits: Sequence[str]) -> Row:
    by_commit: dict[str, list[Observation]] = {}
    for o in t.history.observations:
        by_commit.setdefault(o.commit, []).append(o)
    judged = {c.commit: c for c in t.commits}
    cells = []
    for sha in commits:
        observations = by_commit.get(sha, [])
        state = cell_state(judged.get(sha), observations)
        cells.append(Cell(state, cell_title(sha, state, observations)))
    return Row(key, label(t), t.judgement.verdict.value, t.is_finding, tuple(cells))


def row_key(index: int) -> str:
    """The key of the heatmap row ``index`` and of its detail (``detail-<key>``)."""
    return f"t{index}"


def _omitted(shown: Sequence[TestAnalysis], tests: Sequence[TestAnalysis], commits: int, total_commits: int) -> str:
    parts = []
    if len(shown) < len(tests):
        kept = {id(t) for t in shown}
        findings = sum(1 for t in tests if t.is_finding and id(t) not in kept)
        which = f"{findings} of them with a finding" if findings else "none with a finding"
        parts.append(f"{len(tests) - len(shown)} of {len(tests)} tests ({which})")
    if commits < total_commits:
        parts.append(f"the {total_commits - commits} oldest of {total_commits} commits")
    return f"Left out to keep the page small: {' and '.join(parts)}." if parts else ""


def heatmap(tests: Sequence[TestAnalysis], rows: Sequence[TestAnalysis], max_commits: int = MAX_COMMITS) -> Heatmap:
    """The grid of ``rows`` (``pick_rows`` of ``tests``) over the ``max_commits`` most recent commits of ``tests``,
    with a line naming what it leaves out."""
    every = commit_order(tests)
    commits = every[-max_commits:] if max_commits > 0 else []
    grid = tuple(row(t, row_key(i), commits) for i, t in enumerate(rows))
    return Heatmap(tuple(commits), grid, _omitted(rows, tests, len(commits), len(every)))


def latest_failure(t: TestAnalysis) -> tuple[Observation | None, str | None]:
    """The latest failed report, and the file:line of the test: the report's, else its traceback's."""
    latest = next((o for o in reversed(t.history.observations) if o.failed), None)
    h = t.history
    file, line = source_location(h.classname, h.file, h.line, latest.details if latest else "")
    if not file:
        return latest, None
    return latest, printable(truncate(f"{file}:{line}" if line is not None else file, LABEL_LIMIT))


def cost_words(cost: Cost, currency: str) -> str:
    if not cost.events:
        return "no flaky event, no cost"
    events = "1 flaky event" if cost.events == 1 else f"{cost.events} flaky events"
    return (
        f"{money(cost.total, currency)} for {events}: {cost.developer_minutes:.1f} developer minutes, "
        f"wasted compute {cost.minutes()}"
    )


def detail(t: TestAnalysis, key: str, currency: str) -> Detail:
    j = t.judgement
    latest, location = latest_failure(t)
    failed = [c for c in t.commits if c.verdict is not CommitVerdict.PASSING]
    commits = tuple(FailedCommit(c.commit, c.verdict.value, printable(c.evidence)) for c in failed[:MAX_DETAIL_COMMITS])
    message = first_line(latest.message, MESSAGE_LIMIT) if latest is not None else ""
    return Detail(
        key=key,
        label=label(t),
        test_id=printable(truncate(t.history.test_id, LABEL_LIMIT)),
        context=printable(truncate(t.context.display(), LABEL_LIMIT)),
        verdict=j.verdict.value,
        evidence=printable(j.evidence),
        score=f"{j.score:.3f}",
        lower_bound=f"{j.lower_bound:.3f}",
        location=location,
        message=printable(message) or None,
        trace=excerpt(latest.details) if latest is not None and latest.details else None,
        commits=commits,
        more_commits=len(failed) - len(commits),
        passing_commits=t.passing_commits,
        cost=cost_words(t.cost, currency),
    )


def message_groups(tests: Iterable[TestAnalysis], limit: int = MAX_GROUPS) -> list[MessageGroup]:
    """Failures grouped by the first line of their message, most frequent first, with the tests that had it; a
    failure without a message is not grouped."""
    failures: dict[str, int] = {}
    named: dict[str, dict[str, None]] = {}  # an ordered set of labels per line
    for t in tests:
        name: str | None = None
        for o in t.history.observations:
            line = printable(first_line(o.message, MESSAGE_LIMIT)) if o.failed else ""
            if not line:
                continue
            name = name or label(t)
            failures[line] = failures.get(line, 0) + 1
            named.setdefault(line, {})[name] = None
    order = sorted(failures, key=lambda line: (-failures[line], line))[:limit]
    return [
        MessageGroup(
            line, failures[line], tuple(named[line])[:MAX_GROUP_TESTS], max(0, len(named[line]) - MAX_GROUP_TESTS)
        )
        for line in order
    ]


def cost_rows(analysis: Analysis, limit: int = MAX_BARS) -> list[CostRow]:
    """The tests that cost something, dearest first (``Analysis.ranking``), as figures."""
    cur = analysis.rates.currency
    rows = []
    for t in analysis.ranking()[:limit]:
        c = t.cost
        rows.append(
            CostRow(
                label=label(t),
                events=c.events,
                wasted_compute=c.minutes(),
                developer_minutes=f"{c.developer_minutes:.1f} min",
                compute=money(c.compute, cur) if c.compute_known else "unknown",
                developer=money(c.developer, cur),
                total=money(c.total, cur),
                value=c.total,
            )
        )
    return rows


def header(analysis: Analysis) -> Header:
    findings = [t for t in analysis.tests if t.is_finding]
    counts = {v: sum(1 for t in findings if t.judgement.verdict is v) for v in TestVerdict}
    reports = f"{analysis.usable}" + (f" ({analysis.refused} refused)" if analysis.refused else "")
    stats = (
        Stat("tests", str(len(analysis.tests))),
        Stat("reports read", reports),
        Stat("flaky", str(counts[TestVerdict.FLAKY]), CellState.FLAKY.value),
        Stat("broken", str(counts[TestVerdict.BROKEN]), CellState.FAILING.value),
        Stat("regressed", str(counts[TestVerdict.REGRESSION]), CellState.FAILING.value),
        Stat("total flaky cost", money(analysis.total_cost, analysis.rates.currency)),
    )
    notes = (
        f"Rates: {analysis.rates.describe()}.",
        f"Single-fail policy: {analysis.policy.value}.",
    )
    return Header("Flaketally · flaky test report", stats, notes)


def to_html(analysis: Analysis, *, max_rows: int = MAX_ROWS, max_commits: int = MAX_COMMITS) -> str:
    """The whole report as one page that needs nothing but itself."""
    cur = analysis.rates.currency
    shown = pick_rows(analysis.tests, max_rows)
    costs = cost_rows(analysis)
    return render_page(
        "analysis.html",
        {
            "header": header(analysis),
            "heatmap": heatmap(analysis.tests, shown, max_commits),
            "details": [detail(t, row_key(i), cur) for i, t in enumerate(shown)],
            "groups": message_groups(analysis.tests),
            "costs": costs,
            "chart": bar_layout([(r.label, r.value, r.total) for r in costs]),
            "costs_left_out": len(analysis.ranking()) - len(costs),
            "warnings": [_warning(w) for w in analysis.warnings],
        },
    )


def _warning(w: FileWarning) -> FileWarning:
    return FileWarning(printable(truncate(w.path, LABEL_LIMIT)), printable(truncate(w.message, 1000)))
