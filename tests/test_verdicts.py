"""Verdicts on one commit, over a history, and the 7-day known-flaky memory."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.core.observations import Observation, TestHistory
from bot.core.verdicts import (
    CommitVerdict,
    TestVerdict,
    commit_judgement,
    flip_score,
    history_judgement,
    known_flaky,
    no_longer_flaky,
    recovered,
    wilson_lower_bound,
    wilson_upper_bound,
)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def obs(commit: str, outcomes: str, attempt: int = 1, *, order: int = 0, days_ago: float | None = None) -> Observation:
    started = (NOW - timedelta(days=days_ago)).isoformat() if days_ago is not None else None
    return Observation(order, commit, attempt, 163, started, outcomes, 1.0 * len(outcomes))


def history(*observations: Observation) -> TestHistory:
    return TestHistory("m::t", "m::t", "m", "t", None, None, "default", list(observations))


@pytest.mark.parametrize(
    ("outcomes", "verdict", "passed", "failed"),
    [
        (["F", "P"], CommitVerdict.FLAKY, 1, 1),
        (["FP"], CommitVerdict.FLAKY, 1, 1),  # a flaky pass inside one report
        (["F", "F"], CommitVerdict.FAILING, 0, 2),
        (["FF"], CommitVerdict.FAILING, 0, 2),
        (["E", "F"], CommitVerdict.FAILING, 0, 2),
        (["P", "S"], CommitVerdict.PASSING, 1, 0),
        (["S"], CommitVerdict.PASSING, 0, 0),
        (["F"], CommitVerdict.UNDETERMINED, 0, 1),
        (["F", "S"], CommitVerdict.UNDETERMINED, 0, 1),
    ],
)
def test_commit_verdicts(outcomes: list[str], verdict: CommitVerdict, passed: int, failed: int) -> None:
    judged = commit_judgement("3484a3f0", [obs("3484a3f0", o, i + 1) for i, o in enumerate(outcomes)])
    assert (judged.verdict, judged.passed, judged.failed) == (verdict, passed, failed)


def test_evidence_names_commit_attempts_and_run() -> None:
    judged = commit_judgement("3484a3f0aa", [obs("3484a3f0aa", "F", 1), obs("3484a3f0aa", "P", 2)])
    assert judged.evidence == "3484a3f: failed on attempt 1 of run 163; passed on attempt 2 of run 163"


@pytest.mark.parametrize("policy", [CommitVerdict.UNDETERMINED, CommitVerdict.FAILING, CommitVerdict.FLAKY])
def test_single_fail_policy_decides_a_lone_failure(policy: CommitVerdict) -> None:
    judged = commit_judgement("c", [obs("c", "F")], policy)
    assert judged.verdict is policy
    assert f"single-fail policy: {policy.value}" in judged.evidence


def test_a_failure_on_one_commit_and_a_pass_on_another_is_not_flaky() -> None:
    judged = history_judgement(history(obs("a", "F", order=0), obs("b", "P", order=1)))
    assert judged.verdict is not TestVerdict.FLAKY
    assert judged.proof_commits == ()


def test_proof_beats_score() -> None:
    passes = [obs(f"c{i}", "P", order=i) for i in range(30)]
    judged = history_judgement(history(*passes, obs("c29", "F", 2, order=30)))
    assert judged.verdict is TestVerdict.FLAKY
    assert judged.proof_commits == ("c29",)
    assert "c29" in judged.evidence


def test_fewer_than_five_observations_are_not_scored() -> None:
    judged = history_judgement(history(*(obs(f"c{i}", "P", order=i) for i in range(4))))
    assert judged.verdict is TestVerdict.INSUFFICIENT_DATA


def test_always_failing_is_broken() -> None:
    judged = history_judgement(history(*(obs(f"c{i}", "F", order=i) for i in range(6))))
    assert judged.verdict is TestVerdict.BROKEN
    assert judged.score == 0.0


def test_single_change_point_is_a_regression_naming_the_first_failing_commit() -> None:
    seq = [obs(f"c{i}", "P" if i < 6 else "F", order=i) for i in range(10)]
    judged = history_judgement(history(*seq))
    assert judged.verdict is TestVerdict.REGRESSION
    assert judged.first_failing_commit == "c6"


def test_cross_commit_flips_alone_can_make_a_test_flaky() -> None:
    seq = [obs(f"c{i}", "PF"[i % 2], order=i) for i in range(60)]
    judged = history_judgement(history(*seq))
    assert judged.verdict is TestVerdict.FLAKY
    assert judged.lower_bound > 0.10


def test_stable() -> None:
    judged = history_judgement(history(*(obs(f"c{i}", "P", order=i) for i in range(20))))
    assert (judged.verdict, judged.score) == (TestVerdict.STABLE, 0.0)


def test_flip_weights_same_commit_one_cross_commit_a_third() -> None:
    same, _ = flip_score([obs("a", "P"), obs("a", "F")])
    cross, _ = flip_score([obs("a", "P"), obs("b", "F")])
    assert same == pytest.approx(1.0)
    assert cross == pytest.approx(1 / 3)


def test_recency_ages_per_commit_not_per_observation() -> None:
    # an old flip followed by many reruns of one newer commit: the reruns all share one age
    many = [obs("old", "P"), obs("old", "F")] + [obs("new", "P", i) for i in range(1, 40)]
    few = [obs("old", "P"), obs("old", "F"), obs("new", "P")]
    assert flip_score(many)[0] < flip_score(few)[0]


def test_wilson_lower_bound() -> None:
    assert wilson_lower_bound(0.0, 10) == 0.0
    assert wilson_lower_bound(0.5, 100) == pytest.approx(0.4038, abs=1e-4)
    assert wilson_lower_bound(0.5, 0) == 0.0


def test_known_flaky_within_seven_days() -> None:
    recent = [obs("a", "F", 1, days_ago=2), obs("a", "P", 2, days_ago=2), obs("b", "F", days_ago=1)]
    known = known_flaky(recent, NOW)
    assert known is not None
    assert (known.runs, known.failed_runs, known.same_code_pairs) == (3, 2, 1)
    assert known.sentence("`t`") == (
        "`t` failed 2 of 3 runs in the last 7 days and both passed and failed on the same code once. "
        "It may be flaky rather than broken by this change: rerun it before you change code for it."
    )


def test_known_flaky_forgets_after_seven_days_but_recovery_needs_the_history() -> None:
    old = [obs("a", "F", 1, days_ago=8), obs("a", "P", 2, days_ago=8), obs("b", "P", days_ago=1)]
    assert known_flaky(old, NOW) is None
    # the 7-day memory ran dry, but the history still holds a same-code pass and failure: not recovered
    assert history_judgement(history(*old)).verdict is TestVerdict.FLAKY
    assert no_longer_flaky(True, known_flaky(old, NOW), history_judgement(history(*old))) is False
    still = known_flaky([obs("a", "F", 1, days_ago=1), obs("a", "P", 2, days_ago=1)], NOW)
    assert no_longer_flaky(True, still, history_judgement(history(*old))) is False


def clean_after_a_flake(clean_runs: int) -> list[Observation]:
    """A same-code pass and failure 40 days ago (out of the 30-day window), then clean runs, one a commit."""
    pair = [obs("a", "F", 1, order=0, days_ago=40), obs("a", "P", 2, order=1, days_ago=40)]
    return pair + [obs(f"c{i}", "P", order=2 + i, days_ago=10 - i * 0.1) for i in range(clean_runs)]


def test_recovery_is_announced_once_enough_clean_runs_rule_the_flakiness_out() -> None:
    few, enough = (
        history_judgement(history(*clean_after_a_flake(20))),
        history_judgement(history(*clean_after_a_flake(40))),
    )
    assert few.verdict is TestVerdict.STABLE and enough.verdict is TestVerdict.STABLE
    assert not recovered(few)  # 20 clean attempts: the upper bound of the flip rate is still above 0.10
    assert wilson_upper_bound(0.0, 20) > 0.10 > wilson_upper_bound(0.0, 40)
    assert recovered(enough)
    assert no_longer_flaky(True, None, enough) is True
    assert no_longer_flaky(False, None, enough) is False  # already announced: said once


def test_a_flaky_test_failing_in_single_attempts_is_never_recovered() -> None:
    pair = [obs("a", "F", 1, order=0, days_ago=40), obs("a", "P", 2, order=1, days_ago=40)]
    single = [obs(f"c{i}", "F" if i % 3 == 0 else "P", order=2 + i, days_ago=10 - i * 0.1) for i in range(51)]
    judged = history_judgement(history(*pair, *single))
    assert judged.verdict is not TestVerdict.STABLE
    assert not recovered(judged)
    assert no_longer_flaky(True, None, judged) is False


def test_window_keeps_thirty_days_before_the_newest_report() -> None:
    seq = [obs("old", "F", 1, days_ago=40), obs("old", "P", 2, days_ago=40)]
    seq += [obs(f"c{i}", "P", days_ago=1) for i in range(6)]
    judged = history_judgement(history(*seq))
    assert judged.verdict is TestVerdict.STABLE
    assert judged.runs == 6
