"""``flaketally explain TEST``: every commit and attempt behind one test's verdict, its score and bound,
and why each other verdict did not apply (flakestat's ``explain``).

The rules are listed in the order ``bot.core.verdicts.history_judgement`` applies them, each with whether
it held on this history; the first that held is the verdict. A test checks, on every sample test, that the
rule marked as deciding gives the verdict the judge gave, so the two cannot drift apart.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from bot.core.display import display_id
from bot.core.judge import TestAnalysis
from bot.core.observations import OUTCOME_WORDS, Observation
from bot.core.times import in_window
from bot.core.verdicts import (
    DEFAULT_THRESHOLDS,
    HALF_LIFE_COMMITS,
    MIN_OBSERVATIONS,
    CommitJudgement,
    CommitVerdict,
    TestVerdict,
    Thresholds,
    by_commit,
    commit_judgement,
    short,
)


class NotFound(LookupError):
    """No test, or more than one, answers to the name given; the message says which ones came close."""


def _names(t: TestAnalysis) -> tuple[str, str]:
    h = t.history
    return display_id(h.classname, h.name, h.file), h.test_id


def find(tests: Sequence[TestAnalysis], query: str, context: str | None = None) -> list[TestAnalysis]:
    """The tests ``query`` names (its display id or stored id exactly, else the only test whose id ends with
    or contains it), in every context or the one ``context`` names (its display or key, or a part of it)."""
    if context is not None:
        tests = [
            t for t in tests if context in (t.context.display(), t.history.context) or context in t.context.display()
        ]
        if not tests:
            raise NotFound(f"no test ran in a context named {context!r}")
    exact = [t for t in tests if query in _names(t)]
    if exact:
        return exact
    for match in (lambda name: name.endswith(query), lambda name: query in name):
        found = [t for t in tests if any(match(name) for name in _names(t))]
        ids = sorted({_names(t)[0] for t in found})
        if len(ids) == 1:
            return found
        if len(ids) > 1:
            listed = "\n  ".join(ids[:10]) + ("\n  …" if len(ids) > 10 else "")
            raise NotFound(f"{len(ids)} tests answer to {query!r}; name one:\n  {listed}")
    close = difflib.get_close_matches(query, sorted({_names(t)[0] for t in tests}), n=3, cutoff=0.5)
    hint = f"; did you mean {' or '.join(close)}?" if close else ""
    where = f" in context {context!r}" if context is not None else ""
    raise NotFound(f"no test named {query!r} in these reports{where}{hint}")


@dataclass(frozen=True, slots=True)
class Rule:
    """One of the judge's rules: what it asks, whether it held on this history and the figures that say so."""

    verdict: TestVerdict
    asks: str
    holds: bool
    because: str


@dataclass(frozen=True, slots=True)
class Explanation:
    test: TestAnalysis
    display: str
    rules: tuple[Rule, ...]
    commits: tuple[CommitJudgement, ...]  # every commit in the window, oldest first
    left_out: int  # observations older than the window
    thresholds: Thresholds

    @property
    def deciding(self) -> Rule | None:
        return next((r for r in self.rules if r.holds), None)


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _rules(t: TestAnalysis, th: Thresholds) -> tuple[Rule, ...]:
    j = t.judgement
    n = j.observations
    proof = j.proof_commits
    named = ", ".join(short(c) for c in proof[:5]) + (", …" if len(proof) > 5 else "")
    if not n:
        skipped = Rule(TestVerdict.SKIPPED, "did it run at all?", True, "every run skipped it: nothing to judge")
        return (skipped,)
    never_failed = not j.failed_runs
    enough = Rule(
        TestVerdict.INSUFFICIENT_DATA,
        f"fewer than {MIN_OBSERVATIONS} observations to score?",
        n < MIN_OBSERVATIONS,
        f"{_plural(n, 'observation')}" + (f", fewer than {MIN_OBSERVATIONS}" if n < MIN_OBSERVATIONS else ""),
    )
    if never_failed:  # the judge's shortcut: a test that never failed is stable once there are enough runs
        return (enough, Rule(TestVerdict.STABLE, "did it never fail?", True, f"failed 0 of {_plural(j.runs, 'run')}"))
    return (
        Rule(
            TestVerdict.FLAKY,
            "did it pass and fail on the same commit (same code)?",
            bool(proof),
            f"yes, on {_plural(len(proof), 'commit')} ({named})"
            if proof
            else "no: on every commit its attempts agreed",
        ),
        enough,
        Rule(
            TestVerdict.BROKEN,
            "did it fail every run?",
            j.runs > 0 and j.failed_runs == j.runs,
            f"failed {j.failed_runs} of {_plural(j.runs, 'run')}",
        ),
        Rule(
            TestVerdict.REGRESSION,
            "did it pass up to one commit and fail on every run of every commit since (at least two)?",
            j.first_failing_commit is not None,
            f"yes, from {short(j.first_failing_commit)}"
            if j.first_failing_commit
            else "no single commit divides passing from failing",
        ),
        Rule(
            TestVerdict.FLAKY,
            f"is the flip score's 95% Wilson lower bound above {th.flaky_above}?",
            j.lower_bound > th.flaky_above,
            f"score {j.score:.3f}, lower bound {j.lower_bound:.3f}",
        ),
        Rule(
            TestVerdict.STABLE,
            f"is the flip score below {th.stable_below}?",
            j.score < th.stable_below,
            f"score {j.score:.3f}",
        ),
        Rule(TestVerdict.INSUFFICIENT_DATA, "otherwise: between the thresholds", True, "no rule above held"),
    )


