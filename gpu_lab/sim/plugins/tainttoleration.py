"""TaintToleration: NoSchedule/NoExecute taints repel pods that don't tolerate them.

Filter: any untolerated NoSchedule or NoExecute taint rejects the node
("node(s) had untolerated taint(s)" in v1.37; older releases printed the
taint). Score: the number of untolerated PreferNoSchedule taints, normalised in
reverse, so the node with fewest such taints gets 100 (plugins/tainttoleration).
This is how GPU nodes are usually kept for GPU pods: taint them
``nvidia.com/gpu=present:NoSchedule`` and give GPU pods the toleration.
"""

from __future__ import annotations

import numpy as np

from ...model.objects import Toleration
from ..cachehints import CacheHints
from ..framework import UNRESOLVABLE, CycleContext, Plugin, Status, default_normalize
from .helper import NodeObjectCache, tolerated_mask

ERR_REASON = "node(s) had untolerated taint(s)"


def _tolerations_key(tolerations: list[Toleration]) -> tuple:
    return tuple(tolerations)


class TaintToleration(CacheHints, Plugin):
    name = "TaintToleration"

    def __init__(self, args=None, handle=None):
        super().__init__(args, handle)
        self._nodes = NodeObjectCache()

    def _cached(self, ctx: CycleContext, kind: str, compute):
        return self._nodes.get(ctx.snapshot, (kind, _tolerations_key(ctx.pod.tolerations)), compute)

    def static_filter_key(self, pod):
        return _tolerations_key(pod.tolerations)

    def filter(self, ctx: CycleContext) -> np.ndarray:
        return tolerated_mask(ctx.snapshot, ctx.pod)

    def filter_status(self, ctx: CycleContext, i: int) -> Status:
        return Status(UNRESOLVABLE, (ERR_REASON,), self.name)

    def filter_statuses(self, ctx: CycleContext, idx: np.ndarray) -> list[Status]:
        return [self.filter_status(ctx, 0)] * len(idx)

    def _untolerated_prefer_no_schedule(self, ctx: CycleContext) -> np.ndarray:
        """Per node, the PreferNoSchedule taints the pod does not tolerate."""
        # Only tolerations with effect PreferNoSchedule or empty count here.
        tols = [t for t in ctx.pod.tolerations if t.effect in ("", "PreferNoSchedule")]

        def compute():
            return np.array(
                [
                    sum(
                        1
                        for taint in node.taints
                        if taint.effect == "PreferNoSchedule" and not any(t.tolerates(taint) for t in tols)
                    )
                    for node in ctx.snapshot.nodes
                ],
                dtype=np.int64,
            )

        return self._cached(ctx, "score", compute)

    def score(self, ctx: CycleContext, feasible: np.ndarray) -> np.ndarray:
        return self._untolerated_prefer_no_schedule(ctx)[feasible]

    def same_everywhere(self, ctx: CycleContext) -> bool:
        # No node has a PreferNoSchedule taint the pod minds: 100 everywhere.
        return self._cached(ctx, "none", lambda: not self._untolerated_prefer_no_schedule(ctx).any())

    def normalize_score(self, ctx: CycleContext, scores: np.ndarray) -> np.ndarray:
        return default_normalize(scores, reverse=True)
