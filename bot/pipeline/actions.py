"""The check run's buttons, clicked: "Re-run failed jobs" asks GitHub to run the attempt's failed jobs
again; "Quarantine" opens (or updates) the pull request that adds the commit's flaky tests to the
quarantine file (``bot.pipeline.quarantine``). Each is done once per check run, however often the click is
delivered (the first delivery keeps it in the store), and only for someone who may write to the
repository; what it did is one line that the check run shows."""

from __future__ import annotations

from datetime import datetime

from bot.core.baseline import Word
from bot.core.findings import CommitReport
from bot.core.quarantine import Entry
from bot.github.bodies import QUARANTINE, RERUN
from bot.github.errors import GitHubError
from bot.pipeline.quarantine import adding, propose
from bot.pipeline.scope import Scope
from bot.render.findings import money
from bot.store import repository

WRITERS = ("admin", "maintain", "write")


def quarantine_entries(report: CommitReport, today: datetime) -> list[Entry]:
    """An entry per flaky test of the commit not quarantined yet, in its context, with its evidence and
    cost as the reason."""
    entries = []
    for f in report.findings:
        if f.word not in (Word.FLAKY, Word.KNOWN_FLAKY) or f.quarantine is not None:
            continue
        cost = (
            f" {money(f.cost.total)} {report.rates.currency} in {report.thresholds.window_days} days."
            if f.cost.events
            else ""
        )
        reason = f"{f.history.evidence}.{cost}"
        entries.append(Entry(f.display or f.test_id, f.context.display(), reason[:2000], today.date()))
    return entries


def refusal(scope: Scope, identifier: str, sender: str) -> str | None:
    """Why ``sender``'s click is not acted on (they may not write to the repository), or None."""
    try:
        permission = scope.gh.permission_of(scope.repo, sender)
    except GitHubError as exc:
        return f"@{sender} clicked {identifier}: not done, their permission could not be read ({exc})"
    if permission not in WRITERS:
        return f"@{sender} clicked {identifier}: not done, it needs write access to {scope.repo} ({permission})"
    return None


def act(
    scope: Scope,
    *,
    identifier: str,
    sender: str,
    run_id: int,
    report: CommitReport,
    default_branch: str | None,
    now: datetime,
) -> str:
    """Do what the button asks (the sender may write: ``refusal``); the line the check run shows."""
    who = f"@{sender}"
    if identifier == RERUN:
        try:
            scope.gh.rerun_failed_jobs(scope.repo, run_id)
        except GitHubError as exc:
            return f"{who} asked to re-run the failed jobs: GitHub refused ({exc}; the App needs `actions: write`)"
        return f"{who} asked to re-run the failed jobs of this attempt: requested"
    if identifier == QUARANTINE:
        entries = quarantine_entries(report, now)
        if not entries:
            return f"{who} asked to quarantine: no flaky test here is left to quarantine"
        branch = default_branch or repository.default_branch(scope.store, scope.repo_key) or "main"
        path = scope.options.settings.quarantine.file
        try:
            done = propose(scope.gh, scope.repo, branch, path, adding(entries, who))
        except GitHubError as exc:
            return (
                f"{who} asked to quarantine: GitHub refused ({exc}; the App needs `contents: write` and "
                "`pull_requests: write`)"
            )
        names = ", ".join(e.test for e in entries[:5]) + (" and more" if len(entries) > 5 else "")
        return f"{who} asked to quarantine {names}: {done.said}"
    return f"{who} clicked an unknown button ({identifier}): nothing done"
