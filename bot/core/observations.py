"""A test's history as the judge sees it: one ``Observation`` per stored report that held the test, in the
order the reports ran. The store builds these; everything in ``bot.core`` that judges takes them."""

from __future__ import annotations

import operator
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from itertools import compress
from typing import NamedTuple

from bot.core.results import Outcome

# The letter of each outcome in ``Observation.outcomes``: P passed, F failed, E error, S skipped.
LETTER = {outcome: outcome.letter for outcome in Outcome}
PASSED, FAILED, ERROR, SKIPPED = (LETTER[o] for o in (Outcome.PASSED, Outcome.FAILED, Outcome.ERROR, Outcome.SKIPPED))


# the words an outcome letter is said with, everywhere a person reads attempts
OUTCOME_WORDS = {"P": "passed", "F": "failed", "E": "errored", "S": "skipped"}


def has_failure(outcomes: str) -> bool:
    """Whether a string of outcome letters holds a failure or an error."""
    return FAILED in outcomes or ERROR in outcomes


class Observation(NamedTuple):
    """One test in one stored report."""

    order: int
    commit: str
    attempt: int
    run_id: int | None
    started_at: str | None
    outcomes: str  # one letter per attempt, in order (``LETTER``)
    seconds: float  # the attempts' runtimes added up
    message: str = ""
    details: str = ""  # the first failure's text (a stack trace), bounded

    @property
    def failed(self) -> bool:
        """Whether any attempt in this report failed or errored."""
        return has_failure(self.outcomes)


OUTCOMES_OF = operator.itemgetter(5)  # Observation.outcomes, read in C on the hot path of judging
COMMIT_OF = operator.itemgetter(1)  # Observation.commit
SECONDS_OF = operator.itemgetter(6)  # Observation.seconds
STARTED_AT_OF = operator.itemgetter(4)  # Observation.started_at


def letters_of(observations: Iterable[Observation]) -> str:
    """Every attempt's outcome letter, in order."""
    return "".join(map(OUTCOMES_OF, observations))


def any_failed(observations: Iterable[Observation]) -> bool:
    letters = letters_of(observations)
    return FAILED in letters or ERROR in letters


def commits_of(observations: Iterable[Observation]) -> set[str]:
    return set(map(COMMIT_OF, observations))


def on_commits(observations: Sequence[Observation], commits: Collection[str]) -> list[Observation]:
    """The observations on any of ``commits``, in order: picked out in C, as a month's history of a test is
    thousands of them."""
    if not commits:
        return []
    among = commits if isinstance(commits, set | frozenset) else set(commits)
    return list(compress(observations, map(among.__contains__, map(COMMIT_OF, observations))))


@dataclass(slots=True)
class TestHistory:
    """Every observation of one test in one execution context (``context`` is its key)."""

    __test__ = False  # not a pytest test class

    test_id: str
    family: str
    classname: str
    name: str
    file: str | None
    line: int | None
    context: str
    observations: list[Observation] = field(default_factory=list)
