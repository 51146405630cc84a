"""The ReplicaSet controller (``pkg/controller/replicaset``): keep ``replicas`` pods.

A Deployment's or ReplicaSet's pod that is preempted, evicted or deleted is
replaced at once with a new pod from the same template (a new generated name),
which enters the scheduling queue and may preempt in turn. Pods the kubelet
rejects at admission stay Failed and are not replaced here: the real controller
would replace them again and again, a loop the simulator does not reproduce.
"""

from __future__ import annotations

from ...model.objects import Pod
from ...model.workloads import controller_pod
from .base import Cluster, Controller

REPLACED_REASONS = {"PreemptionByScheduler", "Evicted", ""}  # "" = deleted


class ReplicaSetController(Controller):
    def __init__(self, cluster: Cluster) -> None:
        super().__init__(cluster)
        self.sets: dict[str, dict] = {}  # "ns/replicaset" -> workload record
        self.active: dict[str, set[str]] = {}
        self._missing: dict[str, int] = {}

    def add(self, record: dict, pods: list[Pod]) -> None:
        owner = record["owner"]["name"]
        key = f"{record['namespace']}/{owner}"
        self.sets[key] = record
        self.active[key] = {p.key for p in pods}
        self._missing[key] = 0

    def owns(self, pod: Pod) -> str | None:
        if pod.owner_kind != "ReplicaSet":
            return None
        key = f"{pod.namespace}/{pod.owner_name}"
        return key if key in self.sets else None

    def pod_finished(self, owner: str, pod_key: str, phase: str, reason: str) -> None:
        active = self.active[owner]
        if pod_key not in active:
            return
        active.discard(pod_key)
        if phase == "" or (phase == "Failed" and reason in REPLACED_REASONS):
            self._missing[owner] += 1
            self._dirty.add(owner)

    def refused(self, owner: str, pod_key: str) -> None:
        """The API server refused the pod (quota): still missing, created again at the next sync."""
        self.active[owner].discard(pod_key)
        self._missing[owner] += 1

    def sync(self) -> bool:
        changed = False
        classes = None
        while self._dirty:
            key = min(self._dirty)  # not set.pop(): its order follows string hashing, per process
            self._dirty.discard(key)
            record, count = self.sets[key], self._missing[key]
            self._missing[key] = 0
            classes = classes or self.cluster.priority_classes()
            for _ in range(count):
                pod = controller_pod(record, self.cluster.names, self.cluster.next_created(), classes)
                self.active[key].add(pod.key)
                self.cluster.create_pod(pod)
                changed = True
        return changed
