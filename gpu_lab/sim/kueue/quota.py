"""Quota and usage per (flavor, resource), for ClusterQueues and the cohorts they name.

The arithmetic of pkg/cache/scheduler/resource_node.go, for a cohort tree one level
deep (a cohort is the name in ``spec.cohortName``; Cohort objects are not modelled):

* a ClusterQueue keeps ``nominal - lendingLimit`` for itself (its *local* quota, 0
  without a lendingLimit) and puts the rest into its cohort's pool;
* a cohort's quota is the sum of what its ClusterQueues put in; its usage the sum of
  what they use beyond their local quota;
* ``available`` is local room plus the cohort's room, capped by ``borrowingLimit``;
  ``potential_available`` the same with nothing in use (the largest request that
  could ever fit).

``Snapshot`` is the scheduler's per-cycle copy (pkg/cache/scheduler/snapshot.go): usage
is copied, quotas are shared, and admitted workloads can be removed and added back to
simulate preemption.
"""

from __future__ import annotations

from ...model.kueue.objects import ClusterQueue, ResourceQuota
from .workload import Workload

FR = tuple[str, str]  # (flavor, resource)


class Node:
    """A ClusterQueue or a cohort in the tree (``resourceNode``)."""

    def __init__(self, name: str, parent: Node | None = None, quotas: dict[FR, ResourceQuota] | None = None,
                 cohort: bool = False):
        self.name = name
        self.is_cohort = cohort
        self.parent = parent
        self.quotas = quotas or {}
        self.subtree: dict[FR, int] = {fr: q.nominal for fr, q in self.quotas.items()}
        self.usage: dict[FR, int] = {}
        self.children: list[Node] = []

    def local_quota(self, fr: FR) -> int:
        q = self.quotas.get(fr)
        if q is not None and q.lending_limit is not None:
            return max(0, self.subtree.get(fr, 0) - q.lending_limit)
        return 0

    def local_available(self, fr: FR) -> int:
        return max(0, self.local_quota(fr) - self.usage.get(fr, 0))

    def nominal(self, fr: FR) -> int:
        q = self.quotas.get(fr)
        return q.nominal if q is not None else 0

    def borrowing_with(self, fr: FR, val: int) -> bool:
        """ClusterQueue: beyond its nominal quota; cohort: beyond its pooled quota."""
        limit = self.subtree.get(fr, 0) if self.is_cohort else self.nominal(fr)
        return self.usage.get(fr, 0) + val > limit

    def within_nominal(self, frs: set[FR]) -> bool:
        """``IsWithinNominalInResources``."""
        return all(self.usage.get(fr, 0) <= self.subtree.get(fr, 0) for fr in frs)


def available(node: Node, fr: FR) -> int:
    if node.parent is None:
        return node.subtree.get(fr, 0) - node.usage.get(fr, 0)
    parent_available = available(node.parent, fr)
    q = node.quotas.get(fr)
    if q is not None and q.borrowing_limit is not None:
        stored_in_parent = node.subtree.get(fr, 0) - node.local_quota(fr)
        used_in_parent = max(0, node.usage.get(fr, 0) - node.local_quota(fr))
        parent_available = min(stored_in_parent - used_in_parent + q.borrowing_limit, parent_available)
    return node.local_available(fr) + parent_available


def potential_available(node: Node, fr: FR) -> int:
    if node.parent is None:
        return node.subtree.get(fr, 0)
    result = node.local_quota(fr) + potential_available(node.parent, fr)
    q = node.quotas.get(fr)
    if q is not None and q.borrowing_limit is not None:
        result = min(node.subtree.get(fr, 0) + q.borrowing_limit, result)
    return result


def add_usage(node: Node, fr: FR, val: int) -> None:
    local = node.local_available(fr)
    node.usage[fr] = node.usage.get(fr, 0) + val
    if node.parent is not None and val > local:
        add_usage(node.parent, fr, val - local)


def remove_usage(node: Node, fr: FR, val: int) -> None:
    stored_in_parent = node.usage.get(fr, 0) - node.local_quota(fr)
    node.usage[fr] = node.usage.get(fr, 0) - val
    if stored_in_parent <= 0 or node.parent is None:
        return
    remove_usage(node.parent, fr, min(val, stored_in_parent))


