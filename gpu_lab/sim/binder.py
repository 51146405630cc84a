"""Binding pods to nodes and freeing them: what happens between the scheduler's choice and a pod's end.

``bind`` is the scheduler's binding cycle and the kubelet's start in one step: the node's
kubelet admits the pod (devices, then resources; ``Kubelets.admit``), DynamicResources
reserves its claims, and the pod runs: it is in the snapshot, its devices are recorded,
its controller is told, and a ``gpulab.dev/duration`` schedules its end on the clock.
``end`` (Succeeded, Failed, Evicted, preempted) and ``remove`` (deleted) free it again.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..kubelet.admission import UNEXPECTED_ADMISSION_ERROR
from ..model.duration import DURATION_ANNOTATION, parse_duration
from ..model.objects import Pod
from .cluster import Cluster, PodRecord, pod_gpus
from .dra import backend as dra
from .events import PREEMPTED
from .kubelet import Kubelets, device_requests

if TYPE_CHECKING:
    from .controllermanager import ControllerManager

PREEMPTED_MESSAGE = "{}: preempting to accommodate a higher priority pod"


def _duration(pod: Pod) -> float | None:
    """Seconds the pod runs (``gpulab.dev/duration``), or None: it runs until stopped."""
    # The memo is shared by pods of equal specs, not equal annotations: key it on the text.
    text = pod.annotations.get(DURATION_ANNOTATION)
    if not text:
        return None
    key = ("duration", text)
    if key not in pod.memo:
        pod.memo[key] = parse_duration(text)
    return pod.memo[key]


class Binder:
    def __init__(self, cluster: Cluster, kubelets: Kubelets) -> None:
        self.cluster, self.kubelets = cluster, kubelets
        self.controllers: ControllerManager  # set once the controllers exist (they call back here)

    def bind(self, rec: PodRecord, node: str) -> None:
        """Bind the pod to ``node`` and start it, unless the node's kubelet rejects it."""
        c = self.cluster
        pod = rec.pod
        failure = self.kubelets.admit(pod, node)
        if failure:
            self.reject(rec, node, *failure)
            return
        snap = c.snapshot
        dm = self.kubelets.devices[node]
        try:
            dra_devices = dra.bind(snap, pod, c.nodes[node])  # DynamicResources' Reserve + PreBind
        except dra.BindError as err:
            dm.pods.release(pod.key)
            self.reject(rec, node, UNEXPECTED_ADMISSION_ERROR, str(err))
            return
        snap.add_pod(pod, snap.index[node])
        if c.scheduler.nominated:
            c.scheduler.forget_nomination(pod)
        rec.node, rec.phase, rec.reason, rec.message = node, "Running", "", ""
        rec.nominated_node = None
        if device_requests(pod):
            rec.devices = dm.pods.pod_devices(pod.key)
            rec.container_devices = dm.pods.allocations(pod.key)
        for container, claimed in dra_devices.items():
            for key, ids in claimed.items():
                rec.container_devices.setdefault(container, {}).setdefault(key, []).extend(ids)
                rec.devices.setdefault(key, []).extend(ids)
        rec.start_time = c.now
        c.scheduler.started[pod.key] = c.now
        c.running_on.setdefault(node, {})[pod.key] = pod
        c.pending.pop(pod.key, None)
        c.gpus_allocated += pod_gpus(pod)
        c.generation += 1
        c.bound.append(pod)
        if self.controllers.pod_started(rec):
            return  # a rendezvous decides when it ends
        seconds = _duration(pod)
        if seconds is not None:
            self.finish_at(pod.key, c.now + seconds)

    def admit_direct(self, rec: PodRecord) -> None:
        """spec.nodeName skips the scheduler; the kubelet's admission still checks fit."""
        if rec.pod.node_name not in self.cluster.snapshot.index:
            rec.message = f'node "{rec.pod.node_name}" not found'
            return
        self.bind(rec, rec.pod.node_name)

    def reject(self, rec: PodRecord, node: str, reason: str, message: str) -> None:
        """The kubelet refused the pod: it fails on that node."""
        c = self.cluster
        rec.node, rec.phase, rec.reason, rec.message = node, "Failed", reason, message
        c.wakeups += 1  # its nomination and reservation are gone
        c.scheduler.forget_nomination(rec.pod)
        c.pending.pop(rec.pod.key, None)
        rec.end_time = c.now
        self._notify(rec, "Failed", reason)

    def finish_at(self, key: str, at: float) -> None:
        rec = self.cluster.records[key]
        rec.finish_token += 1
        self.cluster.events.push(at, "finish", (key, rec.finish_token))

    def cancel_finish(self, key: str) -> None:
        self.cluster.records[key].finish_token += 1

    def fail_pod(self, key: str, reason: str, message: str) -> None:
        rec = self.cluster.records.get(key)
        if rec is not None and rec.phase in ("Pending", "Running"):
            self.end(rec, "Failed", reason, message)

    def evict(self, victim: Pod, preemptor: Pod, by: str | None = None) -> None:
        """A preemption's victim goes, with the executor's ``Preempted`` event on it (``by``:
        "podgroup <uid>" when a pod group preempts, else the preemptor pod)."""
        rec = self.cluster.records[victim.key]
        self.cluster.api_events.record(victim.namespace, "Pod", victim.name, "Normal", "Preempted",
                                       PREEMPTED.format(by or f"pod {preemptor.uid}", rec.node), self.cluster.now)
        self.end(rec, "Failed", "PreemptionByScheduler", PREEMPTED_MESSAGE.format(preemptor.scheduler_name))

    def end(self, rec: PodRecord, phase: str, reason: str, message: str = "") -> None:
        """A pod stops: its resources are freed and its controller is told."""
        self._release(rec)
        rec.phase, rec.reason, rec.message = phase, reason, message
        self._notify(rec, phase, reason)

    def remove(self, rec: PodRecord) -> None:
        """A pod is deleted (by a user or a controller): freed, forgotten, its controller told."""
        c = self.cluster
        self._release(rec)
        del c.records[rec.pod.key]
        c.scheduler.forget_nomination(rec.pod)
        self._notify(rec, "", "")
        if rec.phase in ("Pending", "Running"):
            rec.phase, rec.reason = "Failed", "Deleted"
        c.gone.append(rec)

    def _notify(self, rec: PodRecord, phase: str, reason: str) -> None:
        if rec.owner is not None:
            assert rec.owner_key is not None  # the controller manager sets both together
            rec.owner.pod_finished(rec.owner_key, rec.pod.key, phase, reason)

    def _release(self, rec: PodRecord) -> None:
        c = self.cluster
        if rec.node is not None and rec.pod.key in c.snapshot.pod_node:
            c.snapshot.remove_pod(rec.pod)
            self.kubelets.devices[rec.node].pods.release(rec.pod.key)
            c.running_on.get(rec.node, {}).pop(rec.pod.key, None)
            c.gpus_allocated -= pod_gpus(rec.pod)
            c.generation += 1
            c.wakeups += 1  # a pod left a node: room, spread and anti-affinity may change
            self.controllers.pod_stopped(rec)
        c.scheduler.started.pop(rec.pod.key, None)
        c.pending.pop(rec.pod.key, None)
        if rec.end_time is None or rec.phase in ("Pending", "Running"):
            rec.end_time = c.now
