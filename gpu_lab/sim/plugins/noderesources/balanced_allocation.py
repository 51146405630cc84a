"""NodeResourcesBalancedAllocation: prefer nodes whose resources stay evenly used.

balanced_allocation.go (v1.37): the score rewards the *change* in balance the
pod brings: 50 + (50 + with_pod - without_pod) / 2, where a balance score is
(1 - standard deviation of the used fractions) * 100. It uses actual requests
(no non-zero defaults) and skips best-effort pods entirely.

The balance is written three times, for speed, and tests hold them equal: over
many nodes with guards for resources a node lacks (``_balance``), over many nodes
when every node offers cpu and memory (``_balance2_with_without``), and for one
node in plain Python (``_balance_of_two``), which the scheduler uses to rescore the
few nodes whose pods changed (tests/sim/test_caches.py).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...cachehints import CacheHints
from ...framework import MAX_NODE_SCORE, CycleContext, Plugin, Status
from .scoring import node_rows, offered_everywhere, pod_request, scored_resources, value_readers

DEFAULT_RESOURCES: list[dict[str, Any]] = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]


def _balance2_with_without(b0: np.ndarray, b1: np.ndarray, a0: np.ndarray, a1: np.ndarray,
                           r0: int, r1: int) -> tuple[np.ndarray, np.ndarray]:
    """Two resources every node offers (the cpu + memory default): the balance with the
    pod's requests (r0, r1) added and without, computed side by side in one (2, n) array."""
    f0 = (b0 + np.array([[0], [r0]])) / a0
    f1 = (b1 + np.array([[0], [r1]])) / a1
    np.minimum(f0, 1.0, out=f0)
    np.minimum(f1, 1.0, out=f1)
    f0 -= f1
    std = np.abs(f0, out=f0)
    std /= 2
    balance = ((1 - std) * MAX_NODE_SCORE).astype(np.int64)
    return balance[1], balance[0]


def _balance_of_two(u0: int, u1: int, a0: int, a1: int) -> int:
    """One node's balance over two offered resources, in Go's float64 arithmetic."""
    std = abs(min(float(u0) / float(a0), 1.0) - min(float(u1) / float(a1), 1.0)) / 2
    return int((1 - std) * MAX_NODE_SCORE)


def _balance(used: list[np.ndarray], allocs: list[np.ndarray]) -> np.ndarray:
    if len(allocs) == 2:
        (u0, u1), (a0, a1) = used, allocs
        on0, on1 = a0 != 0, a1 != 0
        f0 = np.minimum(u0 / np.where(on0, a0, 1), 1.0)
        f1 = np.minimum(u1 / np.where(on1, a1, 1), 1.0)
        std = np.where(on0 & on1, np.abs(f0 - f1) / 2, 0.0)
        return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)
    n = len(allocs[0])
    fr = np.zeros((len(allocs), n))
    offered = np.zeros((len(allocs), n), dtype=bool)
    for k, (u, a) in enumerate(zip(used, allocs)):
        offered[k] = a != 0
        fr[k] = np.where(a != 0, np.minimum(u / np.where(a == 0, 1, a), 1.0), 0.0)
    count = offered.sum(axis=0)
    std = np.zeros(n)
    two = count == 2
    if two.any():
        # the first two offered fractions, in resource order
        first = np.argmax(offered, axis=0)
        masked = offered.copy()
        masked[first, np.arange(n)] = False
        second = np.argmax(masked, axis=0)
        d = np.abs((fr[first, np.arange(n)] - fr[second, np.arange(n)]) / 2)
        std = np.where(two, d, std)
    many = count > 2
    if many.any():
        safe = np.where(count == 0, 1, count)
        mean = (fr * offered).sum(axis=0) / safe
        var = (((fr - mean) ** 2) * offered).sum(axis=0) / safe
        std = np.where(many, np.sqrt(var), std)
    return ((1 - std) * MAX_NODE_SCORE).astype(np.int64)  # int64() truncates like Go


class BalancedAllocation(CacheHints, Plugin):
    name = "NodeResourcesBalancedAllocation"
    pre_score_decided_by_pod = True

    def __init__(self, args=None, handle=None):
        super().__init__(args, handle)
        res = self.args.get("resources") or DEFAULT_RESOURCES
        self.resources: list[dict[str, Any]] = [
            {"name": r["name"], "weight": int(r.get("weight") or 1)} for r in res]
        self.resource_weights = tuple((r["name"], r["weight"]) for r in self.resources)

    def skips_pre_score(self, pod) -> bool:
        # A best-effort pod (no request for any of the resources) is not scored.
        return all(pod_request(pod, name, True) == 0 for name, _ in self.resource_weights)

    def pre_score(self, ctx: CycleContext, feasible: np.ndarray) -> Status | None:
        return self.skip if self.skips_pre_score(ctx.pod) else None

    def score_key(self, pod):
        # A node's score depends on the pod only through its requests of these resources.
        return tuple(pod_request(pod, name, True) for name, _ in self.resource_weights)

    def score_each(self, ctx: CycleContext, nodes: list[int]) -> list[int] | None:
        scored = scored_resources(ctx.snapshot, ctx.pod, self.resource_weights, True, self.token)
        if len(scored) != 2:
            return None  # the general case only over many nodes
        (alloc_of, c0, used_of, at0, r0, _), (_, c1, _, at1, r1, _) = value_readers(ctx.snapshot, scored)
        out = []
        for i in nodes:
            a0, a1, b0, b1 = alloc_of(i, c0), alloc_of(i, c1), used_of(i, at0), used_of(i, at1)
            if a0 == 0 or a1 == 0:
                return None
            with_pod = _balance_of_two(b0 + r0, b1 + r1, a0, a1)
            out.append(MAX_NODE_SCORE // 2 + (MAX_NODE_SCORE // 2 + with_pod - _balance_of_two(b0, b1, a0, a1)) // 2)
        return out

    def score(self, ctx: CycleContext, feasible: np.ndarray) -> np.ndarray:
        snap = ctx.snapshot
        scored = scored_resources(snap, ctx.pod, self.resource_weights, True, self.token)
        if not len(scored):
            return np.full(len(feasible), 75, dtype=np.int64)  # both balances are 100
        if len(scored) == 2 and offered_everywhere(snap, scored):
            (c0, c1), (s0, s1) = scored.columns, scored.specs
            alloc, req = snap.allocatable, snap.requested
            with_pod, without = _balance2_with_without(
                req[:, c0][feasible], req[:, c1][feasible], alloc[:, c0][feasible], alloc[:, c1][feasible],
                s0.request, s1.request)
        else:
            alloc, before = node_rows(snap, scored, feasible)
            with_pod = _balance(list(before + scored.requests), list(alloc))
            without = _balance(list(before), list(alloc))
        # with - without is within [-50, 50] (a balance is within [50, 100]), so the
        # sum is never negative and // is Go's division.
        score = with_pod - without
        score += MAX_NODE_SCORE // 2
        score //= 2
        score += MAX_NODE_SCORE // 2
        return score
