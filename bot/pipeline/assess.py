"""Assess: what the stored reports say of one commit, as a ``CommitReport`` (``bot.core.findings``).

Only the window before ``now`` (30 days unless configured) is read, and only the tests that failed on the
commit or were known flaky before (less the ones the configuration ignores), so a commit costs the same
however long the repository's history is.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable
from datetime import datetime, timedelta

from bot.core import collector
from bot.core.cost import RerunTiming
from bot.core.findings import CommitReport, Conclusion, GatePolicy, commit_report
from bot.core.times import parse_optional_time, stored_time
from bot.core.verdicts import KNOWN_FLAKY_DAYS, known_flaky
from bot.pipeline.scope import Scope
from bot.store import Store, repository
from bot.store import records as rec


@collector.paused()  # the histories are hundreds of thousands of small objects with no cycle between them
def assess(scope: Scope, head_sha: str, now: datetime, base_commits: Collection[str] = ()) -> CommitReport:
    store, key, settings = scope.store, scope.repo_key, scope.options.settings
    previously = frozenset(k for k in rec.known_flaky_keys(store, key) if not settings.ignores(k[0]))
    on_commit = {t for t in rec.tests_on_commit(store, key, head_sha) if not settings.ignores(t)}
    summary = rec.commit_summary(store, key, head_sha)
    problems = repository.problems_of_commit(store, key, head_sha)
    thresholds = settings.history.thresholds()
    # GitHub's times read "2026-12-01T10:00:00Z": in that form the window is a string comparison
    since = stored_time(now - timedelta(days=thresholds.window_days))
    still = still_known_flaky(scope, {t for t, _ in previously} - on_commit, since, now)
    # a known-flaky test that did not fail here is only remembered or announced recovered: its whole history
    # is judged only when no same-code pass and failure of the last 7 days keeps it remembered
    wanted = on_commit | {t for t, c in previously if t not in on_commit and (t, c) not in still}
    branch = repository.default_branch(store, key)
    on_branch = repository.commits_on_branch(store, key, branch, since) if branch else set()
    report = commit_report(
        scope.repo,
        head_sha,
        store.history(scope.repo, wanted, since, timed=False, texts_on={head_sha}),
        policy=scope.options.policy,
        rates=scope.options.rates,
        now=now,
        previously_known=previously,
        tests_seen=summary.results,
        reports=summary.reports,
        problems=list(dict.fromkeys(p.text for p in problems)),
        unjudged=sorted({p.unjudged_failure for p in problems if p.unjudged_failure}),
        gate_policy=GatePolicy(
            known_flaky=Conclusion(settings.gate.known_flaky.value),
            broken=Conclusion(settings.gate.broken.value),
            fail_on_new_flake=settings.gate.fail_on_new_flake,
        ),
        thresholds=thresholds,
        branch=branch,
        default_commits=on_branch,
        base_commits=base_commits,
        automatic={
            (run_id, attempt + 1)
            for run_id, attempt, requested, _ in repository.reruns_of_commit(store, key, head_sha)
            if requested
        },
        timings=rerun_timings(scope, head_sha),
        quarantine=scope.options.quarantine,
        still_known=still,
    )
    return dataclasses.replace(report, skipped=summary.skipped, seconds=summary.seconds)


def still_known_flaky(scope: Scope, test_ids: set[str], since: str, now: datetime) -> set[tuple[str, str]]:
    """(test id, context key) of ``test_ids`` known flaky at ``now`` (``known_flaky``: a pass and a failure
    on the same code in the last 7 days), in every context they ran in, from the commits they failed on in
    those days only. The reports are asked from a day before the 7 days (``since`` at the latest), so that a
    stored time with an offset is not left out; ``known_flaky`` then places each one exactly.

    The last day is asked first: a pair found in part of the 7 days is one in all of them, and a flaky test
    mostly has one there; only the tests without one are asked the whole 7 days."""
    found: set[tuple[str, str]] = set()
    for days in (1, KNOWN_FLAKY_DAYS + 1):
        if not test_ids:
            break
        recent = max(since, stored_time(now - timedelta(days=days)))
        read = scope.store.history(scope.repo, test_ids, recent, timed=False, failed_commits=True, texts_on=())
        known = {(h.test_id, h.context) for h in read if known_flaky(h.observations, now)}
        found |= known
        # a test is done when it is known flaky in every context it ran in (the others may still be)
        test_ids = {h.test_id for h in read if (h.test_id, h.context) not in known} | (
            test_ids - {h.test_id for h in read}
        )
    return found


def rerun_timings(scope: Scope, head_sha: str) -> dict[tuple[int, int], RerunTiming]:
    """The commit's rerun attempts (attempt 2 on) as GitHub timed them (``attempt_timings``)."""
    return attempt_timings(scope.store, scope.repo_key, rec.runs_for_sha(scope.store, scope.repo_key, head_sha))


def attempt_timings(
    store: Store, repo_key: int, records: Iterable[rec.RunRecord]
) -> dict[tuple[int, int], RerunTiming]:
    """The rerun attempts (attempt 2 on) among ``records``: the minutes of the jobs each ran itself (not the
    ones carried over), and the wait since the attempt before it completed."""
    attempts = {(r.run_id, r.attempt): r for r in records}
    timings = {}
    for run_id in sorted({run_id for run_id, attempt in attempts if attempt > 1}):
        jobs = rec.jobs_of(store, repo_key, run_id, every=True)
        for (rid, attempt), record in attempts.items():
            if rid != run_id or attempt < 2:
                continue
            ran = [
                m for j in jobs if j.attempt == attempt and (m := _minutes(j.started_at, j.completed_at)) is not None
            ]
            minutes = sum(ran) if ran else None
            before = attempts.get((run_id, attempt - 1))
            wait = _minutes(before.updated_at, record.run_started_at) if before else None
            timings[(run_id, attempt)] = RerunTiming(minutes, wait)
    return timings


def _minutes(start: str | None, end: str | None) -> float | None:
    began, ended = parse_optional_time(start), parse_optional_time(end)
    if began is None or ended is None or ended < began:
        return None
    return (ended - began).total_seconds() / 60
