"""Compact arrays for the results that take no row: sorted ids as deltas, durations in milliseconds."""

from __future__ import annotations

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


def pack_ms(seconds: Sequence[float]) -> bytes:
    values = array("I", (min(_MAX_MS, round(s * 1000)) for s in seconds))
    return zlib.compress(values.tobytes(), 6)


def unpack_ms(blob: bytes) -> list[float]:
    values = array("I")
    values.frombytes(zlib.decompress(blob))
    return [v / 1000 for v in values]
