"""Verdicts on one commit, over a history, and the 7-day known-flaky memory."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta, timezone
from itertools import pairwise

import pytest

from bot.core.cost import Rates
from bot.core.judge import judge, judge_failure
from bot.core.observations import Observation, TestHistory
from bot.core.times import parse_time, stored_time
from bot.core.verdicts import (
    SINGLE_FAIL_POLICIES,
    CommitVerdict,
    TestVerdict,
    commit_judgement,
    failed_commits,
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


# The judge's quick paths (a stored history is in time order; most reports run a test once) against the
# plain reading of each rule, on seeded histories that mix retries, skips, offsets and undated reports.


def _plain_known_flaky(observations: list[Observation], now: datetime) -> tuple[int, int, int] | None:
    since = now - timedelta(days=7)
    recent = [o for o in observations if o.started_at and since <= parse_time(o.started_at) <= now]
    recent = [o for o in recent if o.outcomes != "S"]
    by: dict[str, str] = {}
    for o in recent:
        by[o.commit] = by.get(o.commit, "") + o.outcomes
    pairs = sum(1 for letters in by.values() if "P" in letters and ("F" in letters or "E" in letters))
    failed = sum(1 for o in recent if "F" in o.outcomes or "E" in o.outcomes)
    return (len(recent), failed, pairs) if pairs else None


def _plain_flips(observations: list[Observation]) -> tuple[float, int]:
    ordered = list(dict.fromkeys(o.commit for o in observations))
    weight = {c: 0.5 ** ((len(ordered) - 1 - i) / 20) for i, c in enumerate(ordered)}
    attempts = [(o.commit, c in "FE") for o in observations for c in o.outcomes if c != "S"]
    weighted = total = 0.0
    for (commit_before, failed_before), (commit, failed) in pairwise(attempts):
        total += weight[commit]
        if failed != failed_before:
            weighted += weight[commit] * (1.0 if commit == commit_before else 1 / 3)
    return (weighted / total if total else 0.0), len(attempts)


def _seeded_history(seed: int, *, retries: bool, dated: str) -> list[Observation]:
    """About 400 reports over 20 days ending at NOW, a commit run once or twice, the test once in each
    (passed, failed or errored) or, with ``retries``, retried or skipped in some; ``dated``: "utc" (the
    stored form, in time order), "offset" (every time written at one offset, -11 or +13 hours) or "mixed"
    (some undated, some at an offset: not in text order)."""
    rng = random.Random(seed)
    out: list[Observation] = []
    for n in range(400):
        moment = NOW - timedelta(days=20) + timedelta(minutes=72 * n)
        for attempt in (1, 2) if rng.random() < 0.3 else (1,):
            letters = rng.choice("PPPPPFE") if not retries else rng.choice(["P", "F", "FP", "FF", "S", "PS", "E"])
            started: str | None = stored_time(moment)
            if dated == "offset":  # one offset for all: the text is still in time order
                started = moment.astimezone(timezone(timedelta(hours=13 if seed % 2 else -11))).isoformat()
            elif dated == "mixed" and rng.random() < 0.3:
                started = rng.choice([None, moment.astimezone(timezone(timedelta(hours=5))).isoformat()])
            out.append(Observation(len(out), f"c{n}", attempt, n, started, letters, 0.5 * len(letters)))
    return out


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("retries", [False, True])
@pytest.mark.parametrize("dated", ["utc", "offset", "mixed"])
def test_quick_paths_agree_with_the_plain_reading(seed: int, retries: bool, dated: str) -> None:
    observations = _seeded_history(seed, retries=retries, dated=dated)
    for now in (NOW, NOW - timedelta(days=6, hours=5), NOW - timedelta(days=13)):
        known = known_flaky(observations, now)
        plain = _plain_known_flaky(observations, now)
        assert ((known.runs, known.failed_runs, known.same_code_pairs) if known else None) == plain
    assert flip_score(observations) == _plain_flips(observations)  # to the last bit
    groups = failed_commits(observations)
    assert [(c, [o.order for o in obs]) for c, obs in groups.items()] == [
        (c, [o.order for o in observations if o.commit == c])
        for c in dict.fromkeys(o.commit for o in observations if "F" in o.outcomes or "E" in o.outcomes)
    ]
    judged = history_judgement(history(*observations))
    assert judged.failed_runs == sum(1 for o in observations if "F" in o.outcomes or "E" in o.outcomes)
    assert judged.proof_commits == tuple(c for c, obs in groups.items() if "P" in "".join(o.outcomes for o in obs))


@pytest.mark.parametrize("seed", range(2))
@pytest.mark.parametrize("retries", [False, True])
@pytest.mark.parametrize("policy", SINGLE_FAIL_POLICIES)
def test_a_finding_is_judged_as_judge_judges_the_whole_history(seed: int, retries: bool, policy: CommitVerdict) -> None:
    """``judge_failure`` judges only the commits a finding shows and counts; it says what ``judge`` says."""
    observations = _seeded_history(seed, retries=retries, dated="mixed")
    # the first reports 45 days before the rest: out of the history verdict's 30-day window, not of the cost's
    observations = [
        o._replace(started_at=stored_time(NOW - timedelta(days=45))) if o.order < 60 else o for o in observations
    ]
    whole = judge(history(*observations), policy, Rates())
    assert whole.cost.events > 0 and len(whole.commits) > whole.cost.events  # failed commits that are not flaky
    for commit in whole.commits:
        here = [o for o in observations if o.commit == commit.commit]
        assert judge_failure(history(*observations), here, policy, Rates()) == (whole.judgement, commit, whole.cost)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("retries", [False, True])
@pytest.mark.parametrize("days_before", [0, 25])  # 25: the oldest reports fall out of the 30-day window
def test_judge_counts_every_commit_of_the_history(seed: int, retries: bool, days_before: int) -> None:
    """``judge`` reads its counts off the history verdict when that covered every observation, and counts
    them itself otherwise: either way, over the whole history."""
    observations = _seeded_history(seed, retries=retries, dated="utc")
    older = [o._replace(started_at=stored_time(NOW - timedelta(days=20 + days_before))) for o in observations[:50]]
    observations = older + observations[50:]
    judged = judge(history(*observations), CommitVerdict.UNDETERMINED, Rates())
    failed = {o.commit for o in observations if "F" in o.outcomes or "E" in o.outcomes}
    assert [c.commit for c in judged.commits] == [
        c for c in dict.fromkeys(o.commit for o in observations) if c in failed
    ]
    assert judged.passing_commits == len({o.commit for o in observations}) - len(failed)
    clean = [o._replace(outcomes=o.outcomes.replace("F", "P").replace("E", "P")) for o in observations]
    judged = judge(history(*clean), CommitVerdict.UNDETERMINED, Rates())
    assert judged.commits == () and judged.passing_commits == len({o.commit for o in clean})
