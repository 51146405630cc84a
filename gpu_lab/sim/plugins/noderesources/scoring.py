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
from typing import Any

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


@dataclass(frozen=True, eq=False)
class ScoredSet:
    """The resources that count for one pod, as the arrays the scorers need."""

    specs: tuple[ScoredResource, ...]
    columns: tuple[int, ...]
    requests: np.ndarray  # (k, 1): what the pod adds to each resource
    weights: tuple[int, ...]
    # cpu then memory, read from Snapshot.nonzero (use_requested=False) or from
    # requested: rows 0 and 1 of the column-major arrays, gathered in one go.
    cpu_memory: bool

    def __len__(self) -> int:
        return len(self.specs)


def scored_resources(snap: Snapshot, pod: Pod, resources: tuple[tuple[str, int], ...],
                     use_requested: bool, owner: int) -> ScoredSet:
    """The (name, weight) resources of a strategy that count for this pod, cached on the pod
    under ``owner`` (the token of the plugin whose args list ``resources``)."""
    key = ("scored_resources", owner, use_requested, snap.layout)
    got = pod.memo.get(key)
    if got is None:
        specs = []
        for name, weight in resources:
            req = pod_request(pod, name, use_requested)
            if req == 0 and is_scalar(name):
                continue
            col = snap.rindex.get(name)
            if col is None:
                continue
            nz = {"cpu": 0, "memory": 1}.get(name, -1) if not use_requested else -1
            specs.append(ScoredResource(name, weight, col, nz, req))
        columns = tuple(sp.column for sp in specs)
        cpu_memory = columns == (snap.rindex["cpu"], snap.rindex["memory"]) == (0, 1)
        requests = np.array([[sp.request] for sp in specs], dtype=np.int64).reshape(len(specs), 1)
        got = ScoredSet(tuple(specs), columns, requests, tuple(sp.weight for sp in specs), cpu_memory)
        pod.memo[key] = got
    return got


def node_rows(snap: Snapshot, scored: ScoredSet, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(allocatable, allocated before the pod) over ``idx``: (k, len(idx)) arrays, one row per resource."""
    if scored.cpu_memory:
        before = snap.nonzero.T if scored.specs[0].nonzero >= 0 else snap.requested.T[0:2]
        return snap.allocatable.T[0:2].take(idx, axis=1), before.take(idx, axis=1)
    alloc = np.empty((len(scored), len(idx)), dtype=np.int64)
    before = np.empty_like(alloc)
    for k, sp in enumerate(scored.specs):
        alloc[k] = snap.allocatable[:, sp.column][idx]
        source = snap.nonzero[:, sp.nonzero] if sp.nonzero >= 0 else snap.requested[:, sp.column]
        before[k] = source[idx]
    return alloc, before


def value_readers(snap: Snapshot, scored: ScoredSet) -> list[tuple[Any, int, Any, int, int, int]]:
    """Per scored resource: how to read one node's allocatable and what it has allocated
    (``reader(node, column)``), what the pod adds and its weight. Plain-Python access
    to what kube-scheduler's per-node Score reads from one NodeInfo."""
    return [(snap.allocatable.item, sp.column, snap.nonzero.item if sp.nonzero >= 0 else snap.requested.item,
             sp.nonzero if sp.nonzero >= 0 else sp.column, sp.request, sp.weight) for sp in scored.specs]


def offered_everywhere(snap: Snapshot, scored: ScoredSet) -> bool:
    return all(snap.offered_everywhere(col) for col in scored.columns)


def weighted_average(scored: ScoredSet, alloc: np.ndarray, per_resource: np.ndarray,
                     rounding: str = "floor", everywhere: bool = False) -> np.ndarray:
    """Σ score·weight / Σ weight over the resources each node offers (0 when none).

    ``alloc`` and ``per_resource`` have one row per resource of ``scored``.
    """
    weights = scored.weights
    if everywhere and rounding == "floor":  # every node offers every resource
        if len(weights) == 2 and weights[0] == weights[1]:
            total = per_resource[0] + per_resource[1]  # w·(a + b) // 2w == (a + b) // 2
            total //= 2
            return total
        total = per_resource[0] * weights[0]
        for k in range(1, len(weights)):
            total += per_resource[k] * weights[k]
        total //= sum(weights)
        return total
    n = alloc.shape[1]
    total = np.zeros(n, dtype=np.int64)
    wsum = np.zeros(n, dtype=np.int64)
    for k, w in enumerate(weights):
        offered = alloc[k] != 0
        if rounding == "round":  # RequestedToCapacityRatio counts only positive scores
            offered = offered & (per_resource[k] > 0)
        total += np.where(offered, per_resource[k] * w, 0)
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


def least_requested_score(requested: int, capacity: int) -> int:
    """``leastRequestedScore`` for one node, in Go's integer arithmetic."""
    if capacity == 0 or requested > capacity:
        return 0
    return (capacity - requested) * MAX_NODE_SCORE // capacity


def most_requested_score(requested: int, capacity: int) -> int:
    """``mostRequestedScore`` for one node."""
    if capacity == 0:
        return 0
    return min(requested, capacity) * MAX_NODE_SCORE // capacity


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
