"""The pieces of the PR comment and the check run that show a commit's findings: the headline, the table
(the shared context said once above it), links to the run, the job's log, the commit and the test's line,
the per-test history line and the cost lines. Pure Markdown from core data; ``bot.github.bodies`` puts
them together.

Only what comes from outside (names, messages, branch and job names) is escaped, and only as Markdown
needs (``prose``); Flaketally's own sentences are written plain.
"""

from __future__ import annotations

import html
import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import ROUND_HALF_UP, Decimal

from bot.core.baseline import SHOWN_IN_ORDER, Word
from bot.core.findings import Advice, CommitReport, Finding
from bot.core.verdicts import short
from bot.render.markdown import block, code, neutralise, truncate

ADVICE = {
    Advice.NOT_YOUR_CHANGE: "Not your change: it passed on a rerun of the same code; no need to touch it here.",
    Advice.LOOK_AT_CHANGE: "Look at your change: it failed on every attempt of this commit.",
    Advice.KNOWN_BROKEN: "Known broken before this change too: not caused by it.",
    Advice.RERUN: "Rerun the failed jobs: one failure cannot tell a flake from a real failure.",
    Advice.KNOWN_FLAKY: "Rerun it before you change code for it: it is known flaky.",
    Advice.BROKEN_ON_BRANCH: "Not your change: it fails on the default branch too.",
    Advice.NEW_FAILURE: "Look at your change: this test passed before it.",
    Advice.QUARANTINED: "Not held against your change: the test is quarantined in this context.",
}
# how the headline counts each word
HEADLINE = {Word.FLAKY: "flaky (passed on a rerun)", Word.UNDETERMINED: "needs a rerun"}

# what Markdown (and GitHub's mentions, HTML and tables) would act on: escaped in outside text
_ACTIVE = re.compile(r"([\\`*_\[\]@|~&]|<(?=[A-Za-z/!?]))")
_LINE_START = re.compile(r"^([#+\-=>!])")
_RUN = re.compile(r"\brun (\d+)\b")


def prose(text: str, limit: int = 500) -> str:
    """Outside text shown as prose: only what Markdown, HTML or a mention would act on is escaped."""
    return _LINE_START.sub(r"\\\1", _ACTIVE.sub(r"\\\1", neutralise(truncate(text, limit))))


@dataclass(frozen=True, slots=True)
class Links:
    """Where things are on GitHub (GitHub Enterprise Server too: every address comes from GitHub)."""

    repo_url: str | None = None  # https://HOST/owner/name
    runs: Mapping[int, tuple[int | None, str | None]] = field(default_factory=dict)  # run id → (number, page)
    jobs: Mapping[tuple[int, int, str], str] = field(default_factory=dict)  # (run id, attempt, job) → log

    def commit(self, sha: str) -> str:
        return f"[{short(sha)}]({self.repo_url}/commit/{sha})" if self.repo_url else short(sha)

    def run(self, run_id: int) -> str:
        number, url = self.runs.get(run_id, (None, None))
        shown = f"#{number}" if number else f"run {run_id}"
        return f"[{shown}]({url})" if url else shown

    def line(self, f: Finding, sha: str) -> str | None:
        if not self.repo_url or not f.file or f.file.startswith(("/", "..")) or "\\" in f.file:
            return None
        anchor = f"#L{f.line}" if f.line else ""
        return f"{self.repo_url}/blob/{sha}/{f.file}{anchor}"

    def log(self, f: Finding) -> str | None:
        for o in f.commit.observations:
            if o.failed and o.run_id is not None:
                url = self.jobs.get((o.run_id, o.attempt, f.context.job))
                if url:
                    return url
        return None


def evidence(f: Finding, links: Links) -> str:
    """The finding's evidence with its runs linked (``#163``) and the failing job's log."""
    text = _RUN.sub(lambda m: links.run(int(m.group(1))), prose(f.evidence, 700))
    log = links.log(f)
    return f"{text} ([log]({log}))" if log else text


def history_line(f: Finding, window_days: int) -> str:
    """``✓✓✗✓ · failed 2 of 14 runs in the last 30 days · flaky since 2026-11-03``."""
    judged = f.history
    parts = [f.recent] if f.recent else []
    parts.append(f"failed {judged.failed_runs} of {judged.runs} runs in the last {window_days} days")
    if f.flaky_since:
        parts.append(f"flaky since {f.flaky_since}")
    return " · ".join(parts)


