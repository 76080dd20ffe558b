"""``flaketally analyze`` on a terminal: the tests that need attention as a table, worst first.

Piped, the command prints ``bot.render.analysis.to_text`` instead (one stable record a line), the
convention of the ``gh`` CLI; rich is imported only here, so the piped path does not pay for it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import IO

from rich import box
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table
from rich.text import Text

from bot.core.analysis import Analysis
from bot.core.display import display_id
from bot.core.findings import first_flaky_day, recent_outcomes
from bot.core.judge import TestAnalysis
from bot.core.verdicts import CommitVerdict, TestVerdict, short

DEFAULT_TOP = 20
_STYLE = {
    TestVerdict.REGRESSION: "bold red",
    TestVerdict.BROKEN: "bold red",
    TestVerdict.FLAKY: "bold yellow",
}


def _verdict(t: TestAnalysis) -> Text:
    verdict = t.judgement.verdict
    if verdict in _STYLE:
        return Text(verdict.value, style=_STYLE[verdict])
    # the history is fine, but it failed on a commit: say what that commit needs
    worst = sorted({c.verdict.value for c in t.commits if c.verdict.value != "passing"})
    return Text(" / ".join(worst) or verdict.value, style="cyan")


def _history(t: TestAnalysis) -> Text:
    """The last runs as ✓/✗, then how many runs failed of all in the window."""
    text = Text()
    for mark in recent_outcomes(t.history):
        text.append(mark, style="red" if mark == "✗" else "green")
    text.append(f" {t.judgement.failed_runs}/{t.judgement.runs}")
    return text


def _why(t: TestAnalysis) -> str:
    """The verdict's reason in a few words; ``flaketally explain`` gives every commit behind it."""
    j = t.judgement
    if j.verdict is TestVerdict.FLAKY and j.proof_commits:
        since = first_flaky_day(t.history, j)
        return f"flaky on {len(j.proof_commits)}/{j.commits} commits" + (f" since {since}" if since else "")
    if j.verdict is TestVerdict.FLAKY:
        return f"flip score {j.score:.2f}, at least {j.lower_bound:.2f}"
    if j.verdict is TestVerdict.BROKEN:
        return f"failed all {j.runs} runs"
    if j.verdict is TestVerdict.REGRESSION and j.first_failing_commit:
        return f"fails since {short(j.first_failing_commit)}"
    unsettled = [c for c in t.commits if c.verdict is not CommitVerdict.PASSING]
    named = ", ".join(short(c.commit) for c in unsettled[:2]) + (", …" if len(unsettled) > 2 else "")
    return f"{unsettled[0].verdict.value} on {named}" if unsettled else j.evidence


def _cost(t: TestAnalysis) -> str:
    return f"{t.cost.total:,.2f}" if t.cost.events else "·"


def _table(rows: Sequence[tuple[int, TestAnalysis]], currency: str, title: str, width: int) -> Table:
    ids = [display_id(t.history.classname, t.history.name, t.history.file) for _, t in rows]
    # the id unbroken where the terminal allows: the reason gets what the other columns (about 62
    # characters with the id's) leave, and wraps
    why_width = max(16, width - 62 - max(len(i) for i in ids))
    table = Table(title=title, title_justify="left", title_style="dim", box=box.SIMPLE_HEAD, header_style="bold")
    table.add_column("#", justify="right", style="dim")
    table.add_column("verdict", no_wrap=True)
    table.add_column("test", overflow="fold")
    table.add_column("last runs, failed", no_wrap=True)
    table.add_column(f"cost {currency}", justify="right", no_wrap=True)
    table.add_column("why", overflow="fold", max_width=why_width)
    for (rank, t), test in zip(rows, ids, strict=True):
        table.add_row(str(rank), _verdict(t), Text(test), _history(t), _cost(t), _why(t))
    return table


def render(analysis: Analysis, out: IO[str], *, top: int | None = DEFAULT_TOP, width: int | None = None) -> None:
    """The tests that need attention, worst first (one table per execution context, ranks across all),
    then what was left out and the rates; ``top`` None or 0 shows every finding."""
    console = Console(file=out, width=width, highlight=False)
    findings = analysis.worst_first()
    shown = list(enumerate(findings[:top] if top else findings, 1))
    flaky = sum(1 for t in findings if t.judgement.verdict is TestVerdict.FLAKY)
    cur = analysis.rates.currency
    console.print(
        f"[bold]{len(analysis.tests)} tests[/] in {analysis.usable} reports: {len(findings)} need attention, "
        f"{flaky} flaky, flaky cost [bold]{analysis.total_cost:,.2f} {cur}[/]"
    )
    contexts = dict.fromkeys(t.context.display() for _, t in shown)
    for context in contexts:
        console.print(_table([(r, t) for r, t in shown if t.context.display() == context], cur, context, console.width))
    if not shown:
        console.print("No test failed.", style="green")
    if len(shown) < len(findings):
        console.print(f"… {len(findings) - len(shown)} more: --top 0 shows all", style="dim")
    if shown:
        console.print("flaketally explain TEST PATH… shows every commit behind a verdict", style="dim", markup=False)
    console.print(f"rates: {analysis.rates.describe()}", style="dim", markup=False)
    for w in analysis.warnings:
        console.print(Text(f"warning: {w.path}: {w.message}", style="yellow"))


@contextmanager
def progress_bar(out: IO[str]) -> Iterator[Callable[[int, int, str], None]]:
    """A bar on ``out`` (the terminal's stderr) that the reader advances a report at a time; it
    disappears when the reading is done."""
    columns = (TextColumn("reading"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn())
    with Progress(*columns, console=Console(file=out), transient=True) as bar:
        task = bar.add_task("reading", total=None)

        def advance(index: int, total: int, path: str) -> None:
            bar.update(task, completed=index, total=total)

        yield advance
