"""One finished workflow run attempt, end to end: collect → ingest → judge → report.

The steps are a visible pipeline of small functions; GitHub is reached only through ``GitHubPort``
and the store only through ``bot.store``. Everything is idempotent: reprocessing an attempt stores
nothing twice and edits the same check run and the same comment.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import re
import tempfile
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import IO, Protocol

from bot.artifacts import ArchiveLimits, ArchiveRefused, ArchiveWarning, junit_members, matches_patterns
from bot.cost import Rates
from bot.findings import CommitReport, build
from bot.github import (
    Artifact,
    ArtifactGone,
    ArtifactTooLarge,
    CheckConclusion,
    CheckOutput,
    CheckStatus,
    Comment,
    Job,
    RunAttempt,
    RunSummary,
)
from bot.identity import ExecutionContext, RunIdentity
from bot.junit import ReportRefused, parse
from bot.render_github import CHECK_NAME, MARKER, check_output, cleared_body, comment_body, failed_output
from bot.store import Store
from bot.store import records as rec
from bot.verdicts import WINDOW_DAYS, CommitVerdict, parse_time

log = logging.getLogger(__name__)


class Port(Protocol):
    """What the pipeline asks of GitHub: ``bot.github.GitHubPort``, or ``bot.replay.LocalGitHub``."""

    def get_run_attempt(self, repo: str, run_id: int, attempt: int) -> RunAttempt: ...
    def list_jobs(self, repo: str, run_id: int, attempt: int) -> list[Job]: ...
    def list_artifacts(self, repo: str, run_id: int) -> list[Artifact]: ...
    def download_artifact(self, repo: str, artifact_id: int, dest: IO[bytes], max_bytes: int) -> int: ...
    def list_runs_for_sha(self, repo: str, head_sha: str, limit: int = 100) -> list[RunSummary]: ...
    def pulls_for_commit(self, repo: str, sha: str) -> list[int]: ...
    def create_check_run(
        self, repo: str, head_sha: str, name: str, *, status: CheckStatus, external_id: str,
        details_url: str | None = None, output: CheckOutput | None = None, conclusion: CheckConclusion | None = None,
    ) -> int: ...
    def update_check_run(
        self, repo: str, check_run_id: int, *, status: CheckStatus | None = None,
        conclusion: CheckConclusion | None = None, output: CheckOutput | None = None,
    ) -> None: ...
    def list_issue_comments(self, repo: str, number: int) -> list[Comment]: ...
    def create_issue_comment(self, repo: str, number: int, body: str) -> int: ...
    def update_issue_comment(self, repo: str, comment_id: int, body: str) -> None: ...

MAX_OTHER_RUNS = 20
_ATTEMPT_IN_NAME = re.compile(r"(?i)(?:run[-_ ]?)?attempt[-_ .]?(\d+)")


@dataclass(frozen=True, slots=True)
class Options:
    policy: CommitVerdict = CommitVerdict.UNDETERMINED
    rates: Rates = field(default_factory=Rates)
    limits: ArchiveLimits = field(default_factory=ArchiveLimits)
    artifact_patterns: tuple[str, ...] = ()


def _parse_time(value: str | None) -> datetime | None:
    return parse_time(value) if value else None


def _run_record(run: RunAttempt, pulls: Sequence[int] | None = None) -> rec.RunRecord:
    return rec.RunRecord(
        run.id, run.run_attempt, run.head_sha, run.head_branch, run.event, run.path, run.run_number,
        run.html_url, run.conclusion, run.run_started_at, run.updated_at,
        tuple(pulls if pulls is not None else run.pull_requests),
    )


def attempt_of_artifact(artifact: Artifact, attempts: Sequence[rec.RunRecord]) -> int | None:
    """Which attempt uploaded an artifact: by ``attempt N`` in its name, else by its creation time
    (after that attempt started and before the next one did). Artifacts do not name their attempt."""
    named = _ATTEMPT_IN_NAME.search(artifact.name)
    if named:
        return int(named.group(1))
    created = _parse_time(artifact.created_at)
    if created is None:
        return None
    starts = sorted((a.attempt, _parse_time(a.run_started_at)) for a in attempts)
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
        if candidates:
            job = max(candidates, key=lambda j: len(j.name))
    name = job.name if job else _ATTEMPT_IN_NAME.sub("", artifact_name).strip(" -_.") or artifact_name
    runner_os = next((label for label in job.labels if label != "self-hosted"), "") if job else ""
    return ExecutionContext(workflow=workflow_file(workflow_path) if workflow_path else "", job=name,
                            os=runner_os or report_os)


@dataclass(slots=True)
class Collected:
    problems: list[str] = field(default_factory=list)  # what could not be judged, named in the check run


def collect_attempt(
    store: Store,
    gh: Port,
    *,
    repo: str,
    repo_pk: int,
    installation_id: int,
    run: RunAttempt,
    artifacts: Sequence[Artifact],
    attempts: Sequence[rec.RunRecord],
    options: Options,
    collected: Collected,
) -> None:
    """Download this attempt's JUnit artifacts that are not stored yet and ingest their reports."""
    jobs = gh.list_jobs(repo, run.id, run.run_attempt) or _jobs_of_other_attempts(store, repo_pk, run.id)
    rec.record_jobs(store, repo_pk, [
        rec.JobRecord(j.id, run.id, j.run_attempt, j.name, j.conclusion, j.started_at, j.completed_at, j.labels,
                      j.html_url)
        for j in jobs
    ])
    stored = rec.stored_artifacts(store, repo_pk, run.id)
    for artifact in artifacts:
        if artifact.id in stored or attempt_of_artifact(artifact, attempts) != run.run_attempt:
            continue
        if not matches_patterns(artifact.name, options.artifact_patterns):
            continue
        if artifact.expired:
            collected.problems.append(f"artifact {artifact.name!r} of attempt {run.run_attempt} has expired")
            continue
        _ingest_artifact(store, gh, repo=repo, installation_id=installation_id, run=run, artifact=artifact,
                         jobs=jobs, options=options, collected=collected)


