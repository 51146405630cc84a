"""The StatefulSet controller (``pkg/controller/statefulset``): pods ``<name>-<ordinal>``, in order.

Each sync walks the ordinals from ``spec.ordinals.start`` up, as ``updateStatefulSet``
does: a missing pod is created (``statefulset.stateful_pod``, the same name again); with
``OrderedReady`` (the default) the walk stops at the first pod that is not Running and
Ready, so pod N+1 is created only once pod N runs (a pod is Ready as it starts here: no
probes). ``Parallel`` creates every missing pod at once, in slow-start batches (1, 2, 4,
...) that stop after one where the API server refused a create (quota). A pod preempted or evicted is
deleted and created again under its name; one its kubelet rejected stays Failed (the real
controller recreates it at once, again and again, a loop the simulator does not reproduce)
and, OrderedReady, holds back the ordinals after it.
"""

from __future__ import annotations

from ...model.statefulset import PARALLEL, slow_start_batch, stateful_pod
from .base import Cluster, Controller
from .replicaset import REPLACED_REASONS


class StatefulSetController(Controller):
    def __init__(self, cluster: Cluster) -> None:
        super().__init__(cluster)
        self.sets: dict[str, dict] = {}  # "ns/name" -> workload record
        self.members: dict[str, dict[int, str]] = {}  # "ns/name" -> ordinal -> pod key
        self._failed: dict[str, set[int]] = {}  # ordinals whose pod is to be deleted and made again

    def add(self, record: dict, pods) -> None:
        key = f"{record['namespace']}/{record['name']}"
        self.sets[key] = record
        self.members[key] = {int(p.name.rsplit("-", 1)[1]): p.key for p in pods}
        self._dirty.add(key)

    def owns(self, pod):
        if pod.owner_kind != "StatefulSet":
            return None
        key = f"{pod.namespace}/{pod.owner_name}"
        return key if key in self.sets else None

    def pod_started(self, owner: str) -> None:
        """A pod runs (and is Ready): OrderedReady may go on to the next ordinal."""
        self._dirty.add(owner)

    def pod_finished(self, owner: str, pod_key: str, phase: str, reason: str) -> None:
        members = self.members[owner]
        ordinal = next((i for i, k in members.items() if k == pod_key), None)
        if ordinal is None:  # removed by this controller itself
            return
        if phase == "":
            del members[ordinal]
            self._dirty.add(owner)
        elif phase == "Failed" and reason in REPLACED_REASONS:
            self._failed.setdefault(owner, set()).add(ordinal)  # deleted at the next sync, then made again
            self._dirty.add(owner)

    def refused(self, owner: str, pod_key: str) -> None:
        """The API server refused the pod (quota): its ordinal is still missing, tried at the next sync."""
        members = self.members[owner]
        for ordinal in [i for i, k in members.items() if k == pod_key]:
            del members[ordinal]

    def sync(self) -> bool:
        changed = False
        while self._dirty:
            key = min(self._dirty)  # not set.pop(): its order follows string hashing, per process
            self._dirty.discard(key)
            changed |= self._update(key)
        return changed

    def _update(self, key: str) -> bool:
        record, members = self.sets[key], self.members[key]
        ordered = record["pod_management_policy"] != PARALLEL
        changed = False
        for ordinal in sorted(self._failed.pop(key, ())):
            pod_key = members.pop(ordinal, None)
            if pod_key is not None:  # the name is free again once the old pod is gone
                self.cluster.remove_pod(pod_key)
                changed = True
        classes = None
        failed_batch = None  # Parallel: the slow-start batch where a create failed
        for ordinal in range(record["start"], record["start"] + record["replicas"]):
            batch = slow_start_batch(ordinal - record["start"])
            if failed_batch is not None and batch > failed_batch:
                break
            pod_key = members.get(ordinal)
            if pod_key is None:
                classes = classes or self.cluster.priority_classes()
                pod = stateful_pod(record, ordinal, self.cluster.next_created(), classes)
                members[ordinal] = pod.key
                self.cluster.create_pod(pod)
                changed = True
                if ordered:
                    break
                if ordinal not in members:  # refused (quota): refused() forgot it
                    failed_batch = batch
            elif ordered and self.cluster.pod_phase(pod_key) != "Running":
                break
        return changed
