"""What flakes cost: wasted compute is measured from the reports' times, and is unknown (not zero) where
the reports give none."""

from __future__ import annotations

from bot.core.cost import Rates, cost_of
from bot.core.observations import Observation
from bot.core.verdicts import commit_judgement
from bot.render.findings import money


def _flaky(commit: str, seconds: float) -> Observation:
    return Observation(0, commit, 1, 163, None, "FP", seconds)


def test_wasted_compute_is_the_mean_runtime_times_the_attempts_beyond_the_first() -> None:
    cost = cost_of([commit_judgement("a", [_flaky("a", 120.0)])], Rates())
    assert cost.wasted_compute_minutes == 1.0
    assert cost.compute_known and cost.minutes() == "1.000 min"
    assert cost.as_dict()["wasted_compute_minutes"] == 1.0


def test_reports_without_time_make_compute_unknown_not_zero() -> None:
    cost = cost_of([commit_judgement("a", [_flaky("a", 0.0)])], Rates())
    assert not cost.compute_known
    assert cost.minutes() == "unknown (the reports give no time)"
    assert cost.as_dict()["wasted_compute_minutes"] is None
    assert cost.as_dict()["untimed_events"] == 1
    assert cost.total == 22.5  # the developer time is still counted


def test_some_events_without_time_give_a_lower_bound_that_says_so() -> None:
    cost = cost_of([commit_judgement("a", [_flaky("a", 60.0)]), commit_judgement("b", [_flaky("b", 0.0)])], Rates())
    assert cost.compute_known
    assert cost.minutes() == "at least 0.500 min (1 of 2 events without time)"


def test_money_is_to_the_cent_and_never_rounds_a_cost_away() -> None:
    assert money(22.5) == "22.50"
    assert money(0.028) == "0.03"
    assert money(0.004) == "< 0.01"
    assert money(0.0) == "0.00"


def test_a_lower_bound_of_nothing_is_unknown() -> None:
    untimed = [commit_judgement(c, [_flaky(c, 0.0)]) for c in "abc"]
    cost = cost_of([*untimed, commit_judgement("d", [_flaky("d", 0.01)])], Rates())
    assert not cost.compute_known
    assert cost.minutes() == "unknown (3 of 4 events without time)"
