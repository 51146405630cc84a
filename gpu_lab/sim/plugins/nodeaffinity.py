"""NodeAffinity: nodeSelector and required/preferred node affinity (plugins/nodeaffinity).

Filter: every ``nodeSelector`` label must match, and at least one required
``nodeSelectorTerm`` (terms are ORed, expressions within a term ANDed). Score:
the sum of weights of the preferred terms a node matches, normalised so the
best node gets 100. GPU lessons use this to pin work to a GPU product via the
``nvidia.com/gpu.product`` label GPU Feature Discovery sets.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...model.selectors import NodeSelectorTerm
from ..cachehints import CacheHints
from ..framework import UNRESOLVABLE, CycleContext, Plugin, Status, default_normalize
from .helper import NodeObjectCache, freeze, required_affinity_key, required_node_affinity_mask

ERR_REASON_POD = "node(s) didn't match Pod's node affinity/selector"
ERR_REASON_CONFLICT = "pod affinity terms conflict"


def _node_affinity(pod) -> dict[str, Any]:
    return (pod.affinity or {}).get("nodeAffinity") or {}


def _pinned_names(pod) -> frozenset[str] | None:
    required = _node_affinity(pod).get("requiredDuringSchedulingIgnoredDuringExecution")
    terms = (required or {}).get("nodeSelectorTerms") or []
    names: set[str] | None = None
    for t in terms:
        pinned: set[str] | None = None
        for f in t.get("matchFields") or []:
            if f.get("key") == "metadata.name" and f.get("operator") == "In":
                vals = set(f.get("values") or [])
                pinned = vals if pinned is None else pinned & vals
        if pinned is None:  # a term without a name: every node may match (terms are ORed)
            return None
        names = pinned if names is None else names | pinned
    return None if names is None else frozenset(names)


class NodeAffinity(CacheHints, Plugin):
    name = "NodeAffinity"
    pre_score_decided_by_pod = True

    def __init__(self, args=None, handle=None):
        super().__init__(args, handle)
        self._nodes = NodeObjectCache()
        added = (self.args.get("addedAffinity") or {})
        req = (added.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")
        self.added_terms = [NodeSelectorTerm.parse(t) for t in req] if req else None
        self.added_preferred = [
            (int(p.get("weight", 0)), NodeSelectorTerm.parse(p.get("preference") or {}))
            for p in added.get("preferredDuringSchedulingIgnoredDuringExecution") or []
        ]

    # ------------------------------------------------------------ filter
    def static_filter_key(self, pod):
        return required_affinity_key(pod)

    def skips_pre_filter(self, pod) -> bool:
        required = _node_affinity(pod).get("requiredDuringSchedulingIgnoredDuringExecution")
        return required is None and self.added_terms is None and not pod.node_selector

    def pre_filter(self, ctx: CycleContext) -> Status | None:
        # Depends on the pod and this plugin's args only: decided once per pod.
        key = (self.name, "pre_filter", self.token)
        if key not in ctx.pod.memo:
            ctx.pod.memo[key] = self._pre_filter(ctx)
        return ctx.pod.memo[key]

    def _pre_filter(self, ctx: CycleContext) -> Status | None:
        if self.skips_pre_filter(ctx.pod):
            return self.skip
        # Terms that all pin metadata.name with In and share no name can never match.
        names = self.pre_filter_nodes(ctx)
        if names is not None and not names:
            return Status(UNRESOLVABLE, (ERR_REASON_CONFLICT,), self.name)
        return None

    def pre_filter_nodes(self, ctx: CycleContext) -> frozenset[str] | None:
        """PreFilter's result: when every required term pins metadata.name with In (a
        DaemonSet's pod), the union of the names; Filter then runs on those nodes only."""
        key = (self.name, "pre_filter_nodes")
        if key not in ctx.pod.memo:
            ctx.pod.memo[key] = _pinned_names(ctx.pod)
        return ctx.pod.memo[key]

    def filter(self, ctx: CycleContext) -> np.ndarray:
        mask = required_node_affinity_mask(ctx.snapshot, ctx.pod)
        if self.added_terms is None:
            return np.ones(len(ctx.snapshot), dtype=bool) if mask is None else mask
        terms = self.added_terms
        added = self._nodes.get(ctx.snapshot, ("added",), lambda: np.array(
            [any(t.matches(n.name, n.labels) for t in terms) for n in ctx.snapshot.nodes], dtype=bool))
        return added if mask is None else added & mask

    def filter_status(self, ctx: CycleContext, i: int) -> Status:
        node = ctx.snapshot.nodes[i]
        if self.added_terms is not None and not any(t.matches(node.name, node.labels) for t in self.added_terms):
            return Status(UNRESOLVABLE, ("node(s) didn't match scheduler-enforced node affinity",), self.name)
        return Status(UNRESOLVABLE, (ERR_REASON_POD,), self.name)

    def filter_statuses(self, ctx: CycleContext, idx: np.ndarray) -> list[Status]:
        if self.added_terms is not None:
            return [self.filter_status(ctx, int(i)) for i in idx]
        return [Status(UNRESOLVABLE, (ERR_REASON_POD,), self.name)] * len(idx)

    # ------------------------------------------------------------- score
    def skips_pre_score(self, pod) -> bool:
        preferred = _node_affinity(pod).get("preferredDuringSchedulingIgnoredDuringExecution")
        return not preferred and not self.added_preferred

    def pre_score(self, ctx: CycleContext, feasible: np.ndarray) -> Status | None:
        return self.skip if self.skips_pre_score(ctx.pod) else None

    def score(self, ctx: CycleContext, feasible: np.ndarray) -> np.ndarray:
        preferred = _node_affinity(ctx.pod).get("preferredDuringSchedulingIgnoredDuringExecution") or []
        key = ("score", freeze(preferred))

        def compute():
            terms = self.added_preferred + [
                (int(p.get("weight", 0)), NodeSelectorTerm.parse(p.get("preference") or {})) for p in preferred
            ]
            return np.array(
                [sum(w for w, t in terms if w and t.matches(n.name, n.labels)) for n in ctx.snapshot.nodes],
                dtype=np.int64,
            )

        return self._nodes.get(ctx.snapshot, key, compute)[feasible]

    def normalize_score(self, ctx: CycleContext, scores: np.ndarray) -> np.ndarray:
        return default_normalize(scores)
