"""cluster-autoscaler's PredicateChecker: the scheduler's verdict on clusters that do not exist.

Would a pending pod fit on a new node of a pool (scale-up)? Would a node's pods fit on the
other nodes (scale-down)? Both run the sim's own scheduler on a scratch snapshot, as
cluster-autoscaler runs kube-scheduler's framework on its simulated cluster.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..model.objects import Node, Pod
from .cluster import Cluster
from .dra import backend as dra
from .scheduler import Scheduler
from .snapshot import Snapshot


class PredicateChecker:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._verdicts: dict = {}  # pool -> pod template -> fits

    def forget(self) -> None:
        """The scheduler's configuration changed: verdicts of the old one no longer hold."""
        self._verdicts = {}

    def fits_on_new(self, pod: Pod, node: Node, pods: Sequence[Pod] = ()) -> bool:
        """The scheduler's verdict for ``pod`` on a cluster holding only ``node`` with ``pods`` bound
        to it (what cluster-autoscaler asks of a node group's template node, its DaemonSet pods on it).
        Filters only, as CA's ``CheckPredicates``: no preemption."""
        # One verdict per pool (a plain Node is its own), pod template and template pods, until the
        # scheduler's configuration changes (apply clears the cache). Pods of one template share their
        # memo; the entry holds the template pods' memos so that their ids stay theirs.
        cache = self._verdicts.setdefault(node.pool or node.name, {})
        sig = (id(pod.memo), tuple(id(p.memo) for p in pods))
        if sig not in cache:
            c = self.cluster
            snap = Snapshot()
            snap.set_nodes([node])
            for p in pods:
                snap.add_pod(p, 0)
            dra.what_if(c.snapshot, snap)  # the claims the pod names, for DynamicResources
            sched = Scheduler.from_config(c.scheduler_config_raw, snap, c.seed, True, False)
            cache[sig] = (sched.schedule_one(pod, post_filter=False).node is not None, [p.memo for p in pods])
        return cache[sig][0]

    def can_reschedule(self, pods: list[Pod], without: set[str]) -> bool | str:
        """Would ``pods`` all fit on the nodes not in ``without`` (first fit, in node order,
        by free resources and the filters an empty node of the same pool passes)? True, or
        the key of the first pod that would not."""
        snap = self.cluster.snapshot
        order = [i for i, n in enumerate(snap.nodes) if n.name not in without and not n.unschedulable]
        vectors = [snap.request_vector(p) for p in pods]  # may add columns: before copying free
        free = np.array(snap.free, copy=True)
        for p, vec in zip(pods, vectors, strict=True):
            for i in order:
                if (free[i] >= vec).all() and self.fits_on_new(p, snap.nodes[i]):
                    free[i] -= vec
                    break
            else:
                return p.key
        return True
