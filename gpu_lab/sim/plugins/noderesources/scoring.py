"""Shared scoring arithmetic of the noderesources plugins (resource_allocation.go).

Integer arithmetic matches Go's: ``//`` on non-negative int64 is Go's ``/``.
For every resource in the strategy, an extended resource the pod does not
request, or a resource the node does not offer, is left out of the score.
"""

from __future__ import annotations

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


def node_columns(
    snap: Snapshot, pod: Pod, resources: list[dict], idx: np.ndarray, use_requested: bool
) -> tuple[list[dict], list[np.ndarray], list[np.ndarray], list[np.ndarray]]:
    """Per scored resource: (spec, allocatable, allocated-before, requested-with-pod) over ``idx``.

    Entries that the real scorer skips get allocatable 0, so the per-node
    weight sums stay right where only some nodes offer a resource.
    """
    specs, allocs, befores, withs = [], [], [], []
    for spec in resources:
        name = spec["name"]
        req = pod_request(pod, name, use_requested)
        if req == 0 and is_scalar(name):
            continue
        col = snap.rindex.get(name)
        if col is None:
            continue
        alloc = snap.allocatable[idx, col]
        if name in ("cpu", "memory") and not use_requested:
            before = snap.nonzero[idx, 0 if name == "cpu" else 1]
        else:
            before = snap.requested[idx, col]
        specs.append(spec)
        allocs.append(alloc)
        befores.append(before)
        withs.append(before + req)
    return specs, allocs, befores, withs


def weighted_average(specs, allocs, per_resource_scores, rounding: str = "floor") -> np.ndarray:
    """Σ score·weight / Σ weight over resources the node offers (0 when none)."""
    n = len(allocs[0]) if allocs else 0
    total = np.zeros(n, dtype=np.int64)
    wsum = np.zeros(n, dtype=np.int64)
    for spec, alloc, score in zip(specs, allocs, per_resource_scores):
        w = int(spec.get("weight") or 1)
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


def least_requested(requested: np.ndarray, capacity: np.ndarray) -> np.ndarray:
    cap = np.where(capacity == 0, 1, capacity)
    s = (capacity - requested) * MAX_NODE_SCORE // cap
    return np.where((capacity == 0) | (requested > capacity), 0, s)


def most_requested(requested: np.ndarray, capacity: np.ndarray) -> np.ndarray:
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
