"""The weekly digest's figures (``bot.core.digest``) on a generated multi-repository, multi-week history,
checked against what the generator planted, counted on its own."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import pytest

from bot.core.digest import TREND_WEEKS, Digest, RunFact, digest, week_of, week_start, weeks_before
from bot.core.observations import Observation, TestHistory
from bot.render.digest import digest_markdown
from tests.test_end_to_end import golden

WEEK = "2026-W48"
EVENT = 15 * 1.50 + (1.0 / 60) * 0.008  # developer time, and one wasted attempt of 1 s at the default rates


@dataclass
class Planted:
    """A history built run by run, with what was planted in it counted on the side."""

    histories: dict[tuple[str, str], TestHistory] = field(default_factory=dict)
    runs: list[RunFact] = field(default_factory=list)
    flaky: Counter[str] = field(default_factory=Counter)  # week → planted flaky events
    flaky_tests: dict[str, set[tuple[str, str]]] = field(default_factory=dict)  # week → (repo, test)
    failed_runs: Counter[str] = field(default_factory=Counter)
    all_flaky: Counter[str] = field(default_factory=Counter)
    human: Counter[str] = field(default_factory=Counter)
    automatic: Counter[str] = field(default_factory=Counter)
    next_run: int = 1000

    def observe(self, repo: str, test: str, sha: str, attempt: int, run: int, when: datetime, outcome: str) -> None:
        key = (repo, test)
        history = self.histories.setdefault(
            key,
            TestHistory(f"tests.mod::{test}", f"tests.mod::{test}", "tests.mod", test, "tests/mod.py", 1, "default"),
        )
        order = len(history.observations)
        history.observations.append(Observation(order, sha, attempt, run, when.isoformat(), outcome, 1.0))

    def commit(self, repo: str, sha: str, when: datetime, outcomes: dict[str, str], rerun: str | None = None) -> None:
        """One commit's run: attempt 1 with ``outcomes`` ("P"/"F"); with ``rerun`` ("human"/"automatic") a
        second attempt where everything passes."""
        run = self.next_run = self.next_run + 1
        week = week_of(when)
        for test, outcome in outcomes.items():
            self.observe(repo, test, sha, 1, run, when, outcome)
        self.runs.append(RunFact(repo, run, 1, when.isoformat()))
        failed = [t for t, o in outcomes.items() if o == "F"]
        if failed:
            self.failed_runs[week] += 1
        if rerun:
            later = when + timedelta(minutes=30)
            for test in outcomes:
                self.observe(repo, test, sha, 2, run, later, "P")
            self.runs.append(RunFact(repo, run, 2, later.isoformat(), rerun == "automatic", 4.0, 12.0))
            (self.automatic if rerun == "automatic" else self.human)[week_of(later)] += 1
            self.flaky[week] += len(failed)
            self.flaky_tests.setdefault(week, set()).update((repo, t) for t in failed)
            if failed:
                self.all_flaky[week] += 1


def generated() -> Planted:
    """Three repositories over eight weeks: a test flaky every other week, one flaky only this week (new),
    one flaky last week and passing since (fixed), a single failure left undetermined this week."""
    planted = Planted()
    weeks = weeks_before(WEEK, TREND_WEEKS)
    for w, week in enumerate(weeks):
        monday = week_start(week)
        for r, repo in enumerate(("acme/api", "acme/web", "acme/cli")):
            for day in range(3):
                when = monday + timedelta(days=day, hours=9 + r)
                sha = f"{w:02d}{r:02d}{day:02d}".ljust(40, "0")
                outcomes = {"test_stable": "P", "test_often": "P", "test_new": "P", "test_fixed": "P", "test_once": "P"}
                rerun = None
                if day == 0 and w % 2 == 1:  # this week among them
                    outcomes["test_often"], rerun = "F", "human"
                if day == 1 and week == WEEK and repo == "acme/web":
                    outcomes["test_new"], rerun = "F", "automatic"
                if day == 1 and w == TREND_WEEKS - 2 and repo == "acme/cli":
                    outcomes["test_fixed"], rerun = "F", "human"
                if day == 2 and week == WEEK and repo == "acme/api":
                    outcomes["test_once"] = "F"  # no rerun: undetermined
                planted.commit(repo, sha, when, outcomes, rerun)
    return planted


def _run(planted: Planted) -> list[tuple[str, TestHistory]]:
    return [(repo, h) for (repo, _), h in planted.histories.items()]


def test_every_week_of_the_trend_matches_what_was_planted() -> None:
    planted = generated()
    found = digest(WEEK, _run(planted), planted.runs, repositories=3)
    assert [w.week for w in found.trend] == weeks_before(WEEK, TREND_WEEKS)
    for w in found.trend:
        assert w.events == planted.flaky[w.week], w.week
        assert w.cost == pytest.approx(planted.flaky[w.week] * EVENT), w.week
        assert (w.reruns_human, w.reruns_automatic) == (planted.human[w.week], planted.automatic[w.week])
        assert w.rerun_minutes == 4.0 * (planted.human[w.week] + planted.automatic[w.week])
        assert w.wait_minutes == 12.0 * (planted.human[w.week] + planted.automatic[w.week])
        assert (w.failed_runs, w.all_flaky_runs) == (planted.failed_runs[w.week], planted.all_flaky[w.week])
    this = found.this
    assert (this.failed_runs, this.all_flaky_runs) == (5, 4)  # three often, one new; the single failure is not
    assert this.all_flaky_share == pytest.approx(4 / 5)


def test_tests_to_fix_first_new_fixed_and_undetermined() -> None:
    planted = generated()
    found = digest(WEEK, _run(planted), planted.runs, repositories=3)
    ranked = [(t.repo, t.test.rsplit("::", 1)[1], t.events) for t in found.top]
    often = [(repo, "test_often", 1) for repo in ("acme/api", "acme/cli", "acme/web")]
    assert sorted(ranked) == sorted([*often, ("acme/web", "test_new", 1)])
    assert all(t.cost == pytest.approx(EVENT) and t.latest_run is not None for t in found.top)
    for t in found.top:  # the evidence of its latest flaky commit, in one line
        assert f"failed on attempt 1 of run {t.latest_run}" in t.evidence
        assert f"passed on attempt 2 of run {t.latest_run}" in t.evidence
    assert [(t.repo, t.test.rsplit("::", 1)[1]) for t in found.new_flakes] == [("acme/web", "test_new")]
    assert [(repo, test.rsplit("::", 1)[1]) for repo, test, _ in found.fixed] == [("acme/cli", "test_fixed")]
    assert [(repo, test.rsplit("::", 1)[1], n) for repo, test, _, n in found.undetermined] == [
        ("acme/api", "test_once", 1)
    ]
    assert not found.quiet


def test_a_week_with_nothing_is_quiet() -> None:
    planted = Planted()
    when = week_start(WEEK) + timedelta(days=1)
    planted.commit("acme/api", "a" * 40, when, {"test_stable": "P"})
    found = digest(WEEK, _run(planted), planted.runs)
    assert found.quiet and found.top == () and found.this.failed_runs == 0


def test_iso_weeks_in_utc() -> None:
    assert week_of(datetime(2026, 11, 23, 0, 0, tzinfo=UTC)) == "2026-W48"  # a Monday
    assert week_of(datetime(2026, 11, 29, 23, 59, tzinfo=UTC)) == "2026-W48"  # the Sunday after
    assert week_of(datetime(2027, 1, 1, tzinfo=UTC)) == "2026-W53"
    assert week_start("2026-W48") == datetime(2026, 11, 23, tzinfo=UTC)
    assert weeks_before("2027-W01", 3) == ["2026-W52", "2026-W53", "2027-W01"]
    with pytest.raises(ValueError, match="not an ISO week"):
        week_start("2026-48")


# --- the issue body --------------------------------------------------------------------------------


def test_the_busy_weeks_body() -> None:
    planted = generated()
    body = digest_markdown(digest(WEEK, _run(planted), planted.runs, repositories=3), "acme")
    assert body.startswith("<!-- flaketally:digest -->\n## Flaketally digest · acme · 2026-W48 (Nov 23 – Nov 29, 2026)")
    assert "| flaky events | 4 | 1 |" in body  # last week: test_fixed
    assert "| failed runs whose failures were all flaky | 4 of 5 (80%) | 1 of 1 (100%) |" in body
    assert body.count("```mermaid") == 2 and "acme/api" not in body.split("```mermaid")[1]  # no name in a chart
    golden("digest/busy.md", body + "\n")


def test_a_quiet_week_is_one_line() -> None:
    planted = Planted()
    planted.commit("acme/api", "a" * 40, week_start(WEEK) + timedelta(days=1), {"test_stable": "P"})
    body = digest_markdown(digest(WEEK, _run(planted), planted.runs, repositories=1), "acme")
    assert body.splitlines()[-1] == "A quiet week: no test flaked in 1 repository, and nothing was rerun."
    golden("digest/quiet.md", body + "\n")


def five_hundred_repositories() -> Digest:
    """500 repositories with long names, each with a flaky test and a single failure this week."""
    planted = Planted()
    monday = week_start(WEEK)
    for n in range(500):
        repo = f"acme/service-{n:03d}-with-a-rather-long-repository-name"
        when = monday + timedelta(hours=n % 100)
        planted.commit(repo, f"{n:040x}", when, {"test_checkout_applies_the_coupon_on_the_second_try": "F"}, "human")
        planted.commit(repo, f"{n + 1000:040x}", when, {"test_single_failure_with_nothing_to_compare": "F"})
    return digest(WEEK, _run(planted), planted.runs, repositories=500)


def test_500_repositories_stay_under_githubs_limit_and_say_what_was_left_out() -> None:
    body = digest_markdown(five_hundred_repositories(), "acme")
    assert len(body) <= 65_536
    assert "more new flakes not shown (the body must stay under GitHub's limit)" in body
    assert "| flaky events | 500 | 0 |" in body  # the figures still count every repository
    assert "490 more tests flaked this week." in body
    golden("digest/500-repositories.md", body + "\n")
