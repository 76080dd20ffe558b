"""One installation's week, gathered from the store: only the repositories that installation's events
named, their test histories and their runs over the trend's weeks, and the rates of the organisation's
configuration as the App last read it (no GitHub request)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from datetime import timedelta

from bot.config.load import CONFIG_PATH, ORG_REPO, Effective, Source, resolve
from bot.config.quarantine import parse_quarantine
from bot.core.baseline import BaselineState, baseline
from bot.core.digest import TREND_WEEKS, Digest, RunFact, digest, week_start
from bot.core.display import stored_display_id
from bot.core.identity import ExecutionContext
from bot.core.observations import TestHistory
from bot.core.quarantine import recovery
from bot.core.times import stored_time
from bot.pipeline.assess import attempt_timings
from bot.store import Store, repository
from bot.store import organisation as org_store


@dataclass(frozen=True, slots=True)
class OrganisationWeek:
    organisation: str
    digest: Digest
    rates_from: str  # where the rates in force came from

    def render(self, fmt: str, server: str) -> str:
        """The digest as ``flaketally digest --format`` prints it: ``markdown`` (the issue's body), ``html``
        (one page) or ``json`` (every figure, versioned)."""
        if fmt == "json":
            document = {"flaketally": "digest", "version": 1, "organisation": self.organisation}
            document |= dataclasses.asdict(self.digest) | {"rates_from": self.rates_from}
            return json.dumps(document, ensure_ascii=False, indent=2) + "\n"
        if fmt == "html":
            from bot.render.digest_html import digest_html

            return digest_html(self.digest, self.organisation, server=server, rates_from=self.rates_from)
        from bot.render.digest import digest_markdown

        return digest_markdown(self.digest, self.organisation, server=server, rates_from=self.rates_from) + "\n"


def organisation_name(store: Store, installation_id: int) -> str:
    """The account the installation belongs to, else the owner of its repositories, else its id."""
    repos = org_store.repos_of_installation(store, installation_id)
    return org_store.installation_account(store, installation_id) or (
        repos[0][1].split("/", 1)[0] if repos else str(installation_id)
    )


def organisation_config(store: Store, organisation: str) -> Effective:
    """The organisation's ``.github/flaketally.yml`` as the App last read it (the defaults when it never did)."""
    where = f"{organisation}/{ORG_REPO}:{CONFIG_PATH}"
    cached = repository.cached_file(store, where)
    return resolve([Source(where, cached[1] if cached else None)])


def organisation_week(store: Store, installation_id: int, week: str) -> OrganisationWeek:
    """The digest of ``week`` for the installation (module docstring)."""
    repos = org_store.repos_of_installation(store, installation_id)
    organisation = organisation_name(store, installation_id)
    since = stored_time(week_start(week) - timedelta(weeks=TREND_WEEKS - 1))
    histories = []
    runs: list[RunFact] = []
    for key, name in repos:
        histories += [(name, h) for h in store.history(name, since=since)]
        records = org_store.runs_since(store, key, since)
        timings = attempt_timings(store, key, records)
        decided = repository.reruns_of_repo(store, key)
        automatic = {(run_id, attempt + 1) for run_id, attempt, requested, _ in decided if requested}
        for r in records:
            if r.run_started_at is None:
                continue
            timing = timings.get((r.run_id, r.attempt))
            runs.append(
                RunFact(
                    name,
                    r.run_id,
                    r.attempt,
                    r.run_started_at,
                    (r.run_id, r.attempt) in automatic,
                    (timing.job_minutes or 0.0) if timing else 0.0,  # the digest sums what GitHub timed
                    timing.wait_minutes if timing else None,
                )
            )
    effective = organisation_config(store, organisation)
    where = f"{organisation}/{ORG_REPO}:{CONFIG_PATH}"
    rates_from = where if any(k.startswith("rates.") for k in effective.origin) else "the defaults"
    config = effective.config
    found = digest(week, histories, runs, rates=config.rates.rates(), policy=config.policy, repositories=len(repos))
    broken: list[tuple[str, str, str, str]] = []
    quarantined: list[tuple[str, str, str, bool, str]] = []
    for key, name in repos:
        mine = [h for repo, h in histories if repo == name]
        broken += _broken(store, key, name, mine, since)
        quarantined += _quarantined(store, name, organisation, mine)
    # a single failure of a test broken on the default branch needs no rerun: it is in the other queue
    failing = {(repo, test, context) for repo, test, context, _ in broken}
    undetermined = tuple(u for u in found.undetermined if u[:3] not in failing)
    found = dataclasses.replace(found, broken=tuple(broken), quarantined=tuple(quarantined), undetermined=undetermined)
    return OrganisationWeek(organisation, found, rates_from)


def _broken(
    store: Store, key: int, repo: str, histories: list[TestHistory], since: str
) -> list[tuple[str, str, str, str]]:
    """The tests that fail on every recent run of the repository's default branch (``bot.core.baseline``)."""
    branch = repository.default_branch(store, key)
    if not branch:
        return []
    on_branch = repository.commits_on_branch(store, key, branch, since)
    found = []
    for h in histories:
        state = baseline(h.observations, "", branch=branch, default_commits=on_branch)
        if state.state in (BaselineState.BROKEN, BaselineState.REGRESSION):
            test = stored_display_id(h.test_id, h.classname, h.name, h.file)
            found.append((repo, test, ExecutionContext.from_key(h.context).display(), state.evidence))
    return found


def _quarantined(
    store: Store, repo: str, organisation: str, histories: list[TestHistory]
) -> list[tuple[str, str, str, bool, str]]:
    """The repository's quarantine file as the App last read it, each entry due to leave or not."""
    sources = []
    for where in (f"{organisation}/{ORG_REPO}:{CONFIG_PATH}", f"{repo}:{CONFIG_PATH}"):
        cached = repository.cached_file(store, where)
        sources.append(Source(where, cached[1] if cached else None))
    settings = resolve(sources).config.quarantine
    where = f"{repo}:{settings.file}"
    cached = repository.cached_file(store, where)
    quarantine, _ = parse_quarantine(Source(where, cached[1] if cached else None), settings)
    found = []
    for entry in quarantine.entries:
        runs = [
            recovery(h.observations, quarantine)
            for h in histories
            if stored_display_id(h.test_id, h.classname, h.name, h.file) == entry.test
            and entry.covers(entry.test, ExecutionContext.from_key(h.context).display())
        ]
        due = bool(runs) and all(r.due for r in runs)
        found.append((repo, entry.test, entry.context, due, runs[0].evidence if due else entry.reason))
    return found