def explain(
    t: TestAnalysis, policy: CommitVerdict = CommitVerdict.UNDETERMINED, thresholds: Thresholds = DEFAULT_THRESHOLDS
) -> Explanation:
    h = t.history
    window = in_window(h.observations, thresholds.window_days)
    commits = tuple(commit_judgement(sha, obs, policy) for sha, obs in by_commit(window))
    return Explanation(
        t,
        display_id(h.classname, h.name, h.file),
        _rules(t, thresholds),
        commits,
        len(h.observations) - len(window),
        thresholds,
    )


def _attempt(o: Observation) -> str:
    run = f"run {o.run_id} " if o.run_id is not None else ""
    steps = ", then ".join(OUTCOME_WORDS[c] for c in o.outcomes)
    retries = " (retries in one report)" if len(o.outcomes) > 1 else ""
    took = f", {o.seconds:.2f} s" if o.seconds else ""
    return f"{run}attempt {o.attempt}: {steps}{retries}{took}"


def to_text(e: Explanation) -> str:
    t, j, th = e.test, e.test.judgement, e.thresholds
    out = [
        f"{e.display}: {j.verdict.value}",
        f"context: {t.context.display()}",
        f"evidence: {j.evidence}",
        f"score: {j.score:.3f} (same-commit flips weigh 1, cross-commit 1/3, a commit's weight halves every "
        f"{HALF_LIFE_COMMITS} newer commits); 95% Wilson lower bound {j.lower_bound:.3f} over "
        f"{_plural(j.observations, 'observation')}: flaky above {th.flaky_above}, stable below {th.stable_below}",
        f"window: the last {th.window_days} days before the newest run"
        + (f" ({_plural(e.left_out, 'older run')} left out)" if e.left_out else ""),
        "",
        "the judge's rules, in the order it applies them:",
    ]
    decided = e.deciding
    reached = True
    for rule in e.rules:
        mark = "→" if rule is decided else ("✗" if reached else "·")
        tail = f" ⇒ {rule.verdict.value}" if rule is decided else ("" if reached else " (not reached)")
        out.append(f"  {mark} {rule.asks} {rule.because}{tail}")
        if rule is decided:
            reached = False
    out += ["", f"commits, oldest first ({_plural(len(e.commits), 'commit')}):"]
    width = max((len(c.verdict.value) for c in e.commits), default=0)
    for c in e.commits:
        day = min((o.started_at for o in c.observations if o.started_at), default="")[:10]
        head = f"  {short(c.commit)}  {day + '  ' if day else ''}{c.verdict.value:<{width}}  "
        for i, o in enumerate(c.observations):
            out.append((head if i == 0 else " " * len(head)) + _attempt(o))
    failed = [o for o in t.history.observations if o.failed and o.message]
    if failed:
        out += ["", f"latest failure ({short(failed[-1].commit)}): {failed[-1].message}"]
    return "\n".join(out) + "\n"


def to_json(e: Explanation) -> dict[str, Any]:
    t, j = e.test, e.test.judgement
    return {
        "id": t.history.test_id,
        "display": e.display,
        "context": {"key": t.history.context, "display": t.context.display()},
        "verdict": j.verdict.value,
        "evidence": j.evidence,
        "score": round(j.score, 6),
        "lower_bound": round(j.lower_bound, 6),
        "observations": j.observations,
        "thresholds": {
            "window_days": e.thresholds.window_days,
            "flaky_above": e.thresholds.flaky_above,
            "stable_below": e.thresholds.stable_below,
        },
        "rules": [
            {
                "verdict": r.verdict.value,
                "asks": r.asks,
                "holds": r.holds,
                "because": r.because,
                "decides": r is e.deciding,
            }
            for r in e.rules
        ],
        "commits": [
            {
                "sha": c.commit,
                "verdict": c.verdict.value,
                "attempts": [
                    {"run_id": o.run_id, "attempt": o.attempt, "outcomes": o.outcomes, "seconds": o.seconds}
                    for o in c.observations
                ],
            }
            for c in e.commits
        ],
        "left_out": e.left_out,
    }


def render(explanations: Sequence[Explanation], fmt: str) -> str:
    if fmt == "json":
        document = {"flaketally": "explain", "version": 1, "tests": [to_json(e) for e in explanations]}
        return json.dumps(document, ensure_ascii=False, indent=2) + "\n"
    return "\n".join(to_text(e) for e in explanations)
