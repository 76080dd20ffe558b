"""Done-when 2: on the reports of 14 real runner set-ups, every test's history verdict is one its
reports can support (``accept`` in truth.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.core.analysis import Analysis
from bot.core.verdicts import TestVerdict
from bot.local.analyze import analyze
from bot.store import Store

CORPUS = Path(__file__).parent / "fixtures" / "real-runners"
TRUTH = json.loads((CORPUS / "truth.json").read_text())
RUNNERS = sorted(TRUTH["runners"])


@pytest.fixture(scope="module")
def analyses(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Analysis]:
    store = Store.open(f"sqlite:///{tmp_path_factory.mktemp('runners') / 'store.db'}")
    try:
        return {runner: analyze(store, [str(CORPUS / runner)], repo=runner) for runner in RUNNERS}
    finally:
        store.close()


@pytest.mark.parametrize("runner", RUNNERS)
def test_every_verdict_is_one_the_reports_support(runner: str, analyses: dict[str, Analysis]) -> None:
    analysis = analyses[runner]
    truth = TRUTH["runners"][runner]
    judged = {t.history.test_id: t for t in analysis.tests}
    assert analysis.refused == 0 and not analysis.warnings
    assert set(judged) == {t["id"] for t in truth["tests"]}
    for test in truth["tests"]:
        got = judged[test["id"]].judgement
        if test["label"] == "skipped":  # the truth accepts stable or insufficient data; we say what it is
            assert got.verdict is TestVerdict.SKIPPED and got.evidence.startswith("skipped on all"), got.evidence
            continue
        assert got.verdict.value in test["accept"], (test["id"], got.evidence)
        if test["observed"]["same_commit_pass_and_fail"]:
            assert got.verdict is TestVerdict.FLAKY
            assert len(got.proof_commits) >= 1
        if test["label"] == "regression":
            assert got.first_failing_commit == truth["regress_at"]["commit"]
            assert truth["regress_at"]["commit"][:7] in got.evidence
        if test["label"] in ("stable", "skipped"):
            assert got.verdict is not TestVerdict.FLAKY


def test_pytest_rerunfailures_always_failing_test_is_broken_not_flaky(analyses: dict[str, Analysis]) -> None:
    """pytest-rerunfailures writes each rerun as an empty testcase before the final failure: read
    naively, attempt 1 'passed' and the test looks flaky."""
    judged = {t.history.test_id: t for t in analyses["pytest-rerunfailures"].tests}
    broken = judged["tests.test_planted::test_always_fail"]
    assert broken.judgement.verdict is TestVerdict.BROKEN
    # three attempts a report (--reruns 2), every one failed
    assert all(c.verdict.value == "failing" and c.passed == 0 and c.failed == c.attempts for c in broken.commits)
    assert all(c.attempts in (3, 6) for c in broken.commits)


def test_runner_is_part_of_the_context(analyses: dict[str, Analysis]) -> None:
    contexts = {t.context.job for t in analyses["vitest"].tests}
    assert contexts == {"vitest"}
