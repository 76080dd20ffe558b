"""``flaketally explain``: the judge's rules in order, the one that decided, every commit behind it."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from bot.cli import main
from bot.core.verdicts import TestVerdict
from bot.local.analyze import analyze
from bot.local.explain import NotFound, explain, find

FIXTURES = Path(__file__).parent / "fixtures"
SAMPLES = Path(__file__).parent.parent / "samples"
HISTORIES = [SAMPLES / "pytest-rerunfailures", SAMPLES / "flakeledger", *sorted((FIXTURES / "real-runners").iterdir())]


@pytest.mark.parametrize("history", [h for h in HISTORIES if h.is_dir()], ids=lambda p: p.name)
def test_the_deciding_rule_gives_the_verdict_the_judge_gave(history: Path) -> None:
    analysis = analyze(None, [str(history)])
    assert analysis.tests
    for t in analysis.tests:
        e = explain(t)
        assert e.deciding is not None
        assert e.deciding.verdict is t.judgement.verdict, (t.history.test_id, e.rules)
        # every rule before the deciding one was asked and did not hold
        before = e.rules[: e.rules.index(e.deciding)]
        assert not any(r.holds for r in before)


def test_every_verdict_is_reached_by_some_test() -> None:
    analysis = analyze(None, [str(SAMPLES)])
    decided = {explain(t).deciding.verdict for t in analysis.tests}  # type: ignore[union-attr]
    assert {TestVerdict.FLAKY, TestVerdict.BROKEN, TestVerdict.REGRESSION, TestVerdict.STABLE} <= decided


def test_find_by_display_id_by_its_end_or_a_part_and_ambiguity_is_named() -> None:
    tests = analyze(None, [str(SAMPLES)]).tests
    assert [t.history.name for t in find(tests, "tests/test_planted.py::test_flaky_p30")] == ["test_flaky_p30"]
    assert [t.history.name for t in find(tests, "test_flaky_p30")] == ["test_flaky_p30"]
    assert [t.history.name for t in find(tests, "regress")] == ["test_regress_at"]
    with pytest.raises(NotFound, match=r"(?s)2 tests answer to 'test_flaky'.*test_flaky_p05.*test_flaky_p30"):
        find(tests, "test_flaky")
    with pytest.raises(NotFound, match=re.escape("did you mean tests/test_planted.py::test_flaky_p30")):
        find(tests, "tests/test_planted.py::test_flaky_p3O")
    with pytest.raises(NotFound, match="in context 'default'"):
        find(tests, "test_flaky_p30", context="default")


def test_text_names_the_rules_the_score_and_every_commit(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["explain", "test_apply_coupon", str(SAMPLES / "flakeledger")])
    out = capsys.readouterr().out
    assert code == 1
    assert out.startswith("tests/payments/test_checkout.py::test_apply_coupon: flaky\n")
    assert "→ did it pass and fail on the same commit (same code)? yes, on 2 commits (a1b2c3, d4e5f6) ⇒ flaky" in out
    assert "· did it fail every run? failed 2 of 5 runs (not reached)" in out
    assert "95% Wilson lower bound 0.275" in out
    assert "  a1b2c3  flaky    attempt 1: failed, 0.81 s\n                   attempt 2: passed, 0.79 s\n" in out
    assert "latest failure (d4e5f6): TimeoutError: coupon service did not answer" in out


def test_json_carries_rules_and_attempts(capsys: pytest.CaptureFixture[str]) -> None:
    main(["explain", "test_regress_at", str(SAMPLES / "pytest-rerunfailures"), "--format", "json"])
    (doc,) = json.loads(capsys.readouterr().out)["tests"]
    assert doc["verdict"] == "regression" and doc["display"] == "tests/test_planted.py::test_regress_at"
    deciding = [r for r in doc["rules"] if r["decides"]]
    assert [r["verdict"] for r in deciding] == ["regression"]
    assert len(doc["commits"]) == 40 and all(c["attempts"] for c in doc["commits"])


def test_from_a_store_alone_and_usage_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "s.db")
    main(["analyze", str(SAMPLES / "flakeledger"), "--db", db])
    capsys.readouterr()
    assert main(["explain", "test_apply_coupon", "--db", db]) == 1
    assert capsys.readouterr().out.startswith("tests/payments/test_checkout.py::test_apply_coupon: flaky")
    assert main(["explain", "test_apply_coupon"]) == 2
    assert "give the reports to read" in capsys.readouterr().err
    assert main(["explain", "no_such_test", str(SAMPLES / "flakeledger")]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("flaketally: no test named 'no_such_test'")