def _jobs_of_other_attempts(store: Store, repo_pk: int, run_id: int) -> list[Job]:
    """When GitHub lists no job for an attempt, the run's jobs seen on other attempts name the contexts,
    so that both attempts of one job stay one context."""
    return [
        Job(j.id, j.name, j.attempt, "completed", j.conclusion, j.started_at, j.completed_at, j.labels, None,
            j.html_url)
        for j in rec.jobs_of(store, repo_pk, run_id)
    ]


def _ingest_artifact(
    store: Store,
    gh: Port,
    *,
    repo: str,
    installation_id: int,
    run: RunAttempt,
    artifact: Artifact,
    jobs: Sequence[Job],
    options: Options,
    collected: Collected,
) -> None:
    with tempfile.SpooledTemporaryFile(max_size=8 << 20) as archive:
        try:
            gh.download_artifact(repo, artifact.id, archive, options.limits.max_archive_bytes)
        except ArtifactGone:
            collected.problems.append(f"artifact {artifact.name!r} of attempt {run.run_attempt} is gone (expired or "
                                      "deleted)")
            return
        except ArtifactTooLarge as exc:
            collected.problems.append(f"artifact {artifact.name!r} refused: {exc}")
            return
        archive.seek(0)
        warnings: list[ArchiveWarning] = []
        try:
            for member, stream in junit_members(archive, limits=options.limits, warnings=warnings):
                try:
                    report = parse(stream)
                except ReportRefused as exc:
                    collected.problems.append(f"{artifact.name}/{member}: {exc}")
                    continue
                identity = RunIdentity(
                    repo=repo,
                    commit=run.head_sha,
                    attempt=run.run_attempt,
                    context=context_for(artifact.name, jobs, run.path, report.os),
                    source=f"{artifact.name}/{member}",
                    run_id=run.id,
                    started_at=run.run_started_at,
                    artifact_id=artifact.id,
                    installation_id=installation_id,
                )
                store.ingest(report, identity)
        except ArchiveRefused as exc:
            collected.problems.append(f"artifact {artifact.name!r} refused: {exc}")
        collected.problems.extend(f"{artifact.name}/{w.member}: {w.detail or w.reason}" for w in warnings)


