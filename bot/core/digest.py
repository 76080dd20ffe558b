"""The figures of one organisation's week, from its repositories' histories: plain data in, plain data out
(the store and GitHub are read elsewhere, scoped by installation).

A week is an ISO week in UTC (Monday 00:00 to the next Monday). What happened in a week:

- a **flaky event** (one test, one commit, one context judged flaky, as ``bot.core.cost`` counts them)
  happened when the last report of that commit in that context ran;
- a **rerun** is an attempt after the first, in the week its attempt started; automatic when Flaketally
  asked for it (``RunFact.automatic``), human otherwise; its measured minutes and wait are GitHub's;
- a **failed run** is a report (run, attempt) in which at least one test failed; it is *all flaky* when
  every test that failed in it was flaky on that commit.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

from bot.core.cost import Rates, cost_of
from bot.core.display import stored_display_id
from bot.core.identity import ExecutionContext
from bot.core.observations import Observation, TestHistory
from bot.core.quarantine import ALL_CONTEXTS
from bot.core.times import parse_time
from bot.core.verdicts import CommitJudgement, CommitVerdict, by_commit, commit_judgement

TREND_WEEKS = 8
TOP = 10


def week_of(moment: datetime) -> str:
    """``2026-W49``: the ISO week of a time, in UTC."""
    year, week, _ = moment.astimezone(UTC).isocalendar()
    return f"{year}-W{week:02d}"


def week_start(week: str) -> datetime:
    """Monday 00:00 UTC of an ISO week ``YYYY-Www``; ValueError when it is not one."""
    year, _, number = week.partition("-W")
    try:
        return datetime.combine(date.fromisocalendar(int(year), int(number), 1), datetime.min.time(), UTC)
    except ValueError:
        raise ValueError(f"not an ISO week (YYYY-Www): {week!r}") from None


def weeks_before(week: str, count: int) -> list[str]:
    """``count`` weeks ending with ``week``, oldest first."""
    start = week_start(week)
    return [week_of(start - timedelta(weeks=n)) for n in range(count - 1, -1, -1)]


@dataclass(frozen=True, slots=True)
class RunFact:
    """One attempt of a workflow run, as GitHub timed it."""

    repo: str
    run_id: int
    attempt: int
    started_at: str
    automatic: bool = False  # an attempt Flaketally's automatic rerun asked for
    job_minutes: float = 0.0
    wait_minutes: float | None = None


@dataclass(frozen=True, slots=True)
class Event:
    """One flaky event: a test flaky on one commit in one context."""

    repo: str
    test: str  # display id
    context: str
    commit: str
    when: datetime
    cost: float
    run_id: int | None  # the latest run of the commit in which it ran
    evidence: str = ""  # the commit's judgement in one line


@dataclass(frozen=True, slots=True)
class Week:
    week: str
    events: int = 0
    cost: float = 0.0
    reruns_human: int = 0
    reruns_automatic: int = 0
    rerun_minutes: float = 0.0
    wait_minutes: float = 0.0
    failed_runs: int = 0
    all_flaky_runs: int = 0

    @property
    def all_flaky_share(self) -> float | None:
        return self.all_flaky_runs / self.failed_runs if self.failed_runs else None


@dataclass(frozen=True, slots=True)
class TestWeek:
    """A test's flaky events in the digest's week, with the evidence and the latest run where it flaked."""

    __test__ = False

    repo: str
    test: str
    context: str
    events: int
    cost: float
    evidence: str
    latest_run: int | None


@dataclass(frozen=True, slots=True)
class Digest:
    week: str
    rates: Rates
    trend: tuple[Week, ...]  # the last TREND_WEEKS weeks, oldest first; the last is this week
    top: tuple[TestWeek, ...]  # by cost this week, the most first
    new_flakes: tuple[TestWeek, ...]  # first flaky event in the whole lookback is this week
    flaky_this_week: tuple[TestWeek, ...]  # every test with events this week, by cost
    fixed: tuple[tuple[str, str, str], ...]  # (repo, test, context): flaky last week, not this week, passed since
    undetermined: tuple[tuple[str, str, str, int], ...]  # (repo, test, context, commits), the most first
    repositories: int = 0
    more_top: int = 0  # tests with events this week beyond the top
    # tests failing on their repository's default branch: (repo, test, context, evidence), another queue
    broken: tuple[tuple[str, str, str, str], ...] = ()
    # the quarantine files: (repo, test, context, due to leave, evidence or reason)
    quarantined: tuple[tuple[str, str, str, bool, str], ...] = ()

    @property
    def this(self) -> Week:
        return self.trend[-1]

    @property
    def previous(self) -> Week:
        return self.trend[-2] if len(self.trend) > 1 else Week(self.week)

    def suggestions(self) -> dict[str, list[TestWeek]]:
        """Per repository, its tests that flaked this week and are not quarantined there (in their context or
        in all): what its quarantine file could add."""
        listed = {(repo, test, context) for repo, test, context, _, _ in self.quarantined}
        found: dict[str, list[TestWeek]] = {}
        for t in self.flaky_this_week:
            if not {(t.repo, t.test, t.context), (t.repo, t.test, ALL_CONTEXTS)} & listed:
                found.setdefault(t.repo, []).append(t)
        return found

    @property
    def quiet(self) -> bool:
        """Nothing flaked this week, nobody reran anything and nothing was left undetermined."""
        w = self.this
        return not (w.events or w.reruns_human or w.reruns_automatic or self.undetermined)


def _latest(observations: Sequence[Observation]) -> Observation | None:
    dated = [o for o in observations if o.started_at]
    return max(dated, key=lambda o: o.started_at or "") if dated else None


def _judged(
    history: TestHistory, policy: CommitVerdict, rates: Rates
) -> Iterable[tuple[CommitJudgement, datetime, Observation, float]]:
    """Each dated commit of a test in one context: its judgement, when its last report ran, that report,
    and what it cost (``bot.core.cost``: nothing unless it was flaky)."""
    for sha, observations in by_commit(history.observations):
        latest = _latest(observations)
        if latest is None or latest.started_at is None:
            continue
        judged = commit_judgement(sha, observations, policy)
        yield judged, parse_time(latest.started_at), latest, cost_of([judged], rates).total


def digest(
    week: str,
    histories: Sequence[tuple[str, TestHistory]],
    runs: Sequence[RunFact],
    *,
    rates: Rates | None = None,
    policy: CommitVerdict = CommitVerdict.UNDETERMINED,
    repositories: int = 0,
) -> Digest:
    """The digest of ``week`` from (repository, test history) pairs and the attempts of the runs."""
    rates = rates or Rates()
    weeks = weeks_before(week, TREND_WEEKS)
    events: list[Event] = []
    undetermined: dict[tuple[str, str, str], int] = defaultdict(int)
    first_flaky: dict[tuple[str, str, str], str] = {}
    passed_after: dict[tuple[str, str, str], datetime] = {}
    failed_in: dict[tuple[str, int, int], list[bool]] = defaultdict(list)  # (repo, run, attempt) → flaky per test
    run_week: dict[tuple[str, int, int], str] = {}
    for repo, history in histories:
        test = stored_display_id(history.test_id, history.classname, history.name, history.file)
        context = ExecutionContext.from_key(history.context).display()
        key = (repo, test, context)
        for judged, when, latest, cost in _judged(history, policy, rates):
            verdict, sha, observations = judged.verdict, judged.commit, judged.observations
            if verdict is CommitVerdict.FLAKY:
                events.append(Event(repo, test, context, sha, when, cost, latest.run_id, judged.evidence))
                first_flaky.setdefault(key, week_of(when))
            elif verdict is CommitVerdict.UNDETERMINED and week_of(when) == week:
                undetermined[key] += 1
            elif verdict is CommitVerdict.PASSING:
                passed_after[key] = max(when, passed_after.get(key, when))
            for o in observations:
                if o.run_id is None or not o.started_at or not any(c in "FE" for c in o.outcomes):
                    continue
                run = (repo, o.run_id, o.attempt)
                failed_in[run].append(verdict is CommitVerdict.FLAKY)
                run_week[run] = week_of(parse_time(o.started_at))
    trend = tuple(_week(w, events, runs, failed_in, run_week) for w in weeks)
    this_week = [e for e in events if week_of(e.when) == week]
    per_test: dict[tuple[str, str, str], list[Event]] = defaultdict(list)
    for e in this_week:
        per_test[(e.repo, e.test, e.context)].append(e)
    ranked = sorted(per_test.items(), key=lambda item: (-round(sum(e.cost for e in item[1]), 9), item[0]))
    tests = []
    for (repo, test, context), found in ranked:
        last = max(found, key=lambda e: (e.when, e.commit))  # its evidence and its run, the same event
        tests.append(TestWeek(repo, test, context, len(found), sum(e.cost for e in found), last.evidence, last.run_id))
    last_week = weeks[-2]
    flaky_last = {(e.repo, e.test, e.context) for e in events if week_of(e.when) == last_week}
    fixed = sorted(
        key for key in flaky_last - set(per_test) if key in passed_after and week_of(passed_after[key]) == week
    )
    return Digest(
        week,
        rates,
        trend,
        tuple(tests[:TOP]),
        tuple(t for t in tests if first_flaky[(t.repo, t.test, t.context)] == week),
        tuple(tests),
        tuple(fixed),
        tuple(
            (repo, test, context, n)
            for (repo, test, context), n in sorted(undetermined.items(), key=lambda item: (-item[1], item[0]))
        ),
        repositories,
        max(0, len(tests) - TOP),
    )


def _week(
    week: str,
    events: Sequence[Event],
    runs: Sequence[RunFact],
    failed_in: dict[tuple[str, int, int], list[bool]],
    run_week: dict[tuple[str, int, int], str],
) -> Week:
    found = [e for e in events if week_of(e.when) == week]
    reruns = [r for r in runs if r.attempt > 1 and week_of(parse_time(r.started_at)) == week]
    failed = [run for run, w in run_week.items() if w == week]
    return Week(
        week,
        events=len(found),
        cost=sum(e.cost for e in found),
        reruns_human=sum(1 for r in reruns if not r.automatic),
        reruns_automatic=sum(1 for r in reruns if r.automatic),
        rerun_minutes=sum(r.job_minutes for r in reruns),
        wait_minutes=sum(r.wait_minutes or 0.0 for r in reruns),
        failed_runs=len(failed),
        all_flaky_runs=sum(1 for run in failed if all(failed_in[run])),
    )
