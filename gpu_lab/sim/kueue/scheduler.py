"""One scheduling cycle of Kueue's scheduler (pkg/scheduler/scheduler.go ``schedule``, v0.17.0).

1. Pop the head of every active ClusterQueue.
2. Nominate: check the namespace selector, assign flavors, and for a workload that needs
   preemption find its targets, all against one snapshot taken at the start.
3. Go through the entries in order (``makeClassicalIterator``: not borrowing before
   borrowing, higher priority, older) and for each: skip a no-fit; keep capacity for a
   preemption that found no targets (unless ``reclaimWithinCohort: Any``); skip one whose
   targets overlap another's or that no longer fits after the entries before it; issue the
   preemptions; with ``waitForPodsReady.blockAdmission``, wait while an admitted workload's
   pods are not ready; admit.
4. Requeue what was not admitted, setting its QuotaReserved condition to the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...model.kueue.objects import ANY, LOWER_OR_NEWER_EQUAL_PRIORITY, ClusterQueue
from . import messages as m
from . import preemption
from .flavorassigner import NO_FIT, PREEMPT_MODE, Assignment, FlavorAssigner
from .queue import FAILED_AFTER_NOMINATION, GENERIC, NAMESPACE_MISMATCH, PENDING_PREEMPTION
from .quota import FR, Snapshot
from .workload import Workload

if TYPE_CHECKING:
    from .kueue import Kueue

SKIPPED, NOMINATED, ASSUMED = "skipped", "nominated", "assumed"


@dataclass
class Entry:
    wl: Workload
    cq: ClusterQueue
    assignment: Assignment = field(default_factory=Assignment)
    targets: list[preemption.Target] = field(default_factory=list)
    message: str = ""
    status: str = ""
    requeue_reason: str = GENERIC


def heads(k: Kueue) -> list[Workload]:
    """``Manager.heads``: one workload per active ClusterQueue. A head already tried since the
    last change would meet the same answer, so it is left in place (real Kueue spins on it)."""
    out = []
    for name in sorted(k.queues):
        q = k.queues[name]
        if not k.cluster_queue_active(name):
            continue
        head = q.head()
        if head is not None and head.evaluated != k.version:
            popped = q.pop()
            assert popped is not None  # the queue holds the head just read
            out.append(popped)
    return out


def cycle(k: Kueue, now: float) -> bool:
    """Run one cycle; False when there was nothing to try."""
    popped = heads(k)
    if not popped:
        return False
    for wl in popped:
        wl.evaluated = k.version
    # Nomination only reads the cache (what it simulates it puts back); the cycle's own
    # snapshot is copied when the loop below first changes it.
    snap = k.snap
    entries, inadmissible = _nominate(k, popped, snap, now)
    entries.sort(key=lambda e: (e.assignment.borrowing, -e.wl.spec.priority,
                                e.wl.queue_timestamp(k.stamp), e.wl.seq))
    preempted: dict[str, Workload] = {}
    for i, e in enumerate(entries):
        mode = e.assignment.mode
        if mode == NO_FIT:
            continue
        if mode == PREEMPT_MODE and not e.targets:
            # CanAlwaysReclaim; a reservation only matters to the entries after this one
            if e.cq.preemption.reclaim_within_cohort != ANY and i < len(entries) - 1:
                if snap is k.snap:
                    snap = k.snap.copy()
                snap.add_usage(e.cq.name, _to_reserve(e, snap))
            continue
        if any(t.workload.key in preempted for t in e.targets):
            e.status, e.message = SKIPPED, m.OVERLAPPING_TARGETS
            continue
        if not _fits(snap, e, preempted):
            e.status, e.message = SKIPPED, m.NO_LONGER_FITS
            continue
        for t in e.targets:
            preempted[t.workload.key] = t.workload
        if snap is k.snap:
            snap = k.snap.copy()
        snap.add_usage(e.cq.name, e.assignment.usage)
        if mode == PREEMPT_MODE:
            issued = k.issue_preemptions(e.wl, e.cq, e.targets, now)
            if issued:
                e.message += m.pending_preemption(issued)
                e.requeue_reason = PENDING_PREEMPTION
            continue
        if k.admission_blocked():
            # The scheduler waits here (Cache.WaitForPodsReady); the entries after this one
            # have not been looked at yet, so they go back as they were.
            k.block(e, now)
            for later in entries[i + 1:]:
                later.wl.evaluated = -1
                k.queues[later.cq.name].add(later.wl, now)
            entries = entries[:i]
            break
        e.status = ASSUMED
        k.admit(e.wl, e.cq, e.assignment, now)
    for e in entries + inadmissible:
        if e.status != ASSUMED:
            _requeue(k, e, now)
    return True


def _nominate(k: Kueue, popped: list[Workload], snap: Snapshot, now: float) -> tuple[list[Entry], list[Entry]]:
    entries, inadmissible = [], []
    if k.nominations[0] != k.version:
        k.nominations = (k.version, {}, {})
    candidates = k.nominations[2]
    for wl in popped:
        cq = k.config.cluster_queues[wl.cluster_queue or ""]
        e = Entry(wl, cq)
        if not k.namespace_matches(wl, cq):
            e.message, e.requeue_reason = m.NAMESPACE_MISMATCH, NAMESPACE_MISMATCH
            inadmissible.append(e)
            continue
        # Workloads of the same shape meet the same answer until something changes; with a
        # long backlog the scheduler tries each of them after every release.
        if wl.shape is None:
            wl.shape = _shape(wl, cq)
        newer = (wl.queue_timestamp(k.stamp) if cq.preemption.within_cluster_queue == LOWER_OR_NEWER_EQUAL_PRIORITY
                 else None)
        key = (wl.shape, newer)
        known = k.nominations[1].get(key)
        if known is not None:
            e.assignment, targets, e.message = known
            e.targets = list(targets)
            entries.append(e)
            continue

        def oracle(fr: FR, quantity: int, wl: Workload = wl, cq: ClusterQueue = cq) -> tuple[str, int]:
            return preemption.simulate(snap, wl, cq, fr, quantity, now, k.stamp, candidates)

        e.assignment = FlavorAssigner(wl, cq, snap, k.config.resource_flavors, oracle).assign()
        if e.assignment.mode == PREEMPT_MODE:
            ctx = preemption.Context(snap, wl, cq, e.assignment.needs_preemption(), e.assignment.usage, now,
                                     k.stamp, candidates)
            e.targets = preemption.targets(ctx)
        e.message = e.assignment.message()
        k.nominations[1][key] = (e.assignment, tuple(e.targets), e.message)
        entries.append(e)
    return entries, inadmissible


def _shape(wl: Workload, cq: ClusterQueue) -> tuple:
    """What flavor assignment and preemption read from a workload's spec."""
    s = wl.spec
    return (cq.name, s.count, s.priority, tuple(sorted(s.requests.items())),
            tuple(sorted(s.node_selector.items())), repr(s.affinity), s.tolerations)


