"""What the GitHub App keeps beside the reports (bot/store/records.py), on SQLite and on PostgreSQL."""

from __future__ import annotations

import dataclasses

import sqlalchemy as sa

from bot.store import Store
from bot.store import records as rec
from bot.store.records import CheckRunRecord, InstallationState, JobRecord, RunRecord
from bot.store.schema import check_runs, comments, jobs, repos, runs
from tests.builders import F, P, S, report, result, run

REPO = "acme/widgets"


def rows(store: Store, table: sa.Table) -> int:
    with store.engine.connect() as conn:
        return int(conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one())


def a_run(
    run_id: int, attempt: int, sha: str = "s1", conclusion: str | None = None, prs: tuple[int, ...] = ()
) -> RunRecord:
    return RunRecord(
        run_id,
        attempt,
        sha,
        "main",
        "push",
        ".github/workflows/ci.yml",
        run_id + 1000,
        f"https://github.com/{REPO}/actions/runs/{run_id}",
        conclusion,
        "2026-11-01T10:00:00Z",
        f"2026-11-01T10:0{attempt}:00Z",
        prs,
    )


def a_job(job_id: int, run_id: int, attempt: int, name: str, conclusion: str = "failure") -> JobRecord:
    return JobRecord(
        job_id,
        run_id,
        attempt,
        name,
        conclusion,
        "2026-11-01T10:00:00Z",
        "2026-11-01T10:05:00Z",
        ("ubuntu-latest", f"runner-{job_id}"),
        f"https://github.com/{REPO}/actions/runs/{run_id}/job/{job_id}",
    )


def test_an_installation_state_round_trips_and_a_second_record_replaces_it(store: Store) -> None:
    assert rec.installation_state(store, 41) is None
    rec.record_installation(store, 42, "someone-else", InstallationState.SUSPENDED)
    for state in InstallationState:
        rec.record_installation(store, 41, "acme", state)
        assert rec.installation_state(store, 41) is state
    assert rec.installation_state(store, 42) is InstallationState.SUSPENDED
    assert rec.installation_state(store, 43) is None


def test_repo_key_is_the_row_id_and_records_the_installation_and_github_id(store: Store) -> None:
    first = rec.repo_key(store, "acme/first")
    key = rec.repo_key(store, REPO, installation_id=7, repo_id=first + 5000)
    assert rec.repo_key(store, REPO) == key  # asking again, without ids, gives the same key
    assert key != first
    with store.engine.connect() as conn:
        row = conn.execute(sa.select(repos).where(repos.c.full_name == REPO)).one()
        other = conn.execute(sa.select(repos).where(repos.c.full_name == "acme/first")).one()
    assert (row.id, row.installation_id, row.github_id) == (key, 7, first + 5000)  # kept when asked without ids
    assert (other.id, other.installation_id, other.github_id) == (first, None, None)
    rec.repo_key(store, REPO, installation_id=8)
    with store.engine.connect() as conn:
        moved = conn.execute(sa.select(repos.c.installation_id, repos.c.github_id).where(repos.c.id == key)).one()
    assert tuple(moved) == (8, first + 5000)


def test_runs_for_sha_orders_by_run_then_attempt_and_leaves_out_other_shas_and_repos(store: Store) -> None:
    key, other = rec.repo_key(store, REPO), rec.repo_key(store, "acme/other")
    recorded = [a_run(10, 2, prs=(12, 3)), a_run(9, 2), a_run(10, 1, prs=(7,))]
    for r in recorded:
        rec.record_run(store, key, r)
    rec.record_run(store, key, a_run(8, 1, sha="s2"))
    rec.record_run(store, other, a_run(7, 1))
    # run 9 before run 10 (numerically), though its attempt is higher than run 10's first
    assert rec.runs_for_sha(store, key, "s1") == [recorded[1], recorded[2], recorded[0]]
    assert [r.run_id for r in rec.runs_for_sha(store, other, "s1")] == [7]
    assert [r.run_id for r in rec.runs_for_sha(store, key, "s2")] == [8]
    assert rec.runs_for_sha(store, key, "s3") == []


