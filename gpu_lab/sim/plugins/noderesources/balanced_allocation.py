"""NodeResourcesBalancedAllocation: prefer nodes whose resources stay evenly used.

balanced_allocation.go (v1.37): the score rewards the *change* in balance the
pod brings: 50 + (50 + with_pod - without_pod) / 2, where a balance score is
(1 - standard deviation of the used fractions) * 100. It uses actual requests
(no non-zero defaults) and skips best-effort pods entirely.
"""

from __future__ import annotations

import numpy as np

from ...framework import MAX_NODE_SCORE, SKIP, CycleContext, Plugin, Status
from .scoring import node_columns, pod_request

DEFAULT_RESOURCES = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]


def _balance(used: list[np.ndarray], allocs: list[np.ndarray]) -> np.ndarray:
    if len(allocs) == 2:  # the usual cpu + memory case, kept cheap
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


class BalancedAllocation(Plugin):
    name = "NodeResourcesBalancedAllocation"

    def __init__(self, args=None, handle=None):
        super().__init__(args, handle)
        res = self.args.get("resources") or DEFAULT_RESOURCES
        self.resources = [{"name": r["name"], "weight": int(r.get("weight") or 1)} for r in res]

    def pre_score(self, ctx: CycleContext, feasible: np.ndarray) -> Status | None:
        if all(pod_request(ctx.pod, r["name"], True) == 0 for r in self.resources):
            return Status(SKIP, plugin=self.name)
        return None

    def score_key(self, pod):
        # A node's score depends on the pod only through its requests.
        return tuple(pod_request(pod, r["name"], True) for r in self.resources)

    def score(self, ctx: CycleContext, feasible: np.ndarray) -> np.ndarray:
        specs, allocs, befores, withs = node_columns(ctx.snapshot, ctx.pod, self.resources, feasible, use_requested=True)
        if not specs:
            return np.full(len(feasible), 75, dtype=np.int64)  # both balances are 100
        with_pod = _balance(withs, allocs)
        without = _balance(befores, allocs)
        return MAX_NODE_SCORE // 2 + (MAX_NODE_SCORE // 2 + with_pod - without) // 2
