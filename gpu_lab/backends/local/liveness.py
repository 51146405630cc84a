"""The local session's one wait, and the liveness checks that keep it from hanging.

A wait on a lab whose scheduler was killed would only time out; checking the processes
every second instead fails at once, naming the component and the command that repairs
it (:meth:`LocalCluster.check_ready`).
"""

from __future__ import annotations

import time
from collections.abc import Callable

from ..waiting import wait_until
from .cluster import LocalCluster

#: while waiting, how often to look whether every process the wait needs still runs
LIVENESS_EVERY_S = 1.0


class Liveness:
    """``ready()`` before a call, ``wait(done, what)`` during it."""

    def __init__(self, cluster: LocalCluster, timeout: Callable[[], float]):
        self.cluster, self.timeout = cluster, timeout  # read at each wait: callers change it
        self._checked = 0.0

    def ready(self, health: bool = True) -> None:
        """Fail at once, naming the component and the command that repairs it, when a
        process this call needs is stopped or hung (rather than time out much later)."""
        self.cluster.check_ready(health=health)
        self._checked = time.monotonic()

    def still_alive(self) -> None:
        """:meth:`ready` without health checks, at most every ``LIVENESS_EVERY_S``."""
        if time.monotonic() - self._checked >= LIVENESS_EVERY_S:
            self.ready(health=False)

    def wait(self, done: Callable[[], bool], what: str) -> None:
        """Until ``done()``, failing at once when a component it needs stopped, and after
        ``timeout`` naming ``what``."""
        wait_until(done, self.timeout(), what, check=self.still_alive)


__all__ = ["LIVENESS_EVERY_S", "Liveness"]
