"""Classical preemption: which admitted workloads a pending one may evict, and which it must.

pkg/scheduler/preemption (v0.17.0), fair sharing off:

* candidates (classical/hierarchical_preemption.go, candidate_generator.go): workloads of
  the same ClusterQueue allowed by ``withinClusterQueue``, and workloads of other
  ClusterQueues of the cohort that borrow the contested (flavor, resource), allowed by
  ``reclaimWithinCohort``; evicted ones first, then other queues' before our own, lower
  priority first, the most recently admitted first (common/ordering.go);
* targets (preemption.go ``classicalPreemptions``): remove candidates until the workload
  fits, with or without borrowing in the order the policy gives, then add back every
  target it does not need (``fillBackWorkloads``);
* the oracle the flavor assigner asks (preemption_oracle.go ``SimulatePreemption``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from ...model.kueue.objects import (
    ANY,
    LOWER_OR_NEWER_EQUAL_PRIORITY,
    LOWER_PRIORITY,
    NEVER,
    ClusterQueue,
)
from . import messages as m
from .quota import FR, Snapshot, available
from .workload import Workload

# preemptioncommon.PreemptionPossibility
NO_CANDIDATES, PREEMPT, RECLAIM = "NoCandidates", "Preempt", "Reclaim"
# classical preemptionVariant
WITHIN_CQ, HIERARCHICAL_RECLAIM, RECLAIM_WITHOUT_BORROWING, RECLAIM_WHILE_BORROWING = range(1, 5)
REASONS = {WITHIN_CQ: m.IN_CLUSTER_QUEUE, HIERARCHICAL_RECLAIM: m.IN_COHORT_RECLAMATION,
           RECLAIM_WITHOUT_BORROWING: m.IN_COHORT_RECLAMATION,
           RECLAIM_WHILE_BORROWING: m.IN_COHORT_RECLAIM_WHILE_BORROWING}


@dataclass
class Target:
    workload: Workload
    reason: str  # InClusterQueue, InCohortReclamation, InCohortReclaimWhileBorrowing


@dataclass
class Context:
    snap: Snapshot
    preemptor: Workload
    cq: ClusterQueue
    frs: set[FR]  # the (flavor, resource) pairs that need preemption
    usage: dict[FR, int]  # what the preemptor would use
    now: float
    requeuing_timestamp: str
    # candidate lists already built at this state of the snapshot (see ``Candidates``)
    cache: dict | None = None


def satisfies_policy(preemptor: Workload, candidate: Workload, policy: str, stamp: str) -> bool:
    """``SatisfiesPreemptionPolicy`` (the SchedulerTimestampPreemptionBuffer gate is off)."""
    lower = preemptor.spec.priority > candidate.spec.priority
    if policy == LOWER_PRIORITY:
        return lower
    if policy == LOWER_OR_NEWER_EQUAL_PRIORITY:
        newer_equal = (preemptor.spec.priority == candidate.spec.priority
                       and preemptor.queue_timestamp(stamp) < candidate.queue_timestamp(stamp))
        return lower or newer_equal
    return policy == ANY


def uses_resources(wl: Workload, frs: set[FR]) -> bool:
    return wl.admission is not None and any(fr in frs for fr in wl.admission.usage)


def _borrow_forbidden(cq: ClusterQueue) -> bool:
    return cq.preemption.borrow_within_cohort == NEVER


def _variant(ctx: Context, wl: Workload, advantage: bool) -> int | None:
    """``classifyPreemptionVariant``; None for "never"."""
    if not uses_resources(wl, ctx.frs):
        return None
    same = wl.admission is not None and wl.admission.cluster_queue == ctx.cq.name
    policy = ctx.cq.preemption.within_cluster_queue if same else ctx.cq.preemption.reclaim_within_cohort
    if not satisfies_policy(ctx.preemptor, wl, policy, ctx.requeuing_timestamp):
        return None
    if same:
        return WITHIN_CQ
    if advantage:
        return HIERARCHICAL_RECLAIM
    if _borrow_forbidden(ctx.cq):
        return RECLAIM_WITHOUT_BORROWING
    threshold = ctx.cq.preemption.max_priority_threshold
    cand, incoming = wl.spec.priority, ctx.preemptor.spec.priority
    if cand >= incoming or (threshold is not None and cand > threshold):
        return RECLAIM_WITHOUT_BORROWING
    return RECLAIM_WHILE_BORROWING


class Candidates:
    """``candidateIterator``."""

    def __init__(self, ctx: Context):
        self.ctx = ctx
        cq = ctx.cq
        advantage = bool(cq.cohort) and ctx.snap.quantities_fit_in_quota(cq.name, ctx.usage)[0]
        newer = (ctx.preemptor.queue_timestamp(ctx.requeuing_timestamp)
                 if LOWER_OR_NEWER_EQUAL_PRIORITY in (cq.preemption.within_cluster_queue,
                                                      cq.preemption.reclaim_within_cohort) else None)
        key = (cq.name, frozenset(ctx.frs), advantage, ctx.preemptor.spec.priority, newer)
        if ctx.cache is not None and key in ctx.cache:
            self.candidates, self.none_from_other_queues, self.none_for_hierarchical_reclaim = ctx.cache[key]
            return
        same: list[tuple[Workload, int]] = []
        if cq.preemption.within_cluster_queue != NEVER:
            for wl in ctx.snap.workloads[cq.name].values():
                variant = _variant(ctx, wl, False)
                if variant is not None:
                    same.append((wl, variant))
        hierarchy: list[tuple[Workload, int]] = []
        priority: list[tuple[Workload, int]] = []
        if cq.cohort and cq.preemption.reclaim_within_cohort != NEVER:
            target = hierarchy if advantage else priority
            for other in ctx.snap.members(cq.name):
                if other == cq.name or ctx.snap.node(other).within_nominal(ctx.frs):
                    continue
                for wl in ctx.snap.workloads[other].values():
                    variant = _variant(ctx, wl, advantage)
                    if variant is not None:
                        target.append((wl, variant))
        ordered = [sorted(group, key=lambda c: self._order(c[0])) for group in (hierarchy, priority, same)]
        self.candidates = ([c for g in ordered for c in g if c[0].evicted]
                           + [c for g in ordered for c in g if not c[0].evicted])
        self.none_from_other_queues = not hierarchy and not priority
        self.none_for_hierarchical_reclaim = not hierarchy
        if ctx.cache is not None:
            ctx.cache[key] = (self.candidates, self.none_from_other_queues, self.none_for_hierarchical_reclaim)

    def _order(self, wl: Workload) -> tuple:
        """``CandidatesOrdering``: evicted, other queues, lower priority, newest reservation."""
        other_queue = wl.admission is not None and wl.admission.cluster_queue != self.ctx.cq.name
        return (not wl.evicted, not other_queue, wl.spec.priority, -wl.reservation_time(self.ctx.now), wl.seq)

    def iterate(self, borrowing: bool) -> Iterator[tuple[Workload, str]]:
        for wl, variant in self.candidates:
            if self._valid(wl, variant, borrowing):
                yield wl, REASONS[variant]

    def _valid(self, wl: Workload, variant: int, borrowing: bool) -> bool:
        assert wl.admission is not None
        if wl.admission.cluster_queue == self.ctx.cq.name:
            return True
        if borrowing and variant == RECLAIM_WITHOUT_BORROWING:
            return False
        # with a one-level cohort the walk up to the lowest common ancestor stops at once
        return not self.ctx.snap.node(wl.admission.cluster_queue).within_nominal(self.ctx.frs)


def _fits(ctx: Context, allow_borrowing: bool) -> bool:
    """``workloadFits``."""
    node = ctx.snap.node(ctx.cq.name)
    for fr, q in ctx.usage.items():
        if not allow_borrowing and node.borrowing_with(fr, q):
            return False
        if q > max(0, available(node, fr)):
            return False
    return True


def targets(ctx: Context) -> list[Target]:
    """``classicalPreemptions``: the workloads to evict so the preemptor fits, or none."""
    candidates = Candidates(ctx)
    forbidden = _borrow_forbidden(ctx.cq)
    node = ctx.snap.node(ctx.cq.name)
    under_nominal = all(node.usage.get(fr, 0) < node.nominal(fr) for fr in ctx.frs)
    if candidates.none_from_other_queues or (forbidden and not under_nominal):
        attempts = [True]
    elif forbidden and candidates.none_for_hierarchical_reclaim:
        attempts = [False, True]
    else:
        attempts = [True, False]
    for allow_borrowing in attempts:
        chosen: list[Target] = []
        for wl, reason in candidates.iterate(allow_borrowing):
            ctx.snap.remove_workload(wl)
            chosen.append(Target(wl, reason))
            if _fits(ctx, allow_borrowing):
                chosen = _fill_back(ctx, chosen, allow_borrowing)
                for t in chosen:
                    ctx.snap.add_workload(t.workload)
                return chosen
        for t in chosen:
            ctx.snap.add_workload(t.workload)
    return []


def _fill_back(ctx: Context, chosen: list[Target], allow_borrowing: bool) -> list[Target]:
    """``fillBackWorkloads``: keep only the targets the preemptor needs gone."""
    for i in range(len(chosen) - 2, -1, -1):
        ctx.snap.add_workload(chosen[i].workload)
        if _fits(ctx, allow_borrowing):
            chosen[i] = chosen[-1]
            chosen.pop()
        else:
            ctx.snap.remove_workload(chosen[i].workload)
    return chosen


def simulate(snap: Snapshot, preemptor: Workload, cq: ClusterQueue, fr: FR, quantity: int, now: float,
             stamp: str, cache: dict | None = None) -> tuple[str, int]:
    """``PreemptionOracle.SimulatePreemption``: (possibility, borrowing level after it)."""
    if cq.preemption.within_cluster_queue == NEVER and (not cq.cohort or cq.preemption.reclaim_within_cohort == NEVER):
        # no policy allows a candidate: targets() would find none
        return NO_CANDIDATES, snap.lowest_subtree_that_fits(cq.name, fr, quantity)[0]
    ctx = Context(snap, preemptor, cq, {fr}, {fr: quantity}, now, stamp, cache)
    found = targets(ctx)
    if not found:
        return NO_CANDIDATES, snap.lowest_subtree_that_fits(cq.name, fr, quantity)[0]
    for t in found:
        snap.remove_workload(t.workload)
    borrow = snap.lowest_subtree_that_fits(cq.name, fr, quantity)[0]
    for t in found:
        snap.add_workload(t.workload)
    same = any(t.workload.admission and t.workload.admission.cluster_queue == cq.name for t in found)
    return (PREEMPT if same else RECLAIM), borrow


def cq_path(snap: Snapshot, cq: str) -> str:
    """``buildCQPath``: ``/<cohort>/<cq>`` or ``/<cq>``."""
    parent = snap.node(cq).parent
    return f"/{parent.name}/{cq}" if parent is not None else f"/{cq}"
