"""Compact arrays for the results that take no row: sorted ids as deltas, durations in milliseconds; and
the attempts of a result that takes one, as JSON text."""

from __future__ import annotations

import hashlib
import json
import re
import zlib
from array import array
from collections.abc import Sequence
from itertools import accumulate

from bot.core.observations import LETTER
from bot.core.results import TestResult

_MAX_MS = 2**32 - 1


def pack_ids(ids: Sequence[int]) -> bytes:
    """Sorted, distinct ids."""
    deltas = array("I", (b - a for a, b in zip([0, *ids], ids, strict=False)))
    return zlib.compress(deltas.tobytes(), 6)


def unpack_ids(blob: bytes) -> list[int]:
    deltas = array("I")
    deltas.frombytes(zlib.decompress(blob))
    return list(accumulate(deltas))


def stored_seconds(seconds: float) -> float:
    """A duration as ``pack_ms`` keeps it: whole milliseconds."""
    return min(_MAX_MS, round(seconds * 1000)) / 1000


def pack_ms(seconds: Sequence[float]) -> bytes:
    values = array("I", (min(_MAX_MS, round(s * 1000)) for s in seconds))
    return zlib.compress(values.tobytes(), 6)


def unpack_ms(blob: bytes) -> list[float]:
    values = array("I")
    values.frombytes(zlib.decompress(blob))
    return [v / 1000 for v in values]


def ms_at(blob: bytes) -> array[int]:
    """The milliseconds of ``pack_ms``, to be read at a few positions without converting every value."""
    values = array("I")
    values.frombytes(zlib.decompress(blob))
    return values


def ids_digest(ids: Sequence[int], skipped: Sequence[int]) -> str:
    """What names a manifest: the SHA-256 of its two arrays, whatever zlib would make of them."""
    raw = array("I", [len(ids), *ids, *skipped]).tobytes()
    return hashlib.sha256(raw).hexdigest()


def attempts_text(result: TestResult) -> str:
    """A stored result's attempts: ``[["F", 0.123, "message"], ["P", 0.1, ""]]`` (letter, seconds to the
    millisecond, message), as ``json.dumps`` writes it."""
    return json.dumps([[LETTER[a.outcome], round(a.duration, 3), a.message] for a in result.attempts])


# An attempt's start in that text: a bracket, then a quote. Inside a JSON string every quote is escaped
# (``\"``), so this pair is never part of a message, whatever the message says.
_ATTEMPT = re.compile(r'\["([A-Z])", ([^,\]]+)')


def attempt_outcomes(text: str) -> tuple[str, float]:
    """The outcome letters of ``attempts_text``, in order, and the attempts' seconds added up, without
    decoding the messages (judging reads tens of thousands of these an attempt). Text in another form
    than ``json.dumps``'s (none is written) is decoded in full."""
    found = _ATTEMPT.findall(text)
    if not found:
        attempts = json.loads(text)
        return "".join(a[0] for a in attempts), sum(a[1] for a in attempts)
    if len(found) == 1:
        return found[0][0], 0 + float(found[0][1])  # 0 + x: what sum() makes of one value (-0.0 is 0.0)
    return "".join(letter for letter, _ in found), sum(float(seconds) for _, seconds in found)
