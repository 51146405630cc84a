"""DynamicResources: pods get the devices their ResourceClaims ask for (DRA, GA since v1.34).

In kube-scheduler v1.37's default profile (``applyDynamicResources`` puts it before
DefaultPreemption with score weight 2). The phases, as the real plugin runs them
(``gpu_lab.sim.dra.scheduling`` holds the shared work):

* PreEnqueue: a pod whose claims do not exist yet stays out of the queue;
* PreFilter: the same check, and the DeviceClass of every request (a missing class:
  ``request gpu: device class x does not exist``, UnschedulableAndUnresolvable); a pod
  without claims or DRA-mapped extended resources skips the plugin;
* Filter: per node, the structured allocator (``gpu_lab.sim.dra.allocator``) must place
  every unallocated claim (``cannot allocate all claims``), and an allocated claim must be
  usable there (``resourceclaim not available on the node``); allocator errors abort the
  attempt with an Error status (``running "DynamicResources" filter plugin: ...``);
* Score: prioritized lists (``firstAvailable``): 8 - i for every request served by its
  i-th subrequest, normalised to 0..100; 0 for every other pod;
* Reserve/PreBind: ``gpu_lab.sim.dra.scheduling.bind``, called from the bind path.

Not modelled: PostFilter (it deallocates a claim left allocated for a node that is gone; here
claims are allocated at bind and released when their pods stop, so none is left behind),
nominated pods' claims, and pod groups sharing a claim within one cycle. Preemption cannot
free devices anyway: the plugin's rejections are UnschedulableAndUnresolvable, which
preemption skips.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..cachehints import CacheHints
from ..dra.scheduling import AllocatorError, PodDra, wants_dra
from ..dra.state import dra_state
from ..framework import (
    ERROR,
    UNRESOLVABLE,
    UNSCHEDULABLE,
    CycleContext,
    Plugin,
    PostFilterResult,
    Status,
    default_normalize,
)

#: DynamicResources' PodGroupPostFilter reason (dynamicresources.go, v1.37.2)
CLAIMS_RELEASED = "deallocation and deletion of ResourceClaims completed"


class DynamicResources(CacheHints, Plugin):
    name = "DynamicResources"

    def pod_group_post_filter(self, group: Any, run_group: Any, members: list) -> PostFilterResult:
        """``PodGroupPostFilter``: v1.37 deallocates the members' claims that could help and
        always answers Unschedulable with this reason, which the next plugin's Unschedulable
        reasons are appended to (claims held by a failed group are not modelled)."""
        return PostFilterResult(status=Status(UNSCHEDULABLE, (CLAIMS_RELEASED,), self.name))

    def skips_pre_filter(self, pod) -> bool:
        return not wants_dra(pod)

    def pre_enqueue(self, pod) -> Status | None:
        snapshot = getattr(self.handle, "snapshot", None)
        if snapshot is None or not wants_dra(pod):
            return None
        for _, claim, why in dra_state(snapshot).claims_for(pod):
            if claim is None:
                return Status(UNRESOLVABLE, (why,), self.name)
        return None

    def _cycle(self, ctx: CycleContext) -> dict:
        return ctx.data.setdefault(self.name, {})

    def pre_filter(self, ctx: CycleContext) -> Status | None:
        data = self._cycle(ctx)
        data.clear()
        if not wants_dra(ctx.pod):
            return self.skip
        state = dra_state(ctx.snapshot)
        state.sync_nodes(ctx.snapshot)
        if not wants_dra(ctx.pod, state):  # GPUs asked as extended resources, and no class maps any
            return self.skip
        dra = PodDra(state, ctx.pod)
        why = dra.prepare()
        if why is not None:
            return Status(UNRESOLVABLE, (why,), self.name)
        if dra.empty:
            return self.skip
        try:
            results = [dra.on_node(n) for n in ctx.snapshot.nodes]
        except AllocatorError as err:
            # An error in Filter aborts the attempt on every node; the scheduler reports it as is.
            # Should a scheduler ignore ERROR at PreFilter, every node still fails with it.
            data["error"] = f'running "{self.name}" filter plugin: {err}'
            return Status(ERROR, (data["error"],), self.name)
        data["dra"], data["results"] = dra, results
        return None

    def _results(self, ctx: CycleContext) -> list:
        data = self._cycle(ctx)
        if "results" not in data and "error" not in data:
            self.pre_filter(ctx)
        return data.get("results") or [None] * len(ctx.snapshot)

    def filter(self, ctx: CycleContext) -> np.ndarray:
        results = self._results(ctx)
        if self._cycle(ctx).get("error"):
            return np.zeros(len(results), dtype=bool)
        return np.array([r is None or r.ok for r in results], dtype=bool)

    def _reason(self, ctx: CycleContext, i: int) -> str:
        return self._cycle(ctx).get("error") or self._results(ctx)[i].reason

    def filter_status(self, ctx: CycleContext, i: int) -> Status:
        return Status(UNRESOLVABLE, (self._reason(ctx, i),), self.name)

    def filter_statuses(self, ctx: CycleContext, idx: np.ndarray) -> list[Status]:
        shared: dict[str, Status] = {}
        out = []
        for i in idx.tolist():
            reason = self._reason(ctx, i)
            out.append(shared.setdefault(reason, Status(UNRESOLVABLE, (reason,), self.name)))
        return out

    def score(self, ctx: CycleContext, feasible: np.ndarray) -> np.ndarray:
        data = self._cycle(ctx)
        dra = data.get("dra")
        if dra is None or not dra.prioritized:
            return np.zeros(len(feasible), dtype=np.int64)
        results = data["results"]
        return np.array([dra.score(results[int(i)]) for i in feasible], dtype=np.int64)

    def same_everywhere(self, ctx: CycleContext) -> bool:
        dra = self._cycle(ctx).get("dra")
        return dra is None or not dra.prioritized

    def normalize_score(self, ctx: CycleContext, scores: np.ndarray) -> np.ndarray:
        return default_normalize(scores)
