"""Publish: the attempt's ``Flaketally`` check run and one comment per pull request, sending only what
GitHub does not hold yet, so the same verdicts sent twice change nothing."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bot.config.schema import ORGANISATION_SECTIONS, CommentMode
from bot.core.findings import CommitReport
from bot.github.bodies import CHECK_NAME, MARKER, check_output, cleared_body, comment_body, failed_output
from bot.github.models import CheckConclusion, Comment, RunAttempt
from bot.github.payloads import Annotation, CheckOutput
from bot.pipeline.collect import workflow_file
from bot.pipeline.port import Port
from bot.pipeline.scope import Scope
from bot.render.findings import Links
from bot.store import Store, organisation, repository
from bot.store import records as rec

log = logging.getLogger(__name__)

Rerun = tuple[int, int, bool, str]  # a rerun decision: run id, the attempt it followed, requested, its line


@dataclass(frozen=True, slots=True)
class Write:
    """One thing to send to GitHub: what it is (for the log), how many content-creating requests it takes,
    and how to send it (and remember it sent)."""

    what: str
    requests: int
    send: Callable[[], None]


def plan_publication(scope: Scope, report: CommitReport, run: RunAttempt, pull_requests: Sequence[int]) -> list[Write]:
    """What publishing this attempt's judgement would send: only what a person will read and GitHub does
    not hold yet.

    - The attempt's check run is created once, complete, when the attempt has an answer to give: not when a
      later attempt of its run answers instead (one is stored, or Flaketally asked for it), nor for a run
      nobody waits on (``needs_answer``: a push to the default branch with nothing to say).
    - Otherwise new evidence goes to the newest check run of the commit, the one GitHub shows and branch
      protection reads (and to this attempt's own, when it was opened and never concluded), if it changed.
    - Each pull request's comment is started when the report has news for its author (a failure that is
      not already failing on the default branch, known flaky or quarantined: ``CommitReport.has_news``),
      then written whenever its text changes; never for a superseded attempt.
    """
    runs = rec.runs_for_sha(scope.store, scope.repo_key, report.head_sha)
    reruns = repository.reruns_of_commit(scope.store, scope.repo_key, report.head_sha)
    shown = Shown(links_of(scope, runs), rerun_lines(runs, reruns))
    later = superseded(run, runs, reruns)
    answer = not later and needs_answer(scope, report, run)
    writes = _check_writes(scope, report, run, runs, shown, create=answer)
    if later or scope.options.settings.comment is CommentMode.OFF:
        return writes
    return writes + [w for number in pull_requests if (w := _comment_write(scope, report, number, shown))]


def superseded(run: RunAttempt, runs: Sequence[rec.RunRecord], reruns: Sequence[Rerun]) -> bool:
    """Whether a later attempt of this run answers instead: it is stored among the commit's ``runs``, or
    Flaketally asked GitHub for it (``reruns``: the commit's rerun decisions)."""
    if any(r.run_id == run.id and r.attempt > run.run_attempt for r in runs):
        return True
    return any(
        run_id == run.id and attempt == run.run_attempt and requested for run_id, attempt, requested, _ in reruns
    )


def needs_answer(scope: Scope, report: CommitReport, run: RunAttempt) -> bool:
    """False for a run nobody waits on an answer for: a push to the default branch (no pull request waits
    on its gate) that brings no news (``CommitReport.has_news``): green, or failing only where the branch
    already failed. Its results are stored all the same, as history for the next pull request."""
    branch = repository.default_branch(scope.store, scope.repo_key)
    on_branch = run.event == "push" and branch is not None and run.head_branch == branch
    return not on_branch or report.has_news


def _check_writes(
    scope: Scope,
    report: CommitReport,
    run: RunAttempt,
    runs: Sequence[rec.RunRecord],
    shown: Shown,
    *,
    create: bool,
) -> list[Write]:
    known = rec.check_runs_of_commit(scope.store, scope.repo_key, run.head_sha)
    own = next((c for r, a, c in known if (r, a) == (run.id, run.run_attempt)), None)
    if own is None and create:
        conclusion, output = _check_output(scope, report, run.path, shown)
        return [_create_check(scope, run, conclusion, output)]
    paths = {(r.run_id, r.attempt): r.workflow_path for r in runs}
    newest = max(known, key=lambda k: k[2].check_run_id, default=None)
    targets = [k for k in known if k is newest or (k[2] is own and own.output_digest is None)]
    writes = []
    for run_id, attempt, check in targets:
        conclusion, output = _check_output(scope, report, paths.get((run_id, attempt)), shown)
        found = _update_check(scope, run.head_sha, run_id, attempt, check, conclusion, output)
        writes += [found] if found else []
    return writes


def _create_check(scope: Scope, run: RunAttempt, conclusion: CheckConclusion, output: CheckOutput) -> Write:
    def send() -> None:
        check_run_id = scope.gh.create_check_run(
            scope.repo,
            run.head_sha,
            CHECK_NAME,
            status="completed",
            conclusion=conclusion,
            external_id=f"{run.id}:{run.run_attempt}",
            output=output,
        )
        record = rec.CheckRunRecord(check_run_id, _output_digest(conclusion, output), _sent(output.annotations))
        rec.remember_check_run(scope.store, scope.repo_key, run.head_sha, run.id, run.run_attempt, record)

    return Write(f"create check run {run.id}:{run.run_attempt}", len(output.batches()), send)


def _comment_write(scope: Scope, report: CommitReport, number: int, shown: Shown) -> Write | None:
    """The pull request's comment, written or cleared, when that changes what it says."""
    comment_id = rec.comment_of(scope.store, scope.repo_key, number)
    starts = report.has_news or scope.options.settings.comment is CommentMode.ALWAYS
    if comment_id is None and not starts:
        return None  # a comment is started by news (``on-failure``) or by any run (``always``)
    said = rec.comment_digest_of(scope.store, scope.repo_key, number) if comment_id is not None else None
    if comment_id is None and (found := _find_comment(scope.gh, scope.repo, number)) is not None:
        comment_id, said = found.id, _fingerprint(found.body)  # written before the store knew it
    # once there, it is kept true: the report, or that the failures are gone
    if report.has_something_to_say or scope.options.settings.comment is CommentMode.ALWAYS:
        body = comment_body(report, shown.links)
    else:
        body = cleared_body(report, shown.links)
    digest = _fingerprint(body)
    if digest == said:
        return None

    def send() -> None:
        sent = comment_id
        if sent is None:
            sent = scope.gh.create_issue_comment(scope.repo, number, body)
        else:
            scope.gh.update_issue_comment(scope.repo, sent, body)
        rec.remember_comment(scope.store, scope.repo_key, number, sent, digest)

    return Write(f"{'edit' if comment_id else 'post'} the comment on #{number}", 1, send)


def publish(writes: Sequence[Write], scope: Scope, report: CommitReport) -> None:
    """Send what ``plan_publication`` planned, then remember who is known flaky."""
    for write in writes:
        log.debug("publishing", extra={"repo": scope.repo, "write": write.what})
        write.send()
    rec.set_known_flaky(scope.store, scope.repo_key, report.known_flaky_now)


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


def rerun_lines(runs: Sequence[rec.RunRecord], reruns: Sequence[Rerun]) -> tuple[str, ...]:
    """The rerun decisions of the commit, one line each, naming the run as people know it."""
    numbers = {r.run_id: r.run_number for r in runs}
    return tuple(
        f"{line} (run #{numbers.get(run_id) or run_id}, after attempt {attempt})" for run_id, attempt, _, line in reruns
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


def _update_check(
    scope: Scope,
    head_sha: str,
    run_id: int,
    attempt: int,
    check: rec.CheckRunRecord,
    conclusion: CheckConclusion,
    output: CheckOutput,
) -> Write | None:
    """The check run concluded anew, sending only what it does not hold yet: the same verdicts sent twice
    change nothing, and no annotation is ever posted twice. None when it holds everything already."""
    digest = _output_digest(conclusion, output)
    fresh = tuple(a for a in output.annotations if _fingerprint(a.to_json()) not in check.annotations_sent)
    if digest == check.output_digest and not fresh:
        return None
    sending = dataclasses.replace(output, annotations=fresh)

    def send() -> None:
        scope.gh.update_check_run(
            scope.repo, check.check_run_id, status="completed", conclusion=conclusion, output=sending
        )
        record = rec.CheckRunRecord(check.check_run_id, digest, check.annotations_sent | _sent(fresh))
        rec.remember_check_run(scope.store, scope.repo_key, head_sha, run_id, attempt, record)

    return Write(f"update check run {check.check_run_id}", len(sending.batches()), send)


def _output_digest(conclusion: CheckConclusion, output: CheckOutput) -> str:
    return _fingerprint([conclusion, output.title, output.summary, output.text])


def _sent(annotations: Sequence[Annotation]) -> frozenset[str]:
    return frozenset(_fingerprint(a.to_json()) for a in annotations)


def conclude_failed(
    store: Store,
    gh: Port,
    *,
    repo: str,
    run_id: int,
    attempt: int,
    reason: str,
    head_sha: str | None = None,
    repo_key: int | None = None,
) -> None:
    """A job that finally failed leaves a check run saying so: its attempt's, concluded, or (given the
    commit and the repository's key) a new one, so the failure is visible where the answer would have been."""
    known = rec.check_runs_of_attempt(store, repo, run_id, attempt)
    if not known and head_sha is not None and repo_key is not None:
        try:
            check_run_id = gh.create_check_run(
                repo,
                head_sha,
                CHECK_NAME,
                status="completed",
                conclusion="neutral",
                external_id=f"{run_id}:{attempt}",
                output=failed_output(reason),
            )
        except Exception:  # as below: the job has failed already
            log.exception("could not open a check run saying so", extra={"repo": repo, "run_id": run_id})
        else:
            record = rec.CheckRunRecord(check_run_id, None, frozenset())
            rec.remember_check_run(store, repo_key, head_sha, run_id, attempt, record)
        return
    for key, sha, check_run_id in known:
        try:
            gh.update_check_run(
                repo, check_run_id, status="completed", conclusion="neutral", output=failed_output(reason)
            )
        except Exception:  # the job has failed already; say why in the log, not with a second traceback
            log.exception("could not conclude the check run", extra={"repo": repo, "check_run_id": check_run_id})
        else:  # what was said before no longer stands; the annotations already posted still do
            held = rec.check_run_of(store, key, sha, run_id, attempt)
            sent = held.annotations_sent if held else frozenset()
            rec.remember_check_run(store, key, sha, run_id, attempt, rec.CheckRunRecord(check_run_id, None, sent))


def _find_comment(gh: Port, repo: str, number: int) -> Comment | None:
    for comment in gh.list_issue_comments(repo, number):
        if comment.body.startswith(MARKER) and comment.user_type == "Bot":
            return comment
    return None


def _fingerprint(value: object) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()
