"""Automatic reruns (``rerun: failed-jobs``): gather what the rules in ``bot.core.rerun`` look at, keep the
decision, and send the one request. The decision is kept before the request is sent, so a run is rerun
once, ever, whoever processes its delivery and however often; a request GitHub refuses is said, never
tried again."""

from __future__ import annotations

import logging
from datetime import datetime

from bot.config.schema import RerunMode
from bot.core.baseline import Word
from bot.core.findings import CommitReport
from bot.core.identity import ExecutionContext
from bot.core.rerun import RerunFacts, decide_rerun
from bot.core.times import parse_optional_time
from bot.github.errors import GitHubError, GitHubUnavailable
from bot.github.models import RunAttempt
from bot.pipeline.scope import Scope
from bot.store import records as rec
from bot.store import repository

log = logging.getLogger(__name__)


def claim_rerun(scope: Scope, run: RunAttempt, report: CommitReport, now: datetime) -> bool:
    """Decide whether to ask GitHub to re-run this attempt's failed jobs, once per run, and keep the
    decision; True when this call decided to ask (then ``request_rerun`` sends the request)."""
    settings = scope.options.settings
    if settings.rerun is not RerunMode.FAILED_JOBS or run.run_attempt != 1:
        return False
    store, key = scope.store, scope.repo_key
    latest = max((r.attempt for r in rec.runs_for_sha(store, key, run.head_sha) if r.run_id == run.id), default=1)
    facts = RerunFacts(
        enabled=True,
        attempt=run.run_attempt,
        latest_attempt=latest,
        conclusion=run.conclusion,
        started_at=parse_optional_time(run.run_started_at),
        now=now,
        failed=failed_here(report, run),
        jobs_without_report=jobs_without_report(scope, run),
        max_failed_tests=settings.rerun_limits.max_failed_tests,
    )
    decision = decide_rerun(facts)
    if decision is None:
        return False
    # False when decided before: by an earlier delivery, or by another worker a moment ago
    claimed = repository.claim_rerun(store, key, run.id, run.head_sha, run.run_attempt, decision.rerun, decision.line)
    return claimed and decision.rerun


def request_rerun(scope: Scope, run: RunAttempt) -> None:
    """Ask GitHub to re-run the failed jobs of the run; a refusal is kept as the decision's line."""
    store, key = scope.store, scope.repo_key
    try:
        scope.gh.rerun_failed_jobs(scope.repo, run.id)
    except (GitHubError, GitHubUnavailable) as exc:
        log.warning("rerun refused", extra={"repo": scope.repo, "run_id": run.id, "error": str(exc)})
        repository.amend_rerun(store, key, run.id, False, f"no rerun: GitHub did not take the request ({exc})")


def failed_here(report: CommitReport, run: RunAttempt) -> list[tuple[str, Word]]:
    """(test id, word) of the tests that failed in this attempt of this run."""
    return [
        (f.test_id, f.word)
        for f in report.findings
        if any(o.run_id == run.id and o.attempt == run.run_attempt and o.failed for o in f.commit.observations)
    ]


def jobs_without_report(scope: Scope, run: RunAttempt) -> list[str]:
    """The attempt's failed jobs that left no readable report. When a report cannot be told to a job (its
    context is named after its artifact), no job is said to lack one: a crash is not claimed on a guess."""
    jobs = [j for j in rec.jobs_of(scope.store, scope.repo_key, run.id, every=True) if j.attempt == run.run_attempt]
    names = {j.name for j in jobs}
    reported = {
        ExecutionContext.from_key(k).job
        for k in rec.report_contexts(scope.store, scope.repo_key, run.id, run.run_attempt)
    }
    if not reported <= names:
        return []
    return sorted({j.name for j in jobs if j.conclusion == "failure" and j.name not in reported})
