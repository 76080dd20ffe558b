"""Assess: what the stored reports say of one commit, as a ``CommitReport`` (``bot.core.findings``).

Only the 30-day window before ``now`` is read, and only the tests that failed on the commit or were known
flaky before, so a commit costs the same however long the repository's history is.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.core.findings import CommitReport, commit_report
from bot.core.verdicts import WINDOW_DAYS
from bot.pipeline.scope import Scope
from bot.store import records as rec


def assess(scope: Scope, head_sha: str, now: datetime) -> CommitReport:
    store, key = scope.store, scope.repo_key
    previously = frozenset(rec.known_flaky_keys(store, key))
    wanted = rec.tests_on_commit(store, key, head_sha) | {t for t, _ in previously}
    reports, results = rec.commit_summary(store, key, head_sha)
    problems = rec.problems_of_commit(store, key, head_sha)
    # GitHub's times read "2026-12-01T10:00:00Z": in that form the window is a string comparison
    since = (now - timedelta(days=WINDOW_DAYS)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return commit_report(
        scope.repo,
        head_sha,
        store.history(scope.repo, wanted, since),
        policy=scope.options.policy,
        rates=scope.options.rates,
        now=now,
        previously_known=previously,
        tests_seen=results,
        reports=reports,
        problems=list(dict.fromkeys(p.text for p in problems)),
        unjudged=sorted({p.unjudged_failure for p in problems if p.unjudged_failure}),
    )
