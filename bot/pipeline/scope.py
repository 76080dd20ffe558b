"""What every step of one delivery's processing needs, in one object instead of eight arguments."""

from __future__ import annotations

from dataclasses import dataclass, field

from bot.config.load import Effective
from bot.config.schema import Config
from bot.core.cost import Rates
from bot.core.quarantine import NONE as NO_QUARANTINE
from bot.core.quarantine import Quarantine
from bot.core.verdicts import CommitVerdict
from bot.github.artifacts import ArchiveLimits
from bot.pipeline.port import Port
from bot.store import Store


@dataclass(frozen=True, slots=True)
class Options:
    """How one repository is judged and read: the single-fail policy, the rates, the archive caps, the
    artifact name patterns, and the rest of its configuration (``config``: the gate, the comment mode,
    the thresholds, reruns, tests to ignore, with where each value came from)."""

    policy: CommitVerdict = CommitVerdict.UNDETERMINED
    rates: Rates = field(default_factory=Rates)
    limits: ArchiveLimits = field(default_factory=ArchiveLimits)
    artifact_patterns: tuple[str, ...] = ()
    config: Effective = field(default_factory=Effective)
    quarantine: Quarantine = NO_QUARANTINE  # the repository's quarantine file, read with its configuration

    @property
    def settings(self) -> Config:
        return self.config.config


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