def _fits(snap: Snapshot, e: Entry, preempted: dict[str, Workload]) -> bool:
    """``fits``: with this cycle's preemptions and the entry's own targets gone."""
    gone = {**preempted, **{t.workload.key: t.workload for t in e.targets}}
    present = []
    for wl in gone.values():
        assert wl.admission is not None  # preemption targets are admitted workloads
        if wl.key in snap.workloads[wl.admission.cluster_queue]:
            present.append(wl)
    for wl in present:
        snap.remove_workload(wl)
    ok = snap.fits(e.cq.name, e.assignment.usage)
    for wl in present:
        snap.add_workload(wl)
    return ok


def _to_reserve(e: Entry, snap: Snapshot) -> dict[FR, int]:
    """``quotaResourcesToReserve`` for a preemption without targets."""
    node = snap.node(e.cq.name)
    out = {}
    for fr, usage in e.assignment.usage.items():
        q = e.cq.quota(*fr)
        used = node.usage.get(fr, 0)
        if e.assignment.borrowing > 0:
            out[fr] = usage if q.borrowing_limit is None else min(usage, q.nominal + q.borrowing_limit - used)
        else:
            out[fr] = max(0, min(usage, q.nominal - used))
    return out


def _requeue(k: Kueue, e: Entry, now: float) -> None:
    """``requeueAndUpdate``."""
    reason = e.requeue_reason
    if e.status and reason == GENERIC:
        reason = FAILED_AFTER_NOMINATION
    k.queues[e.cq.name].requeue(e.wl, reason, now)
    if e.status in ("", SKIPPED):
        k.set_pending(e.wl, m.PENDING, e.message, now)
