"""The sim session's state as the API objects kubectl would read (``view.View``).

Pods and Events come from the session's rows and records; nodes from its node rows (what
the kubelet model reports: capacity, allocatable, labels, taints) with the nodeInfo and
addresses gpu-lab's simulated kubelet writes on the local backend (``kubelet.nodestatus``).
What the sim does not model is left as kubectl shows an unset field: no pod IPs (``<none>``),
no restarts, no annotations but the node's own. A preemption's victims, which the sim keeps
as Failed (``PreemptionByScheduler``) for its tables, are left out: the real scheduler deletes
them, so kubectl no longer lists them (their ``Preempted`` Events stay).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ...kubelet.nodestatus import node_info, node_ip
from ...model.objects import Pod
from ...names import stable_uid
from ...sim.cluster import PodRecord
from .view import KEvent, KNode, KPod, View

if TYPE_CHECKING:
    from ..sim import SimSession

PREEMPTED = "PreemptionByScheduler"  # the victim's DisruptionTarget reason
#: who records an Event of each kind in the sim (describe's From column)
SOURCES = {"Pod": "default-scheduler", "Job": "job-controller", "ReplicaSet": "replicaset-controller",
           "Node": "cluster-autoscaler"}


def pod_limits(pod: Pod) -> dict[str, int]:
    """resourcehelper.PodLimits: containers' limits summed, the largest init container's if
    larger, plus the pod overhead for a resource that has a limit."""
    total: dict[str, int] = {}
    for c in pod.containers:
        for r, v in c.limits.items():
            total[r] = total.get(r, 0) + v
    for c in pod.init_containers:
        for r, v in c.limits.items():
            total[r] = max(total.get(r, 0), v)
    for r, v in pod.overhead.items():
        if r in total:
            total[r] += v
    return total


def pod_reason(r: PodRecord) -> str:
    """status.reason, or SchedulingGated: the API server's PodScheduled condition on a pod
    created with schedulingGates, until they are removed (the sim keeps no condition)."""
    if r.phase == "Pending" and r.pod.raw.get("spec", {}).get("schedulingGates"):
        return "SchedulingGated"
    return r.reason


def sim_view(session: SimSession) -> View:
    cluster = session._sim.cluster
    pods = [KPod(r.pod.namespace, r.pod.name, r.phase, pod_reason(r), r.node, r.nominated_node, r.created_at,
                 len(r.pod.containers), dict(r.pod.requests), pod_limits(r.pod))
            for r in cluster.records.values() if r.reason != PREEMPTED]
    order = {name: i for i, name in enumerate(cluster.nodes)}
    nodes = []
    for row in session._node_rows():
        node = cluster.nodes[row.name]
        nodes.append(KNode(row.name, dict(row.labels), dict(node.annotations), list(row.taints),
                           row.unschedulable, dict(row.capacity), dict(row.allocatable),
                           cluster.node_joined.get(row.name, 0.0),
                           node_info(node, stable_uid("boot", row.name)),
                           [("InternalIP", node_ip(order[row.name])), ("Hostname", row.name)]))
    events = [KEvent(e.namespace, e.kind, e.name, e.type, e.reason, e.message, e.time,
                     e.time if e.last is None else e.last, e.count, SOURCES.get(e.kind, ""))
              for e in session._event_rows()]
    return View(cluster.now, session._epoch, pods, nodes, events)