def test_recording_an_attempt_again_updates_it(store: Store) -> None:
    key = rec.repo_key(store, REPO)
    rec.record_run(store, key, a_run(10, 1))
    rec.record_run(store, key, a_run(10, 2))
    done = a_run(10, 1, conclusion="failure", prs=(5,))
    rec.record_run(store, key, done)
    assert rec.runs_for_sha(store, key, "s1") == [done, a_run(10, 2)]
    assert rows(store, runs) == 2


def test_jobs_of_gives_one_job_per_name_from_the_newest_attempt(store: Store) -> None:
    key, other = rec.repo_key(store, REPO), rec.repo_key(store, "acme/other")
    first = [a_job(101, 10, 1, "build"), a_job(102, 10, 1, "test")]
    rec.record_jobs(store, key, first)
    rec.record_jobs(store, key, [a_job(201, 10, 2, "build", "success")])
    rec.record_jobs(store, key, [a_job(301, 11, 1, "build")])
    rec.record_jobs(store, other, [a_job(401, 10, 3, "build")])
    assert rec.jobs_of(store, key, 10) == [a_job(201, 10, 2, "build", "success"), first[1]]
    assert rec.jobs_of(store, key, 12) == []
    rec.record_jobs(store, key, [a_job(102, 10, 1, "test", "success")])  # the same job again: updated
    assert rec.jobs_of(store, key, 10)[1].conclusion == "success"
    assert rows(store, jobs) == 5


def test_a_check_run_round_trips_and_is_updated_when_remembered_again(store: Store) -> None:
    key = rec.repo_key(store, REPO)
    assert rec.check_run_of(store, key, "s1", 10, 1) is None
    assert rec.check_run_attempt(store, key, 555) is None
    sent = CheckRunRecord(555, "digest-1", frozenset({"fp-b", "fp-a"}))
    rec.remember_check_run(store, key, "s1", 10, 1, sent)
    assert rec.check_run_of(store, key, "s1", 10, 1) == sent
    assert rec.check_run_of(store, key, "s1", 10, 2) is None
    assert rec.check_run_of(store, key, "s2", 10, 1) is None
    again = CheckRunRecord(556, None, frozenset())
    rec.remember_check_run(store, key, "s1", 10, 1, again)
    assert rec.check_run_of(store, key, "s1", 10, 1) == again
    assert rows(store, check_runs) == 1
    assert rec.check_run_attempt(store, key, 556) == (10, 1)
    assert rec.check_run_attempt(store, key, 555) is None  # replaced


def test_check_runs_are_found_back_by_id_and_by_attempt(store: Store) -> None:
    key, other = rec.repo_key(store, REPO), rec.repo_key(store, "acme/other")
    rec.remember_check_run(store, key, "s1", 10, 2, CheckRunRecord(501, None, frozenset()))
    rec.remember_check_run(store, key, "s2", 10, 2, CheckRunRecord(502, None, frozenset()))
    rec.remember_check_run(store, key, "s1", 10, 1, CheckRunRecord(503, None, frozenset()))
    rec.remember_check_run(store, other, "s1", 10, 2, CheckRunRecord(504, None, frozenset()))
    assert rec.check_run_attempt(store, key, 501) == (10, 2)
    assert rec.check_run_attempt(store, key, 503) == (10, 1)
    assert rec.check_run_attempt(store, key, 504) is None  # another repository's
    assert sorted(rec.check_runs_of_attempt(store, REPO, 10, 2)) == [(key, "s1", 501), (key, "s2", 502)]
    assert rec.check_runs_of_attempt(store, "acme/other", 10, 2) == [(other, "s1", 504)]
    assert rec.check_runs_of_attempt(store, REPO, 10, 3) == []
    assert rec.check_runs_of_attempt(store, "acme/missing", 10, 2) == []


