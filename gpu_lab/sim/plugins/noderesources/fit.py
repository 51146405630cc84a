"""NodeResourcesFit: does the pod's request fit what the node has left?

Filter (fit.go ``fitsRequest``): one more pod than ``pods`` allows is "Too
many pods"; each of cpu, memory, ephemeral-storage and every scalar resource
(``nvidia.com/gpu`` included) the pod requests and the node lacks gives
"Insufficient <name>". The failure is UnschedulableAndUnresolvable when the
request exceeds the node's whole allocatable (preemption cannot help).

Score: the configured ``scoringStrategy`` (default LeastAllocated over cpu and
memory, weight 1 each). Extended resources count only if listed there, which is
why GPUs are neither spread nor packed by default.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ....errors import GpuLabError
from ...cachehints import CacheHints
from ...framework import MAX_NODE_SCORE, UNRESOLVABLE, UNSCHEDULABLE, CycleContext, Plugin, Status
from .scoring import (
    MAX_CUSTOM_PRIORITY_SCORE,
    is_scalar,
    least_requested,
    least_requested_score,
    most_requested,
    most_requested_score,
    node_rows,
    offered_everywhere,
    pod_request,
    requested_to_capacity,
    scored_resources,
    value_readers,
    weighted_average,
)

DEFAULT_RESOURCES: list[dict[str, Any]] = [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1}]
STRATEGIES = ("LeastAllocated", "MostAllocated", "RequestedToCapacityRatio")


def _delegated_to_dra(ctx: CycleContext, name: str) -> bool:
    """DRAExtendedResource (``shouldDelegateResourceToDRA``): an extended resource a DeviceClass
    maps is left to DynamicResources on nodes whose allocatable has none of it."""
    state = getattr(ctx.snapshot, "dra", None)
    return state is not None and state.maps_extended() and state.extended_class(name) is not None


class Fit(CacheHints, Plugin):
    name = "NodeResourcesFit"

    def __init__(self, args=None, handle=None):
        super().__init__(args, handle)
        strat = dict(self.args.get("scoringStrategy") or {})
        self.strategy = strat.get("type") or "LeastAllocated"
        if self.strategy not in STRATEGIES:
            raise GpuLabError(
                f'NodeResourcesFitArgs: scoringStrategy.type: Unsupported value: "{self.strategy}": '
                f"supported values: {', '.join(repr(s) for s in STRATEGIES)}"
            )
        resources = strat.get("resources") or DEFAULT_RESOURCES
        self.resources: list[dict[str, Any]] = [
            {"name": r["name"], "weight": int(r.get("weight") or 1)} for r in resources]
        self.resource_weights = tuple((r["name"], r["weight"]) for r in self.resources)
        for r in self.resources:
            if not 1 <= r["weight"] <= 100:
                raise GpuLabError(
                    f"NodeResourcesFitArgs: scoringStrategy.resources[{r['name']}].weight: "
                    f"Invalid value: {r['weight']}: resource weight of {r['name']} should be in range [1, 100]"
                )
        self.shape: list[tuple[int, int]] = []
        if self.strategy == "RequestedToCapacityRatio":
            raw_shape = (strat.get("requestedToCapacityRatio") or {}).get("shape") or []
            if not raw_shape:
                raise GpuLabError("NodeResourcesFitArgs: scoringStrategy.requestedToCapacityRatio.shape: Required value: at least one point must be specified")
            # Configured scores are 0..10 and scaled to 0..100 (requested_to_capacity_ratio.go).
            self.shape = [
                (int(p["utilization"]), int(p["score"]) * (MAX_NODE_SCORE // MAX_CUSTOM_PRIORITY_SCORE))
                for p in raw_shape
            ]
        self.ignored = set(self.args.get("ignoredResources") or [])
        self.ignored_groups = set(self.args.get("ignoredResourceGroups") or [])

    # ---------------------------------------------------------------- filter
    def _checked(self, ctx: CycleContext) -> list[tuple[str, int, int]]:
        """(resource, column, request) the filter compares, in fit.go's order; cached on the pod."""
        snap, pod = ctx.snapshot, ctx.pod
        got = pod.memo.get((self.name, "checked", self.token, snap.layout))
        if got is None:
            for name in pod.requests:  # may add columns, and so change the layout
                snap.resource_column(name)
            key = (self.name, "checked", self.token, snap.layout)
            got = []
            for name in ("cpu", "memory", "ephemeral-storage"):
                if pod.requests.get(name, 0) > 0:
                    got.append((name, snap.rindex[name], pod.requests[name]))
            for name, v in pod.requests.items():
                if name in ("cpu", "memory", "ephemeral-storage") or v <= 0 or not is_scalar(name):
                    continue
                if name in self.ignored or name.split("/", 1)[0] in self.ignored_groups:
                    continue
                got.append((name, snap.rindex[name], v))
            pod.memo[key] = got
        return got

    def _free(self, ctx: CycleContext) -> np.ndarray:
        """What each node has left, with room kept for pods nominated to it."""
        free = ctx.snapshot.free
        if ctx.nominated:
            free = free.copy(order="F")
            for i, pods in ctx.nominated.items():
                for p in pods:
                    free[i] -= ctx.snapshot.request_vector(p)
        return free

    def filter(self, ctx: CycleContext) -> np.ndarray:
        snap = ctx.snapshot
        checked = self._checked(ctx)
        free = self._free(ctx)
        ok = free[:, snap.rindex["pods"]] >= 1
        for name, col, v in checked:
            fits = free[:, col] >= v
            if _delegated_to_dra(ctx, name):
                fits |= snap.allocatable[:, col] == 0
            ok &= fits
        return ok

    def filter_status(self, ctx: CycleContext, i: int) -> Status:
        snap = ctx.snapshot
        free = self._free(ctx)[i]
        alloc = snap.allocatable[i]
        reasons, unresolvable = [], False
        pods_col = snap.rindex["pods"]
        if free[pods_col] < 1:
            reasons.append("Too many pods")
        for name, col, v in self._checked(ctx):
            if v > free[col] and not (alloc[col] == 0 and _delegated_to_dra(ctx, name)):
                reasons.append(f"Insufficient {name}")
                unresolvable |= v > alloc[col]
        return Status(UNRESOLVABLE if unresolvable else UNSCHEDULABLE, tuple(reasons), self.name)

    def filter_statuses(self, ctx: CycleContext, idx: np.ndarray) -> list[Status]:
        """Vectorised ``filter_status``: nodes with the same shortfalls share one Status."""
        shared, which = self._shortfalls(ctx, idx)
        return list(map(shared.__getitem__, which.tolist()))

    def filter_status_groups(self, ctx: CycleContext, idx: np.ndarray) -> list[tuple[Status, np.ndarray]]:
        shared, which = self._shortfalls(ctx, idx)
        return [(st, idx[which == k]) for k, st in enumerate(shared)]

    def _shortfalls(self, ctx: CycleContext, idx: np.ndarray) -> tuple[list[Status], np.ndarray]:
        """The distinct verdicts on nodes ``idx`` and, per node, which one is its."""
        snap = ctx.snapshot
        free = self._free(ctx)[idx]
        alloc = snap.allocatable[idx]
        pods_col = snap.rindex["pods"]
        checked = self._checked(ctx)
        short = [free[:, pods_col] < 1]
        beyond = [np.zeros(len(idx), dtype=bool)]
        for name, col, v in checked:
            lacking = v > free[:, col]
            if _delegated_to_dra(ctx, name):
                lacking &= alloc[:, col] != 0
            short.append(lacking)
            beyond.append(v > alloc[:, col])
        bits = np.zeros(len(idx), dtype=np.int64)
        for k, (s, b) in enumerate(zip(short, beyond)):
            bits |= s.astype(np.int64) << (2 * k)
            bits |= (s & b).astype(np.int64) << (2 * k + 1)
        names = ["Too many pods"] + [f"Insufficient {name}" for name, _, _ in checked]
        kinds, which = np.unique(bits, return_inverse=True)
        shared = []
        for b in kinds.tolist():
            reasons = tuple(n for k, n in enumerate(names) if b >> (2 * k) & 1)
            unresolvable = any(b >> (2 * k + 1) & 1 for k in range(len(names)))
            shared.append(Status(UNRESOLVABLE if unresolvable else UNSCHEDULABLE, reasons, self.name))
        return shared, which

    # ----------------------------------------------------------------- score
    def score_key(self, pod):
        # A node's score depends on the pod only through what it asks of the scored resources.
        return tuple(pod_request(pod, name, False) for name, _ in self.resource_weights)

    def score_each(self, ctx: CycleContext, nodes: list[int]) -> list[int] | None:
        if self.strategy == "RequestedToCapacityRatio":
            return None  # only over many nodes
        scored = scored_resources(ctx.snapshot, ctx.pod, self.resource_weights, False, self.token)
        scorer = least_requested_score if self.strategy == "LeastAllocated" else most_requested_score
        readers, out = value_readers(ctx.snapshot, scored), []
        for i in nodes:
            total = weights = 0
            for alloc_of, col, used_of, at, request, weight in readers:
                alloc = alloc_of(i, col)
                if alloc:  # a resource the node does not offer is left out
                    total += scorer(used_of(i, at) + request, alloc) * weight
                    weights += weight
            out.append(total // weights if weights else 0)
        return out

    def score(self, ctx: CycleContext, feasible: np.ndarray) -> np.ndarray:
        snap = ctx.snapshot
        scored = scored_resources(snap, ctx.pod, self.resource_weights, False, self.token)
        if not len(scored):
            return np.zeros(len(feasible), dtype=np.int64)
        alloc, requested = node_rows(snap, scored, feasible)
        requested += scored.requests  # with the pod
        if self.strategy == "RequestedToCapacityRatio":
            per = requested_to_capacity(self.shape, requested, alloc)
            return weighted_average(scored, alloc, per, rounding="round")
        everywhere = offered_everywhere(snap, scored)
        scorer = least_requested if self.strategy == "LeastAllocated" else most_requested
        return weighted_average(scored, alloc, scorer(requested, alloc, everywhere), everywhere=everywhere)
