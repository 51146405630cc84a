"""The node side's clock and what falls due on it: the end of a pod annotated with a
duration, another try at claims that were not ready. Each is handed to its node's worker
when due.

The clock is real time plus what ``advance`` added, so a lesson can skip the 5-minute
device-plugin grace period or a pod's duration on a real control plane (whose own clock
keeps real time)."""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from collections.abc import Callable


class Timers:
    """``after(seconds, node, uid, what)``; ``run`` hands each to ``deliver`` when due."""

    def __init__(self) -> None:
        self._skew = 0.0
        self._due: list[tuple[float, int, str, str, str]] = []
        self._seq = itertools.count()
        self._cond = threading.Condition()

    def now(self) -> float:
        """Seconds on the node side's clock (monotonic, plus every ``advance``)."""
        return time.monotonic() + self._skew

    def advance(self, seconds: float) -> None:
        with self._cond:
            self._skew += float(seconds)
            self._cond.notify_all()

    def after(self, seconds: float, node: str, uid: str, what: str) -> None:
        with self._cond:
            heapq.heappush(self._due, (self.now() + seconds, next(self._seq), node, uid, what))
            self._cond.notify_all()

    def time_to_last(self) -> float:
        """Seconds until the last one queued falls due (0 when none is queued)."""
        with self._cond:
            return max((t - self.now() for t, *_ in self._due), default=0.0)

    def wake(self) -> None:
        """Let ``run`` look at its stop event now."""
        with self._cond:
            self._cond.notify_all()

    def run(self, stopping: threading.Event, deliver: Callable[[str, str, str], None]) -> None:
        while not stopping.is_set():
            with self._cond:
                now = self.now()
                due = []
                while self._due and self._due[0][0] <= now:
                    due.append(heapq.heappop(self._due))
                if not due:
                    wait = self._due[0][0] - now if self._due else 1.0
                    self._cond.wait(min(wait, 1.0))
                    continue
            for _, _, node, uid, what in due:
                deliver(node, uid, what)