def headline(report: CommitReport, links: Links | None = None) -> str:
    findings = report.findings
    sha = (links or Links()).commit(report.head_sha)
    unjudged = f"{len(report.unjudged)} not judged (a name shared by several tests)"
    if not findings:
        return f"{len(report.unjudged)} failed on {sha}, {unjudged}" if report.unjudged else f"no test failed on {sha}"
    counts = Counter(f.word for f in findings)
    parts = [f"{counts[word]} {HEADLINE.get(word, word.value)}" for word in SHOWN_IN_ORDER if counts[word]]
    if report.unjudged:
        parts.append(unjudged)
    failures = "failure" if len(findings) == 1 else "failures"
    return f"{len(findings)} {failures} on {sha}: " + ", ".join(parts)


def shared_context(report: CommitReport) -> str | None:
    """The context every finding shares, said once above the table; None when they differ."""
    shown = {f.context.display() for f in report.findings}
    return shown.pop() if len(shown) == 1 else None


def table(report: CommitReport, links: Links, *, advice: bool, budget: int) -> list[str]:
    """One row per finding: the test (linked to its line), its word, its evidence and history, and with
    ``advice`` what to do; the context above the table when shared, else in each row."""
    shared = shared_context(report)
    rows = [f"Context: {code(shared, 300)}", ""] if shared else []
    rows += [
        "| test | verdict | evidence |" + (" what to do |" if advice else ""),
        "|---|---|---|" + ("---|" if advice else ""),
    ]
    used = sum(len(r) + 1 for r in rows)
    window = report.thresholds.window_days
    for index, f in enumerate(report.findings):
        source = links.line(f, report.head_sha)
        test = code(f.display or f.test_id, 300) + (f" ([source]({source}))" if source else "")
        detail = f"{evidence(f, links)}<br>{history_line(f, window)}"
        if not shared:
            detail += f"<br>{code(f.context.display(), 200)}"
        cells = [test, f"**{f.word.value}**", detail]
        if advice:
            cells.append(ADVICE[f.advice])
        row = "| " + " | ".join(cells) + " |"
        if used + len(row) + 200 > budget:
            rows.append(f"\n…and {len(report.findings) - index} more, left out to stay within GitHub's limit.")
            break
        rows.append(row)
        used += len(row) + 1
    return rows


def money(value: float) -> str:
    """To the cent, halves rounded up as the figure is written (2.675 → 2.68), and never a rounded-away
    zero: below a cent it says so."""
    if 0 < value < 0.005:
        return "< 0.01"
    return str(Decimal(repr(value)).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP))


def cost_lines(report: CommitReport) -> list[str]:
    lines = []
    rates, window = report.rates, report.thresholds.window_days
    for f in report.findings:
        if f.word is not Word.FLAKY or not f.cost.events:
            continue
        c = f.cost
        compute = (
            f"{money(c.compute)} for {c.minutes(2)} of reruns at {rates.compute_per_minute:g} {rates.currency}/min"
            if c.compute_known
            else "rerun compute unknown: the reports give no time"
        )
        line = (
            f"{code(f.display or f.name, 200)} flaked on {c.events} commit{'s' if c.events != 1 else ''} in the last "
            f"{window} days: {money(c.total)} {rates.currency} so far ({money(c.developer)} for "
            f"{rates.developer_minutes_per_event:g} developer minutes per flaky event at "
            f"{rates.developer_per_minute:.2f} {rates.currency}/min, {compute})."
        )
        if f.measured is not None:
            m = f.measured
            parts = []
            if m.rerun_minutes is not None:
                parts.append(
                    f"its share of the rerun's jobs, {m.rerun_minutes:.1f} minutes "
                    f"({money(m.compute(rates))} {rates.currency}, from the jobs API)"
                )
            if m.wait_minutes is not None:
                parts.append(f"a {m.wait_minutes:.0f}-minute wait for it")
            if parts:
                line += f" Measured here: {' and '.join(parts)}."
        lines.append(line)
    return lines


def totals(report: CommitReport, skipped: int, seconds: float) -> str:
    """Tests, failed, skipped, duration and reports read, for the check run's summary."""
    minutes = f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"
    reports = "report" if report.reports == 1 else "reports"
    return (
        f"{report.tests_seen} tests in {report.reports} {reports}: {len(report.findings)} failed, {skipped} skipped; "
        f"{minutes} of test time."
    )


def failures(report: CommitReport, *, budget: int = 20_000) -> list[str]:
    """Each failing test's failure text, collapsed, within a budget; the words that need one first."""
    parts: list[str] = []
    used = 0
    for f in report.findings:
        if not f.details or f.word is Word.FLAKY:
            continue
        piece = "\n".join(
            [
                f"<details><summary>Failure of <code>{html.escape(truncate(f.display or f.test_id, 200))}</code>"
                f"</summary>",
                "",
                block(f.details),
                "</details>",
            ]
        )
        if used + len(piece) > budget:
            parts.append("…more failures are in the check run's annotations.")
            break
        parts.append(piece)
        used += len(piece)
    return parts
