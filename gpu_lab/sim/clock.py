"""The simulated clock: a queue of timed events, earliest first.

Everything that happens later in the sim goes through here: a pod's run ends
(``gpulab.dev/duration``), an object is submitted (``gpulab.dev/submit-at``), a
controller asked to be woken (a Job's failure backoff, Kueue's waitForPodsReady
timeout, a new node finishing provisioning). Events at the same instant keep the
order they were scheduled in, so a run is reproducible.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import Any


@dataclass(order=True)
class Event:
    at: float
    seq: int
    kind: str = field(compare=False)  # "finish", "submit", "wake"
    payload: Any = field(compare=False, default=None)


class EventQueue:
    def __init__(self) -> None:
        self._heap: list[Event] = []
        self._seq = 0

    def push(self, at: float, kind: str, payload: Any = None) -> Event:
        self._seq += 1
        ev = Event(at, self._seq, kind, payload)
        heapq.heappush(self._heap, ev)
        return ev

    def next_at(self) -> float | None:
        return self._heap[0].at if self._heap else None

    def pop(self) -> Event:
        return heapq.heappop(self._heap)

    def __len__(self) -> int:
        return len(self._heap)
