"""Compact arrays for the results that take no row: sorted ids as deltas, durations in milliseconds."""

from __future__ import annotations

import hashlib
import zlib
from array import array
from collections.abc import Sequence
from itertools import accumulate

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
