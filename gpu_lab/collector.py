"""Python's cyclic garbage collector kept out of long runs of allocation (the bottom layer).

Used by the sim's scheduling loop and API server and by every backend's table builds.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """Keep Python's cyclic garbage collector out of a scheduling run or a table build.

    A scheduling run allocates no reference cycles (tests/sim/test_caches.py checks
    it), so what it frees goes at once by reference counting; anything else is
    only collected a little later. A collector pass in the middle would re-scan the
    long-lived cluster objects (every parsed manifest): on 10,000 pods one full
    pass costs about as much as scheduling 1,000 of them.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


__all__ = ["collector_paused"]
