"""What a JUnit report says, as plain data: each test's attempts in order and the run identity written in
the report. ``bot.core.junit`` reads it; the store keeps it; the verdicts judge it."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum
from typing import ClassVar, NamedTuple

from bot.core.identity import family_id, test_id

MAX_MESSAGE = 300


class Outcome(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    SKIPPED = "skipped"

    @property
    def is_failure(self) -> bool:
        return self in (Outcome.FAILED, Outcome.ERROR)

    @property
    def letter(self) -> str:
        """The one letter an outcome is stored and judged as (``bot.core.observations``)."""
        return self.value[0].upper()


class Attempt(NamedTuple):
    outcome: Outcome
    duration: float = 0.0
    message: str = ""


@dataclass(slots=True)
class TestResult:
    """One test in one report: its attempts in order, the last being the final outcome."""

    __test__: ClassVar[bool] = False  # not a pytest test class

    classname: str
    name: str
    attempts: tuple[Attempt, ...]
    file: str | None = None
    line: int | None = None
    project: str | None = None
    details: str = field(default="", compare=False)  # its first failure's text (a stack trace), bounded
    id: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        self.id = test_id(self.classname, self.name, self.file, self.project)

    @property
    def family(self) -> str:
        return family_id(self.classname, self.name, self.file, self.project)

    @property
    def outcome(self) -> Outcome:
        return self.attempts[-1].outcome

    @property
    def message(self) -> str:
        """The first line of the first failure's message, bounded."""
        for attempt in self.attempts:
            if attempt.outcome.is_failure and attempt.message:
                return attempt.message
        return ""


@dataclass(frozen=True, slots=True)
class Collision:
    """Testcases of one name in one suite that are not a runner's retries: different tests that share a
    name. None of them is judged (a pass of one beside a failure of another would read as a flaky pass);
    the report names them instead."""

    classname: str
    name: str
    file: str | None
    project: str | None
    suite: str
    entries: int  # testcase elements of that name
    failed: int  # how many of them failed

    @property
    def test(self) -> str:
        """The shared name as a test id would show it."""
        return test_id(self.classname, self.name, self.file, self.project)

    def describe(self) -> str:
        outcome = f"{self.failed} of them failed" if self.failed else "none of them failed"
        where = f" in suite {self.suite!r}" if self.suite else ""
        return (
            f"{self.entries} testcases named {self.test!r}{where} are different tests sharing one name, not "
            f"retries ({outcome}): left out of the verdicts; give them distinct names to have them judged"
        )


# A test that passed at its one attempt, as ``bot.core.junit.parse(..., lean=True)`` leaves it instead of a
# TestResult (one object fewer per testcase, for readers that keep columns): its id, classname, name, file,
# line, project, and seconds.
Passed = tuple[str, str, str, str | None, int | None, str | None, float]


@dataclass(slots=True)
class Report:
    """What one JUnit file says: its results, the name collisions left out of them, and the run identity
    written inside it. Read with ``lean=True``, its single passes are in ``passes`` instead of ``results``."""

    digest: str
    results: list[TestResult]
    collisions: list[Collision] = field(default_factory=list)
    commit: str | None = None
    attempt: int | None = None
    timestamp: str | None = None
    runtime: str = ""
    os: str = ""
    arch: str = ""
    size: int = 0
    passes: list[Passed] = field(default_factory=list)


class ReportRefused(Exception):
    """The file is not a usable JUnit report; the message says why, for a warning."""


def first_line(text: str | None, limit: int = MAX_MESSAGE) -> str:
    """The first non-blank line, stripped and bounded (without splitting the whole text)."""
    if not text:
        return ""
    start, size = 0, len(text)
    while start < size:
        end = text.find("\n", start)
        if end < 0:
            end = size
        line = text[start:end].strip()
        if line:
            return line if len(line) <= limit else line[: limit - 1] + "…"
        start = end + 1
    return ""
