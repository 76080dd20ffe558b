"""GitHub's write budget (``bot.github.budget``) on a real Redis, with a clock the tests move: the per-minute
and per-hour limits, slots given back, the waiting line, and the pipeline never waiting while it holds a
repository's publish lock."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import redis

from bot.github.budget import TICKET_TTL, BudgetExhausted, WriteBudget
from bot.pipeline.attempt import process_workflow_run
from bot.store import Store
from tests.github_fake import FakeGitHub, zip_of
from tests.test_end_to_end import junit


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0
        self.slept: list[float] = []
        self.on_sleep: list[object] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        for hook in self.on_sleep:
            hook()  # type: ignore[operator]
        self.now += seconds


def budget(conn: redis.Redis, clock: Clock, **limits: int) -> WriteBudget:
    return WriteBudget(conn, 77, clock=clock, sleep=clock.sleep, max_wait=7200, **limits)


def spend(b: WriteBudget, n: int) -> None:
    assert b.ensure(n, wait=False)
    for _ in range(n):
        b.spend()


def test_the_minute_holds_80_writes_and_the_81st_waits_for_the_oldest_to_age(conn: redis.Redis) -> None:
    clock = Clock()
    first = budget(conn, clock)
    spend(first, 50)
    clock.now += 30
    spend(first, 30)
    assert first.used() == (80, 80)
    other = budget(conn, clock)  # another worker of the same installation
    assert not other.ensure(1, wait=False)
    other.ensure(1, wait=True)  # waits until the first 50 are a minute old
    assert clock.now == pytest.approx(1_000_060.0) and sum(clock.slept) == pytest.approx(30.0)
    assert other.held == 1


def test_the_hour_holds_500_writes(conn: redis.Redis) -> None:
    clock = Clock()
    b = budget(conn, clock)
    for _ in range(10):  # 50 a minute: never the minute's limit
        spend(b, 50)
        clock.now += 60
    assert b.used() == (0, 500)
    assert not b.ensure(1, wait=False)
    started = clock.now
    b.ensure(1, wait=True)
    assert clock.now == pytest.approx(started - 600 + 3600)  # when the first 50 are an hour old


def test_slots_taken_and_not_spent_are_given_back(conn: redis.Redis) -> None:
    clock = Clock()
    b = budget(conn, clock, per_minute=3, per_hour=10)
    assert b.ensure(3, wait=False)
    b.spend()
    b.release()
    assert b.used() == (1, 1) and b.held == 0
    assert budget(conn, clock, per_minute=3, per_hour=10).ensure(2, wait=False)


def test_spending_with_nothing_held_takes_a_slot_and_waits_for_it(conn: redis.Redis) -> None:
    clock = Clock()
    b = budget(conn, clock, per_minute=1, per_hour=10)
    b.spend()
    b.spend()  # the minute is full: it waits for the first to age
    assert sum(clock.slept) == pytest.approx(60.0) and b.used() == (1, 2)


def test_a_backlog_drains_in_order_and_a_newcomer_does_not_jump_the_line(conn: redis.Redis) -> None:
    clock = Clock()
    spend(budget(conn, clock, per_minute=1, per_hour=100), 1)
    waiting = budget(conn, clock, per_minute=1, per_hour=100)
    newcomer = budget(conn, clock, per_minute=1, per_hour=100)
    tried: list[bool] = []

    def newcomer_tries() -> None:
        if not tried and clock.now >= 1_000_059.0:  # the waiter looked a moment ago (it polls every second)
            clock.now += 1.5  # the minute has room now, but the waiter was first
            tried.append(newcomer.ensure(1, wait=False))

    clock.on_sleep.append(newcomer_tries)
    waiting.ensure(1, wait=True)
    assert tried == [False] and waiting.held == 1 and newcomer.held == 0


def test_a_waiter_that_died_does_not_hold_the_line(conn: redis.Redis) -> None:
    clock = Clock()
    spend(budget(conn, clock, per_minute=2, per_hour=100), 1)
    dead = budget(conn, clock, per_minute=2, per_hour=100)
    clock.on_sleep.append(lambda: (_ for _ in ()).throw(KeyboardInterrupt))  # the process stops while waiting
    with pytest.raises(KeyboardInterrupt):
        dead.ensure(2, wait=True)  # 1 + 2 > 2: it waits in line
    clock.on_sleep.clear()
    assert not budget(conn, clock, per_minute=2, per_hour=100).ensure(1, wait=False)  # room, but it was first
    clock.now += TICKET_TTL + 1  # it has not looked since: gone
    assert budget(conn, clock, per_minute=2, per_hour=100).ensure(1, wait=False)


def test_a_wait_longer_than_a_job_may_wait_raises(conn: redis.Redis) -> None:
    clock = Clock()
    spend(budget(conn, clock, per_minute=1, per_hour=1), 1)
    patient = WriteBudget(conn, 77, per_minute=1, per_hour=1, clock=clock, sleep=clock.sleep, max_wait=120)
    with pytest.raises(BudgetExhausted, match="1 a minute, 1 an hour"):
        patient.ensure(1, wait=True)
    assert patient.held == 0 and clock.now - 1_000_000.0 <= 120


def test_a_budget_needs_sane_limits(conn: redis.Redis) -> None:
    with pytest.raises(ValueError, match="per_minute"):
        WriteBudget(conn, 77, per_minute=0)


def test_every_content_creating_request_of_the_port_spends_from_the_budget(conn: redis.Redis) -> None:
    clock = Clock()
    b = budget(conn, clock, per_minute=2, per_hour=10)
    with FakeGitHub() as github, github.port(writes=b) as gh:
        run = github.add_run("acme/widgets", pull_requests=[7])
        gh.create_issue_comment("acme/widgets", 7, "one")
        gh.create_issue_comment("acme/widgets", 7, "two")
        assert clock.slept == []
        gh.create_issue_comment("acme/widgets", 7, "three")  # the minute is full: the port waits
        gh.list_jobs("acme/widgets", run.id, 1)  # a read spends nothing
    assert sum(clock.slept) == pytest.approx(60.0) and b.used() == (1, 3)


def test_the_pipeline_never_waits_for_the_budget_while_holding_the_publish_lock(
    conn: redis.Redis, store: Store
) -> None:
    """Two pull requests' attempts, a budget of one write a minute: the second waits for its slot with the
    repository's lock let go, then is judged again and published under it."""
    clock = Clock()
    held: list[bool] = []

    @contextmanager
    def lock() -> Iterator[None]:
        held.append(True)
        try:
            yield
        finally:
            held.pop()

    waits_under_lock: list[bool] = []
    clock.on_sleep.append(lambda: waits_under_lock.append(bool(held)))
    with FakeGitHub() as github:
        for number in (7, 8):
            sha = f"{number:040x}"
            run = github.add_run("acme/widgets", head_sha=sha, pull_requests=[number], conclusion="failure")
            github.add_job(run, attempt=1, name="test (3.11)", conclusion="failure")
            github.add_artifact(run, "junit-results", zip_of({"junit.xml": junit(test_apply_coupon="fail")}), attempt=1)
            with github.port(writes=budget(conn, clock, per_minute=1, per_hour=100)) as gh:
                process_workflow_run(
                    store,
                    gh,
                    installation_id=77,
                    repo="acme/widgets",
                    repo_id=1,
                    run_id=run.id,
                    attempt=1,
                    publish_lock=lock,
                    writes=gh.writes,
                )
        writes = [r for r in github.requests if r.method in ("POST", "PATCH") and r.route != "token"]
    assert waits_under_lock and not any(waits_under_lock)  # it waited, and never under the lock
    assert [r.route for r in writes] == ["create_check_run", "create_comment"] * 2
    assert budget(conn, clock, per_minute=1, per_hour=100).used()[1] == 4  # every write was counted
