"""A ClusterQueue's pending workloads: the heap the scheduler pops from and the parked ones.

pkg/cache/queue/cluster_queue.go (v0.17.0). The heap is ordered by priority (higher
first), then the queue-order timestamp (creation, or the PodsReady-timeout eviction), then
UID (here: submission order); a BestEffortFIFO queue puts its "sticky" workload (the one
waiting for its preemptions) first. A workload the scheduler could not admit goes back:

* StrictFIFO: straight into the heap, whatever the reason (except a namespace mismatch),
  so the oldest workload keeps blocking those behind it (head-of-line blocking);
* BestEffortFIFO: into the heap only when it failed after nomination or waits for its
  preemptions; otherwise it is parked as *inadmissible* and the next one gets its turn.

Parked workloads return to the heap when quota is released in the ClusterQueue's cohort
(``QueueInadmissibleWorkloads``), if their namespace still matches and their backoff is over.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator

from ...model.kueue.objects import STRICT_FIFO, ClusterQueue
from . import messages as m
from .workload import Workload

# pkg/cache/queue RequeueReason
GENERIC = ""
NAMESPACE_MISMATCH = "NamespaceMismatch"
FAILED_AFTER_NOMINATION = "FailedAfterNomination"
PENDING_PREEMPTION = "PendingPreemption"


def backoff_expired(wl: Workload, now: float) -> bool:
    """``backoffWaitingTimeExpired``."""
    c = wl.condition(m.REQUEUED)
    if c is not None and c.status == "False":
        return False
    return wl.requeue_at is None or now >= wl.requeue_at


class Queue:
    def __init__(self, cq: ClusterQueue, requeuing_timestamp: str):
        self.name = cq.name
        self.strict = cq.queueing_strategy == STRICT_FIFO
        self.stamp = requeuing_timestamp
        self._heap: list[tuple[tuple, int, str]] = []
        self._live: dict[str, tuple[int, Workload]] = {}  # key -> (push number, workload)
        self._pushes = 0
        self.inadmissible: dict[str, Workload] = {}
        self.sticky: str | None = None

    def __len__(self) -> int:
        return len(self._live) + len(self.inadmissible)

    def workloads(self) -> Iterator[Workload]:
        yield from (wl for _, wl in self._live.values())
        yield from self.inadmissible.values()

    def _push(self, wl: Workload) -> None:
        self._pushes += 1
        order = (wl.key != self.sticky, -wl.spec.priority, wl.queue_timestamp(self.stamp), wl.seq)
        heapq.heappush(self._heap, (order, self._pushes, wl.key))
        self._live[wl.key] = (self._pushes, wl)
        wl.in_queue = True

    def _clean(self) -> None:
        while self._heap and self._live.get(self._heap[0][2], (None,))[0] != self._heap[0][1]:
            heapq.heappop(self._heap)

    def add(self, wl: Workload, now: float) -> None:
        """``PushOrUpdate`` of a workload that is not in the queue yet."""
        if wl.key in self._live or wl.key in self.inadmissible:
            return
        if not backoff_expired(wl, now):
            self.inadmissible[wl.key] = wl
            wl.in_queue = True
            return
        self._push(wl)

    def head(self) -> Workload | None:
        self._clean()
        return self._live[self._heap[0][2]][1] if self._heap else None

    def pop(self) -> Workload | None:
        self._clean()
        if not self._heap:
            return None
        _, _, key = heapq.heappop(self._heap)
        wl = self._live.pop(key)[1]
        wl.in_queue = False
        return wl

    def requeue(self, wl: Workload, reason: str, now: float) -> None:
        """``RequeueIfNotPresent`` after a scheduling attempt."""
        if reason == PENDING_PREEMPTION and not self.strict:
            self.sticky = wl.key
        if self.strict:
            immediate = reason != NAMESPACE_MISMATCH
        else:
            immediate = reason in (FAILED_AFTER_NOMINATION, PENDING_PREEMPTION)
        if immediate and backoff_expired(wl, now):
            self.inadmissible.pop(wl.key, None)
            if wl.key not in self._live:
                self._push(wl)
            return
        if wl.key in self.inadmissible or wl.key in self._live:
            return
        self.inadmissible[wl.key] = wl
        wl.in_queue = True

    def retry_inadmissible(self, now: float, namespace_ok: Callable[[Workload], bool]) -> int:
        """``queueInadmissibleWorkloads``: back to the heap, where namespace and backoff allow."""
        moved = 0
        for key, wl in list(self.inadmissible.items()):
            if namespace_ok(wl) and backoff_expired(wl, now):
                del self.inadmissible[key]
                if key not in self._live:
                    self._push(wl)
                    moved += 1
        return moved

    def delete(self, key: str) -> None:
        parked = self.inadmissible.pop(key, None)
        if parked is not None:
            parked.in_queue = False
        entry = self._live.pop(key, None)
        if entry is not None:
            entry[1].in_queue = False
        if self.sticky == key:
            self.sticky = None
