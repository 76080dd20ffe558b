"""One scripted history of a commit, delivered every way GitHub can deliver it, ends in the same answer: the
check run GitHub shows (the newest Flaketally check run of the commit, the one branch protection reads),
the same comment and the same store.

The history (one head SHA, pull request 7):
- run A (``pull_request``), attempt 1: job ``test (3.11)`` fails ``test_coupon``; job ``unit`` passes; an
  artifact ``junit-e2e`` has expired before anyone could read it;
- run A, attempt 2, a "re-run failed jobs": only ``test (3.11)`` runs again and ``test_coupon`` passes;
  ``unit`` is carried over (GitHub lists it under attempt 2 with ``run_attempt`` 1, and its artifact was
  uploaded during attempt 1);
- run B (``push``) on the same SHA: ``test_coupon`` fails again.

Deliveries: in time (each attempt processed before the next one exists), late (everything has run before
attempt 1 is processed), reversed, and all at once to two workers. The final state is compared with one
golden file (tests/golden/order/), whatever the way, on SQLite and PostgreSQL. GitHub only ever appends
annotations, so the annotations sent for earlier judgements stay and are not compared. Which older check
runs exist depends on the order (an attempt already superseded when it is processed writes none: GitHub's
write budget), so they are not compared either; every one of them is complete, never left in progress.

The same history with upload-artifact's ``overwrite: true`` (attempt 2's ``junit-test`` replaced attempt
1's) delivered late: attempt 1 never reads attempt 2's upload, every check run names the report attempt 1
lost, and the verdicts use what remains.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from contextlib import nullcontext
from pathlib import Path

import pytest
import sqlalchemy as sa

from bot.pipeline.attempt import PublishLock, process_workflow_run
from bot.store import Store
from bot.store.schema import reports
from tests.github_fake import SHA, FakeGitHub, FakeRun, zip_of
from tests.support.concurrent import Job, together
from tests.test_end_to_end import junit as pytest_report

REPO = "acme/widgets"
RUN_A, RUN_B = 9001, 9002
NAMES = {RUN_A: "A", RUN_B: "B"}
PR = 7
GOLDEN = Path(__file__).parent / "golden" / "order"


def junit(**outcomes: str) -> bytes:
    return zip_of({"junit.xml": pytest_report(**outcomes)})


def first_attempt(github: FakeGitHub) -> FakeRun:
    run = github.add_run(REPO, RUN_A, head_sha=SHA, pull_requests=[PR], conclusion="failure")
    github.add_job(run, attempt=1, name="test (3.11)", conclusion="failure")
    github.add_job(run, attempt=1, name="unit")
    github.add_artifact(run, "junit-test (3.11)", junit(test_coupon="fail", test_total="pass"), attempt=1)
    github.add_artifact(run, "junit-unit", junit(test_parse="pass"), attempt=1)
    github.add_artifact(run, "junit-e2e", junit(test_browser="pass"), attempt=1, expired=True)
    return run


def the_rest(github: FakeGitHub, run: FakeRun, *, overwrite: bool = False) -> FakeRun:
    """Attempt 2 of run A (failed jobs only) and run B on the same commit."""
    github.add_attempt(run, conclusion="success")
    github.add_job(run, attempt=2, name="test (3.11)")
    github.add_job(run, attempt=2, name="unit", carried_from=1)
    if overwrite:  # upload-artifact v4 with `overwrite: true` deletes the earlier artifact of the name
        (earlier,) = [a for a in github.artifacts.values() if a.name == "junit-test (3.11)"]
        del github.artifacts[earlier.id]
    github.add_artifact(run, "junit-test (3.11)", junit(test_coupon="pass", test_total="pass"), attempt=2)
    push = github.add_run(REPO, RUN_B, head_sha=SHA, event="push", run_number=164, conclusion="failure")
    github.add_job(push, attempt=1, name="test (3.11)", conclusion="failure")
    github.add_artifact(push, "junit-test (3.11)", junit(test_coupon="fail", test_total="pass"), attempt=1)
    github.add_pull(REPO, SHA, PR)  # the push run names no pull request; the commit does
    return push


DELIVERIES = [(RUN_A, 1), (RUN_A, 2), (RUN_B, 1)]


def process(
    store: Store, github: FakeGitHub, deliveries: list[tuple[int, int]], publish_lock: PublishLock = nullcontext
) -> None:
    with github.port() as gh:
        for run_id, attempt in deliveries:
            process_workflow_run(
                store,
                gh,
                installation_id=77,
                repo=REPO,
                repo_id=1,
                run_id=run_id,
                attempt=attempt,
                publish_lock=publish_lock,
            )


def in_time(store: Store, github: FakeGitHub, _redis_url: str) -> None:
    run = first_attempt(github)
    process(store, github, DELIVERIES[:1])
    the_rest(github, run)
    process(store, github, DELIVERIES[1:])


def late(store: Store, github: FakeGitHub, _redis_url: str, *, overwrite: bool = False) -> None:
    the_rest(github, first_attempt(github), overwrite=overwrite)
    process(store, github, DELIVERIES)


def reversed_(store: Store, github: FakeGitHub, _redis_url: str, *, overwrite: bool = False) -> None:
    the_rest(github, first_attempt(github), overwrite=overwrite)
    process(store, github, DELIVERIES[::-1])


def two_workers(store: Store, github: FakeGitHub, redis_url: str, *, overwrite: bool = False) -> None:
    """Every delivery queued at once and taken by two workers, each with its own store connections and
    its own GitHub client, publishing under the workers' Redis lock."""
    the_rest(github, first_attempt(github), overwrite=overwrite)

    def taking(share: list[tuple[int, int]]) -> Job:
        return lambda own, lock: process(own, github, share, publish_lock=lock)

    together(store.url, redis_url, [taking(DELIVERIES[1::-1]), taking(DELIVERIES[2:])])


