"""The entry points, one per job: what each webhook event makes Flaketally do.

``process_workflow_run`` is the whole pipeline for one finished attempt, in the order it runs: begin
(is the installation active, which repository), its configuration (``bot.pipeline.config``), the run and
its pull requests, the check run opened, collect (``bot.pipeline.collect``), then under the repository's
publish lock assess (``bot.pipeline.assess``), an automatic rerun when the repository wants one
(``bot.pipeline.rerun``) and publish (``bot.pipeline.publish``). GitHub is reached only through the
``Port``, the store only through ``bot.store``. Everything is idempotent: processing an attempt again
stores nothing twice and edits the same check run and the same comment.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime

from bot.core.findings import CommitReport
from bot.core.verdicts import parse_optional_time
from bot.github.errors import GitHubError
from bot.github.models import RunAttempt
from bot.pipeline import actions
from bot.pipeline.assess import assess
from bot.pipeline.collect import collect_commit, run_record
from bot.pipeline.config import configure
from bot.pipeline.port import Port
from bot.pipeline.publish import ensure_check_run, publish
from bot.pipeline.quarantine import due_to_leave, propose, removing
from bot.pipeline.rerun import consider_rerun
from bot.pipeline.scope import Options, Scope
from bot.store import Store, repository
from bot.store import records as rec

log = logging.getLogger(__name__)

PublishLock = Callable[[], AbstractContextManager[None]]


def _no_lock() -> AbstractContextManager[None]:
    return nullcontext()


def begin(
    store: Store, gh: Port, *, installation_id: int, repo: str, repo_id: int, options: Options | None = None
) -> Scope | None:
    """The scope of one delivery, or None when its installation is suspended or deleted."""
    if rec.installation_state(store, installation_id) in (
        rec.InstallationState.DELETED,
        rec.InstallationState.SUSPENDED,
    ):
        log.info("installation not processed", extra={"installation_id": installation_id})
        return None
    repo_key = rec.repo_key(store, repo, installation_id, repo_id)
    return Scope(store, gh, installation_id, repo, repo_id, repo_key, options or Options())


def process_workflow_run(
    store: Store,
    gh: Port,
    *,
    installation_id: int,
    repo: str,
    repo_id: int,
    run_id: int,
    attempt: int,
    options: Options | None = None,
    now: datetime | None = None,
    publish_lock: PublishLock = _no_lock,
    default_branch: str | None = None,
) -> CommitReport | None:
    """``workflow_run`` ``completed``: collect, judge and report one attempt. ``default_branch``: the
    repository's, as the delivery named it (kept for later deliveries that do not)."""
    scope = begin(store, gh, installation_id=installation_id, repo=repo, repo_id=repo_id, options=options)
    if scope is None:
        return None
    if default_branch:
        repository.set_default_branch(store, scope.repo_key, default_branch)
    scope = configure(scope)
    run = gh.get_run_attempt(repo, run_id, attempt)
    pulls = list(run.pull_requests) or gh.pulls_for_commit(repo, run.head_sha)
    rec.record_run(store, scope.repo_key, run_record(run, pulls))
    with publish_lock():  # two workers on one attempt open one check run between them
        check = ensure_check_run(scope, run.head_sha, run_id, attempt)
    collect_commit(scope, run, pulls)
    with publish_lock():
        when = now or parse_optional_time(run.updated_at) or datetime.now(UTC)
        report = assess(scope, run.head_sha, when, base_commits=run.base_shas)
        report = let_out(scope, report, run)
        consider_rerun(scope, run, report, now or datetime.now(UTC))
        publish(scope, report, run, check, pulls)
    return report


def let_out(scope: Scope, report: CommitReport, run: RunAttempt) -> CommitReport:
    """The report naming the quarantined tests due to leave; on a push to the default branch, the pull
    request that lets them out opened or updated (``bot.pipeline.quarantine``)."""
    leaving = due_to_leave(scope)
    if not leaving:
        return report
    note = ""
    branch = repository.default_branch(scope.store, scope.repo_key)
    if branch and run.event == "push" and run.head_branch == branch:
        path = scope.options.settings.quarantine.file
        try:
            note = propose(scope.gh, scope.repo, branch, path, removing(leaving)).said
        except GitHubError as exc:
            note = f"the pull request that lets them out could not be opened ({exc}; it needs `contents: write`)"
    shown = tuple((e.test, e.context, evidence) for e, evidence in leaving)
    return dataclasses.replace(report, leaving=shown, leaving_note=note)


