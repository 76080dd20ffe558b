"""The repository's configuration as GitHub holds it: ``.github/flaketally.yml`` of its default branch over
the organisation's (the same path in the organisation's ``.github`` repository).

Each file is read with the ETag of the last answer, so an unchanged file is a 304, which costs no rate
limit: the configuration is fresh on every run for free. A file that cannot be read is named, and the
defaults apply; only GitHub being unavailable stops the job (rq tries it again later).
"""

from __future__ import annotations

import dataclasses

from bot.config.load import CONFIG_PATH, ORG_REPO, Effective, Source, resolve
from bot.config.quarantine import parse_quarantine
from bot.config.schema import Config
from bot.core.quarantine import Quarantine
from bot.github.errors import GitHubError
from bot.pipeline.port import Port
from bot.pipeline.scope import Scope
from bot.store import Store, repository


def read_file(store: Store, gh: Port, repo: str, path: str = CONFIG_PATH) -> tuple[Source, str | None]:
    """One file as the source of keys, and a problem when it could not be read."""
    where = f"{repo}:{path}"
    cached = repository.cached_file(store, where)
    try:
        got = gh.get_file(repo, path, cached[0] if cached else None)
    except GitHubError as exc:
        return Source(where, None), f"{where} could not be read ({exc}); the defaults apply"
    if got.state == "unchanged" and cached is not None:
        return Source(where, cached[1]), None
    if got.state == "found":
        repository.cache_file(store, where, got.etag, got.text)
        return Source(where, got.text), None
    if cached is not None:
        repository.cache_file(store, where, None, None)
    if got.state == "not_a_file":
        return Source(where, None), f"{where} is not a file; the defaults apply"
    return Source(where, None), None


def repository_config(store: Store, gh: Port, repo: str) -> Effective:
    """The organisation's file, then the repository's, merged key by key, with what was wrong in them."""
    org_repo = f"{repo.split('/', 1)[0]}/{ORG_REPO}"
    sources, problems = [], []
    for where in dict.fromkeys((org_repo, repo)):  # the organisation's `.github` repository is read once
        source, problem = read_file(store, gh, where)
        sources.append(source)
        if problem:
            problems.append(problem)
    effective = resolve(sources)
    return dataclasses.replace(effective, problems=(*problems, *effective.problems))


def repository_quarantine(store: Store, gh: Port, repo: str, config: Config) -> tuple[Quarantine, list[str]]:
    """The repository's quarantine file (``quarantine.file``, on its default branch), read like the
    configuration (with its ETag), and what was wrong in it."""
    source, problem = read_file(store, gh, repo, config.quarantine.file)
    quarantine, problems = parse_quarantine(source, config.quarantine)
    return quarantine, [problem.replace("the defaults apply", "nothing is quarantined")] if problem else problems


DEPLOYMENT = "this deployment"


def configure(scope: Scope) -> Scope:
    """The scope with the repository's configuration in force. What the files do not set keeps the
    deployment's choice (``FLAKETALLY_ARTIFACTS``, ``replay --single-fail-policy``), else the default."""
    effective = repository_config(scope.store, scope.gh, scope.repo)
    config, origin, base = effective.config, dict(effective.origin), scope.options
    deployment: dict[str, object] = {}
    if "single_fail" not in origin and base.policy.value != config.single_fail.value:
        deployment["single_fail"] = base.policy.value
    if "artifacts" not in origin and base.artifact_patterns:
        deployment["artifacts"] = list(base.artifact_patterns)
    if deployment:
        config = config.model_validate({**config.model_dump(mode="json"), **deployment})
        origin.update(dict.fromkeys(deployment, DEPLOYMENT))
    quarantine, problems = repository_quarantine(scope.store, scope.gh, scope.repo, config)
    options = dataclasses.replace(
        base,
        policy=config.policy,
        rates=config.rates.rates() if any(k.startswith("rates.") for k in origin) else base.rates,
        artifact_patterns=tuple(config.artifacts),
        config=dataclasses.replace(effective, config=config, origin=origin, problems=(*effective.problems, *problems)),
        quarantine=quarantine,
    )
    return dataclasses.replace(scope, options=options)


def show_repository(*, app_id: int, private_key: str, api_url: str, database_url: str, repo: str) -> str:
    """``flaketally config show``: the configuration in force for ``repo``, read from GitHub as the App's
    installation there reads it (the store keeps the ETags, as the workers do)."""
    from bot.config.commands import show
    from bot.github.port import GitHubPort, installation_for_repo

    installation = installation_for_repo(app_id=app_id, private_key=private_key, api_url=api_url, repo=repo)
    store = Store.open(database_url)
    try:
        with GitHubPort(app_id=app_id, private_key=private_key, installation_id=installation, api_url=api_url) as gh:
            effective = repository_config(store, gh, repo)
    finally:
        store.close()
    return "\n".join([*(f"problem\t{p}" for p in effective.problems), *show(effective)]) + "\n"


def quarantine_of_repository(
    *, app_id: int, private_key: str, api_url: str, database_url: str, repo: str
) -> tuple[Quarantine, list[str]]:
    """``flaketally quarantine --repo``: the repository's quarantine file as its installation reads it
    (where its configuration puts it)."""
    from bot.github.port import GitHubPort, installation_for_repo

    installation = installation_for_repo(app_id=app_id, private_key=private_key, api_url=api_url, repo=repo)
    store = Store.open(database_url)
    try:
        with GitHubPort(app_id=app_id, private_key=private_key, installation_id=installation, api_url=api_url) as gh:
            effective = repository_config(store, gh, repo)
            return repository_quarantine(store, gh, repo, effective.config)
    finally:
        store.close()
