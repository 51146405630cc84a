"""NodeName: a pod that names its node may only go there (plugins/nodename)."""

from __future__ import annotations

import numpy as np

from ..cachehints import CacheHints
from ..framework import UNRESOLVABLE, CycleContext, Plugin, Status

ERR_REASON = "node(s) didn't match the requested node name"


class NodeName(CacheHints, Plugin):
    name = "NodeName"

    def static_filter_key(self, pod):
        return pod.node_name

    def filter(self, ctx: CycleContext) -> np.ndarray:
        want = ctx.pod.node_name
        n = len(ctx.snapshot)
        if not want:
            return np.ones(n, dtype=bool)
        out = np.zeros(n, dtype=bool)
        i = ctx.snapshot.index.get(want)
        if i is not None:
            out[i] = True
        return out

    def filter_status(self, ctx: CycleContext, i: int) -> Status:
        return Status(UNRESOLVABLE, (ERR_REASON,), self.name)

    def filter_statuses(self, ctx: CycleContext, idx: np.ndarray) -> list[Status]:
        return [self.filter_status(ctx, 0)] * len(idx)
