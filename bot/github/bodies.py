"""The bodies Flaketally sends to GitHub: the check run's output and annotations, and the PR comment.

The pieces come from ``bot.render.findings``; every outside text (test names, messages, file paths, branch
and job names) stays inert (``bot.render.markdown``, ``prose``) while Flaketally's own sentences are plain,
and every body is cut to GitHub's limits with a line saying how much was left out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from bot.core.baseline import Word
from bot.core.findings import CommitReport, Conclusion, Finding, decide
from bot.github.limits import MAX_COMMENT, MAX_OUTPUT_TEXT
from bot.github.models import AnnotationLevel, CheckConclusion
from bot.github.payloads import Annotation, CheckAction, CheckOutput
from bot.github.permissions import FEATURES, RERUNS
from bot.github.permissions import QUARANTINE as QUARANTINE_FEATURE
from bot.render.findings import (
    ADVICE,
    Links,
    cost_lines,
    failures,
    headline,
    history_line,
    prose,
    table,
    totals,
)
from bot.render.markdown import code, neutralise, truncate

MARKER = "<!-- flaketally:comment -->"
CHECK_NAME = "Flaketally"
MAX_ANNOTATION_MESSAGE = 4_000  # ours, well under GitHub's MAX_ANNOTATION_BYTES: a developer reads it inline
NO_LINKS = Links()


def _known(report: CommitReport) -> list[str]:
    return [
        "> " + f.known.sentence(code(f.display or f.test_id))
        for f in report.findings
        if f.known and f.word is Word.KNOWN_FLAKY
    ]


def _ended(report: CommitReport) -> list[str]:
    return [
        f"{code(test)} ({code(context, 200)}) is no longer flaky: it has not both passed and failed on the same "
        f"code in the last 7 days, and its history rules flakiness out ({prose(evidence, 300)})."
        for test, context, evidence in report.no_longer_flaky
    ]


def _leaving(report: CommitReport) -> list[str]:
    lines = [
        f"{code(test)} ({code(context, 200)}) is due to leave the quarantine: {prose(evidence, 400)}."
        for test, context, evidence in report.leaving[:10]
    ]
    if lines and report.leaving_note:
        lines.append(prose(report.leaving_note, 300) + ".")
    return lines


def _how(report: CommitReport) -> list[str]:
    """The explainer, collapsed, where a verdict needs it: a single failure left undetermined."""
    if not any(f.word is Word.UNDETERMINED for f in report.findings):
        return []
    return [
        "<details><summary>How Flaketally decides</summary>",
        "",
        "Same code = same commit and context (workflow, job with its matrix values, runner). A pass and a failure "
        "on the same code is flaky; a failure on every attempt (at least two) is failing; a single failure stays "
        f"undetermined until a rerun (single-fail policy: {report.policy.value}). Rates: "
        f"{prose(report.rates.describe())}.",
        "</details>",
    ]


def _fit(parts: Sequence[str], limit: int) -> str:
    body = "\n".join(parts)
    return body if len(body) <= limit else truncate(body, limit - 60) + "\n\n…cut to stay within GitHub's limit."


def comment_body(report: CommitReport, links: Links = NO_LINKS) -> str:
    """The PR comment: headline, the shared context, one row per failing test with its evidence, history
    and what to do, the cost of each flaky test, known-flaky and no-longer-flaky notices."""
    parts = [MARKER, f"### Flaketally · {headline(report, links)}", ""]
    if report.findings:
        parts += [*table(report, links, advice=True, budget=MAX_COMMENT // 2), ""]
    for section in (failures(report), cost_lines(report), _known(report), _ended(report), _leaving(report)):
        if section:
            parts += [*section, ""]
    if report.problems:
        parts += ["Not judged: " + "; ".join(prose(p, 300) for p in report.problems[:10]), ""]
    parts += _how(report)
    return _fit(parts, MAX_COMMENT).rstrip("\n")


def cleared_body(report: CommitReport, links: Links = NO_LINKS) -> str:
    """The comment edited in place when the failures it reported are gone."""
    parts = [
        MARKER,
        f"### Flaketally · {headline(report, links)}",
        "",
        f"The failures reported here earlier are gone: no test failed on {links.commit(report.head_sha)}.",
    ]
    return _fit(parts, MAX_COMMENT)


def _annotation(f: Finding, workflow_path: str, window_days: int) -> Annotation:
    level: AnnotationLevel = "warning" if f.word is Word.FLAKY else ("failure" if f.real else "notice")
    at_file = bool(f.file) and not str(f.file).startswith(("/", ".."))
    path = str(f.file) if at_file else workflow_path
    line = f.line if at_file and f.line else 1
    message = f"{f.word.value}: {f.evidence}. {ADVICE[f.advice]}\n{history_line(f, window_days)}"
    if f.message:
        message += f"\n{f.message}"
    if f.known and f.word is Word.KNOWN_FLAKY:
        message += "\n" + f.known.sentence(f.display or f.test_id)
    return Annotation.bounded(
        path=truncate(neutralise(path), 1000),
        start_line=line,
        end_line=line,
        level=level,
        message=truncate(neutralise(message, keep_newlines=True), MAX_ANNOTATION_MESSAGE),
        title=neutralise(f"{f.display or f.test_id} · {f.context.display()}"),
        raw_details=neutralise(f.details, keep_newlines=True) if f.details else None,
    )


RERUN, QUARANTINE = "rerun", "quarantine"  # the identifiers of the check run's buttons
_BUTTONS = {
    RERUN: CheckAction("Re-run failed jobs", "Ask GitHub to run the failed jobs again", RERUN),
    QUARANTINE: CheckAction("Quarantine", "Open a PR quarantining the flaky tests", QUARANTINE),
}
# what each button needs the installation to have granted (the pull request: a branch, a commit, the PR)
# the permissions each button needs written (``bot.github.permissions``, the one table of them)
NEEDS = {button: tuple(FEATURES[feature]) for button, feature in ((RERUN, RERUNS), (QUARANTINE, QUARANTINE_FEATURE))}


def buttons(
    report: CommitReport, permissions: Mapping[str, str] | None, conclusion: Conclusion
) -> tuple[list[CheckAction], list[str]]:
    """The check run's buttons: "Re-run failed jobs" when it failed or is neutral for failures, "Quarantine"
    when it names flaky tests not quarantined yet; a button whose permission the installation has not
    granted is left out, with a line saying which one (``permissions`` None: not known, shown)."""
    wanted = []
    if report.findings and conclusion in (Conclusion.FAILURE, Conclusion.NEUTRAL):
        wanted.append(RERUN)
    if any(f.word in (Word.FLAKY, Word.KNOWN_FLAKY) for f in report.findings):
        wanted.append(QUARANTINE)
    shown, missing = [], []
    for identifier in wanted:
        lacking = [p for p in NEEDS[identifier] if permissions is not None and permissions.get(p) != "write"]
        if lacking:
            granted = ", ".join(f"`{p}: write`" for p in lacking)
            missing.append(
                f'No "{_BUTTONS[identifier].label}" button: it needs {granted}, which this installation '
                "has not granted (the App's settings, Permissions)."
            )
        else:
            shown.append(_BUTTONS[identifier])
    return shown, missing


def check_output(
    report: CommitReport,
    workflow_path: str = ".github",
    *,
    links: Links = NO_LINKS,
    config_lines: Sequence[str] = (),
    config_problems: Sequence[str] = (),
    rerun_lines: Sequence[str] = (),
    action_lines: Sequence[str] = (),
    permissions: Mapping[str, str] | None = None,
) -> tuple[CheckConclusion, CheckOutput]:
    """The check run's conclusion and output: the reason first, the totals, then a table; one annotation
    per failing test, at its file and line when the report gives them, otherwise at the workflow file. The
    configuration in force closes the text, collapsed; what was wrong in it is said in the summary."""
    gate = decide(report, lambda name: code(name, 200))
    summary = [gate.reason, "", totals(report, report.skipped, report.seconds), ""]
    if report.findings:
        summary += table(report, links, advice=False, budget=MAX_OUTPUT_TEXT // 2)
    if rerun_lines:
        summary += ["", *(f"Automatic rerun: {prose(line, 300)}" for line in rerun_lines[:10])]
    if action_lines:
        summary += ["", *(prose(line, 300) for line in action_lines[-10:])]
    shown, missing = buttons(report, permissions, gate.conclusion)
    if missing:
        summary += ["", *missing]
    if report.problems:
        summary += ["", "Not judged: " + "; ".join(prose(p, 300) for p in report.problems[:20])]
    if config_problems:
        summary += ["", "Configuration: " + "; ".join(prose(p, 300) for p in config_problems[:20])]
    text = [*cost_lines(report), *_known(report), *_ended(report), *_leaving(report)]
    if config_lines:
        text += ["", "<details><summary>Configuration in force</summary>", ""]
        text += [code(line, 300) + "<br>" for line in config_lines]
        text += ["</details>"]
    output = CheckOutput.bounded(
        title=neutralise(headline(report)),
        summary=_fit(summary, MAX_OUTPUT_TEXT),
        text=_fit(text, MAX_OUTPUT_TEXT),
        annotations=[_annotation(f, workflow_path, report.thresholds.window_days) for f in report.findings],
        actions=shown,
    )
    return gate.conclusion.value, output


def failed_output(reason: str) -> CheckOutput:
    """The output of a check run whose job finally failed: it says so, instead of staying in progress."""
    return CheckOutput.bounded(
        title="Flaketally could not judge this commit",
        summary=f"Neutral: Flaketally could not finish ({neutralise(reason)[:500]}); the failures, if any, were "
        "not judged. Re-run this check to try again.",
    )
