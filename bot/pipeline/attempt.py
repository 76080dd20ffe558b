"""The entry points, one per job: what each webhook event makes Flaketally do.

``process_workflow_run`` is the whole pipeline for one finished attempt, in the order it runs: begin
(is the installation active, which repository), its configuration (``bot.pipeline.config``), the run and
its pull requests, collect (``bot.pipeline.collect``), then under the repository's publish lock assess
(``bot.pipeline.assess``), an automatic rerun when the repository wants one (``bot.pipeline.rerun``) and
publish (``bot.pipeline.publish``), within the installation's write budget (``answer``). Nothing is written
to GitHub before the attempt's answer is known: its check run is created once, complete. GitHub is reached
only through the ``Port``, the store only through ``bot.store``. Everything is idempotent: processing an attempt again
stores nothing twice and edits the same check run and the same comment.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import UTC, datetime

from bot.core.findings import CommitReport
from bot.core.times import parse_optional_time
from bot.github.budget import UNLIMITED, Writes
from bot.github.errors import GitHubError
from bot.github.models import RunAttempt
from bot.pipeline import actions
from bot.pipeline.assess import assess
from bot.pipeline.collect import collect_commit, run_record
from bot.pipeline.config import configure
from bot.pipeline.port import Port
from bot.pipeline.publish import plan_publication, publish
from bot.pipeline.quarantine import due_to_leave, propose, removing
from bot.pipeline.rerun import claim_rerun, request_rerun
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
    writes: Writes = UNLIMITED,
) -> CommitReport | None:
    """``workflow_run`` ``completed``: collect, judge and report one attempt. ``default_branch``: the
    repository's, as the delivery named it (kept for later deliveries that do not); ``writes``: the
    installation's write budget (``bot.github.budget``), which the port spends from too."""
    scope = begin(store, gh, installation_id=installation_id, repo=repo, repo_id=repo_id, options=options)
    if scope is None:
        return None
    if default_branch:
        repository.set_default_branch(store, scope.repo_key, default_branch)
    scope = configure(scope)
    run = gh.get_run_attempt(repo, run_id, attempt)
    pulls = list(run.pull_requests) or gh.pulls_for_commit(repo, run.head_sha)
    rec.record_run(store, scope.repo_key, run_record(run, pulls))
    collect_commit(scope, run, pulls)
    return answer(scope, run, pulls, now=now, publish_lock=publish_lock, writes=writes)


def answer(
    scope: Scope,
    run: RunAttempt,
    pulls: Sequence[int],
    *,
    now: datetime | None,
    publish_lock: PublishLock,
    writes: Writes,
) -> CommitReport:
    """Judge the commit and publish what a person will read, within the installation's write budget.

    Under the repository's publish lock: assess, decide an automatic rerun, plan the writes, and send them
    if the budget holds room for all of them now. When it does not, the lock is let go, the budget waited
    for (in line with the installation's other writers), and everything is judged and planned again under
    the lock: what is sent is always the newest judgement, and nobody waits while holding the lock."""
    rerun_due: bool | None = None  # decided once, the first time round
    try:
        while True:
            with publish_lock():
                when = now or parse_optional_time(run.updated_at) or datetime.now(UTC)
                report = assess(scope, run.head_sha, when, base_commits=run.base_shas)
                if proposal_due(scope, run) and not writes.ensure(PROPOSAL_REQUESTS, wait=False):
                    need = PROPOSAL_REQUESTS
                else:
                    report = let_out(scope, report, run)
                    if rerun_due is None:
                        rerun_due = claim_rerun(scope, run, report, now or datetime.now(UTC))
                    planned = [] if rerun_due else plan_publication(scope, report, run, pulls)
                    need = 1 if rerun_due else sum(w.requests for w in planned)
                    if writes.ensure(need, wait=False):
                        if not rerun_due:
                            publish(planned, scope, report)
                            return report
                        request_rerun(scope, run)  # then plan again: the attempt is superseded, or was refused
                        rerun_due = False
                        continue
            writes.ensure(need, wait=True)
    finally:
        writes.release()  # what was taken and not sent goes back to the installation


PROPOSAL_REQUESTS = 3  # at most: the branch pointed, the file written, the pull request opened or updated


def proposal_due(scope: Scope, run: RunAttempt) -> bool:
    """Whether ``let_out`` may open or update the pull request that lets quarantined tests out."""
    branch = repository.default_branch(scope.store, scope.repo_key)
    return bool(branch and run.event == "push" and run.head_branch == branch and due_to_leave(scope))


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
    writes: Writes = UNLIMITED,
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
        writes=writes,
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
    writes: Writes = UNLIMITED,
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
        writes=writes,
    )
    return line
