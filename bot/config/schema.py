"""The one schema of ``.github/flaketally.yml``: a typed model whose fields are the keys, with their
defaults, limits and the sentence the README shows for each (``flaketally config schema`` prints it).

Every key changes what Flaketally does; an unknown key is an error (a typo must not pass for a setting).
"""

from __future__ import annotations

import fnmatch
from datetime import date
from enum import StrEnum
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from bot.core.cost import Rates
from bot.core.quarantine import ALL_CONTEXTS, CLEAN_DAYS, CLEAN_RUNS
from bot.core.verdicts import CommitVerdict, Thresholds

MAX_FILE_BYTES = 64 * 1024
QUARANTINE_PATH = ".github/flaketally-quarantine.yml"
MAX_QUARANTINED = 1000
MAX_PATTERNS = 100
Pattern = Annotated[str, Field(min_length=1, max_length=300)]


class RerunMode(StrEnum):
    OFF = "off"
    FAILED_JOBS = "failed-jobs"


class CommentMode(StrEnum):
    ON_FAILURE = "on-failure"
    ALWAYS = "always"
    OFF = "off"


class SingleFail(StrEnum):
    UNDETERMINED = "undetermined"
    FAILING = "failing"
    FLAKY = "flaky"


class GateConclusion(StrEnum):
    SUCCESS = "success"
    NEUTRAL = "neutral"
    FAILURE = "failure"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RatesConfig(_Section):
    compute_per_minute: float = Field(0.008, ge=0, le=1000, description="CI compute, currency per minute.")
    developer_per_minute: float = Field(1.50, ge=0, le=10000, description="A developer's time, currency per minute.")
    developer_minutes_per_event: float = Field(
        15.0, ge=0, le=480, description="Developer minutes one flaky event costs (a rerun, a look, a wait)."
    )
    currency: str = Field("USD", pattern=r"^[A-Za-z]{1,10}$", description="The label printed beside every figure.")

    def rates(self) -> Rates:
        return Rates(
            self.compute_per_minute, self.developer_per_minute, self.developer_minutes_per_event, self.currency
        )


class RerunLimits(_Section):
    max_failed_tests: int = Field(
        3, ge=1, le=50, description="Rerun only when at most this many distinct tests failed (broken ones not counted)."
    )


class HistoryConfig(_Section):
    window_days: int = Field(30, ge=1, le=90, description="Days of history a verdict is drawn from.")
    flaky_above: float = Field(
        0.10, gt=0, lt=1, description="A flip score whose lower confidence bound is above this is flaky."
    )
    stable_below: float = Field(0.05, ge=0, lt=1, description="A flip score below this is stable.")

    @model_validator(mode="after")
    def _ordered(self) -> HistoryConfig:
        if self.stable_below >= self.flaky_above:
            raise ValueError(f"stable_below ({self.stable_below}) must be below flaky_above ({self.flaky_above})")
        return self

    def thresholds(self) -> Thresholds:
        return Thresholds(window_days=self.window_days, flaky_above=self.flaky_above, stable_below=self.stable_below)


class GateConfig(_Section):
    known_flaky: GateConclusion = Field(
        GateConclusion.NEUTRAL,
        description="The conclusion when the only failures are single failures of tests known flaky, not rerun.",
    )
    broken: GateConclusion = Field(
        GateConclusion.NEUTRAL,
        description="The conclusion when the only failures are of tests broken on the default branch too.",
    )
    fail_on_new_flake: bool = Field(
        False, description="Fail when a test stable before this pull request is flaky on it."
    )


class QuarantineConfig(_Section):
    file: str = Field(
        QUARANTINE_PATH,
        min_length=1,
        max_length=300,
        pattern=r"^[A-Za-z0-9_.][A-Za-z0-9_./-]*\.ya?ml$",
        description="The quarantine file in the repository (its default branch): the tests taken out of the gate.",
    )
    clean_runs: int = Field(
        CLEAN_RUNS,
        ge=5,
        le=10000,
        description="Clean runs in a row (in its context) before a quarantined test is due to leave; 59 rule out "
        "a 5% failure rate with 95% confidence.",
    )
    clean_days: int = Field(CLEAN_DAYS, ge=0, le=90, description="Days those clean runs must span at least.")


DIGEST_SCHEDULE = "0 9 * * 1"  # Monday 09:00
# sections read from the organisation's file only: a repository's check run does not list them
ORGANISATION_SECTIONS = ("digest",)


class DigestConfig(_Section):
    repository: str = Field(
        "",
        max_length=200,
        pattern=r"^([A-Za-z0-9][A-Za-z0-9-]*/)?[A-Za-z0-9._-]+$|^$",
        description="Where the weekly digest is posted (read from the organisation's file): a repository of the "
        "organisation, `name` or `owner/name`; empty: the organisation's `.github` repository.",
    )
    schedule: str = Field(
        DIGEST_SCHEDULE,
        max_length=100,
        description="When it is posted: a cron string (minute hour day month weekday) in `digest.timezone`; "
        "it covers the last whole ISO week before.",
    )
    timezone: str = Field("UTC", max_length=60, description="The time zone of `digest.schedule` (IANA name).")

    @field_validator("schedule")
    @classmethod
    def _cron(cls, value: str) -> str:
        from croniter import croniter

        if len(value.split()) != 5 or not croniter.is_valid(value):
            raise ValueError(f"not a cron string of five fields: {value!r}")
        return value

    @field_validator("timezone")
    @classmethod
    def _zone(cls, value: str) -> str:
        from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"not a time zone name (such as Europe/Berlin): {value!r}") from None
        return value


