"""One installation's week, gathered from the store: only the repositories that installation's events
named, their test histories and their runs over the trend's weeks, and the rates of the organisation's
configuration as the App last read it (no GitHub request)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, timedelta

from bot.config.load import CONFIG_PATH, ORG_REPO, Source, resolve
from bot.core.digest import TREND_WEEKS, Digest, RunFact, digest, week_start
from bot.pipeline.assess import attempt_timings
from bot.store import Store, repository
from bot.store import records as rec


@dataclass(frozen=True, slots=True)
class OrganisationWeek:
    organisation: str
    digest: Digest
    rates_from: str  # where the rates in force came from


def organisation_week(store: Store, installation_id: int, week: str) -> OrganisationWeek:
    """The digest of ``week`` for the installation (module docstring)."""
    repos = rec.repos_of_installation(store, installation_id)
    organisation = rec.installation_account(store, installation_id) or (
        repos[0][1].split("/", 1)[0] if repos else str(installation_id)
    )
    since = (week_start(week) - timedelta(weeks=TREND_WEEKS - 1)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    histories = []
    runs: list[RunFact] = []
    for key, name in repos:
        histories += [(name, h) for h in store.history(name, since=since)]
        records = rec.runs_since(store, key, since)
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
                    timing.job_minutes if timing else 0.0,
                    timing.wait_minutes if timing else None,
                )
            )
    where = f"{organisation}/{ORG_REPO}:{CONFIG_PATH}"
    cached = repository.cached_file(store, where)
    effective = resolve([Source(where, cached[1] if cached else None)])
    rates_from = where if any(k.startswith("rates.") for k in effective.origin) else "the defaults"
    found = digest(
        week,
        histories,
        runs,
        rates=effective.config.rates.rates(),
        policy=effective.config.policy,
        repositories=len(repos),
    )
    return OrganisationWeek(organisation, found, rates_from)
