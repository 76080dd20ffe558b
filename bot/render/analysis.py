"""The three faces of ``flaketally analyze``: text (one record a line), Markdown and versioned JSON."""

from __future__ import annotations

import json
from typing import Any

from bot.core.analysis import Analysis
from bot.core.cost import Cost
from bot.core.display import display_id, source_location
from bot.core.judge import TestAnalysis
from bot.core.verdicts import CommitJudgement, CommitVerdict, TestVerdict
from bot.render.markdown import code, plain

JSON_VERSION = 1


def _money(value: float, currency: str) -> str:
    return f"{value:.4f} {currency}"


def _compute(cost: Cost, currency: str) -> str:
    return _money(cost.compute, currency) if cost.compute_known else "unknown"


def _tab(value: str) -> str:
    return value.replace("\t", " ").replace("\n", " ").replace("\r", " ")


def to_text(analysis: Analysis) -> str:
    """One record per line, tab-separated, sorted: diffable."""
    cur = analysis.rates.currency
    lines = [
        f"policy\tsingle-fail={analysis.policy.value}",
        f"rates\t{analysis.rates.describe()}",
        f"reports\tread={analysis.usable}\trefused={analysis.refused}",
    ]
    for t in analysis.tests:
        ctx = t.context.display()
        j = t.judgement
        lines.append(
            f"test\t{j.verdict.value}\t{_tab(t.history.test_id)}\t{ctx}\tscore={j.score:.3f}\t"
            f"lower_bound={j.lower_bound:.3f}\t{_tab(j.evidence)}"
        )
        for c in t.commits:
            if c.verdict is not CommitVerdict.PASSING:
                lines.append(
                    f"commit\t{c.verdict.value}\t{_tab(t.history.test_id)}\t{ctx}\t{c.commit}\t"
                    f"attempts={c.attempts}\tpassed={c.passed}\tfailed={c.failed}\t{_tab(c.evidence)}"
                )
    for rank, t in enumerate(analysis.ranking(), 1):
        cost = t.cost
        lines.append(
            f"cost\t{rank}\t{_tab(t.history.test_id)}\t{t.context.display()}\tevents={cost.events}\t"
            f"wasted_compute={cost.minutes()}\tdeveloper={cost.developer_minutes:.1f} min\t"
            f"compute={_compute(cost, cur)}\tdeveloper_cost={_money(cost.developer, cur)}\t"
            f"total={_money(cost.total, cur)}"
        )
    lines.append(f"total\t{_money(analysis.total_cost, cur)}")
    lines.extend(f"warning\t{_tab(w.path)}\t{_tab(w.message)}" for w in analysis.warnings)
    return "\n".join(lines) + "\n"


def _commit_json(c: CommitJudgement) -> dict[str, Any]:
    return {
        "sha": c.commit,
        "verdict": c.verdict.value,
        "attempts": c.attempts,
        "passed": c.passed,
        "failed": c.failed,
        "evidence": c.evidence,
    }


def _failure(t: TestAnalysis) -> tuple[str | None, str | None, int | None]:
    """The latest failure's message, and the file and line: the report's, else its traceback's."""
    h = t.history
    # ``commits``: the ones it failed on, none when it never failed
    latest = next((o for o in reversed(h.observations) if o.failed), None) if t.commits else None
    file, line = source_location(h.classname, h.file, h.line, latest.details if latest else "")
    return (latest.message or None) if latest else None, file, line


def _test_json(t: TestAnalysis) -> dict[str, Any]:
    h, j = t.history, t.judgement
    message, file, line = _failure(t)
    return {
        "classname": h.classname,
        "name": h.name,
        "id": h.test_id,
        "display": display_id(h.classname, h.name, h.file),
        "family": h.family,
        "file": file,
        "line": line,
        "message": message,
        "context": {"key": h.context, "display": t.context.display()},
        "verdict": j.verdict.value,
        "score": round(j.score, 6),
        "lower_bound": round(j.lower_bound, 6),
        "observations": j.observations,
        "runs": j.runs,
        "failed_runs": j.failed_runs,
        "first_failing_commit": j.first_failing_commit,
        "commits": [_commit_json(c) for c in t.commits],
        "passing_commits": t.passing_commits,
        "cost": t.cost.as_dict(),
        "evidence": j.evidence,
    }