class Snapshot:
    """The quota tree and the workloads holding quota in each ClusterQueue."""

    def __init__(self, cluster_queues: dict[str, ClusterQueue]):
        self.cqs: dict[str, Node] = {}
        self.cohorts: dict[str, Node] = {}
        self.workloads: dict[str, dict[str, Workload]] = {}
        for cq in cluster_queues.values():
            quotas = {(fq.name, res): q for rg in cq.resource_groups for fq in rg.flavors
                      for res, q in fq.resources.items()}
            parent = None
            if cq.cohort:
                parent = self.cohorts.setdefault(cq.cohort, Node(cq.cohort, cohort=True))
            node = Node(cq.name, parent, quotas)
            if parent is not None:
                parent.children.append(node)
            self.cqs[cq.name] = node
            self.workloads[cq.name] = {}
        for cohort in self.cohorts.values():  # updateCohortResourceNode / accumulateFromChild
            for child in cohort.children:
                for fr, q in child.subtree.items():
                    cohort.subtree[fr] = cohort.subtree.get(fr, 0) + q - child.local_quota(fr)

    def copy(self) -> Snapshot:
        new = object.__new__(Snapshot)
        new.cohorts = {}
        for name, c in self.cohorts.items():
            n = Node(name, cohort=True)
            n.subtree, n.usage = c.subtree, dict(c.usage)
            new.cohorts[name] = n
        new.cqs = {}
        for name, c in self.cqs.items():
            n = Node(name, new.cohorts[c.parent.name] if c.parent else None, c.quotas)
            n.subtree, n.usage = c.subtree, dict(c.usage)
            if n.parent is not None:
                n.parent.children.append(n)
            new.cqs[name] = n
        new.workloads = {name: dict(wls) for name, wls in self.workloads.items()}
        return new

    def node(self, cq: str) -> Node:
        return self.cqs[cq]

    def members(self, cq: str) -> list[str]:
        """The ClusterQueues of ``cq``'s cohort (``Root().SubtreeClusterQueues()``)."""
        parent = self.cqs[cq].parent
        return [c.name for c in parent.children] if parent is not None else [cq]

    def add_workload(self, wl: Workload) -> None:
        assert wl.admission is not None
        cq = wl.admission.cluster_queue
        for fr, q in wl.admission.usage.items():
            add_usage(self.cqs[cq], fr, q)
        self.workloads[cq][wl.key] = wl

    def remove_workload(self, wl: Workload) -> None:
        assert wl.admission is not None
        cq = wl.admission.cluster_queue
        for fr, q in wl.admission.usage.items():
            remove_usage(self.cqs[cq], fr, q)
        self.workloads[cq].pop(wl.key, None)

    def add_usage(self, cq: str, usage: dict[FR, int]) -> None:
        for fr, q in usage.items():
            add_usage(self.cqs[cq], fr, q)

    def fits(self, cq: str, usage: dict[FR, int]) -> bool:
        """``ClusterQueueSnapshot.Fits``."""
        node = self.cqs[cq]
        return all(max(0, available(node, fr)) >= q for fr, q in usage.items())

    def quantities_fit_in_quota(self, cq: str, requests: dict[FR, int]) -> tuple[bool, dict[FR, int]]:
        node = self.cqs[cq]
        fits = all(node.usage.get(fr, 0) + q <= node.subtree.get(fr, 0) for fr, q in requests.items())
        return fits, {fr: max(0, q - node.local_available(fr)) for fr, q in requests.items()}

    def lowest_subtree_that_fits(self, cq: str, fr: FR, val: int) -> tuple[int, bool]:
        """``FindHeightOfLowestSubtreeThatFits``: (borrowing level, may reclaim in hierarchy)."""
        node = self.cqs[cq]
        if not node.borrowing_with(fr, val) or node.parent is None:
            return 0, node.parent is not None
        # whether or not the cohort fits the rest, the answer is the root's height (1: it
        # has ClusterQueues and no child cohorts) and the root has no parent to reclaim from
        return 1, False