class Config(_Section):
    """Everything a repository (or its organisation) can set."""

    rerun: RerunMode = Field(
        RerunMode.OFF,
        description="`failed-jobs`: after a failed first attempt, ask GitHub once to re-run the failed jobs "
        "(needs `actions: write`), within `rerun_limits`.",
    )
    rerun_limits: RerunLimits = Field(default_factory=RerunLimits, description="When an automatic rerun is asked.")
    comment: CommentMode = Field(
        CommentMode.ON_FAILURE,
        description="`on-failure`: comment when a failure is news to the author (not already failing on the default "
        "branch, known flaky or quarantined: the check run says those), then keep it true; `always`: on "
        "every pull request run; `off`: never (the check run still says everything).",
    )
    single_fail: SingleFail = Field(
        SingleFail.UNDETERMINED,
        description="What a single failure with nothing to compare it with is called.",
    )
    rates: RatesConfig = Field(default_factory=RatesConfig, description="What a flaky event costs.")
    history: HistoryConfig = Field(default_factory=HistoryConfig, description="How history verdicts are drawn.")
    gate: GateConfig = Field(default_factory=GateConfig, description="The check run's conclusion.")
    artifacts: list[Pattern] = Field(
        default_factory=list,
        max_length=MAX_PATTERNS,
        description="Artifact name patterns (`fnmatch`) to read; empty: every artifact holding JUnit XML.",
    )
    ignore: list[Pattern] = Field(
        default_factory=list,
        max_length=MAX_PATTERNS,
        description="Test id patterns (`fnmatch`) never judged nor shown (they are still stored).",
    )
    quarantine: QuarantineConfig = Field(
        default_factory=QuarantineConfig, description="Where the quarantine file is, and when a test may leave it."
    )
    digest: DigestConfig = Field(default_factory=DigestConfig, description="The organisation's weekly digest.")

    @field_validator("rerun", "comment", mode="before")
    @classmethod
    def _yaml_off(cls, value: object) -> object:
        """YAML 1.1 reads a bare ``off`` as false: it means ``off`` here."""
        return "off" if value is False else value

    @property
    def policy(self) -> CommitVerdict:
        return CommitVerdict(self.single_fail.value)

    def ignores(self, test_id: str) -> bool:
        return any(fnmatch.fnmatchcase(test_id, pattern) for pattern in self.ignore)


DEFAULT = Config()


def sections() -> dict[str, type[_Section]]:
    """The keys whose value is a mapping of keys of its own: merged key by key."""
    found: dict[str, type[_Section]] = {}
    for name, field in Config.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, _Section):
            found[name] = kind
    return found


def describe(value: Any) -> str:
    """A value as the YAML file would write it."""
    if isinstance(value, StrEnum):
        return value.value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(describe(v) for v in value) + "]"
    return str(value)


def reference() -> str:
    """The keys as a Markdown table, from the schema itself (the README shows this)."""
    rows = ["| key | values | default | what it does |", "|---|---|---|---|"]
    nested = sections()
    for name, field in Config.model_fields.items():
        if name in nested:
            for sub, subfield in nested[name].model_fields.items():
                rows.append(_row(f"{name}.{sub}", subfield))
        else:
            rows.append(_row(name, field))
    return "\n".join(rows)


def _row(key: str, field: Any) -> str:
    kind = field.annotation
    if isinstance(kind, type) and issubclass(kind, StrEnum):
        values = " \\| ".join(f"`{m.value}`" for m in kind)
    elif kind is bool:
        values = "`true` \\| `false`"
    elif kind is int or kind is float:
        bounds = [bound for bound in map(_bound, field.metadata) if bound]
        values = f"number {' and '.join(bounds)}" if bounds else "number"
    elif kind is str:
        values = "text"
    else:
        values = "list of patterns"
    default = field.get_default(call_default_factory=True)
    shown = describe(default) or ("[]" if isinstance(default, list) else '""')
    return f"| `{key}` | {values} | `{shown}` | {field.description or ''} |"


_SIGNS = {"ge": "≥", "gt": ">", "le": "≤", "lt": "<"}


def _bound(meta: object) -> str:
    for attribute, sign in _SIGNS.items():
        if hasattr(meta, attribute):
            return f"{sign} {getattr(meta, attribute)}"
    return ""


class QuarantineEntry(BaseModel):
    """One entry of the quarantine file (``bot.core.quarantine``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    test: str = Field(min_length=1, max_length=500, description="The test's id as its runner prints it.")
    context: str = Field(
        ALL_CONTEXTS,
        min_length=1,
        max_length=300,
        description="Its execution context as Flaketally shows it, or `all`.",
    )
    reason: str = Field(min_length=1, max_length=2000, description="Why: its flaky evidence and cost at the time.")
    since: date = Field(description="The day it was quarantined (YYYY-MM-DD).")
    owner: str | None = Field(None, max_length=100, description="Who looks after it.")
    issue: str | None = Field(None, max_length=500, pattern=r"^https?://\S+$", description="The issue that tracks it.")


class QuarantineFile(BaseModel):
    """The quarantine file: ``quarantine:``, a list of entries."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    quarantine: list[QuarantineEntry] = Field(default_factory=list, max_length=MAX_QUARANTINED)
