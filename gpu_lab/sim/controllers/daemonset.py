"""The DaemonSet controller (``pkg/controller/daemon``): one pod per node that should run it.

On every sync of a DaemonSet, as ``manage`` does: each node where
``nodeShouldRunDaemonPod`` holds and no daemon pod is gets one (``daemonset.daemon_pod``:
pinned by a required node affinity, placed by the scheduler); a pod on a node it should
no longer run on (an untolerated NoExecute taint, a label that no longer matches) is
deleted, and so is a pending pod whose node is gone. Nodes that join (the autoscaler's
too), leave or change mark every DaemonSet for a sync. A daemon pod that is preempted,
evicted or deleted is replaced; one its kubelet rejected stays Failed (the real controller
deletes and recreates it with a backoff, a loop the simulator does not reproduce).
"""

from __future__ import annotations

from ...model.daemonset import daemon_pod, should_run
from ...model.objects import Node
from .base import Cluster, Controller
from .replicaset import REPLACED_REASONS


def should_run_on(record: dict, node: Node) -> bool:
    """``nodeShouldRunDaemonPod``'s first answer for this DaemonSet and node: does it get a pod there
    (also what cluster-autoscaler asks of a template node)."""
    return should_run(record, node.name, node.labels, node.taints)[0]


class DaemonSetController(Controller):
    def __init__(self, cluster: Cluster) -> None:
        super().__init__(cluster)
        self.sets: dict[str, dict] = {}  # "ns/name" -> workload record
        self.placed: dict[str, dict[str, str]] = {}  # "ns/name" -> node -> its daemon pod's key
        self._node_version = -1

    def add(self, record: dict) -> None:
        key = f"{record['namespace']}/{record['name']}"
        self.sets[key] = record
        self.placed[key] = {}
        self._dirty.add(key)

    def owns(self, pod):
        if pod.owner_kind != "DaemonSet":
            return None
        key = f"{pod.namespace}/{pod.owner_name}"
        return key if key in self.sets else None

    def pod_finished(self, owner: str, pod_key: str, phase: str, reason: str) -> None:
        placed = self.placed[owner]
        node = next((n for n, k in placed.items() if k == pod_key), None)
        if node is None:  # removed by this controller itself
            return
        if phase == "" or (phase == "Failed" and reason in REPLACED_REASONS):
            del placed[node]
            self._dirty.add(owner)

    def refused(self, owner: str, pod_key: str) -> None:
        """The API server refused the pod (quota): its node still lacks one, tried at the next sync."""
        placed = self.placed[owner]
        for node in [n for n, k in placed.items() if k == pod_key]:
            del placed[node]

    def sync(self) -> bool:
        version = self.cluster.node_version()
        if version != self._node_version:  # nodes came, went or changed: every DaemonSet looks again
            self._node_version = version
            self._dirty.update(self.sets)
        changed = False
        while self._dirty:
            key = min(self._dirty)  # not set.pop(): its order follows string hashing, per process
            self._dirty.discard(key)
            changed |= self._manage(key)
        return changed

    def _manage(self, key: str) -> bool:
        record, placed = self.sets[key], self.placed[key]
        nodes = self.cluster.nodes()
        changed = False
        for name in sorted(placed):
            pod_key = placed[name]
            node = nodes.get(name)
            if node is None:
                keep = self.cluster.pod_phase(pod_key) == "Running"  # the node's drain evicts it
            else:
                keep = should_run(record, name, node.labels, node.taints)[1]
            if not keep:
                del placed[name]
                self.cluster.remove_pod(pod_key)
                changed = True
        classes = self.cluster.priority_classes()
        for name in sorted(nodes):
            if name in placed:
                continue
            if should_run_on(record, nodes[name]):
                pod = daemon_pod(record, name, self.cluster.names, self.cluster.next_created(), classes)
                placed[name] = pod.key
                self.cluster.create_pod(pod)
                changed = True
        return changed
