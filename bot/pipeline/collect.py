"""Collect: every report of a commit that is not stored yet, from this run's attempts and the other runs
on the same head SHA. Artifacts are attributed to the attempt that uploaded them, read with caps, and
each report is stored under the execution context of the job that wrote it."""

from __future__ import annotations

import re
import tempfile
from collections.abc import Sequence

from bot.core.identity import ExecutionContext, RunIdentity
from bot.core.junit import parse
from bot.core.results import ReportRefused
from bot.core.times import parse_optional_time
from bot.github.artifacts import ArchiveRefused, ArchiveWarning, junit_members, matches_patterns
from bot.github.errors import ArtifactGone, ArtifactTooLarge
from bot.github.models import Artifact, Job, RunAttempt
from bot.pipeline.scope import Scope
from bot.store import records as rec
from bot.store import repository

MAX_OTHER_RUNS = 20
_ATTEMPT_IN_NAME = re.compile(r"(?i)(?:run[-_ ]?)?attempt[-_ .]?(\d+)")


def collect_commit(scope: Scope, run: RunAttempt, pulls: Sequence[int]) -> None:
    """This run's attempts up to ``run`` that are not stored yet, then the other runs of its commit."""
    stored = rec.stored_attempts(scope.store, scope.repo_key, run.id)
    earlier = [scope.gh.get_run_attempt(scope.repo, run.id, n) for n in range(1, run.run_attempt) if n not in stored]
    collect_run(scope, [*earlier, run], pulls)
    collect_other_runs(scope, run)


def collect_run(scope: Scope, todo: Sequence[RunAttempt], pulls: Sequence[int], latest: int | None = None) -> None:
    """Collect these attempts of one run: artifacts are listed once, then each attributed to its attempt.
    ``latest`` is the run's latest attempt when the caller knows it already (from the runs listing)."""
    if not todo:
        return
    run_id = todo[0].id
    for this in todo:
        rec.record_run(scope.store, scope.repo_key, run_record(this, pulls))
    attempts = every_attempt(scope, todo[-1], latest)
    artifacts = scope.gh.list_artifacts(scope.repo, run_id)
    for this in todo:
        collect_attempt(scope, this, artifacts, attempts)


def every_attempt(scope: Scope, run: RunAttempt, latest: int | None = None) -> list[rec.RunRecord]:
    """Every attempt the run has had so far, with its start time, so an artifact is told apart by time
    only against all of them: processed late, attempt 1 would otherwise take attempt 2's uploads for its
    own. The run's latest attempt is asked first (unless given); the attempts not stored yet are then
    fetched."""
    known = {r.attempt: r for r in rec.runs_for_sha(scope.store, scope.repo_key, run.head_sha) if r.run_id == run.id}
    if latest is None:
        latest = scope.gh.get_run(scope.repo, run.id).run_attempt
    for n in range(1, latest + 1):
        if n not in known:
            known[n] = run_record(scope.gh.get_run_attempt(scope.repo, run.id, n), ())
            rec.record_run(scope.store, scope.repo_key, known[n])
    return [known[n] for n in sorted(known)]


def collect_other_runs(scope: Scope, run: RunAttempt) -> None:
    """The other finished workflow runs on the same head SHA that are not stored yet (bounded)."""
    for other in scope.gh.list_runs_for_sha(scope.repo, run.head_sha, limit=MAX_OTHER_RUNS):
        if other.id == run.id or other.status != "completed":
            continue
        stored = rec.stored_attempts(scope.store, scope.repo_key, other.id)
        todo = [
            scope.gh.get_run_attempt(scope.repo, other.id, n)
            for n in range(1, other.run_attempt + 1)
            if n not in stored
        ]
        collect_run(scope, todo, pulls=(), latest=other.run_attempt)


