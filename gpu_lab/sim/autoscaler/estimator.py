"""How many new nodes of a group the pending pods need: cluster-autoscaler's binpacking estimator.

Pods are taken largest first (cpu share plus memory share of the template,
as ``estimator/binpacking_estimator.go`` sorts them) and each goes onto the
first new node it fits, else onto another new node while the group has room.
Every new node starts as the group's template does, with its DaemonSet pods
(``group.pods``) already on it. Resources are counted here; ``fits(pod, group)``
answers for everything else a scheduler checks on the template node
(selectors, taints, affinity, host ports against the daemon pods).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from .state import NodeGroup, PodState

Fits = Callable[[PodState, NodeGroup], "bool | str"]


def shortfall(requests: Mapping[str, int], free: Mapping[str, int]) -> str | None:
    """kube-scheduler's ``Insufficient <resource>`` for the first resource that does not fit, or None."""
    if "pods" in free and free["pods"] < 1:
        return "Too many pods"
    for res, amount in requests.items():
        if amount > 0 and amount > free.get(res, 0):
            return f"Insufficient {res}"
    return None


def take(free: dict[str, int], requests: Mapping[str, int]) -> None:
    if "pods" in free:
        free["pods"] -= 1
    for res, amount in requests.items():
        free[res] = free.get(res, 0) - amount


def fresh(group: NodeGroup) -> dict[str, int]:
    """What a new node of ``group`` has free: its allocatable less its template pods (DaemonSets)."""
    free = dict(group.allocatable)
    for pod in group.pods:
        take(free, pod.requests)
    return free


def template_reason(pod: PodState, group: NodeGroup, fits: Fits, free: Mapping[str, int] | None = None) -> str | None:
    """Why ``pod`` would not fit a new node of ``group`` (None: it would). ``free``: ``fresh(group)``."""
    short = shortfall(pod.requests, fresh(group) if free is None else free)
    if short:
        return short
    answer = fits(pod, group)
    if answer is True:
        return None
    return answer if isinstance(answer, str) and answer else "node(s) didn't match the pod's requirements"


@dataclass
class Estimate:
    """``nodes`` new nodes of ``group`` hold ``placed`` (pod -> index of its new node)."""

    group: NodeGroup
    nodes: int = 0
    placed: dict[PodState, int] = field(default_factory=dict)
    rejected: dict[PodState, str] = field(default_factory=dict)  # pod -> why it fits no empty node

    @property
    def pods(self) -> list[PodState]:
        return list(self.placed)


def estimate(pods: Sequence[PodState], group: NodeGroup, limit: int, fits: Fits,
             frees: list[dict[str, int]] | None = None) -> Estimate:
    """Binpack ``pods`` onto new nodes of ``group``, at most ``limit`` of them.

    ``frees`` starts the packing from nodes already on their way (their free
    resources, consumed in place); those do not count as new nodes.
    """
    est = Estimate(group)
    bins = frees if frees is not None else []
    first_new = len(bins)
    new = fresh(group)
    for pod in sorted(pods, key=lambda p: -_score(p, group)):
        reason = template_reason(pod, group, fits, new)
        if reason:
            est.rejected[pod] = reason
            continue
        for i, free in enumerate(bins):
            if shortfall(pod.requests, free) is None:
                take(free, pod.requests)
                est.placed[pod] = i - first_new
                break
        else:
            if len(bins) - first_new >= limit:
                continue  # the group is full: the pod waits for a later scale-up
            free = dict(new)
            take(free, pod.requests)
            bins.append(free)
            est.placed[pod] = len(bins) - 1 - first_new
    est.nodes = len(bins) - first_new
    return est


def _score(pod: PodState, group: NodeGroup) -> float:
    score = 0.0
    for res in ("cpu", "memory"):
        alloc = group.allocatable.get(res, 0)
        if alloc > 0:
            score += pod.requests.get(res, 0) / alloc
    return score
