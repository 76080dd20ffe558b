"""Publish: the attempt's ``Flaketally`` check run and one comment per pull request, sending only what
GitHub does not hold yet, so the same verdicts sent twice change nothing."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from bot.config.schema import ORGANISATION_SECTIONS, CommentMode
from bot.core.findings import CommitReport
from bot.github.bodies import CHECK_NAME, MARKER, check_output, cleared_body, comment_body, failed_output
from bot.github.models import CheckConclusion, RunAttempt
from bot.github.payloads import CheckOutput
from bot.pipeline.collect import workflow_file
from bot.pipeline.port import Port
from bot.pipeline.scope import Scope
from bot.render.findings import Links
from bot.store import Store, organisation, repository
from bot.store import records as rec

log = logging.getLogger(__name__)


def ensure_check_run(scope: Scope, head_sha: str, run_id: int, attempt: int) -> rec.CheckRunRecord:
    """The ``Flaketally`` check run of this attempt, opened in progress when there is none yet.

    One check run per attempt: GitHub only ever appends annotations, so a later attempt's verdicts get
    a fresh check run (the newest one of a name is the one branch protection reads)."""
    known = rec.check_run_of(scope.store, scope.repo_key, head_sha, run_id, attempt)
    if known is None:
        check_run_id = scope.gh.create_check_run(
            scope.repo, head_sha, CHECK_NAME, status="in_progress", external_id=f"{run_id}:{attempt}"
        )
        known = rec.CheckRunRecord(check_run_id, None, frozenset())
        rec.remember_check_run(scope.store, scope.repo_key, head_sha, run_id, attempt, known)
    return known


def publish(
    scope: Scope, report: CommitReport, run: RunAttempt, check: rec.CheckRunRecord, pull_requests: Sequence[int]
) -> None:
    """Conclude the check run, write or clear each pull request's comment, remember who is known flaky."""
    runs = rec.runs_for_sha(scope.store, scope.repo_key, report.head_sha)
    shown = Shown(links_of(scope, runs), rerun_lines(scope, report.head_sha, runs))
    conclusion, output = _check_output(scope, report, run.path, shown)
    update_check(scope, run.head_sha, run.id, run.run_attempt, check, conclusion, output)
    rejudge_commit_checks(scope, report, run, runs, shown)
    mode = scope.options.settings.comment
    for number in pull_requests if mode is not CommentMode.OFF else ():
        comment_id = rec.comment_of(scope.store, scope.repo_key, number) or _find_comment(scope.gh, scope.repo, number)
        if report.has_something_to_say or mode is CommentMode.ALWAYS:
            body = comment_body(report, shown.links)
        elif comment_id is not None:
            body = cleared_body(report, shown.links)
        else:
            continue
        if comment_id is None:
            comment_id = scope.gh.create_issue_comment(scope.repo, number, body)
        else:
            scope.gh.update_issue_comment(scope.repo, comment_id, body)
        rec.remember_comment(scope.store, scope.repo_key, number, comment_id)
    rec.set_known_flaky(scope.store, scope.repo_key, report.known_flaky_now)


def rejudge_commit_checks(
    scope: Scope, report: CommitReport, run: RunAttempt, runs: Sequence[rec.RunRecord], shown: Shown
) -> None:
    """Every other concluded Flaketally check run of the commit takes the same judgement, so the final
    state does not depend on the order in which attempts and runs were processed. A check run still in
    progress (its attempt is running) is left to its own delivery; one that says nothing new is not sent."""
    paths = {(r.run_id, r.attempt): r.workflow_path for r in runs}
    for run_id, attempt, check in rec.check_runs_of_commit(scope.store, scope.repo_key, run.head_sha):
        if (run_id, attempt) == (run.id, run.run_attempt) or check.output_digest is None:
            continue
        conclusion, output = _check_output(scope, report, paths.get((run_id, attempt)), shown)
        update_check(scope, run.head_sha, run_id, attempt, check, conclusion, output)


@dataclass(frozen=True, slots=True)
class Shown:
    """What every check run of the commit shows beside the judgement, read once per publish."""

    links: Links
    reruns: tuple[str, ...]


