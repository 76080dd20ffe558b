"""Changing the quarantine file the only way it changes: by a pull request a person merges.

One pull request per repository and purpose, found again by its branch: ``flaketally/quarantine`` adds
tests (the check run's "Quarantine" button), ``flaketally/quarantine-recovered`` removes the ones that
recovered. A second click or a redelivered event updates the same pull request, and a change already made
changes nothing. Nothing is ever pushed to the default branch.

The file is written back in its canonical form (``bot.config.quarantine.render_quarantine``): comments a
person added by hand are not kept, and a file with entries Flaketally cannot read is never rewritten (it
would drop them); the pull request is then not opened, and the reason is said.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from bot.config.load import Source
from bot.config.quarantine import parse_quarantine, render_quarantine
from bot.core.display import stored_display_id
from bot.core.identity import ExecutionContext
from bot.core.quarantine import Entry, recovery
from bot.pipeline.port import Port
from bot.pipeline.scope import Scope
from bot.render.findings import prose
from bot.render.markdown import code, plain
from bot.store import organisation

ADD_BRANCH = "flaketally/quarantine"
REMOVE_BRANCH = "flaketally/quarantine-recovered"


@dataclass(frozen=True, slots=True)
class Proposal:
    """What a request to change the file did: the pull request (None when there was nothing to propose or it
    could not be), whether it was opened now, and one sentence for the check run."""

    number: int | None
    opened: bool
    said: str


@dataclass(frozen=True, slots=True)
class Change:
    branch: str
    title: str
    message: str  # the commit message
    body: Callable[[Sequence[Entry]], str]  # the pull request's body, from the file's entries after the change
    apply: Callable[[list[Entry]], list[Entry]]


def propose(gh: Port, repo: str, default_branch: str, path: str, change: Change) -> Proposal:
    """Open or update the pull request that makes ``change`` to the quarantine file at ``path``."""
    number = gh.open_pull(repo, change.branch)
    if number is None:
        base = gh.branch_sha(repo, default_branch)
        if base is None:
            return Proposal(None, False, f"no pull request: {repo} has no branch {default_branch}")
        gh.point_branch(repo, change.branch, base)  # a branch left by a closed pull request starts again
    text, blob = gh.file_at(repo, path, change.branch)
    quarantine, problems = parse_quarantine(Source(f"{repo}:{path}", text))
    if problems:
        return Proposal(number, False, f"no change proposed: {problems[0]} (fix the file first; nothing is dropped)")
    before = list(quarantine.entries)
    after = change.apply(list(before))
    if after != before:
        gh.write_file(repo, path, change.branch, render_quarantine(after), change.message, blob)
    elif number is None:
        return Proposal(None, False, "no change proposed: the quarantine file already says so")
    if number is None:
        number = gh.create_pull(repo, change.branch, default_branch, change.title, change.body(after))
        return Proposal(number, True, f"opened pull request #{number}")
    if after == before:  # asked again: the pull request already says so, and nothing is written
        return Proposal(number, False, f"#{number} says so")
    gh.update_pull(repo, number, change.title, change.body(after))
    return Proposal(number, False, f"updated pull request #{number}")


def _cell(text: str) -> str:
    """Text in a table cell: as prose, with its pipes escaped so the row holds."""
    return prose(text).replace("|", "\\|")


def adding(entries: Sequence[Entry], asked_by: str) -> Change:
    """Add ``entries`` (an entry already there for the test and context is kept as it is)."""

    def apply(current: list[Entry]) -> list[Entry]:
        have = {(e.test, e.context) for e in current}
        return current + [e for e in entries if (e.test, e.context) not in have]

    def body(after: Sequence[Entry]) -> str:
        rows = [f"| {code(e.test)} | {_cell(e.context)} | {_cell(e.reason)} | {e.since} |" for e in after]
        return "\n".join(
            [
                f"Flaketally proposes to quarantine these tests (asked by {plain(asked_by, 40)}): their failures will "
                "no longer fail the Flaketally check in these contexts. They are still run, observed and shown, and "
                "a test leaves the quarantine by a pull request like this one once its runs show it recovered.",
                "",
                "| test | context | why | since |",
                "|---|---|---|---|",
                *rows,
                "",
                "Merging this pull request is what quarantines them; closing it changes nothing.",
            ]
        )

    return Change(ADD_BRANCH, "Flaketally: quarantine flaky tests", "Quarantine flaky tests (Flaketally)", body, apply)


def removing(recovered: Sequence[tuple[Entry, str]]) -> Change:
    """Remove the entries that recovered, each with the evidence that says so."""
    gone = {(e.test, e.context) for e, _ in recovered}

    def apply(current: list[Entry]) -> list[Entry]:
        return [e for e in current if (e.test, e.context) not in gone]

    def body(after: Sequence[Entry]) -> str:
        rows = [f"| {code(e.test)} | {_cell(e.context)} | {_cell(evidence)} |" for e, evidence in recovered]
        return "\n".join(
            [
                "These quarantined tests have recovered: as many clean runs in a row in their context, over as many "
                "days, as the repository asks (`quarantine.clean_runs`, `quarantine.clean_days`); beside each, the "
                "failure rate its runs rule out. Merging this pull request lets their failures count again.",
                "",
                "| test | context | evidence |",
                "|---|---|---|",
                *rows,
            ]
        )

    title = "Flaketally: recovered tests leave the quarantine"
    return Change(REMOVE_BRANCH, title, "Unquarantine recovered tests (Flaketally)", body, apply)


def due_to_leave(scope: Scope) -> list[tuple[Entry, str]]:
    """The quarantine entries whose test has recovered in every context the entry covers and the test ran
    in (``bot.core.quarantine.recovery``), each with its evidence."""
    quarantine = scope.options.quarantine
    if not quarantine:
        return []
    named = {e.test for e in quarantine.entries}
    shown = {
        stored: display
        for stored, classname, name, file in organisation.test_names(scope.store, scope.repo_key)
        if (display := stored_display_id(stored, classname, name, file)) in named
    }
    histories = scope.store.history(scope.repo, set(shown)) if shown else []
    due = []
    for entry in quarantine.entries:
        found = [
            (context, recovery(h.observations, quarantine))
            for h in histories
            if shown[h.test_id] == entry.test
            and entry.covers(entry.test, context := ExecutionContext.from_key(h.context).display())
        ]
        if found and all(r.due for _, r in found):
            due.append((entry, "; ".join(f"{context}: {r.evidence}" for context, r in found)))
    return due
