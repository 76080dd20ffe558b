"""The bodies Flaketally sends to GitHub: the check run's output and annotations, and the PR comment.

Every outside text (test names, messages, file paths) goes through ``bot.render.markdown`` so it stays inert,
and every body is cut to GitHub's limits with a line saying how much was left out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

from bot.core.baseline import SHOWN_IN_ORDER, Word
from bot.core.findings import Advice, CommitReport, Finding, decide
from bot.core.verdicts import short
from bot.github.limits import MAX_COMMENT, MAX_OUTPUT_TEXT
from bot.github.models import AnnotationLevel, CheckConclusion
from bot.github.payloads import Annotation, CheckOutput
from bot.render.markdown import code, neutralise, plain, truncate

MARKER = "<!-- flaketally:comment -->"
CHECK_NAME = "Flaketally"
MAX_ANNOTATION_MESSAGE = 4_000  # ours, well under GitHub's MAX_ANNOTATION_BYTES: a developer reads it inline

_ADVICE = {
    Advice.NOT_YOUR_CHANGE: "Not your change: it passed on a rerun of the same code; no need to touch it here.",
    Advice.LOOK_AT_CHANGE: "Look at your change: it failed on every attempt of this commit.",
    Advice.KNOWN_BROKEN: "Known broken before this change too: not caused by it.",
    Advice.RERUN: "Rerun the failed jobs: one failure cannot tell a flake from a real failure.",
    Advice.KNOWN_FLAKY: "Rerun it before you change code for it: it is known flaky.",
    Advice.BROKEN_ON_BRANCH: "Not your change: it fails on the default branch too.",
    Advice.NEW_FAILURE: "Look at your change: this test passed before it.",
}


def _headline(report: CommitReport) -> str:
    findings = report.findings
    sha = short(report.head_sha)
    unjudged = f"{len(report.unjudged)} failed but not judged (a name shared by several tests)"
    if not findings:
        return f"{unjudged} on {sha}" if report.unjudged else f"no test failed on {sha}"
    counts = Counter(f.word for f in findings)
    parts = [f"{counts[word]} {word.value}" for word in SHOWN_IN_ORDER if counts[word]]
    if report.unjudged:
        parts.append(unjudged)
    tests = "test" if len(findings) == 1 else "tests"
    return f"{len(findings)} {tests} failed on {sha}: " + ", ".join(parts)


def _rows(report: CommitReport, *, advice: bool, budget: int) -> list[str]:
    header = "| test | verdict | evidence | what to do |" if advice else "| test | verdict | evidence |"
    rows = [header, "|---|---|---|---|" if advice else "|---|---|---|"]
    used = sum(len(r) + 1 for r in rows)
    for index, f in enumerate(report.findings):
        cells = [code(f.test_id), f"**{f.word.value}**", plain(f"{f.evidence}; {f.context.display()}")]
        if advice:
            cells.append(plain(_ADVICE[f.advice]))
        row = "| " + " | ".join(cells) + " |"
        if used + len(row) + 200 > budget:
            rows.append(f"\n…and {len(report.findings) - index} more, left out to stay within GitHub's limit.")
            break
        rows.append(row)
        used += len(row) + 1
    return rows


def _costs(report: CommitReport) -> list[str]:
    lines = []
    rates = report.rates
    for f in report.findings:
        if f.word is Word.FLAKY and f.cost.events:
            c = f.cost
            line = (
                f"{code(f.name, 120)} flaked on {c.events} commit{'s' if c.events != 1 else ''} in the window: "
                f"{c.total:.2f} {rates.currency} so far ({rates.developer_minutes_per_event:g} developer minutes per "
                f"event at {rates.developer_per_minute:.2f} {rates.currency}/min, plus "
                f"{c.wasted_compute_minutes:.1f} rerun minutes at {rates.compute_per_minute:g} {rates.currency}/min)."
            )
            if f.measured is not None:
                m = f.measured
                wait = f" and a {m.wait_minutes:.0f}-minute wait for it" if m.wait_minutes is not None else ""
                line += (
                    f" Measured here: its share of the rerun's jobs, {m.rerun_minutes:.1f} minutes "
                    f"({m.compute(rates):.3f} {rates.currency}, from the jobs API){wait}."
                )
            lines.append(line)
    return lines


def _known(report: CommitReport) -> list[str]:
    return ["> " + f.known.sentence(code(f.test_id)) for f in report.findings if f.known and f.word is Word.KNOWN_FLAKY]


def _ended(report: CommitReport) -> list[str]:
    return [
        f"{code(test)} ({plain(context, 100)}) is no longer flaky: it has not both passed and failed on the same "
        f"code in the last 7 days, and its history rules flakiness out ({plain(evidence, 300)})."
        for test, context, evidence in report.no_longer_flaky
    ]


def _how(report: CommitReport) -> list[str]:
    return [
        "<details><summary>How Flaketally decides</summary>",
        "",
        "Same code = same commit and context (workflow, job with its matrix values, runner). A pass and a failure "
        "on the same code is flaky; a failure on every attempt (at least two) is failing; a single failure stays "
        f"undetermined until a rerun (single-fail policy: {report.policy.value}). Rates: "
        f"{plain(report.rates.describe())}.",
        "</details>",
    ]


def _fit(parts: Sequence[str], limit: int) -> str:
    body = "\n".join(parts)
    return body if len(body) <= limit else truncate(body, limit - 60) + "\n\n…cut to stay within GitHub's limit."


def comment_body(report: CommitReport) -> str:
    """The PR comment: headline, one row per failing test with its evidence and what to do, the cost of
    each flaky test, known-flaky and no-longer-flaky notices, and how the verdicts are made."""
    parts = [MARKER, f"### Flaketally · {_headline(report)}", ""]
    if report.findings:
        parts += [*_rows(report, advice=True, budget=MAX_COMMENT // 2), ""]
    for section in (_costs(report), _known(report), _ended(report)):
        if section:
            parts += [*section, ""]
    if report.problems:
        parts += ["Not judged: " + "; ".join(plain(p, 300) for p in report.problems[:10]), ""]
    parts += _how(report)
    return _fit(parts, MAX_COMMENT)


def cleared_body(report: CommitReport) -> str:
    """The comment edited in place when the failures it reported are gone."""
    parts = [
        MARKER,
        f"### Flaketally · {_headline(report)}",
        "",
        f"The failures reported here earlier are gone: no test failed on {short(report.head_sha)}.",
        "",
        *_how(report),
    ]
    return _fit(parts, MAX_COMMENT)


def _annotation(f: Finding, workflow_path: str) -> Annotation:
    level: AnnotationLevel = "warning" if f.word is Word.FLAKY else ("failure" if f.real else "notice")
    at_file = bool(f.file) and not str(f.file).startswith(("/", ".."))
    path = str(f.file) if at_file else workflow_path
    line = f.line if at_file and f.line else 1
    message = f"{f.word.value}: {f.evidence}. {_ADVICE[f.advice]}"
    if f.message:
        message += f"\n{f.message}"
    if f.known and f.word is Word.KNOWN_FLAKY:
        message += "\n" + f.known.sentence(f.test_id)
    return Annotation.bounded(
        path=truncate(neutralise(path), 1000),
        start_line=line,
        end_line=line,
        level=level,
        message=truncate(neutralise(message, keep_newlines=True), MAX_ANNOTATION_MESSAGE),
        title=neutralise(f"{f.test_id} · {f.context.display()}"),
    )


def check_output(
    report: CommitReport,
    workflow_path: str = ".github",
    *,
    config_lines: Sequence[str] = (),
    config_problems: Sequence[str] = (),
    rerun_lines: Sequence[str] = (),
) -> tuple[CheckConclusion, CheckOutput]:
    """The check run's conclusion and output: the reason first, then a table; one annotation per failing
    test, at its file and line when the report gives them, otherwise at the workflow file. The
    configuration in force closes the text, collapsed; what was wrong in it is said in the summary."""
    gate = decide(report, lambda name: code(name, 100))
    summary = [gate.reason, ""]
    if report.findings:
        summary += _rows(report, advice=False, budget=MAX_OUTPUT_TEXT // 2)
    if rerun_lines:
        summary += ["", *(f"Automatic rerun: {plain(line, 300)}" for line in rerun_lines[:10])]
    if report.problems:
        summary += ["", "Not judged: " + "; ".join(plain(p, 300) for p in report.problems[:20])]
    if config_problems:
        summary += ["", "Configuration: " + "; ".join(plain(p, 300) for p in config_problems[:20])]
    text = [*_costs(report), *_known(report), *_ended(report), "", *_how(report)]
    if config_lines:
        text += ["", "<details><summary>Configuration in force</summary>", ""]
        text += [code(line, 300) + "<br>" for line in config_lines]
        text += ["</details>"]
    output = CheckOutput.bounded(
        title=neutralise(_headline(report)),
        summary=_fit(summary, MAX_OUTPUT_TEXT),
        text=_fit(text, MAX_OUTPUT_TEXT),
        annotations=[_annotation(f, workflow_path) for f in report.findings],
    )
    return gate.conclusion.value, output


def failed_output(reason: str) -> CheckOutput:
    """The output of a check run whose job finally failed: it says so, instead of staying in progress."""
    return CheckOutput.bounded(
        title="Flaketally could not judge this commit",
        summary=f"Neutral: Flaketally could not finish ({neutralise(reason)[:500]}); the failures, if any, were "
        "not judged. Re-run this check to try again.",
    )