def links_of(scope: Scope, runs: Sequence[rec.RunRecord]) -> Links:
    """Where the commit's runs, jobs and files are on GitHub, from what the store holds of its runs."""
    pages = [r.html_url for r in runs if r.html_url and "/actions/runs/" in r.html_url]
    repo_url = pages[0].split("/actions/runs/", 1)[0] if pages else None
    jobs = {
        (j.run_id, j.attempt, j.name): j.html_url
        for run_id in sorted({r.run_id for r in runs})
        for j in rec.jobs_of(scope.store, scope.repo_key, run_id, every=True)
        if j.html_url
    }
    return Links(repo_url, {r.run_id: (r.run_number, r.html_url) for r in runs}, jobs)


def rerun_lines(scope: Scope, head_sha: str, runs: Sequence[rec.RunRecord]) -> tuple[str, ...]:
    """The rerun decisions of the commit, one line each, naming the run as people know it."""
    numbers = {r.run_id: r.run_number for r in runs}
    return tuple(
        f"{line} (run #{numbers.get(run_id) or run_id}, after attempt {attempt})"
        for run_id, attempt, _, line in repository.reruns_of_commit(scope.store, scope.repo_key, head_sha)
    )


def _check_output(
    scope: Scope, report: CommitReport, workflow_path: str | None, shown: Shown
) -> tuple[CheckConclusion, CheckOutput]:
    """The check run's output, with the rerun decisions of the commit, the configuration in force at its
    foot and what was wrong in it."""
    config = scope.options.config
    return check_output(
        report,
        workflow_file(workflow_path),
        links=shown.links,
        config_lines=config.lines(skip=ORGANISATION_SECTIONS),
        config_problems=config.problems,
        rerun_lines=shown.reruns,
        action_lines=repository.actions_of_commit(scope.store, scope.repo_key, report.head_sha),
        permissions=organisation.installation_permissions(scope.store, scope.installation_id),
    )


def update_check(
    scope: Scope,
    head_sha: str,
    run_id: int,
    attempt: int,
    check: rec.CheckRunRecord,
    conclusion: CheckConclusion,
    output: CheckOutput,
) -> None:
    """Conclude the check run, sending only what it does not hold yet: the same verdicts sent twice
    change nothing, and no annotation is ever posted twice."""
    digest = _fingerprint([conclusion, output.title, output.summary, output.text])
    fresh = tuple(a for a in output.annotations if _fingerprint(a.to_json()) not in check.annotations_sent)
    if digest == check.output_digest and not fresh:
        return
    scope.gh.update_check_run(
        scope.repo,
        check.check_run_id,
        status="completed",
        conclusion=conclusion,
        output=dataclasses.replace(output, annotations=fresh),
    )
    sent = check.annotations_sent | {_fingerprint(a.to_json()) for a in fresh}
    rec.remember_check_run(
        scope.store,
        scope.repo_key,
        head_sha,
        run_id,
        attempt,
        rec.CheckRunRecord(check.check_run_id, digest, frozenset(sent)),
    )


def conclude_failed(store: Store, gh: Port, *, repo: str, run_id: int, attempt: int, reason: str) -> None:
    """A job that finally failed leaves its check run concluded, saying so, never stuck in progress."""
    for repo_key, head_sha, check_run_id in rec.check_runs_of_attempt(store, repo, run_id, attempt):
        try:
            gh.update_check_run(
                repo, check_run_id, status="completed", conclusion="neutral", output=failed_output(reason)
            )
        except Exception:  # the job has failed already; say why in the log, not with a second traceback
            log.exception("could not conclude the check run", extra={"repo": repo, "check_run_id": check_run_id})
        else:  # what was said before no longer stands; the annotations already posted still do
            known = rec.check_run_of(store, repo_key, head_sha, run_id, attempt)
            sent = known.annotations_sent if known else frozenset()
            rec.remember_check_run(
                store, repo_key, head_sha, run_id, attempt, rec.CheckRunRecord(check_run_id, None, sent)
            )


def _find_comment(gh: Port, repo: str, number: int) -> int | None:
    for comment in gh.list_issue_comments(repo, number):
        if comment.body.startswith(MARKER) and comment.user_type == "Bot":
            return comment.id
    return None


def _fingerprint(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()
