"""Waiting for a real scheduler to settle, shared by the backends that talk to one."""

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