def collect_attempt(
    scope: Scope, run: RunAttempt, artifacts: Sequence[Artifact], attempts: Sequence[rec.RunRecord]
) -> None:
    """Download this attempt's JUnit artifacts that are not stored yet and ingest their reports."""
    jobs = scope.gh.list_jobs(scope.repo, run.id, run.run_attempt) or jobs_of_other_attempts(scope, run.id)
    rec.record_jobs(scope.store, scope.repo_key, [job_record(run, j) for j in jobs])
    stored = rec.stored_artifacts(scope.store, scope.repo_key, run.id)
    for artifact in artifacts:
        if artifact.id in stored or attempt_of_artifact(artifact, attempts) != run.run_attempt:
            continue
        if not matches_patterns(artifact.name, scope.options.artifact_patterns):
            continue
        if artifact.expired:
            note(scope, run, f"artifact {artifact.name!r} of attempt {run.run_attempt} has expired")
            continue
        ingest_artifact(scope, run, artifact, jobs)
    replaced = replaced_artifacts(run.run_attempt, artifacts, attempts, scope.options.artifact_patterns)
    read = rec.stored_artifact_names(scope.store, scope.repo_key, run.id, run.run_attempt) if replaced else set()
    for name, later in replaced:
        if name not in read:
            note(
                scope,
                run,
                f"artifact {name!r} of attempt {run.run_attempt} is missing: attempt {later} uploaded one of that "
                "name, which replaces the earlier one when uploaded with overwrite: true, so attempt "
                f"{run.run_attempt}'s reports in it could not be read",
            )


def ingest_artifact(scope: Scope, run: RunAttempt, artifact: Artifact, jobs: Sequence[Job]) -> None:
    """Download one artifact (spooled, capped), read each JUnit member and store its report."""
    limits = scope.options.limits
    with tempfile.SpooledTemporaryFile(max_size=8 << 20) as archive:
        try:
            scope.gh.download_artifact(scope.repo, artifact.id, archive, limits.max_archive_bytes)
        except ArtifactGone:
            note(scope, run, f"artifact {artifact.name!r} of attempt {run.run_attempt} is gone (expired or deleted)")
            return
        except ArtifactTooLarge as exc:
            note(scope, run, f"artifact {artifact.name!r} of attempt {run.run_attempt} refused: {exc}")
            return
        archive.seek(0)
        warnings: list[ArchiveWarning] = []
        try:
            for member, stream in junit_members(archive, limits=limits, warnings=warnings):
                try:
                    report = parse(stream)
                except ReportRefused as exc:
                    note(scope, run, f"{artifact.name}/{member} (attempt {run.run_attempt}): {exc}")
                    continue
                for collision in report.collisions:
                    text = f"{artifact.name}/{member} (attempt {run.run_attempt}): {collision.describe()}"
                    note(scope, run, text, collision.test if collision.failed else None)
                identity = RunIdentity(
                    repo=scope.repo,
                    commit=run.head_sha,
                    attempt=run.run_attempt,
                    context=context_for(artifact.name, jobs, run.path, report.os),
                    source=f"{artifact.name}/{member}",
                    run_id=run.id,
                    started_at=run.run_started_at,
                    artifact_id=artifact.id,
                    installation_id=scope.installation_id,
                )
                scope.store.ingest(report, identity)
        except ArchiveRefused as exc:
            note(scope, run, f"artifact {artifact.name!r} of attempt {run.run_attempt} refused: {exc}")
        for w in warnings:
            note(scope, run, f"{artifact.name}/{w.member} (attempt {run.run_attempt}): {w.detail or w.reason}")


def note(scope: Scope, run: RunAttempt, text: str, unjudged_failure: str | None = None) -> None:
    """Keep something that could not be judged on the commit: every check run of the commit names it."""
    problem = repository.Problem(run.id, run.run_attempt, text, unjudged_failure)
    repository.record_problem(scope.store, scope.repo_key, run.head_sha, problem)


# --- pure helpers ---------------------------------------------------------------------------------


def replaced_artifacts(
    attempt: int, artifacts: Sequence[Artifact], attempts: Sequence[rec.RunRecord], patterns: Sequence[str]
) -> list[tuple[str, int]]:
    """(name, later attempt) of the candidate artifacts that a later attempt uploaded and this attempt has
    none of: with upload-artifact's ``overwrite: true`` a rerun replaces the earlier attempt's artifact of
    the same name, so an attempt processed late finds only the later one (which it must never read)."""
    mine: set[str] = set()
    later: dict[str, int] = {}
    for artifact in artifacts:
        if not matches_patterns(artifact.name, patterns):
            continue
        owner = attempt_of_artifact(artifact, attempts)
        if owner == attempt:
            mine.add(artifact.name)
        elif owner is not None and owner > attempt:
            later[artifact.name] = min(owner, later.get(artifact.name, owner))
    return sorted((name, n) for name, n in later.items() if name not in mine)


