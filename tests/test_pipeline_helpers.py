"""The pure helpers of bot.pipeline.collect: which attempt uploaded an artifact, the execution context a
report is stored under, and the records kept of runs and jobs."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from bot.core.identity import ExecutionContext
from bot.github.models import Artifact, Job, RunAttempt
from bot.pipeline.collect import attempt_of_artifact, context_for, job_record, run_record, workflow_file
from bot.store.records import JobRecord, RunRecord

CI = ".github/workflows/ci.yml"
CI_AT_MAIN = f"{CI}@refs/heads/main"
T1 = "2024-05-01T10:00:00Z"  # attempt 1 starts
T2 = "2024-05-01T11:00:00Z"  # attempt 2 starts
T3 = "2024-05-01T12:00:00Z"  # attempt 3 starts


def artifact(name: str = "junit-results", created_at: str | None = None) -> Artifact:
    return Artifact(id=7, name=name, size_in_bytes=1024, expired=False, created_at=created_at)


def attempt(number: int, started: str | None) -> RunRecord:
    return RunRecord(
        run_id=4242,
        attempt=number,
        head_sha="c0ffee",
        head_branch="main",
        event="push",
        workflow_path=CI_AT_MAIN,
        run_number=17,
        html_url=None,
        conclusion=None,
        run_started_at=started,
        updated_at=None,
        pull_requests=(),
    )


THREE = [attempt(1, T1), attempt(2, T2), attempt(3, T3)]


def job(name: str, labels: Sequence[str] = ("ubuntu-latest",), job_id: int = 1) -> Job:
    return Job(
        id=job_id,
        name=name,
        run_attempt=1,
        status="completed",
        conclusion="success",
        started_at=None,
        completed_at=None,
        labels=tuple(labels),
        runner_name=None,
        html_url=None,
    )


# --- attempt_of_artifact ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("junit-attempt-2", 2),
        ("test-results (attempt 3)", 3),
        ("run_attempt_1", 1),
        ("run-attempt-3-junit", 3),
        ("JUnit-ATTEMPT-2", 2),  # case does not matter
        ("junit.attempt.3", 3),
        ("junit-attempt12", 12),  # the number is read whole, even of an attempt not known
    ],
)
def test_an_attempt_number_in_the_name_wins(name: str, expected: int) -> None:
    # Created during attempt 1: the name still decides.
    assert attempt_of_artifact(artifact(name, "2024-05-01T10:30:00Z"), THREE) == expected
    # And it needs neither a creation time nor known attempts.
    assert attempt_of_artifact(artifact(name, None), []) == expected


@pytest.mark.parametrize(
    ("created_at", "expected"),
    [
        ("2024-05-01T10:00:00Z", 1),  # the instant attempt 1 starts
        ("2024-05-01T10:30:00Z", 1),
        ("2024-05-01T10:59:59Z", 1),
        ("2024-05-01T11:00:00Z", 2),
        ("2024-05-01T11:30:00Z", 2),
        ("2024-05-01T12:00:01Z", 3),
        ("2024-05-02T00:00:00Z", 3),  # after the last attempt started: the last one
        ("2024-05-01T09:59:59Z", None),  # before any attempt started
        ("2024-05-01T11:30:00+02:00", None),  # 09:30 UTC: the offset is honoured
        ("2024-05-01T13:30:00+02:00", 2),  # 11:30 UTC
        ("2024-05-01T11:30:00", 2),  # no offset: UTC
    ],
)
def test_without_a_number_the_creation_time_decides(created_at: str, expected: int | None) -> None:
    assert attempt_of_artifact(artifact("junit-results", created_at), THREE) == expected


def test_the_attempts_may_come_in_any_order() -> None:
    shuffled = [THREE[2], THREE[0], THREE[1]]
    assert attempt_of_artifact(artifact(created_at="2024-05-01T11:30:00Z"), shuffled) == 2
    assert attempt_of_artifact(artifact(created_at="2024-05-01T10:30:00Z"), shuffled) == 1
    assert attempt_of_artifact(artifact(created_at="2024-05-01T12:30:00Z"), shuffled) == 3


def test_attempt_starts_with_offsets_are_compared_as_instants() -> None:
    attempts = [attempt(1, "2024-05-01T12:00:00+02:00"), attempt(2, "2024-05-01T13:00:00+02:00")]  # 10:00, 11:00 UTC
    assert attempt_of_artifact(artifact(created_at="2024-05-01T10:30:00Z"), attempts) == 1
    assert attempt_of_artifact(artifact(created_at="2024-05-01T11:00:00Z"), attempts) == 2
    assert attempt_of_artifact(artifact(created_at="2024-05-01T09:30:00Z"), attempts) is None


@pytest.mark.parametrize("created_at", [None, ""])
def test_no_creation_time_no_attempt(created_at: str | None) -> None:
    assert attempt_of_artifact(artifact("junit-results", created_at), THREE) is None


def test_no_known_attempt_no_attempt() -> None:
    assert attempt_of_artifact(artifact(created_at=T2), []) is None


def test_an_attempt_without_a_start_is_skipped() -> None:
    attempts = [attempt(1, T1), attempt(2, None), attempt(3, T3)]
    # Between 1 and 3, attempt 2's start unknown: attempt 1's window runs on to attempt 3.
    assert attempt_of_artifact(artifact(created_at="2024-05-01T11:30:00Z"), attempts) == 1
    assert attempt_of_artifact(artifact(created_at="2024-05-01T12:30:00Z"), attempts) == 3
    assert attempt_of_artifact(artifact(created_at="2024-05-01T09:00:00Z"), [attempt(1, None)]) is None


@pytest.mark.parametrize("name", ["junit-results", "attempts-report", "attempt", "reattempt-x", "pytest-3.12"])
def test_names_without_an_attempt_number_go_by_time(name: str) -> None:
    assert attempt_of_artifact(artifact(name, "2024-05-01T11:30:00Z"), THREE) == 2


# --- context_for ------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["junit-results", "something-else-entirely", "junit-attempt-2", ""])
def test_a_single_job_is_the_job_whatever_the_artifact_name(name: str) -> None:
    context = context_for(name, [job("build", labels=("ubuntu-22.04",))], CI_AT_MAIN, "Linux")
    assert context == ExecutionContext(workflow=CI, job="build", os="ubuntu-22.04")


MATRIX = [job("test (3.11)", job_id=1), job("test (3.12)", job_id=2), job("lint", job_id=3)]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("junit-test (3.12)", "test (3.12)"),
        ("junit-test (3.11)-attempt-2", "test (3.11)"),
        ("lint-report", "lint"),
    ],
)
def test_several_jobs_the_one_the_artifact_names(name: str, expected: str) -> None:
    assert context_for(name, MATRIX, CI, "").job == expected


@pytest.mark.parametrize(
    "jobs",
    [
        [job("test", job_id=1), job("test (windows-latest)", job_id=2)],
        [job("test (windows-latest)", job_id=2), job("test", job_id=1)],
    ],
)
def test_the_longest_matching_job_name_wins(jobs: list[Job]) -> None:
    assert context_for("results-test (windows-latest)", jobs, CI, "").job == "test (windows-latest)"
    assert context_for("results-test", jobs, CI, "").job == "test"


def test_job_names_match_case_insensitively() -> None:
    jobs = [job("Test (Ubuntu)", labels=("ubuntu-24.04",), job_id=1), job("Lint", job_id=2)]
    context = context_for("JUNIT-test (ubuntu)", jobs, CI, "Linux")
    assert context == ExecutionContext(workflow=CI, job="Test (Ubuntu)", os="ubuntu-24.04")


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("junit-attempt-2", "junit"),
        ("junit_Attempt_3", "junit"),
        ("run_attempt_1-pytest", "pytest"),
        ("pytest-results", "pytest-results"),
        ("attempt-2", "attempt-2"),  # nothing left without the number: the whole name
    ],
)
def test_no_matching_job_the_artifact_name_without_its_attempt(name: str, expected: str) -> None:
    context = context_for(name, MATRIX, CI_AT_MAIN, "Windows")
    assert context == ExecutionContext(workflow=CI, job=expected, os="Windows")
    assert context_for(name, [], CI_AT_MAIN, "Windows") == context


def test_the_attempts_of_one_artifact_share_a_context() -> None:
    first = context_for("test-results (attempt 1)", MATRIX, CI, "Linux")
    third = context_for("test-results (attempt 3)", MATRIX, CI, "Linux")
    assert first == third
    assert "attempt" not in first.job and first.job.startswith("test-results")


def test_a_job_without_a_name_matches_no_artifact() -> None:
    # "" is in every string: a job GitHub left unnamed must not claim every artifact.
    jobs = [job("", job_id=1), job("lint", job_id=2)]
    assert context_for("junit-results", jobs, CI, "Linux") == ExecutionContext(
        workflow=CI, job="junit-results", os="Linux"
    )


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        (("ubuntu-latest",), "ubuntu-latest"),
        (("self-hosted", "linux", "x64"), "linux"),
        (("self-hosted", "self-hosted", "macOS", "ARM64"), "macOS"),
        (("self-hosted",), "FromReport"),
        ((), "FromReport"),
    ],
)
def test_runner_os_is_the_first_label_not_self_hosted(labels: tuple[str, ...], expected: str) -> None:
    assert context_for("junit", [job("build", labels=labels)], CI, "FromReport").os == expected
    several = [job("build", labels=labels, job_id=1), job("lint", labels=("windows-latest",), job_id=2)]
    assert context_for("junit-build", several, CI, "FromReport").os == expected


def test_no_job_the_report_os() -> None:
    assert context_for("junit", MATRIX, CI, "Linux").os == "Linux"
    assert context_for("junit", MATRIX, CI, "").os == ""


@pytest.mark.parametrize(
    ("path", "expected"),
    [(CI_AT_MAIN, CI), (f"{CI}@v1.2", CI), (CI, CI), (None, ""), ("", "")],
)
def test_the_context_workflow_is_the_file_without_its_ref(path: str | None, expected: str) -> None:
    assert context_for("junit", [job("build")], path, "").workflow == expected


# --- workflow_file ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (CI_AT_MAIN, CI),
        (".github/workflows/release.yaml@refs/tags/v1.0.0", ".github/workflows/release.yaml"),
        ("ci.yml@main", "ci.yml"),
        (CI, CI),
        ("a.yml@refs/heads/feature@x", "a.yml"),  # only the first "@" separates the ref
        ("dynamic/github-code-scanning/codeql", "dynamic/github-code-scanning/codeql"),
        (None, ".github"),
        ("", ".github"),
    ],
)
def test_workflow_file(path: str | None, expected: str) -> None:
    assert workflow_file(path) == expected


# --- run_record and job_record ----------------------------------------------------------------------

RUN = RunAttempt(
    id=4242,
    run_attempt=3,
    head_sha="c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00",
    head_branch="feature/x",
    event="pull_request",
    status="completed",
    conclusion="failure",
    path=".github/workflows/ci.yml@refs/pull/5/merge",
    name="CI",
    html_url="https://github.com/acme/widgets/actions/runs/4242/attempts/3",
    run_number=17,
    run_started_at="2024-05-01T10:00:00Z",
    updated_at="2024-05-01T10:20:00Z",
    pull_requests=(5, 8),
    head_repo_full_name="fork/widgets",
)


def expected_run_record(pulls: tuple[int, ...]) -> RunRecord:
    return RunRecord(
        run_id=4242,
        attempt=3,
        head_sha="c0ffee00c0ffee00c0ffee00c0ffee00c0ffee00",
        head_branch="feature/x",
        event="pull_request",
        workflow_path=".github/workflows/ci.yml@refs/pull/5/merge",
        run_number=17,
        html_url="https://github.com/acme/widgets/actions/runs/4242/attempts/3",
        conclusion="failure",
        run_started_at="2024-05-01T10:00:00Z",
        updated_at="2024-05-01T10:20:00Z",
        pull_requests=pulls,
    )


def test_run_record_carries_the_run() -> None:
    assert run_record(RUN) == expected_run_record((5, 8))
    assert run_record(RUN, None) == expected_run_record((5, 8))


@pytest.mark.parametrize(("pulls", "expected"), [([12, 3], (12, 3)), ((9,), (9,)), ([], ())])
def test_given_pulls_replace_the_runs_own(pulls: Sequence[int], expected: tuple[int, ...]) -> None:
    record = run_record(RUN, pulls)
    assert record == expected_run_record(expected)
    assert isinstance(record.pull_requests, tuple)


def test_run_record_keeps_what_github_left_out() -> None:
    bare = RunAttempt(
        id=1,
        run_attempt=1,
        head_sha="abc",
        head_branch=None,
        event="workflow_dispatch",
        status=None,
        conclusion=None,
        path=CI,
        name=None,
        html_url="https://github.com/acme/widgets/actions/runs/1",
        run_number=1,
        run_started_at=None,
        updated_at="2024-05-01T10:20:00Z",
        pull_requests=(),
        head_repo_full_name=None,
    )
    assert run_record(bare) == RunRecord(
        run_id=1,
        attempt=1,
        head_sha="abc",
        head_branch=None,
        event="workflow_dispatch",
        workflow_path=CI,
        run_number=1,
        html_url="https://github.com/acme/widgets/actions/runs/1",
        conclusion=None,
        run_started_at=None,
        updated_at="2024-05-01T10:20:00Z",
        pull_requests=(),
    )


def test_job_record_carries_the_job_under_its_run() -> None:
    built = Job(
        id=99,
        name="test (3.12)",
        run_attempt=2,  # the job's own attempt, not the run attempt it was listed with (3)
        status="completed",
        conclusion="success",
        started_at="2024-05-01T10:01:00Z",
        completed_at="2024-05-01T10:09:00Z",
        labels=("self-hosted", "linux"),
        runner_name="runner-3",
        html_url="https://github.com/acme/widgets/actions/runs/4242/job/99",
    )
    assert job_record(RUN, built) == JobRecord(
        id=99,
        run_id=4242,
        attempt=2,
        name="test (3.12)",
        conclusion="success",
        started_at="2024-05-01T10:01:00Z",
        completed_at="2024-05-01T10:09:00Z",
        labels=("self-hosted", "linux"),
        html_url="https://github.com/acme/widgets/actions/runs/4242/job/99",
    )


def test_an_artifact_named_by_the_matrix_values_belongs_to_the_job_of_those_values() -> None:
    from bot.pipeline.collect import context_for, matrix_values

    jobs = [
        Job(1, "test (3.11, ubuntu-latest)", 1, "completed", "failure", None, None, ("ubuntu-latest",), None, None),
        Job(2, "test (3.11, windows-latest)", 1, "completed", "success", None, None, ("windows-latest",), None, None),
    ]
    assert matrix_values("test (3.11, ubuntu-latest)") == ["3.11", "ubuntu-latest"]
    context = context_for("junit-3.11-windows-latest", jobs, ".github/workflows/ci.yml", "")
    assert (context.job, context.os) == ("test (3.11, windows-latest)", "windows-latest")
    partial = context_for("junit-3.11", jobs, ".github/workflows/ci.yml", "")  # no job has all its values there
    assert partial.job == "junit-3.11"