def judge_commit_report(
    store: Store, *, repo: str, repo_pk: int, head_sha: str, options: Options, now: datetime,
    problems: Sequence[str] = (),
) -> CommitReport:
    previously = frozenset(rec.known_flaky_keys(store, repo_pk))
    wanted = rec.tests_on_commit(store, repo_pk, head_sha) | {t for t, _ in previously}
    reports, results = rec.commit_summary(store, repo_pk, head_sha)
    # GitHub's times read "2026-12-01T10:00:00Z": in that form the window is a string comparison
    since = (now - timedelta(days=WINDOW_DAYS)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return build(
        repo, head_sha, store.history(repo, wanted, since), policy=options.policy, rates=options.rates, now=now,
        previously_known=previously, tests_seen=results, reports=reports, problems=problems,
    )


def ensure_check_run(store: Store, gh: Port, *, repo: str, repo_pk: int, head_sha: str, run_id: int,
                     attempt: int) -> rec.CheckRunRecord:
    """The ``Flaketally`` check run of this attempt, opened in progress when there is none yet.

    One check run per attempt: GitHub only ever appends annotations, so a later attempt's verdicts get
    a fresh check run (the newest one of a name is the one branch protection reads)."""
    known = rec.check_run_of(store, repo_pk, head_sha, run_id, attempt)
    if known is None:
        check_run_id = gh.create_check_run(repo, head_sha, CHECK_NAME, status="in_progress",
                                           external_id=f"{run_id}:{attempt}")
        known = rec.CheckRunRecord(check_run_id, None, frozenset())
        rec.remember_check_run(store, repo_pk, head_sha, run_id, attempt, known)
    return known


def _fingerprint(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def update_check(
    store: Store, gh: Port, *, repo: str, repo_pk: int, head_sha: str, run_id: int, attempt: int,
    check: rec.CheckRunRecord, conclusion: CheckConclusion, output: CheckOutput,
) -> None:
    """Conclude the check run, sending only what it does not hold yet: the same verdicts sent twice
    change nothing, and no annotation is ever posted twice."""
    digest = _fingerprint([conclusion, output.title, output.summary, output.text])
    fresh = tuple(a for a in output.annotations if _fingerprint(a.to_json()) not in check.annotations_sent)
    if digest == check.output_digest and not fresh:
        return
    gh.update_check_run(repo, check.check_run_id, status="completed", conclusion=conclusion,
                        output=dataclasses.replace(output, annotations=fresh))
    sent = check.annotations_sent | {_fingerprint(a.to_json()) for a in fresh}
    rec.remember_check_run(store, repo_pk, head_sha, run_id, attempt,
                           rec.CheckRunRecord(check.check_run_id, digest, frozenset(sent)))


def publish(
    store: Store, gh: Port, *, repo: str, repo_pk: int, report: CommitReport, run: RunAttempt,
    check: rec.CheckRunRecord, pull_requests: Sequence[int],
) -> None:
    conclusion, output = check_output(report, workflow_file(run.path))
    update_check(store, gh, repo=repo, repo_pk=repo_pk, head_sha=run.head_sha, run_id=run.id,
                 attempt=run.run_attempt, check=check, conclusion=conclusion, output=output)
    for number in pull_requests:
        comment_id = rec.comment_of(store, repo_pk, number) or _find_comment(gh, repo, number)
        if report.has_something_to_say:
            body = comment_body(report)
        elif comment_id is not None:
            body = cleared_body(report)
        else:
            continue
        if comment_id is None:
            comment_id = gh.create_issue_comment(repo, number, body)
        else:
            gh.update_issue_comment(repo, comment_id, body)
        rec.remember_comment(store, repo_pk, number, comment_id)
    rec.set_known_flaky(store, repo_pk, report.known_flaky_now)


def workflow_file(path: str | None) -> str:
    """``.github/workflows/ci.yml@main`` → ``.github/workflows/ci.yml``."""
    return (path or ".github").split("@", 1)[0]


def _find_comment(gh: Port, repo: str, number: int) -> int | None:
    for comment in gh.list_issue_comments(repo, number):
        if comment.body.startswith(MARKER) and comment.user_type == "Bot":
            return comment.id
    return None


PublishLock = Callable[[], AbstractContextManager[None]]


def _no_lock() -> AbstractContextManager[None]:
    return nullcontext()


def process_attempt(
    store: Store, gh: Port, *, installation_id: int, repo: str, repo_github_id: int, run_id: int,
    attempt: int, options: Options | None = None, now: datetime | None = None, publish_lock: PublishLock = _no_lock,
) -> CommitReport | None:
    """The whole pipeline for one ``workflow_run`` ``completed`` delivery."""
    options = options or Options()
    if not _active(store, installation_id):
        return None
    repo_pk = rec.repo_id(store, repo, installation_id, repo_github_id)
    run = gh.get_run_attempt(repo, run_id, attempt)
    pulls = list(run.pull_requests) or gh.pulls_for_commit(repo, run.head_sha)
    rec.record_run(store, repo_pk, _run_record(run, pulls))
    check = ensure_check_run(store, gh, repo=repo, repo_pk=repo_pk, head_sha=run.head_sha, run_id=run_id,
                             attempt=attempt)
    collected = Collected()
    stored = rec.stored_attempts(store, repo_pk, run_id)
    todo = [gh.get_run_attempt(repo, run_id, n) for n in range(1, attempt) if n not in stored] + [run]
    _collect_run(store, gh, repo=repo, repo_pk=repo_pk, installation_id=installation_id, todo=todo,
                 pulls=pulls, options=options, collected=collected)
    _collect_other_runs(store, gh, repo=repo, repo_pk=repo_pk, installation_id=installation_id, run=run,
                        options=options, collected=collected)
    with publish_lock():
        report = judge_commit_report(
            store, repo=repo, repo_pk=repo_pk, head_sha=run.head_sha, options=options,
            now=now or _parse_time(run.updated_at) or datetime.now(UTC), problems=collected.problems,
        )
        publish(store, gh, repo=repo, repo_pk=repo_pk, report=report, run=run, check=check, pull_requests=pulls)
    return report


def _active(store: Store, installation_id: int) -> bool:
    if rec.installation_status(store, installation_id) in ("deleted", "suspended"):
        log.info("installation not processed", extra={"installation_id": installation_id})
        return False
    return True


def open_check(
    store: Store, gh: Port, *, installation_id: int, repo: str, repo_github_id: int, head_sha: str,
    run_id: int, attempt: int,
) -> rec.CheckRunRecord | None:
    """``workflow_run`` ``requested``: the attempt's check run, in progress, before any result is in."""
    if not _active(store, installation_id):
        return None
    repo_pk = rec.repo_id(store, repo, installation_id, repo_github_id)
    return ensure_check_run(store, gh, repo=repo, repo_pk=repo_pk, head_sha=head_sha, run_id=run_id, attempt=attempt)


def rejudge_check_run(
    store: Store, gh: Port, *, installation_id: int, repo: str, repo_github_id: int, head_sha: str,
    check_run_id: int, options: Options | None = None, publish_lock: PublishLock = _no_lock,
) -> CommitReport | None:
    """``check_run`` ``rerequested``: process the attempt that check run belongs to again."""
    if not _active(store, installation_id):
        return None
    repo_pk = rec.repo_id(store, repo, installation_id, repo_github_id)
    found = rec.check_run_attempt(store, repo_pk, check_run_id)
    if found is None:
        log.info("rerequested check run unknown", extra={"repo": repo, "check_run_id": check_run_id})
        return None
    run_id, attempt = found
    return process_attempt(store, gh, installation_id=installation_id, repo=repo, repo_github_id=repo_github_id,
                           run_id=run_id, attempt=attempt, options=options, publish_lock=publish_lock)


def conclude_failed(store: Store, gh: Port, *, repo: str, run_id: int, attempt: int, reason: str) -> None:
    """A job that finally failed leaves its check run concluded, saying so, never stuck in progress."""
    for repo_pk, head_sha, check_run_id in rec.check_runs_of_attempt(store, repo, run_id, attempt):
        try:
            gh.update_check_run(repo, check_run_id, status="completed", conclusion="neutral",
                                output=failed_output(reason))
        except Exception:  # the job has failed already; say why in the log, not with a second traceback
            log.exception("could not conclude the check run", extra={"repo": repo, "check_run_id": check_run_id})
        else:  # what was said before no longer stands; the annotations already posted still do
            known = rec.check_run_of(store, repo_pk, head_sha, run_id, attempt)
            sent = known.annotations_sent if known else frozenset()
            rec.remember_check_run(store, repo_pk, head_sha, run_id, attempt,
                                   rec.CheckRunRecord(check_run_id, None, sent))


def _collect_run(
    store: Store, gh: Port, *, repo: str, repo_pk: int, installation_id: int, todo: Sequence[RunAttempt],
    pulls: Sequence[int], options: Options, collected: Collected,
) -> None:
    """Collect these attempts of one run: artifacts are listed once, then each attributed to its attempt."""
    if not todo:
        return
    run_id, head_sha = todo[0].id, todo[0].head_sha
    for this in todo:
        rec.record_run(store, repo_pk, _run_record(this, pulls))
    artifacts = gh.list_artifacts(repo, run_id)
    attempts = [r for r in rec.runs_for_sha(store, repo_pk, head_sha) if r.run_id == run_id]
    for this in todo:
        collect_attempt(store, gh, repo=repo, repo_pk=repo_pk, installation_id=installation_id, run=this,
                        artifacts=artifacts, attempts=attempts, options=options, collected=collected)


def _collect_other_runs(
    store: Store, gh: Port, *, repo: str, repo_pk: int, installation_id: int, run: RunAttempt,
    options: Options, collected: Collected,
) -> None:
    """The other finished workflow runs on the same head SHA that are not stored yet (bounded)."""
    for other in gh.list_runs_for_sha(repo, run.head_sha, limit=MAX_OTHER_RUNS):
        if other.id == run.id or other.status != "completed":
            continue
        stored = rec.stored_attempts(store, repo_pk, other.id)
        todo = [gh.get_run_attempt(repo, other.id, n) for n in range(1, other.run_attempt + 1) if n not in stored]
        _collect_run(store, gh, repo=repo, repo_pk=repo_pk, installation_id=installation_id, todo=todo,
                     pulls=(), options=options, collected=collected)