def to_json(analysis: Analysis) -> str:
    r = analysis.rates
    document = {
        "flaketally": "analysis",
        "version": JSON_VERSION,
        "policy": {"single_fail": analysis.policy.value},
        "rates": {
            "compute_per_minute": r.compute_per_minute,
            "developer_per_minute": r.developer_per_minute,
            "developer_minutes_per_event": r.developer_minutes_per_event,
        },
        "currency": r.currency,
        "reports": {"read": analysis.usable, "refused": analysis.refused},
        "tests": [_test_json(t) for t in analysis.tests],
        "ranking": [
            {"rank": i, "id": t.history.test_id, "context": t.history.context, "total": round(t.cost.total, 6)}
            for i, t in enumerate(analysis.ranking(), 1)
        ],
        "total_cost": round(analysis.total_cost, 6),
        "warnings": [{"path": w.path, "message": w.message} for w in analysis.warnings],
    }
    # compact: json's C encoder only runs without indent, and a history's document is large
    return json.dumps(document, ensure_ascii=False, separators=(",", ":")) + "\n"


def _per_commit(t: TestAnalysis) -> str:
    """``flaky on 2 (a1b2c3, d4e5f6), failing on 1 (…)``: the commits behind a test's verdict."""
    parts = []
    for verdict in (CommitVerdict.FAILING, CommitVerdict.UNDETERMINED, CommitVerdict.FLAKY):
        shas = [c.commit[:7] for c in t.commits if c.verdict is verdict]
        if shas:
            named = ", ".join(shas[:3]) + (", …" if len(shas) > 3 else "")
            parts.append(f"{verdict.value} on {len(shas)} ({named})")
    return "; ".join(parts) or "passing on every commit"


def to_markdown(analysis: Analysis) -> str:
    """What a reader wants first: the tests that need attention, then what the flakes cost."""
    cur = analysis.rates.currency
    findings = [t for t in analysis.tests if t.is_finding]
    counts = {v: sum(1 for t in findings if t.judgement.verdict is v) for v in TestVerdict}
    out = [
        f"### Flaketally · {len(analysis.tests)} tests in {analysis.usable} reports: "
        f"{counts[TestVerdict.FLAKY]} flaky, {counts[TestVerdict.BROKEN]} broken, "
        f"{counts[TestVerdict.REGRESSION]} regressed",
        "",
    ]
    if findings:
        out += ["| test | context | verdict | commits | evidence |", "|---|---|---|---|---|"]
        out += [
            f"| {code(t.history.test_id)} | {plain(t.context.display(), 100)} | **{t.judgement.verdict.value}** | "
            f"{plain(_per_commit(t))} | {plain(t.judgement.evidence)} |"
            for t in findings
        ]
        out.append("")
    else:
        out += ["No test failed.", ""]
    ranking = analysis.ranking()
    if ranking:
        out += [
            "#### What the flakes cost",
            "",
            "| rank | test | events | wasted compute | developer time | compute | developer | total |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for rank, t in enumerate(ranking, 1):
            c = t.cost
            out.append(
                f"| {rank} | {code(t.history.test_id)} | {c.events} | {c.minutes()} | "
                f"{c.developer_minutes:.1f} min | {_compute(c, cur)} | {_money(c.developer, cur)} | "
                f"{_money(c.total, cur)} |"
            )
        out += ["", f"Total flaky cost: **{_money(analysis.total_cost, cur)}** ({analysis.rates.describe()}).", ""]
    out += [
        "<details><summary>How Flaketally decides</summary>",
        "",
        "Same code = same commit and context. A pass and a failure on the same code is flaky; failures on "
        "every attempt (at least two) are failing; a single failure stays undetermined until a rerun "
        f"(single-fail policy: {analysis.policy.value}). Over a test's history, a pass and a failure on one "
        "commit proves it flaky; otherwise a recency-weighted flip score (same-commit flips 1, cross-commit 1/3) "
        "must clear 0.10 at its Wilson lower bound; a test failing every time is broken, one failing from one "
        "commit on is a regression.",
        "</details>",
    ]
    if analysis.warnings:
        out += ["", "#### Warnings", ""]
        out += [f"- {code(w.path, 200)}: {plain(w.message)}" for w in analysis.warnings]
    return "\n".join(out) + "\n"


RENDERERS = {"text": to_text, "markdown": to_markdown, "json": to_json}
