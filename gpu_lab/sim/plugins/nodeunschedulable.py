"""NodeUnschedulable: cordoned nodes (spec.unschedulable) take no new pods.

A pod that tolerates the ``node.kubernetes.io/unschedulable:NoSchedule`` taint
may still land there (plugins/nodeunschedulable).
"""

from __future__ import annotations

import numpy as np

from ...model.objects import Taint
from ..cachehints import CacheHints
from ..framework import UNRESOLVABLE, CycleContext, Plugin, Status
from .helper import NodeObjectCache

ERR_REASON_UNSCHEDULABLE = "node(s) were unschedulable"
UNSCHEDULABLE_TAINT = Taint("node.kubernetes.io/unschedulable", "", "NoSchedule")


class NodeUnschedulable(CacheHints, Plugin):
    name = "NodeUnschedulable"

    def __init__(self, args=None, handle=None):
        super().__init__(args, handle)
        self._nodes = NodeObjectCache()

    @staticmethod
    def _tolerates(pod) -> bool:
        got = pod.memo.get("tolerates-unschedulable")
        if got is None:
            got = any(t.tolerates(UNSCHEDULABLE_TAINT) for t in pod.tolerations)
            pod.memo["tolerates-unschedulable"] = got
        return got

    def static_filter_key(self, pod):
        return self._tolerates(pod)

    def filter(self, ctx: CycleContext) -> np.ndarray:
        cordoned = self._nodes.get(ctx.snapshot, "cordoned",
                                   lambda: np.array([n.unschedulable for n in ctx.snapshot.nodes], dtype=bool))
        if not cordoned.any() or self._tolerates(ctx.pod):
            return np.ones(len(cordoned), dtype=bool)
        return ~cordoned

    def filter_status(self, ctx: CycleContext, i: int) -> Status:
        return Status(UNRESOLVABLE, (ERR_REASON_UNSCHEDULABLE,), self.name)

    def filter_statuses(self, ctx: CycleContext, idx: np.ndarray) -> list[Status]:
        return [self.filter_status(ctx, 0)] * len(idx)