def open_check_run(
    store: Store,
    gh: Port,
    *,
    installation_id: int,
    repo: str,
    repo_id: int,
    head_sha: str,
    run_id: int,
    attempt: int,
    publish_lock: PublishLock = _no_lock,
) -> rec.CheckRunRecord | None:
    """``workflow_run`` ``requested``: the attempt's check run, in progress, before any result is in."""
    scope = begin(store, gh, installation_id=installation_id, repo=repo, repo_id=repo_id)
    if scope is None:
        return None
    with publish_lock():
        return ensure_check_run(scope, head_sha, run_id, attempt)


def rejudge(
    store: Store,
    gh: Port,
    *,
    installation_id: int,
    repo: str,
    repo_id: int,
    head_sha: str,
    check_run_id: int,
    options: Options | None = None,
    publish_lock: PublishLock = _no_lock,
    default_branch: str | None = None,
) -> CommitReport | None:
    """``check_run`` ``rerequested``: process the attempt that check run belongs to again."""
    scope = begin(store, gh, installation_id=installation_id, repo=repo, repo_id=repo_id, options=options)
    if scope is None:
        return None
    found = rec.check_run_attempt(store, scope.repo_key, check_run_id)
    if found is None:
        log.info("rerequested check run unknown", extra={"repo": repo, "check_run_id": check_run_id})
        return None
    run_id, attempt = found
    return process_workflow_run(
        store,
        gh,
        installation_id=installation_id,
        repo=repo,
        repo_id=repo_id,
        run_id=run_id,
        attempt=attempt,
        options=options,
        publish_lock=publish_lock,
        default_branch=default_branch,
    )


def act(
    store: Store,
    gh: Port,
    *,
    installation_id: int,
    repo: str,
    repo_id: int,
    head_sha: str,
    check_run_id: int,
    identifier: str,
    sender: str,
    options: Options | None = None,
    now: datetime | None = None,
    publish_lock: PublishLock = _no_lock,
    default_branch: str | None = None,
) -> str | None:
    """``check_run`` ``requested_action``: do what the button asks (``bot.pipeline.actions``), once per check
    run and button, then publish the attempt's check run again, which shows the line saying what was done.
    None when the check run is not one of this App's, or the click was already acted on."""
    scope = begin(store, gh, installation_id=installation_id, repo=repo, repo_id=repo_id, options=options)
    if scope is None:
        return None
    found = rec.check_run_attempt(store, scope.repo_key, check_run_id)
    if found is None:
        log.info("action on an unknown check run", extra={"repo": repo, "check_run_id": check_run_id})
        return None
    run_id, attempt = found
    refused = actions.refusal(scope, identifier, sender)
    # a refusal is kept apart, so that it never takes the place of a click by someone who may write
    kept = f"refused:{identifier}"[:20] if refused else identifier
    line = refused or f"@{sender} clicked {identifier}: in progress"
    if not repository.claim_action(store, scope.repo_key, check_run_id, kept, head_sha, sender, line):
        log.info("action already taken", extra={"repo": repo, "check_run_id": check_run_id, "action": kept})
        return None
    scope = configure(scope)
    # judged as of the attempt the check run belongs to, as its publication was
    runs = rec.runs_for_sha(store, scope.repo_key, head_sha)
    record = next((r for r in runs if (r.run_id, r.attempt) == found), None)
    when = now or (parse_optional_time(record.updated_at) if record else None) or datetime.now(UTC)
    if not refused:
        try:
            line = actions.act(
                scope,
                identifier=identifier,
                sender=sender,
                run_id=run_id,
                report=assess(scope, head_sha, when),
                default_branch=default_branch,
                now=when,
            )
        except BaseException:  # GitHub unavailable, the job stopped: the click is not lost, a retry acts on it
            repository.release_action(store, scope.repo_key, check_run_id, identifier)
            raise
        repository.settle_action(store, scope.repo_key, check_run_id, identifier, line)
    process_workflow_run(
        store,
        gh,
        installation_id=installation_id,
        repo=repo,
        repo_id=repo_id,
        run_id=run_id,
        attempt=attempt,
        options=options,
        now=now,
        publish_lock=publish_lock,
        default_branch=default_branch,
    )
    return line
