"""The verdict words: of a test on one commit, of a test over its history, and the single-fail policies.

Kept apart from ``bot.core.verdicts`` (which judges, and re-exports these) so that the CLI's parser can
name them without importing the judge: ``flaketally --help`` answers at once.
"""

from __future__ import annotations

from enum import StrEnum


class CommitVerdict(StrEnum):
    FLAKY = "flaky"
    FAILING = "failing"
    PASSING = "passing"
    UNDETERMINED = "undetermined"


class TestVerdict(StrEnum):
    FLAKY = "flaky"
    BROKEN = "broken"
    REGRESSION = "regression"
    STABLE = "stable"
    INSUFFICIENT_DATA = "insufficient_data"
    SKIPPED = "skipped"  # it never ran in the window: every observation skipped it


TestVerdict.__test__ = False  # type: ignore[attr-defined]  # not a pytest test class


SINGLE_FAIL_POLICIES = (CommitVerdict.UNDETERMINED, CommitVerdict.FAILING, CommitVerdict.FLAKY)
