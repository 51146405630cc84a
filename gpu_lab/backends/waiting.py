"""Waiting on a real cluster, shared by the backends that talk to one: until a condition
holds (``wait_until``), or until the scheduler has settled (``wait_settled``)."""

from __future__ import annotations

import time
from collections.abc import Callable

from ..errors import GpuLabError


def wait_settled(settled: Callable[[], bool], timeout: float, settle: float, what: str,
                 poll: float = 0.2) -> None:
    """Return once ``settled()`` has held for ``settle`` seconds in a row; raise after ``timeout``."""
    stable_since = None
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if settled():
            stable_since = stable_since or time.monotonic()
            if time.monotonic() - stable_since >= settle:
                return
        else:
            stable_since = None
        time.sleep(poll)
    raise GpuLabError(f"timed out after {timeout:.0f} s waiting for {what}")


def wait_until(done: Callable[[], bool], timeout: float, what: str,
               check: Callable[[], object] | None = None, poll: float = 0.2) -> None:
    """Return once ``done()`` holds; raise after ``timeout`` naming ``what``. ``check`` runs
    before each look (a local lab's: every process the wait needs still runs), so a stopped
    component fails the wait at once, in its own words."""
    deadline = time.monotonic() + timeout
    while not done():
        if check is not None:
            check()
        if time.monotonic() > deadline:
            raise GpuLabError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(poll)
