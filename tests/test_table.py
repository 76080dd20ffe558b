"""``flaketally analyze`` on a terminal: the tests that need attention, worst first, one table per context."""

from __future__ import annotations

import io
from pathlib import Path

from bot.core.analysis import Analysis
from bot.local.analyze import analyze
from bot.render.table import render

SAMPLES = Path(__file__).parent.parent / "samples"


def _table(analysis: Analysis, top: int | None = 20) -> str:
    out = io.StringIO()
    render(analysis, out, top=top, width=160)
    return out.getvalue()


def _rows(text: str) -> list[list[str]]:
    return [line.split() for line in text.splitlines() if line.strip()[:1].isdigit() and "::" in line]


def test_worst_first_regression_broken_then_flaky_by_cost() -> None:
    rows = _rows(_table(analyze(None, [str(SAMPLES)]), top=0))
    assert [r[0] for r in rows] == [str(i) for i in range(1, len(rows) + 1)]
    verdicts = [r[1] for r in rows]
    assert verdicts[:2] == ["regression", "broken"]
    assert verdicts.index("failing") > max(i for i, v in enumerate(verdicts) if v == "flaky")
    assert rows[0][2] == "tests/test_planted.py::test_regress_at"  # the id a person pastes into pytest
    # within one context the flaky tests are ranked by cost
    planted = [float(r[5]) for r in rows if r[1] == "flaky" and r[2].startswith("tests/test_planted.py")]
    assert len(planted) >= 3 and planted == sorted(planted, reverse=True)


def test_each_context_is_said_once_as_a_title() -> None:
    text = _table(analyze(None, [str(SAMPLES)]), top=0)
    assert text.count("pytest-rerunfailures · ubuntu-latest") == 1
    assert text.count("default context") == 1


def test_top_limits_the_rows_and_says_how_many_were_left_out() -> None:
    analysis = analyze(None, [str(SAMPLES)])
    text = _table(analysis, top=3)
    assert len(_rows(text)) == 3
    assert f"… {len(analysis.worst_first()) - 3} more: --top 0 shows all" in text
    assert "more:" not in _table(analysis, top=0)


def test_the_why_says_the_reason_in_a_few_words() -> None:
    text = _table(analyze(None, [str(SAMPLES / "pytest-rerunfailures")]), top=0)
    assert "fails since 43169d6" in text
    assert "failed all 50 runs" in text
    assert "flaky on 18/40 commits since 2026-12-01" in text
    assert "✗✗✗✗✗✗✗✗✗✗ 50/50" in text  # the last ten runs, then failed of all runs in the window


def test_no_finding_says_so(tmp_path: Path) -> None:
    report = tmp_path / "ok.xml"
    report.write_text('<testsuite commit="abc"><testcase classname="m" name="t"/></testsuite>')
    text = _table(analyze(None, [str(report)]))
    assert "No test failed." in text and "0 need attention" in text