def attempt_of_artifact(artifact: Artifact, attempts: Sequence[rec.RunRecord]) -> int | None:
    """Which attempt uploaded an artifact: by ``attempt N`` in its name, else by its creation time
    (after that attempt started and before the next one did). Artifacts do not name their attempt."""
    named = _ATTEMPT_IN_NAME.search(artifact.name)
    if named:
        return int(named.group(1))
    created = parse_optional_time(artifact.created_at)
    if created is None:
        return None
    starts = sorted((a.attempt, parse_optional_time(a.run_started_at)) for a in attempts)
    chosen = None
    for attempt, started in starts:
        if started is not None and created >= started:
            chosen = attempt
    return chosen


def context_for(artifact_name: str, jobs: Sequence[Job], workflow_path: str | None, report_os: str) -> ExecutionContext:
    """Workflow, job (with its matrix values) and runner OS; the artifact's name, without its attempt
    number, when the job that uploaded it cannot be told."""
    job: Job | None = None
    if len(jobs) == 1:
        job = jobs[0]
    else:
        lowered = artifact_name.lower()
        candidates = [j for j in jobs if j.name and j.name.lower() in lowered]
        if not candidates:  # `junit-${{ matrix.os }}`: the job's matrix values are in the artifact's name
            candidates = [j for j in jobs if (values := matrix_values(j.name)) and all(v in lowered for v in values)]
            if len({j.name for j in candidates}) > 1:
                candidates = []  # several jobs fit: the artifact's name stands for the context
        if candidates:
            job = max(candidates, key=lambda j: len(j.name))
    name = job.name if job else _ATTEMPT_IN_NAME.sub("", artifact_name).strip(" -_.") or artifact_name
    runner_os = next((label for label in job.labels if label != "self-hosted"), "") if job else ""
    return ExecutionContext(
        workflow=workflow_file(workflow_path) if workflow_path else "", job=name, os=runner_os or report_os
    )


def matrix_values(job_name: str) -> list[str]:
    """The matrix values GitHub writes into a job's name: ``test (3.11, ubuntu-latest)`` → both."""
    if not job_name.endswith(")") or "(" not in job_name:
        return []
    inside = job_name[job_name.rindex("(") + 1 : -1]
    return [v.strip().lower() for v in inside.split(",") if v.strip()]


def workflow_file(path: str | None) -> str:
    """``.github/workflows/ci.yml@main`` → ``.github/workflows/ci.yml``."""
    return (path or ".github").split("@", 1)[0]


def run_record(run: RunAttempt, pulls: Sequence[int] | None = None) -> rec.RunRecord:
    return rec.RunRecord(
        run.id,
        run.run_attempt,
        run.head_sha,
        run.head_branch,
        run.event,
        run.path,
        run.run_number,
        run.html_url,
        run.conclusion,
        run.run_started_at,
        run.updated_at,
        tuple(pulls if pulls is not None else run.pull_requests),
    )


def job_record(run: RunAttempt, job: Job) -> rec.JobRecord:
    return rec.JobRecord(
        job.id,
        run.id,
        job.run_attempt,
        job.name,
        job.conclusion,
        job.started_at,
        job.completed_at,
        job.labels,
        job.html_url,
    )


def jobs_of_other_attempts(scope: Scope, run_id: int) -> list[Job]:
    """When GitHub lists no job for an attempt, the run's jobs seen on other attempts name the contexts,
    so that both attempts of one job stay one context."""
    return [
        Job(
            j.id, j.name, j.attempt, "completed", j.conclusion, j.started_at, j.completed_at, j.labels, None, j.html_url
        )
        for j in rec.jobs_of(scope.store, scope.repo_key, run_id)
    ]
