"""Shared scoring arithmetic of the noderesources plugins (resource_allocation.go).

Integer arithmetic matches Go's: ``//`` on non-negative int64 is Go's ``/``.
For every resource in the strategy, an extended resource the pod does not
request, or a resource the node does not offer, is left out of the score.

Scores are computed over many nodes at once, one resource column at a time.
When every node offers a resource (the usual case for cpu and memory) the
"left out where the node does not offer it" guards cannot change anything and
are skipped; the arithmetic is the same either way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ....model.objects import Pod, is_extended_resource
from ...framework import MAX_NODE_SCORE
from ...snapshot import Snapshot

MAX_CUSTOM_PRIORITY_SCORE = 10  # config.MaxCustomPriorityScore
MAX_UTILIZATION = 100


def is_scalar(name: str) -> bool:
    """``schedutil.IsScalarResourceName``: extended, hugepages-*, attachable volumes."""
    return (
        is_extended_resource(name)
        or name.startswith("hugepages-")
        or name.startswith("attachable-volumes-")
    )


def pod_request(pod: Pod, resource: str, use_requested: bool) -> int:
    """The pod's request for scoring; cpu/memory get the non-zero defaults unless use_requested."""
    if not use_requested:
        if resource == "cpu":
            return pod.nonzero_cpu
        if resource == "memory":
            return pod.nonzero_memory
    return pod.requests.get(resource, 0)


@dataclass(frozen=True)
class ScoredResource:
    """One resource a scorer looks at for one pod: where to read it, what the pod adds."""

    name: str
    weight: int
    column: int  # column in Snapshot.allocatable / requested
    nonzero: int  # column in Snapshot.nonzero to read instead of requested, or -1
    request: int


def scored_resources(snap: Snapshot, pod: Pod, resources: tuple[tuple[str, int], ...],
                     use_requested: bool) -> tuple[ScoredResource, ...]:
    """The (name, weight) resources of a strategy that count for this pod, cached on the pod."""
    key = ("scored_resources", resources, use_requested, snap.layout)
    got = pod.memo.get(key)
    if got is None:
        out = []
        for name, weight in resources:
            req = pod_request(pod, name, use_requested)
            if req == 0 and is_scalar(name):
                continue
            col = snap.rindex.get(name)
            if col is None:
                continue
            nz = {"cpu": 0, "memory": 1}.get(name, -1) if not use_requested else -1
            out.append(ScoredResource(name, weight, col, nz, req))
        got = tuple(out)
        pod.memo[key] = got
    return got


def node_columns(snap: Snapshot, specs: tuple[ScoredResource, ...], idx: np.ndarray
                 ) -> tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """Per scored resource over ``idx``: allocatable, allocated before the pod, and with it."""
    allocs, befores, withs = [], [], []
    for s in specs:
        allocs.append(snap.allocatable[:, s.column][idx])
        source = snap.nonzero[:, s.nonzero] if s.nonzero >= 0 else snap.requested[:, s.column]
        before = source[idx]
        befores.append(before)
        withs.append(before + s.request)
    return allocs, befores, withs


def offered_everywhere(snap: Snapshot, specs: tuple[ScoredResource, ...]) -> bool:
    return all(snap.offered_everywhere(s.column) for s in specs)


def weighted_average(specs, allocs, per_resource_scores, rounding: str = "floor") -> np.ndarray:
    """Σ score·weight / Σ weight over resources the node offers (0 when none)."""
    n = len(allocs[0]) if allocs else 0
    total = np.zeros(n, dtype=np.int64)
    wsum = np.zeros(n, dtype=np.int64)
    for spec, alloc, score in zip(specs, allocs, per_resource_scores):
        w = spec.weight
        offered = alloc != 0
        if rounding == "round":  # RequestedToCapacityRatio counts only positive scores
            offered = offered & (score > 0)
        total += np.where(offered, score * w, 0)
        wsum += np.where(offered, w, 0)
    safe = np.where(wsum == 0, 1, wsum)
    if rounding == "round":
        out = np.floor(total / safe + 0.5).astype(np.int64)  # math.Round on non-negative values
    else:
        out = total // safe
    return np.where(wsum == 0, 0, out)


def least_requested(requested: np.ndarray, capacity: np.ndarray, everywhere: bool = False) -> np.ndarray:
    """``leastRequestedScore``: 0 when the node offers none or too little."""
    if everywhere:  # capacity > 0 on every node
        free = capacity - requested
        np.maximum(free, 0, out=free)
        free *= MAX_NODE_SCORE
        free //= capacity
        return free
    cap = np.where(capacity == 0, 1, capacity)
    s = (capacity - requested) * MAX_NODE_SCORE // cap
    return np.where((capacity == 0) | (requested > capacity), 0, s)


def most_requested(requested: np.ndarray, capacity: np.ndarray, everywhere: bool = False) -> np.ndarray:
    """``mostRequestedScore``: a request above capacity counts as full."""
    if everywhere:
        return np.minimum(requested, capacity) * MAX_NODE_SCORE // capacity
    cap = np.where(capacity == 0, 1, capacity)
    s = np.minimum(requested, capacity) * MAX_NODE_SCORE // cap
    return np.where(capacity == 0, 0, s)


def go_div(a, b):
    """Go's integer division truncates toward zero; Python's floors."""
    q = np.abs(a) // abs(b)
    return np.where((np.asarray(a) < 0) != (b < 0), -q, q)


def broken_linear(shape: list[tuple[int, int]], p: np.ndarray) -> np.ndarray:
    """``helper.BuildBrokenLinearFunction`` over an array of utilisations."""
    out = np.full(p.shape, shape[-1][1], dtype=np.int64)
    done = np.zeros(p.shape, dtype=bool)
    for i, (u, s) in enumerate(shape):
        hit = (~done) & (p <= u)
        if i == 0:
            out[hit] = s
        else:
            u0, s0 = shape[i - 1]
            out[hit] = s0 + go_div((s - s0) * (p[hit] - u0), u - u0) if u != u0 else s
        done |= hit
    return out


def requested_to_capacity(shape: list[tuple[int, int]], requested: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    cap = np.where(capacity == 0, 1, capacity)
    util = np.where((capacity == 0) | (requested > capacity), MAX_UTILIZATION, requested * MAX_UTILIZATION // cap)
    return broken_linear(shape, util)
