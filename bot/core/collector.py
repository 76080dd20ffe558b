"""Python's cyclic garbage collector, paused where many small objects are made that hold no cycles (reading
a report, building and judging a large history): it would only walk them, again and again, as they pile up.
Objects are still freed when their last reference goes; a cycle made meanwhile is collected once it resumes."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused() -> Iterator[None]:
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()
