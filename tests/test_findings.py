"""The gate and the findings of one commit: plain data in, a conclusion with its reason out."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.core.cost import Rates
from bot.core.findings import Advice, Conclusion, commit_report
from bot.core.identity import ExecutionContext
from bot.core.observations import Observation, TestHistory
from bot.core.verdicts import CommitVerdict

NOW = datetime(2026, 12, 1, 12, tzinfo=UTC)
HEAD = "3484a3fb816e0859fd6e1cea078d76385ff50625"
CTX = ExecutionContext(workflow=".github/workflows/ci.yml", job="test (3.11)", os="ubuntu-latest").key()


def obs(commit: str, outcomes: str, attempt: int = 1, days_ago: float = 0.1) -> Observation:
    return Observation(
        0,
        commit,
        attempt,
        163,
        (NOW - timedelta(days=days_ago)).isoformat(),
        outcomes,
        0.8,
        "AssertionError: boom" if "F" in outcomes else "",
    )


def hist(name: str, *observations: Observation) -> TestHistory:
    return TestHistory(
        f"tests.mod::{name}", f"tests.mod::{name}", "tests.mod", name, "tests/test_mod.py", 12, CTX, list(observations)
    )


def report(*histories: TestHistory, previously: frozenset[tuple[str, str]] = frozenset()):  # type: ignore[no-untyped-def]
    return commit_report(
        "acme/widgets",
        HEAD,
        histories,
        policy=CommitVerdict.UNDETERMINED,
        rates=Rates(),
        now=NOW,
        previously_known=previously,
        tests_seen=10,
        reports=len(histories) or 1,
    )


def test_nothing_failed_is_success() -> None:
    r = report(hist("test_ok", obs(HEAD, "P")))
    assert r.findings == ()
    assert r.gate.conclusion is Conclusion.SUCCESS
    assert r.gate.reason == "Success: no test failed on 3484a3f (10 tests)."
    assert not r.has_something_to_say


def test_a_failure_that_passed_on_a_rerun_is_success() -> None:
    r = report(hist("test_apply_coupon", obs(HEAD, "F", 1), obs(HEAD, "P", 2)))
    (finding,) = r.findings
    assert finding.verdict is CommitVerdict.FLAKY and finding.advice is Advice.NOT_YOUR_CHANGE
    assert r.gate.conclusion is Conclusion.SUCCESS
    reason = "Success: the only failure, tests/test_mod.py::test_apply_coupon, passed on a rerun of the same commit."
    assert r.gate.reason == reason


def test_a_failure_on_every_attempt_is_failure() -> None:
    r = report(
        hist("test_pdf_header", obs(HEAD, "F", 1), obs(HEAD, "F", 2)),
        hist("test_apply_coupon", obs(HEAD, "F", 1), obs(HEAD, "P", 2)),
    )
    assert [f.verdict for f in r.findings] == [CommitVerdict.FAILING, CommitVerdict.FLAKY]
    assert r.gate.conclusion is Conclusion.FAILURE
    assert r.gate.reason == "Failure: tests/test_mod.py::test_pdf_header failed on every attempt of 3484a3f."


def test_a_single_failure_without_flaky_history_is_failure() -> None:
    r = report(hist("test_x", obs("old", "P", days_ago=2), obs(HEAD, "F")))
    (finding,) = r.findings
    assert finding.verdict is CommitVerdict.UNDETERMINED and finding.real and finding.advice is Advice.RERUN
    assert r.gate.conclusion is Conclusion.FAILURE


def test_a_single_failure_of_a_known_flaky_test_is_neutral() -> None:
    r = report(hist("test_catchup", obs("old", "F", 1, 2), obs("old", "P", 2, 2), obs(HEAD, "F")))
    (finding,) = r.findings
    assert finding.known is not None and not finding.real and finding.advice is Advice.KNOWN_FLAKY
    assert r.gate.conclusion is Conclusion.NEUTRAL
    assert r.gate.reason == "Neutral: tests/test_mod.py::test_catchup failed once and is known flaky; it was not rerun."
    assert ("tests.mod::test_catchup", CTX) in r.known_flaky_now


def test_no_longer_flaky_is_not_announced_while_the_history_contradicts_it() -> None:
    old = hist("test_gone", obs("old", "F", 1, 9), obs("old", "P", 2, 9), obs(HEAD, "P"))
    r = report(old, previously=frozenset({("tests.mod::test_gone", CTX)}))
    assert r.no_longer_flaky == ()  # the memory ended, but the same-code pair 9 days ago is in the history
    assert ("tests.mod::test_gone", CTX) in r.known_flaky_now  # still remembered, to be announced later
    assert report(old).no_longer_flaky == ()


def test_no_longer_flaky_is_announced_once_the_history_has_recovered() -> None:
    clean = [obs(f"c{i}", "P", 1, 10 - i * 0.1) for i in range(40)]
    gone = hist("test_gone", obs("old", "F", 1, 40), obs("old", "P", 2, 40), *clean, obs(HEAD, "P"))
    r = report(gone, previously=frozenset({("tests.mod::test_gone", CTX)}))
    ((test, context, evidence),) = r.no_longer_flaky
    assert (test, context) == ("tests.mod::test_gone", ".github/workflows/ci.yml · test (3.11) · ubuntu-latest")
    assert evidence.startswith("failed 0 of 41 runs on 41 commits")
    assert r.has_something_to_say
    assert ("tests.mod::test_gone", CTX) not in r.known_flaky_now  # forgotten: said once
    assert report(gone).no_longer_flaky == ()


def test_no_report_is_neutral() -> None:
    r = commit_report("acme/widgets", HEAD, [], policy=CommitVerdict.UNDETERMINED, rates=Rates(), now=NOW)
    assert r.gate.conclusion is Conclusion.NEUTRAL
    assert "no JUnit report" in r.gate.reason


def test_a_test_broken_before_the_change_says_so() -> None:
    before = [obs(f"c{i}", "F", days_ago=3) for i in range(6)]
    r = report(hist("test_broken", *before, obs(HEAD, "F", 1), obs(HEAD, "F", 2)))
    assert r.findings[0].advice is Advice.KNOWN_BROKEN


def test_flaky_cost_so_far_counts_every_flaky_commit() -> None:
    flaky_twice = [obs("a", "F", 1, 3), obs("a", "P", 2, 3), obs(HEAD, "F", 1), obs(HEAD, "P", 2)]
    r = report(hist("test_apply_coupon", *flaky_twice))
    assert r.findings[0].cost.events == 2
    assert round(r.findings[0].cost.total, 4) == 45.0002