def test_a_comment_is_remembered_per_repository_and_pull_request(store: Store) -> None:
    key, other = rec.repo_key(store, REPO), rec.repo_key(store, "acme/other")
    assert rec.comment_of(store, key, 12) is None
    rec.remember_comment(store, key, 12, 9001)
    rec.remember_comment(store, key, 13, 9002)
    rec.remember_comment(store, other, 12, 9003)
    assert rec.comment_of(store, key, 12) == 9001
    rec.remember_comment(store, key, 12, 9004)
    assert (rec.comment_of(store, key, 12), rec.comment_of(store, key, 13)) == (9004, 9002)
    assert rec.comment_of(store, other, 12) == 9003
    assert rows(store, comments) == 3


def test_set_known_flaky_replaces_the_set_and_ignores_unknown_tests(store: Store) -> None:
    a, b = result("test_a", F), result("test_b", P)
    linux, windows = run("c1"), run("c1", os="windows-latest")
    store.ingest(report(a, b), linux)
    store.ingest(report(a), windows)
    store.ingest(report(result("test_c", F)), run("c1", repo="acme/other"))
    key, other = rec.repo_key(store, REPO), rec.repo_key(store, "acme/other")
    on_linux, on_windows = linux.context.key(), windows.context.key()
    assert rec.known_flaky_keys(store, key) == set()
    rec.set_known_flaky(store, key, [(a.id, on_linux), (a.id, on_windows), ("tests.mod::test_nope", on_linux)])
    assert rec.known_flaky_keys(store, key) == {(a.id, on_linux), (a.id, on_windows)}
    c_id = result("test_c").id  # a test of the other repository, and a context no report ran in
    rec.set_known_flaky(store, key, [(b.id, on_linux), (c_id, on_linux), (a.id, "no-such-context")])
    assert rec.known_flaky_keys(store, key) == {(b.id, on_linux)}
    rec.set_known_flaky(store, other, [(c_id, on_linux)])
    rec.set_known_flaky(store, key, set())
    assert rec.known_flaky_keys(store, key) == set()
    assert rec.known_flaky_keys(store, other) == {(c_id, on_linux)}


def test_stored_attempts_and_artifacts_of_a_run(store: Store) -> None:
    one = report(result("test_a", F))
    store.ingest(one, dataclasses.replace(run("c1", 1, run_id=163), artifact_id=9))
    store.ingest(one, dataclasses.replace(run("c1", 2, run_id=163), artifact_id=10))
    store.ingest(one, run("c1", 4, run_id=163))  # read without an artifact
    store.ingest(one, dataclasses.replace(run("c1", 1, run_id=164), artifact_id=11))
    store.ingest(one, dataclasses.replace(run("c1", 3, run_id=163, repo="acme/other"), artifact_id=12))
    key = rec.repo_key(store, REPO)
    assert rec.stored_attempts(store, key, 163) == {1, 2, 4}
    assert rec.stored_artifacts(store, key, 163) == {9, 10}
    assert (rec.stored_attempts(store, key, 164), rec.stored_artifacts(store, key, 164)) == ({1}, {11})
    assert (rec.stored_attempts(store, key, 165), rec.stored_artifacts(store, key, 165)) == (set(), set())


def test_tests_on_commit_and_commit_summary_count_that_commit_only(store: Store) -> None:
    failed, retried, passed, skipped = (
        result("test_b", F),
        result("test_c", F, P),
        result("test_a"),
        result("test_d", S),
    )
    store.ingest(report(passed, failed, retried, skipped), run("c1", 1))
    store.ingest(report(passed, result("test_e", F)), run("c1", 2, os="windows-latest"))
    store.ingest(report(passed, result("test_f", F)), run("c2"))
    store.ingest(report(passed, failed, result("test_g", F)), run("c1", repo="acme/other"))
    key = rec.repo_key(store, REPO)
    assert rec.tests_on_commit(store, key, "c1") == {failed.id, retried.id, result("test_e").id}
    assert rec.tests_on_commit(store, key, "c2") == {result("test_f").id}
    assert rec.tests_on_commit(store, key, "c3") == set()
    assert rec.commit_summary(store, key, "c1")[:2] == (2, 6)
    assert rec.commit_summary(store, key, "c2")[:2] == (1, 2)
    assert rec.commit_summary(store, key, "c3")[:2] == (0, 0)
