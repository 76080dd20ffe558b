"""What every step of one delivery's processing needs, in one object instead of eight arguments."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.core.cost import Rates
from bot.core.verdicts import CommitVerdict
from bot.github.artifacts import ArchiveLimits
from bot.pipeline.port import Port
from bot.store import Store


@dataclass(frozen=True, slots=True)
class Options:
    """How this deployment judges and reads: the single-fail policy, the rates, the archive caps and the
    artifact name patterns (``FLAKETALLY_ARTIFACTS``)."""

    policy: CommitVerdict = CommitVerdict.UNDETERMINED
    rates: Rates = field(default_factory=Rates)
    limits: ArchiveLimits = field(default_factory=ArchiveLimits)
    artifact_patterns: tuple[str, ...] = ()


@dataclass(slots=True)
class Scope:
    """One delivery's repository, as every step sees it.

    ``repo_id`` is GitHub's id of the repository, ``repo_key`` the store's key of it. What could not be
    judged on the way (expired artifacts, refused reports) is kept in the store (``collect.note``), so every
    check run of the commit names it.
    """

    store: Store
    gh: Port
    installation_id: int
    repo: str  # owner/name
    repo_id: int
    repo_key: int
    options: Options
