"""Posting one installation's digest of one week, once.

Where: ``digest.repository`` of the organisation's ``.github/flaketally.yml`` (read fresh, with its ETag),
else the organisation's ``.github`` repository. A repository the installation cannot reach (404) or whose
issues are off (410) is not posted in: the week is kept as not posted with the reason, logged, and shown as
a warning on ``/readyz``; nothing is retried until someone runs ``flaketally digest --post``.

Once: the caller holds the installation's digest lock (``workers.jobs``), so one worker at a time gets
here; a week already posted is left alone, and an issue with the week's title (a try that died after GitHub
took it) is kept instead of opening another. Then every open digest issue of an earlier week is closed, its
body starting with a line that links the new one; a closed issue is never closed again.
"""

from __future__ import annotations

import logging

from bot.config.load import CONFIG_PATH, ORG_REPO, resolve
from bot.digest.collect import organisation_name, organisation_week
from bot.github.errors import GitHubError
from bot.pipeline.config import read_file
from bot.pipeline.port import Port
from bot.render.digest import digest_markdown, digest_title, superseded, week_of_title
from bot.store import Store
from bot.store.digests import DigestRecord, DigestState, digest_of, keep_digest

log = logging.getLogger(__name__)

LABEL = "flaketally-digest"


def digest_repository(organisation: str, setting: str) -> str:
    """``owner/name`` of the repository ``digest.repository`` names (a bare name is the organisation's)."""
    if not setting:
        return f"{organisation}/{ORG_REPO}"
    return setting if "/" in setting else f"{organisation}/{setting}"


def post_digest(store: Store, gh: Port, installation_id: int, week: str, *, server: str) -> DigestRecord:
    """Post the installation's digest of ``week`` unless it was (module docstring); what was done."""
    done = digest_of(store, installation_id, week)
    if done is not None and done.state is DigestState.POSTED:
        return done
    organisation = organisation_name(store, installation_id)
    source, problem = read_file(store, gh, f"{organisation}/{ORG_REPO}")  # refreshes what the digest reads
    if problem:
        log.warning("digest configuration unreadable", extra={"installation_id": installation_id, "why": problem})
    repo = digest_repository(organisation, resolve([source]).config.digest.repository)
    try:
        issues = gh.list_issues(repo, LABEL)
    except GitHubError as exc:
        if exc.status not in (404, 410):
            raise
        why = "the installation cannot reach it" if exc.status == 404 else "its issues are turned off"
        line = (
            f"the digest of {organisation} for {week} was not posted: {why} ({repo}); install the App there, or "
            f"set digest.repository in {organisation}/{ORG_REPO}:{CONFIG_PATH}, then run "
            f"flaketally digest --installation {installation_id} --week {week} --post"
        )
        log.warning(line, extra={"installation_id": installation_id, "week": week})
        keep_digest(store, installation_id, week, DigestState.NOT_POSTED, line, repo=repo)
        return DigestRecord(installation_id, week, DigestState.NOT_POSTED, repo, None, line)
    title = digest_title(week)
    earlier = [i for i in issues if (w := week_of_title(i.title)) is not None and w < week]
    existing = next((i.number for i in issues if i.title == title), None)
    if existing is None:
        previous = max(earlier, key=lambda i: (week_of_title(i.title) or "", i.number)).number if earlier else None
        found = organisation_week(store, installation_id, week)  # with the configuration just read
        body = digest_markdown(
            found.digest, organisation, server=server, rates_from=found.rates_from, previous=previous
        )
        existing = gh.create_issue(repo, title, body, [LABEL])
    line = f"the digest of {organisation} for {week} is {repo}#{existing}"
    keep_digest(store, installation_id, week, DigestState.POSTED, line, repo=repo, issue_number=existing)
    for old in earlier:
        if old.state == "open":
            gh.close_issue(repo, old.number, superseded(old.body, week, existing))
    log.info(line, extra={"installation_id": installation_id, "week": week})
    return DigestRecord(installation_id, week, DigestState.POSTED, repo, existing, line)