def final_state(store: Store, github: FakeGitHub) -> str:
    """What GitHub and the store finally hold: the check run GitHub shows, the comments on the pull request,
    and every stored report by run, attempt and artifact."""
    checks = [c for c in github.check_runs.values() if c.name == "Flaketally"]
    assert checks and all(c.status == "completed" for c in checks), "a check run was left in progress"
    assert len(checks) <= len(DELIVERIES), "more check runs than attempts"
    shown = max(checks, key=lambda c: c.id)
    out = shown.output or {}
    parts = [
        f"# the check run GitHub shows: {shown.status}, {shown.conclusion}",
        f"title: {out.get('title')}",
        "## summary",
        out.get("summary", ""),
        "## text",
        out.get("text") or "",
        "",
    ]
    for comment in github.comments_on(REPO, PR):
        parts += [f"# comment on #{PR}", comment.body, ""]
    with store.engine.connect() as conn:
        rows = conn.execute(sa.select(reports.c.run_id, reports.c.attempt, reports.c.source)).all()
    parts.append("# reports stored")
    parts += sorted(f"run {NAMES[int(r)]}, attempt {a}: {s}" for r, a, s in rows)
    parts.append("# store counts " + json.dumps(store.counts(), sort_keys=True))
    return "\n".join(parts) + "\n"


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("FLAKETALLY_UPDATE_GOLDEN"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    assert path.exists(), f"{path} is missing: run with FLAKETALLY_UPDATE_GOLDEN=1 to write it"
    assert text == path.read_text(), f"{name} differs from its golden file"


Way = Callable[..., None]


@pytest.mark.parametrize("way", [in_time, late, reversed_, two_workers], ids=lambda w: w.__name__.strip("_"))
def test_every_way_of_delivering_the_history_ends_the_same(
    way: Way, store: Store, github: FakeGitHub, redis_url: str
) -> None:
    way(store, github, redis_url)
    state = final_state(store, github)
    golden("history.md", state)
    # what the golden file holds, said once more where a reader looks first
    assert state.count("# the check run GitHub shows: completed, success") == 1
    assert state.count("# comment on") == 1 and "**flaky**" in state
    assert "Not judged: artifact 'junit-e2e' of attempt 1 has expired" in state
    assert "run A, attempt 2: junit-unit" not in state  # the carried-over job's report is attempt 1's only


@pytest.mark.parametrize("way", [late, reversed_, two_workers], ids=lambda w: w.__name__.strip("_"))
def test_a_report_replaced_by_a_later_attempt_is_named_and_never_read_as_the_earlier_one(
    way: Way, store: Store, github: FakeGitHub, redis_url: str
) -> None:
    way(store, github, redis_url, overwrite=True)
    state = final_state(store, github)
    golden("history-overwrite.md", state)
    stored = state.split("# reports stored\n", 1)[1]
    assert "run A, attempt 1: junit-test" not in stored  # attempt 2's upload is never read as attempt 1's
    assert stored.count("run A, attempt 2: junit-test (3.11)/junit.xml") == 1
    lost = "artifact 'junit-test (3.11)' of attempt 1 is missing: attempt 2 uploaded one of that name"
    assert state.count(lost) == 1 + 1  # the check run names it, and the comment
    assert state.count("completed, success") == 1  # what remains: failed on run B, passed on attempt 2 of A
