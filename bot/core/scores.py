"""The flip score of a test's history (how often its outcome changes, recent commits weighing most) and
the Wilson bounds that say how sure a score is. ``bot.core.verdicts`` judges with them."""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Sequence
from itertools import compress

from bot.core.observations import COMMIT_OF, Observation, letters_of

SAME_COMMIT_FLIP = 1.0
CROSS_COMMIT_FLIP = 1 / 3
# Recency: a commit's weight halves every this many newer commits.
HALF_LIFE_COMMITS = 20
_Z = 1.96


def wilson_interval(p: float, n: int, z: float = _Z) -> tuple[float, float]:
    """The Wilson score interval of a rate ``p`` seen over ``n`` trials; (0, 1) with no trial."""
    if n <= 0:
        return 0.0, 1.0
    p = min(1.0, max(0.0, p))
    denominator = 1 + z * z / n
    centre = p + z * z / (2 * n)
    margin = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return max(0.0, (centre - margin) / denominator), min(1.0, (centre + margin) / denominator)


def wilson_lower_bound(p: float, n: int, z: float = _Z) -> float:
    return wilson_interval(p, n, z)[0] if n > 0 else 0.0


def wilson_upper_bound(p: float, n: int, z: float = _Z) -> float:
    return wilson_interval(p, n, z)[1]


def flip_score(
    observations: Sequence[Observation], groups: Sequence[tuple[str, list[Observation]]] | None = None
) -> tuple[float, int]:
    """The recency-weighted rate of outcome changes between neighbouring attempts, and their count.

    A change between two attempts of one commit weighs 1, across commits 1/3; a commit's weight
    halves every ``HALF_LIFE_COMMITS`` newer commits, so reruns of one commit age together.
    """
    ordered = [c for c, _ in groups] if groups is not None else list(dict.fromkeys([o.commit for o in observations]))
    return flips(observations, ordered)


def flips(observations: Sequence[Observation], ordered: Sequence[str]) -> tuple[float, int]:
    """``flip_score``, with the commits in the order they first ran."""
    # each commit's weight worked out once, not once per attempt: the newest 1, the one before it less
    weight = dict(zip(ordered, reversed(_weights(len(ordered))), strict=True))
    letters = letters_of(observations)
    if len(letters) == len(observations) and "S" not in letters:
        return _single_attempt_flips(observations, letters, weight)
    weighted = total = 0.0
    count = 0
    before_commit, before_failed = "", False
    # the attempts that ran, in order, each against the one before it (one pass, no list of pairs)
    for o in observations:
        commit = o.commit
        for c in o.outcomes:
            if c == "S":
                continue
            failed = c == "F" or c == "E"
            if count:
                recency = weight[commit]
                total += recency
                if failed != before_failed:
                    weighted += recency * (SAME_COMMIT_FLIP if before_commit == commit else CROSS_COMMIT_FLIP)
            count += 1
            before_commit, before_failed = commit, failed
    return (weighted / total if total else 0.0), count


_FAILED_BIT = str.maketrans("PFE", "011")
_WEIGHTS: list[list[float]] = [[]]  # the recency weights by commits newer (one list, replaced when grown)


def _weights(commits: int) -> list[float]:
    """The recency weight of a commit with 0, 1, 2, … newer commits, for ``commits`` commits: it halves
    every ``HALF_LIFE_COMMITS``. Worked out once for the longest history seen (a list is only ever
    replaced whole, so a reader in another thread sees a complete one)."""
    table = _WEIGHTS[0]
    if len(table) < commits:
        table = [0.5 ** (newer / HALF_LIFE_COMMITS) for newer in range(max(commits, 2 * len(table), 64))]
        _WEIGHTS[0] = table
    return table[:commits]


def _single_attempt_flips(
    observations: Sequence[Observation], letters: str, weight: dict[str, float]
) -> tuple[float, int]:
    """``flips`` of a history in which every report ran the test once (no retry, no skip): each attempt
    is an observation. Summed in C, in the same order as the general loop, so the score is the same to
    the last bit; Python steps only through the flips."""
    commits = list(map(COMMIT_OF, observations))
    recency = list(map(weight.__getitem__, commits))
    total = functools.reduce(operator.add, recency[1:], 0.0)
    bits = letters.translate(_FAILED_BIT)
    weighted = 0.0
    for i in compress(range(1, len(bits)), map(operator.ne, bits[1:], bits[:-1])):
        weighted += recency[i] * (SAME_COMMIT_FLIP if commits[i - 1] == commits[i] else CROSS_COMMIT_FLIP)
    return (weighted / total if total else 0.0), len(letters)
