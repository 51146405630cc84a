"""The controllers the sim runs, as kube-controller-manager runs them, and the cluster they see.

Kueue, Job, ReplicaSet, StatefulSet and DaemonSet controllers, the resourceclaim controller (DRA) and, when a
NodePool autoscales, cluster-autoscaler; rendezvous Jobs (``training.py``) are timed
here too, since their pods make progress only while the whole gang runs. Each controller
sees the cluster through ``ClusterView`` (``controllers.base.Cluster``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..model.objects import Node, Pod
from .cluster import Cluster, PodRecord, pod_gpus
from .controllers.base import Controller
from .controllers.clusterautoscaler import ClusterAutoscalerController
from .controllers.daemonset import DaemonSetController
from .controllers.job import JobController
from .controllers.kueue import KueueController
from .controllers.replicaset import ReplicaSetController
from .controllers.statefulset import StatefulSetController
from .defaultselector import Listers
from .dra import backend as dra
from .training import Rendezvous

if TYPE_CHECKING:
    from .runner import Runner


class ClusterView:
    """The simulated cluster as its controllers see it (``sim.controllers.base.Cluster``)."""

    def __init__(self, sim: Runner) -> None:
        self._sim = sim
        self._c = sim.cluster
        self.names = sim.cluster.names

    @property
    def now(self) -> float:
        return self._c.now

    def create_pod(self, pod: Pod) -> None:
        self._sim.apiserver.add_pod(pod)

    def remove_pod(self, key: str) -> None:
        rec = self._c.records.get(key)
        if rec is not None:
            self._sim.binder.remove(rec)

    def wake_at(self, at: float, controller: Controller, key: str) -> None:
        self._c.events.push(at, "wake", (controller, key))

    def next_created(self) -> int:
        self._c.created += 1
        return self._c.created - 1

    def priority_classes(self) -> dict[str, dict]:
        return self._c.priority_classes

    # ---- nodes (the autoscaler's part)
    def nodes(self) -> dict[str, Node]:
        return self._c.nodes

    def pods_on(self, node: str) -> list[Pod]:
        return self._c.pods_on(node)

    def pending_pods(self) -> list[Pod]:
        """Pods the scheduler tried and could not place (not those waiting on a gate)."""
        return [r.pod for r in self._sim.queue.pending() if r.attempts and r.nominated_node is None]

    def pod_phase(self, key: str) -> str | None:
        rec = self._c.records.get(key)
        return rec.phase if rec is not None else None

    def node_version(self) -> int:
        """Bumped whenever nodes join, leave or change (labels, taints, allocatable)."""
        return self._c.snapshot.node_version

    def generation(self) -> int:
        """Bumped by every node change and every pod created, bound or freed."""
        return self._c.generation

    def cordon(self, name: str) -> None:
        self._sim.nodes.cordon(name)
        self._c.generation += 1

    def can_reschedule(self, pods: list[Pod], without: set[str]) -> bool | str:
        return self._sim.predicate_checker.can_reschedule(pods, without)

    def add_node(self, node: Node) -> None:
        self._sim.nodes.add([node])

    def remove_node(self, name: str, reason: str) -> list[str]:
        """Drain and delete a node: its pods are evicted (their controllers replace them)."""
        return self._sim.nodes.remove(name, reason)

    def fits_on(self, pod: Pod, node: Node, pods: Sequence[Pod] = ()) -> bool:
        """Would the scheduler's filters accept ``pod`` on ``node`` if it joined now holding only ``pods``?"""
        return self._sim.predicate_checker.fits_on_new(pod, node, pods)

    def daemonsets(self) -> list[dict]:
        """The DaemonSets' records (cluster-autoscaler puts their pods on its template nodes)."""
        return list(self._sim.controllers.daemonsets.sets.values())


class ControllerManager:
    """Every controller of the sim, in the order they sync."""

    def __init__(self, sim: Runner) -> None:
        self._sim = sim
        self.cluster: Cluster = sim.cluster
        view = ClusterView(sim)
        self.jobs = JobController(view)
        self.replicasets = ReplicaSetController(view)
        self.kueue = KueueController(view, self.jobs)
        self.statefulsets = StatefulSetController(view)
        self.daemonsets = DaemonSetController(view)
        self.controllers: list[Controller] = [self.kueue, self.jobs, self.replicasets, self.statefulsets,
                                              self.daemonsets, dra.DraController(view, self.cluster.snapshot)]
        # the Services, ReplicaSets and StatefulSets default spreading selects on (the scheduler reads them)
        self.listers = self.cluster.snapshot.listers = Listers()
        binder, events = sim.binder, self.cluster.events
        self.rendezvous = Rendezvous(binder.finish_at, binder.cancel_finish, binder.fail_pod,
                                     lambda at, job: events.push(at, "rendezvous", job))
        self.rendezvous_jobs: dict[str, tuple] = {}  # job key -> (size, work seconds or None, timeout)
        self.autoscaler: ClusterAutoscalerController | None = None
        self.pool_docs: list[dict] = []

    def adopt(self, rec: PodRecord) -> None:
        """The controller that manages the record's pod, if any, becomes its owner."""
        for c in self.controllers:
            key = c.owns(rec.pod)
            if key is not None:
                rec.owner, rec.owner_key = c, key
                break

    def sync(self) -> bool:
        """Every controller reconciles what changed; True when anything did."""
        changed = False
        for c in self.controllers:
            if c.sync():
                changed = True
                if c.frees_resources:
                    self.cluster.wakeups += 1
        return changed

    def pod_started(self, rec: PodRecord) -> bool:
        """A pod began running: its Job or StatefulSet is told. True when a rendezvous times its run."""
        if rec.owner is self.statefulsets:
            assert rec.owner_key is not None  # set together with owner
            self.statefulsets.pod_started(rec.owner_key)
        if rec.owner is self.jobs:
            assert rec.owner_key is not None  # set together with owner
            self.jobs.pod_started(rec.owner_key)
            if rec.owner_key in self.rendezvous_jobs:
                self.rendezvous.pod_started(rec.owner_key, rec.pod.key, pod_gpus(rec.pod), self.cluster.now)
                return True
        return False

    def pod_stopped(self, rec: PodRecord) -> None:
        """A running pod stopped: a rendezvous it was part of stalls."""
        if rec.owner_key in self.rendezvous_jobs and rec.owner is self.jobs:
            self.rendezvous.pod_stopped(rec.owner_key, rec.pod.key, self.cluster.now)

    def register_rendezvous(self, jobs: dict[str, tuple[int, float | None, float | None]]) -> None:
        """Rendezvous Jobs (size, seconds of work, timeout) from an apply."""
        self.rendezvous_jobs.update(jobs)
        for key, (size, work, timeout) in jobs.items():
            self.rendezvous.register(key, size, work, timeout)

    def start_autoscaler(self, spec) -> None:
        """(Re)start the autoscaler over every NodePool so far; nodes it asked for keep coming."""
        old = self.autoscaler
        spec = spec if spec is not None else (old.spec if old is not None else None)
        new = ClusterAutoscalerController(ClusterView(self._sim), spec, self.pool_docs, self.cluster.seed)
        if old is not None:
            new.joined_at, new.provisioning, new.events = old.joined_at, old.provisioning, old.events
            self.controllers.remove(old)
        self.autoscaler = new
        self.controllers.append(new)
