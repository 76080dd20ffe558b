"""The check run's conclusion, with its reason in one sentence, from the words the failures of a commit
were called (``bot.core.baseline.Word``) and what the repository chose (``GatePolicy``).

- ``failure``: a failure that reproduces (``failing``), a ``new failure``, a single failure with nothing
  to compare it with (``undetermined``), a failure of a test whose name another test in the same report
  shares (it cannot be judged, and is not let through), or, with ``fail_on_new_flake``, a test stable on
  the default branch that is flaky here;
- ``broken`` and ``regression`` (failing on the default branch too) and ``known flaky`` (not rerun):
  what the repository chose, ``neutral`` by default;
- ``success``: nothing failed, or every failure passed on a rerun of the same commit or is of a test
  quarantined in its context (still shown, marked quarantined);
- ``neutral`` too when no report was found at all.

When several apply, the most severe conclusion wins (failure, then neutral, then success), and its
reason is the one said.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING

from bot.core.baseline import Word
from bot.core.verdicts import short

if TYPE_CHECKING:
    from bot.core.findings import CommitReport, Finding


class Conclusion(StrEnum):
    SUCCESS = "success"
    FAILURE = "failure"
    NEUTRAL = "neutral"


_SEVERITY = {Conclusion.FAILURE: 0, Conclusion.NEUTRAL: 1, Conclusion.SUCCESS: 2}


@dataclass(frozen=True, slots=True)
class Gate:
    conclusion: Conclusion
    reason: str  # one sentence, shown first


@dataclass(frozen=True, slots=True)
class GatePolicy:
    """What a repository chose for the failures that are not its change's fault (``gate`` in its
    ``.github/flaketally.yml``)."""

    known_flaky: Conclusion = Conclusion.NEUTRAL  # single failures of tests known flaky, not rerun
    broken: Conclusion = Conclusion.NEUTRAL  # failures of tests broken on the default branch too
    fail_on_new_flake: bool = False


def _names(findings: Sequence[Finding], show: Callable[[str], str], limit: int = 3) -> str:
    names = sorted({f.display or f.name for f in findings})
    shown = ", ".join(show(n) for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def _one(findings: Sequence[Finding]) -> bool:
    return len({f.display or f.name for f in findings}) == 1


def _as_is(name: str) -> str:
    return name


def decide(report: CommitReport, show: Callable[[str], str] = _as_is) -> Gate:
    """The conclusion and its reason (module docstring)."""
    sha = short(report.head_sha)
    branch = report.branch or "the default branch"
    policy = report.gate_policy

    def said(*words: Word) -> list[Finding]:
        return [f for f in report.findings if f.word in words]

    failing, new, lone = said(Word.FAILING), said(Word.NEW_FAILURE), said(Word.UNDETERMINED)
    if failing:
        return Gate(Conclusion.FAILURE, f"Failure: {_names(failing, show)} failed on every attempt of {sha}.")
    if new:
        return Gate(
            Conclusion.FAILURE,
            f"Failure: {_names(new, show)} failed on {sha} and passed before it (on this pull request's base or "
            f"on {branch}'s recent runs): likely this change.",
        )
    if lone:
        return Gate(
            Conclusion.FAILURE,
            f"Failure: {_names(lone, show)} failed on the only attempt of {sha} and "
            f"{'has' if _one(lone) else 'have'} no flaky history; rerun the failed jobs to know whether it is flaky.",
        )
    if report.unjudged:
        names = report.unjudged
        shown = ", ".join(show(n) for n in names[:3]) + (f" and {len(names) - 3} more" if len(names) > 3 else "")
        return Gate(
            Conclusion.FAILURE,
            f"Failure: {shown} failed, and {'its name is' if len(names) == 1 else 'their names are'} shared with "
            "another test in the same report, so Flaketally cannot tell which one failed; give the tests distinct "
            "names to have them judged.",
        )
    newly = [f for f in said(Word.FLAKY) if f.newly_flaky] if policy.fail_on_new_flake else []
    if newly:
        return Gate(
            Conclusion.FAILURE,
            f"Failure: {_names(newly, show)} {'was' if _one(newly) else 'were'} stable on {branch} and "
            f"{'is' if _one(newly) else 'are'} flaky on {sha} (`fail_on_new_flake`).",
        )
    chosen: list[Gate] = []
    broken = said(Word.BROKEN, Word.REGRESSION)
    if broken:
        conclusion = policy.broken
        chosen.append(
            Gate(
                conclusion,
                f"{conclusion.value.capitalize()}: {_names(broken, show)} {'fails' if _one(broken) else 'fail'} on "
                f"{branch} too: not this change.",
            )
        )
    known = said(Word.KNOWN_FLAKY)
    if known:
        conclusion = policy.known_flaky
        chosen.append(
            Gate(
                conclusion,
                f"{conclusion.value.capitalize()}: {_names(known, show)} failed once and "
                + ("is known flaky; it was not rerun." if _one(known) else "are known flaky; they were not rerun."),
            )
        )
    if chosen:
        return min(chosen, key=lambda g: _SEVERITY[g.conclusion])
    flaky, quarantined = said(Word.FLAKY), said(Word.QUARANTINED)
    if quarantined:
        passed = f"; {_names(flaky, show)} passed on a rerun of the same commit" if flaky else ""
        return Gate(
            Conclusion.SUCCESS,
            f"Success: {_names(quarantined, show)} failed and {'is' if _one(quarantined) else 'are'} quarantined in "
            f"{'its context' if _one(quarantined) else 'their contexts'}, not held against this change{passed}.",
        )
    if flaky:
        only = "the only failure, " if len(flaky) == 1 else "every failure, "
        return Gate(Conclusion.SUCCESS, f"Success: {only}{_names(flaky, show)}, passed on a rerun of the same commit.")
    if report.reports == 0:
        return Gate(Conclusion.NEUTRAL, f"Neutral: no JUnit report was found for {sha}, so nothing was judged.")
    return Gate(Conclusion.SUCCESS, f"Success: no test failed on {sha} ({report.tests_seen} tests).")
