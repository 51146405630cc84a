"""The embedded backend: our kube-scheduler model, a tiny kubelet and the controllers, on a clock.

Pods are queued by priority then creation order, scheduled one cycle at a
time, bound, given devices by their node's device manager, and (when they carry
a ``gpulab.dev/duration`` annotation) finish after that long on a simulated
clock, which frees their resources for whoever waits. Objects annotated
``gpulab.dev/submit-at`` are created at that simulated time. The Job and
ReplicaSet controllers (``sim/controllers``) create and replace their pods;
rendezvous Jobs (``sim/training.py``) progress only while all workers run.
"""

from __future__ import annotations

import heapq
import json
import math
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..deviceplugin.config import DevicePluginConfig, parse_config
from ..errors import GpuLabError
from ..gpus.labels import gpu_uuids
from ..gpus.pricing import node_price_per_hour, physical_gpus
from ..gpus.reconfigure import reconfigure
from ..kubelet.admission import UNEXPECTED_ADMISSION_ERROR, admit_devices, fit_failure
from ..kubelet.devicemanager import DeviceManager
from ..model import arguments as args
from ..model.duration import DURATION_ANNOTATION, go_duration_string, parse_duration
from ..model.nodepool import MIG_CONFIG_LABEL
from ..model.objects import Node, Pod, is_extended_resource
from ..model.parse import NameGenerator
from ..model.scenario import load_documents, parse_scenario
from ..model.timing import rendezvous_settings, submit_time
from ..sim.clock import EventQueue
from ..sim.controllers.base import Controller
from ..sim.controllers.clusterautoscaler import ClusterAutoscalerController
from ..sim.controllers.job import JobController
from ..sim.controllers.kueue import KueueController
from ..sim.controllers.replicaset import ReplicaSetController
from ..sim.dra import backend as dra
from ..sim.explain import Explanation, build_explanation
from ..sim.plugins.defaultpreemption import lower_priority_nominated
from ..sim.recorder import Levels, Recorder
from ..sim.scheduler import Attempt, Scheduler
from ..sim.snapshot import Snapshot
from ..sim.training import Rendezvous
from .base import Session, Source, collector_paused
from .tables import NodeRow, PodRow

# Events that can make a pod that failed on these plugins fit: another pod
# landing (affinity, spread) as opposed to one leaving (everything).
_POD_ADDED_HELPS = {"InterPodAffinity", "PodTopologySpread"}
PREEMPTED_MESSAGE = "{}: preempting to accommodate a higher priority pod"


def _advertised_devices(node: Node) -> dict[str, list[str]]:
    """Device IDs per NVIDIA resource. NodePool nodes carry theirs; a plain Node manifest
    that advertises whole GPUs gets the same stable UUIDs a NodePool node of that name would."""
    devices = {r: list(ids) for r, ids in node.devices.items()}
    count = node.capacity.get("nvidia.com/gpu", 0)
    if count and "nvidia.com/gpu" not in devices:
        devices["nvidia.com/gpu"] = gpu_uuids(node.name, count)
    return devices


def _admission_needs(snap: Snapshot, pod: Pod) -> list[tuple[int, int]]:
    """(column, amount) of everything the pod asks for, and one pod slot: when a node
    has that much free, the kubelet's resource check passes."""
    key = ("admission_needs", snap.layout)
    got = pod.memo.get(key)
    if got is None:
        vec = snap.request_vector(pod)  # may add columns
        key = ("admission_needs", snap.layout)
        got = pod.memo[key] = [(int(c), int(vec[c])) for c in np.flatnonzero(vec)]
    return got


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


def _device_requests(pod: Pod) -> tuple[tuple[str, str, int], ...]:
    """(container, resource, count) for every extended resource a container asks for:
    the only ones a device plugin can serve."""
    got = pod.memo.get("device_requests")
    if got is None:
        got = tuple((c.name, r, v) for c in pod.containers for r, v in c.requests.items()
                    if v > 0 and is_extended_resource(r))
        pod.memo["device_requests"] = got
    return got


def _gpus(pod: Pod) -> int:
    """NVIDIA devices the pod holds once running (whole GPUs, MIG instances, shared replicas)."""
    got = pod.memo.get("gpus")
    if got is None:
        got = pod.memo["gpus"] = sum(v for r, v in pod.requests.items() if r.startswith("nvidia.com/"))
    return got


def _seconds(t: float | None) -> float:
    return math.nan if t is None else t


def _template_gpus(template: dict) -> int:
    from ..model.quantity import parse_quantity, value

    total = 0
    for c in template["spec"].get("containers") or []:
        limits = (c.get("resources") or {}).get("limits") or {}
        requests = {**limits, **((c.get("resources") or {}).get("requests") or {})}
        total += sum(value(parse_quantity(v)) for r, v in requests.items() if r.startswith("nvidia.com/"))
    return total


TIMELINE_COLUMNS = ["namespace", "pod", "owner_kind", "owner", "node", "pool", "gpus", "phase", "reason",
                    "created_at", "started_at", "finished_at", "stranded_s"]
JOB_COLUMNS = ["namespace", "name", "state", "queue", "gpus", "succeeded", "failed", "reason", "message",
               "admitted_at", "started_at", "finished_at"]

# advance() with no limit stops here even if something keeps waking (e.g. a retry loop)
HORIZON_S = 366 * 24 * 3600.0
WORKLOAD_TIMELINE = ("Job", "ReplicaSet")


@dataclass
class PodRecord:
    pod: Pod
    node: str | None = None
    phase: str = "Pending"
    reason: str = ""
    message: str = ""
    devices: dict[str, list[str]] = field(default_factory=dict)
    container_devices: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    nominated_node: str | None = None
    start_time: float | None = None
    end_time: float | None = None
    attempts: int = 0
    attempt: Attempt | None = None
    unschedulable_plugins: set[str] = field(default_factory=set)
    created_at: float = 0.0
    owner: Controller | None = None  # the controller that manages the pod
    owner_key: str | None = None
    finish_token: int = 0  # invalidates a scheduled end when the run is paused


class _Cluster:
    """The session as its controllers see it (``sim.controllers.base.Cluster``)."""

    def __init__(self, session: SimSession) -> None:
        self._s = session
        self.names = session._names

    @property
    def now(self) -> float:
        return self._s._clock

    def create_pod(self, pod: Pod) -> None:
        self._s._add_pod(pod)

    def remove_pod(self, key: str) -> None:
        rec = self._s._records.get(key)
        if rec is not None:
            self._s._remove(rec)

    def wake_at(self, at: float, controller: Controller, key: str) -> None:
        self._s._timeline.push(at, "wake", (controller, key))

    def next_created(self) -> int:
        self._s._created += 1
        return self._s._created - 1

    def priority_classes(self) -> dict[str, dict]:
        return self._s._priority_classes

    # ---- nodes (the autoscaler's part)
    def nodes(self) -> dict[str, Node]:
        return self._s._nodes

    def pods_on(self, node: str) -> list[Pod]:
        return list(self._s._running_on.get(node, {}).values())

    def pending_pods(self) -> list[Pod]:
        """Pods the scheduler tried and could not place (not those waiting on a gate)."""
        return [r.pod for r in self._s._pending() if r.attempts and r.nominated_node is None]

    def pod_phase(self, key: str) -> str | None:
        rec = self._s._records.get(key)
        return rec.phase if rec is not None else None

    def generation(self) -> int:
        """Bumped by every node change and every pod created, bound or freed."""
        return self._s._generation

    def cordon(self, name: str) -> None:
        self._s._nodes[name].unschedulable = True
        self._s._snapshot.touch_nodes()
        self._s._generation += 1

    def can_reschedule(self, pods: list[Pod], without: set[str]) -> bool | str:
        return self._s._can_reschedule(pods, without)

    def add_node(self, node: Node) -> None:
        self._s._add_nodes([node])

    def remove_node(self, name: str, reason: str) -> list[str]:
        """Drain and delete a node: its pods are evicted (their controllers replace them)."""
        return self._s._remove_node(name, reason)

    def fits_on(self, pod: Pod, node: Node) -> bool:
        """Would the scheduler's filters accept ``pod`` on ``node`` if it were empty and joined now?"""
        return self._s._fits_on_new(pod, node)


@dataclass
class _GangQueue:
    """One pass over the queue when pods name PodGroups: the pending pods kept out of it
    (PreEnqueue said no, or they wait at Permit), each queued member's group, each group's
    queued members in queue order, and the groups whose cycle already ran in this pass."""

    gated: set[str] = field(default_factory=set)
    group_of: dict[str, str] = field(default_factory=dict)
    members: dict[str, list[PodRecord]] = field(default_factory=dict)
    tried: set[str] = field(default_factory=set)


class _PermitTimer:
    """The target of a Permit timeout's "wake" event: the pass over the queue that follows
    every clock step rejects the members whose wait ran out."""

    def wake(self, key: str) -> None:
        return None


_PERMIT_TIMER = _PermitTimer()


class SimSession(Session):
    backend = "sim"

    def __init__(self, seed: int | None = 0, deterministic: bool = False, record: bool = True):
        self.seed, self.deterministic, self.record = seed, deterministic, record
        self.reset()

    @property
    def now(self) -> float:
        """Seconds on the simulated clock (``advance`` moves it)."""
        return self._clock

    # ------------------------------------------------------------- state
    def reset(self) -> None:
        self._clock = 0.0
        self._nodes: dict[str, Node] = {}
        self._records: dict[str, PodRecord] = {}
        self._priority_classes: dict[str, dict] = {}
        self._scheduler_config_raw: dict | None = None
        self._namespaces: set[str] = {"default", "kube-system"}
        self._created = 0
        self._timeline = EventQueue()
        self._snapshot = Snapshot()
        self._devices: dict[str, DeviceManager] = {}
        self._plugin_configs: dict[str, DevicePluginConfig] = {}
        self._parsed_configs: dict[tuple, DevicePluginConfig] = {}
        self._scheduler = Scheduler.from_config(None, self._snapshot, self.seed, self.deterministic, self.record)
        # generateName as the API server does it: random, retried on collision, from the seed
        self._names = NameGenerator(self.seed, taken=lambda ns, name: f"{ns}/{name}" in self._records)
        self._queue: dict[str, PodRecord] = {}  # pending, unbound pods
        self._gone: list[PodRecord] = []  # deleted pods, for the timeline
        self._gpus_allocated = 0
        self._fleet: tuple[int, int, float] | None = None  # gpu nodes, GPUs, $/h (cached)
        cluster = _Cluster(self)
        self._jobs = JobController(cluster)
        self._replicasets = ReplicaSetController(cluster)
        self._kueue = KueueController(cluster, self._jobs)
        self._controllers: list[Controller] = [self._kueue, self._jobs, self._replicasets,
                                               dra.DraController(cluster, self._snapshot)]
        self._rendezvous = Rendezvous(self._finish_at, self._cancel_finish, self._fail_pod,
                                      lambda at, job: self._timeline.push(at, "rendezvous", job))
        self._rendezvous_jobs: dict[str, float | None] = {}  # job key -> work seconds (None: forever)
        self._recorder = Recorder()
        self._pod_groups: dict = {}
        self._fit_cache: dict = {}
        self._generation = 0
        self._running_on: dict[str, dict[str, Pod]] = {}  # node -> its running pods
        self._autoscaler: ClusterAutoscalerController | None = None
        self._pool_docs: list[dict] = []

    # ------------------------------------------------------------- apply
    def apply(self, src: Source) -> list[str]:
        docs = load_documents(src)
        with collector_paused():  # thousands of long-lived objects at once
            sc = parse_scenario(docs, known_priority_classes=dict(self._priority_classes),
                                first_created=self._created, names=self._names)
        # Check everything before changing anything: nothing half-applied.
        for n in sc.nodes:
            if n.name in self._nodes:
                raise GpuLabError(f'nodes "{n.name}" already exists')
        for p in sc.pods:
            if p.key in self._records:
                raise GpuLabError(f'pods "{p.name}" already exists (namespace {p.namespace})')
            if p.namespace not in self._namespaces and p.namespace not in sc.namespaces:
                raise GpuLabError(f'namespaces "{p.namespace}" not found')
        self._check_pod_groups(sc.pod_groups, sc.namespaces)
        dra_records = dra.admit(self._snapshot, sc.dra, sc.pods, self._namespaces | set(sc.namespaces))
        new_scheduler = None
        if sc.scheduler_config is not None:
            new_scheduler = Scheduler.from_config(sc.scheduler_config, self._snapshot, self.seed,
                                                  self.deterministic, self.record)
        for p in sc.pods:
            if p.annotations.get(DURATION_ANNOTATION):
                parse_duration(p.annotations[DURATION_ANNOTATION])
        at_of, rendezvous = self._plan(sc)
        if sc.kueue:
            self._kueue.check(sc.kueue)

        refs: list[str] = []
        self._add_pod_groups(sc.pod_groups)
        refs += [f"podgroup/{g.key}" for g in sc.pod_groups]
        self._priority_classes.update(sc.priority_classes)
        refs += [f"priorityclass/{k}" for k in sc.priority_classes]
        self._namespaces.update(sc.namespaces)
        refs += [f"namespace/{k}" for k in sc.namespaces]
        refs += dra.commit(self._snapshot, dra_records)
        if new_scheduler is not None:
            self._scheduler_config_raw = sc.scheduler_config
            new_scheduler.nominated = self._scheduler.nominated
            new_scheduler.pod_groups = self._scheduler.pod_groups  # members waiting at Permit
            self._scheduler = new_scheduler
            self._fit_cache = {}  # verdicts of the old configuration
            refs.append("kubeschedulerconfiguration")
        if sc.nodes:
            for n in sc.nodes:
                self._nodes[n.name] = n
                self._devices[n.name] = self._device_manager(n)
            self._snapshot.set_nodes(self._nodes.values())
            refs += [f"node/{n.name}" for n in sc.nodes]
            self._fleet = None
            self._generation += 1  # the autoscaler looks again: pods may now move
        self._pool_docs += sc.node_pools
        if sc.kueue:
            self._kueue.add(sc.kueue + [d for d in sc.documents if d.get("kind") == "Namespace"])
            refs += [f"{d.get('kind', '').lower()}/{(d.get('metadata') or {}).get('name')}" for d in sc.kueue]
        if sc.autoscaler is not None or any((p.get("spec") or {}).get("autoscaling") for p in sc.node_pools):
            self._start_autoscaler(sc.autoscaler)
            refs += ["autoscaler"] if sc.autoscaler is not None else []
        self._created = max([self._created] + [p.created + 1 for p in sc.pods])
        self._rendezvous_jobs.update(rendezvous)
        for key, (size, work, timeout) in rendezvous.items():
            self._rendezvous.register(key, size, work, timeout)
        later: dict[tuple[float, int], tuple[dict | None, list[Pod]]] = {}
        by_key = {p.key: p for p in sc.pods}
        for i, record in enumerate(sc.workloads):
            at = at_of[("workload", i)]
            pods = [by_key[f"{record['namespace']}/{n}"] for n in record["pods"]]
            if at > self._clock:
                later[(at, len(later))] = (record, pods)
            else:
                self._add_workload(record, pods)
        for p in sc.pods:
            refs.append(f"pod/{p.key}")
            at = at_of.get(p.key)
            if at is None:
                continue  # a workload's pod: created with its workload
            if at > self._clock:
                later[(at, len(later))] = (None, [p])
            else:
                self._add_pod(p)
        for (at, _), item in sorted(later.items(), key=lambda kv: kv[0]):
            self._timeline.push(at, "submit", item)
        return refs

    def _plan(self, sc) -> tuple[dict, dict[str, tuple[int, float | None, float | None]]]:
        """When each object is created (``gpulab.dev/submit-at``) and which Jobs are rendezvous
        Jobs (size, seconds of work, timeout): checked before anything is applied."""
        at_of: dict = {}
        owned: set[str] = set()
        rendezvous = {}
        for i, record in enumerate(sc.workloads):
            ann = (record["raw"].get("metadata") or {}).get("annotations") or {}
            at_of[("workload", i)] = submit_time(ann)
            owned.update(f"{record['namespace']}/{n}" for n in record["pods"])
            if record["kind"] == "Job":
                is_rendezvous, timeout = rendezvous_settings(record)
                if is_rendezvous:
                    work = (record["template"]["metadata"].get("annotations") or {}).get(DURATION_ANNOTATION)
                    rendezvous[f"{record['namespace']}/{record['name']}"] = (
                        record["parallelism"], parse_duration(work) if work else None, timeout)
        for p in sc.pods:
            if p.key not in owned:
                at_of[p.key] = submit_time(p.annotations)
        return at_of, rendezvous

    def _add_workload(self, record: dict, pods: list[Pod]) -> None:
        if self._kueue.manages(record):  # Kueue's webhook suspends it: no pods until admitted
            self._jobs.add(record, [], suspended=True)
            self._kueue.submit(record)
            return
        if record["kind"] == "Job":
            self._jobs.add(record, pods)
        else:
            self._replicasets.add(record, pods)
        for p in pods:
            self._add_pod(p)

    def _submit(self, items: list[tuple[dict | None, list[Pod]]]) -> None:
        """Objects whose ``gpulab.dev/submit-at`` has come: created now, queued after earlier
        ones, in the order they were applied."""
        for _, pods in items:
            for p in pods:
                p.created = self._created
                self._created += 1
        for record, pods in items:
            if record is not None:
                self._add_workload(record, pods)
            else:
                for p in pods:
                    self._add_pod(p)

    def _add_pod(self, pod: Pod) -> None:
        rec = PodRecord(pod, created_at=self._clock)
        for c in self._controllers:
            key = c.owns(pod)
            if key is not None:
                rec.owner, rec.owner_key = c, key
                break
        self._records[pod.key] = rec
        self._generation += 1
        if pod.node_name:
            self._admit_direct(rec)
        else:
            self._queue[pod.key] = rec

    def _admit_direct(self, rec: PodRecord) -> None:
        """spec.nodeName skips the scheduler; the kubelet's admission still checks fit."""
        if rec.pod.node_name not in self._snapshot.index:
            rec.message = f'node "{rec.pod.node_name}" not found'
            return
        self._bind(rec, rec.pod.node_name)

    def _reject(self, rec: PodRecord, node: str, reason: str, message: str) -> None:
        rec.node, rec.phase, rec.reason, rec.message = node, "Failed", reason, message
        self._scheduler.forget_nomination(rec.pod)
        self._queue.pop(rec.pod.key, None)
        rec.end_time = self._clock
        self._notify(rec, "Failed", reason)

    # ---------------------------------------------------------- schedule
    def _pending(self) -> list[PodRecord]:
        return [r for r in self._queue.values() if r.phase == "Pending" and r.node is None
                and not r.pod.node_name and not r.pod.raw.get("spec", {}).get("schedulingGates")]

    def schedule(self) -> pd.DataFrame:
        self._settle()
        self._observe()
        return self.pods()

    def _settle(self) -> None:
        """Schedule, let the controllers react (replacements, new pods), repeat until quiet:
        what a real cluster does within seconds of a change, at one instant of the clock."""
        for _ in range(100_000):
            self._run_queue()
            changed = False
            for c in self._controllers:
                changed = c.sync() or changed
            if not changed:
                return

    def _run_queue(self) -> None:
        with collector_paused():
            self._drain_queue()

    def _drain_queue(self) -> None:
        pending = [r for r in self._pending() if not self._dra_gated(r)]
        gangs = self._pod_group_queue(pending)  # None: no pod names a PodGroup (the usual case)
        if gangs is not None:
            pending = [r for r in pending if r.pod.key not in gangs.gated]
        active = [(-r.pod.priority, r.pod.created, r.pod.key) for r in pending]
        heapq.heapify(active)
        unschedulable: list[PodRecord] = []
        waiting_on_pods: list[PodRecord] = []
        budget = 20 * (len(active) + 10)
        while active and budget > 0:
            budget -= 1
            _, _, key = heapq.heappop(active)
            rec = self._records[key]
            if rec.phase != "Pending" or rec.node is not None:
                continue
            if gangs is not None and key in gangs.group_of:
                group_key = gangs.group_of[key]
                if group_key in gangs.tried:
                    continue  # the group's cycle took this member already
                gangs.tried.add(group_key)
                bound, failed, preempted = self._schedule_pod_group(gangs, group_key)
                unschedulable += failed
                if preempted:  # room was made: everyone waiting gets another try, the group too
                    for u in unschedulable:
                        heapq.heappush(active, (-u.pod.priority, u.pod.created, u.pod.key))
                    unschedulable, waiting_on_pods = [], []
                    gangs.tried.discard(group_key)
                elif bound and waiting_on_pods:
                    for u in waiting_on_pods:
                        unschedulable.remove(u)
                        heapq.heappush(active, (-u.pod.priority, u.pod.created, u.pod.key))
                    waiting_on_pods = []
                continue
            attempt = self._scheduler.schedule_one(rec.pod)
            rec.attempts += 1
            rec.attempt = attempt if self.record else None
            if attempt.node is not None:
                self._bind(rec, attempt.node)
                if waiting_on_pods:  # only affinity/spread failures can be helped by a new pod
                    for u in waiting_on_pods:
                        unschedulable.remove(u)
                        heapq.heappush(active, (-u.pod.priority, u.pod.created, u.pod.key))
                    waiting_on_pods = []
                continue
            rec.message = attempt.message
            rec.unschedulable_plugins = set(attempt.diagnosis.unschedulable_plugins) if attempt.diagnosis else set()
            pf = attempt.post_filter
            if pf is not None and pf.nominated_node is None and pf.nominating_mode == "Override":
                self._scheduler.forget_nomination(rec.pod)
                rec.nominated_node = None
            if pf is not None and pf.nominated_node is not None:
                node_name = self._snapshot.nodes[pf.nominated_node].name
                for victim in pf.victims:
                    self._evict(victim, rec.pod)
                # Lower-priority pods nominated to that node lose their claim (the preemption executor).
                for other in lower_priority_nominated(self._scheduler.nominated, rec.pod.priority,
                                                      pf.nominated_node):
                    self._scheduler.forget_nomination(other)
                    self._records[other.key].nominated_node = None
                self._scheduler.nominate(rec.pod, pf.nominated_node)
                rec.nominated_node = node_name
                # Deleting pods frees room: everyone waiting gets another try.
                for u in unschedulable:
                    heapq.heappush(active, (-u.pod.priority, u.pod.created, u.pod.key))
                unschedulable, waiting_on_pods = [], []
                heapq.heappush(active, (-rec.pod.priority, rec.pod.created, rec.pod.key))
            else:
                unschedulable.append(rec)
                if rec.unschedulable_plugins & _POD_ADDED_HELPS:
                    waiting_on_pods.append(rec)

    def _dra_gated(self, rec: PodRecord) -> bool:
        """DynamicResources' PreEnqueue: a pod whose ResourceClaims do not exist stays out of the
        queue, silent (no PodScheduled condition), as for a gated gang member."""
        why = dra.not_queued(self._snapshot, rec.pod)
        if why is not None and self.record:
            rec.attempt = Attempt(pod=rec.pod, profile=rec.pod.scheduler_name, node_names=self._snapshot.names,
                                  message=f"not queued (PreEnqueue DynamicResources): {why}")
        return why is not None

    # ----------------------------------------------- pod groups (native gang scheduling)
    # PodGroups live in ``self._pod_groups`` (key -> model.podgroup.PodGroup); the scheduler's
    # PodGroupManager gets them, and the members' counts, before each pass over the queue.
    # A member assumed on a node waits at Permit (GangScheduling) until its gang has minCount
    # members bound or assumed; one still waiting after the plugin's timeout is rejected, at a
    # "wake" event on the timeline (``_PermitTimer``).

    def _check_pod_groups(self, groups: list, namespaces: list[str]) -> None:
        """Before ``apply`` changes anything: PodGroups are created once, in namespaces that
        exist (or that the same apply creates)."""
        known = self.__dict__.setdefault("_pod_groups", {})
        for g in groups:
            if g.key in known:
                raise GpuLabError(f'podgroups.scheduling.k8s.io "{g.name}" already exists')
            if g.namespace not in self._namespaces and g.namespace not in namespaces:
                raise GpuLabError(f'namespaces "{g.namespace}" not found')

    def _add_pod_groups(self, groups: list) -> None:
        """``apply``: the scenario's PodGroups exist from now on."""
        self.__dict__.setdefault("_pod_groups", {}).update((g.key, g) for g in groups)

    def _pod_group_queue(self, pending: list[PodRecord]) -> _GangQueue | None:
        """Counts every group's members for the scheduler, expires Permit waits, and runs
        PreEnqueue on pending members: those it turns away stay out of the queue, silent (no
        message), as a real pod blocked at PreEnqueue has no PodScheduled condition."""
        from ..model.podgroup import pod_group_name
        from ..sim.podgroups import PodGroupState

        groups = self._scheduler.pod_groups
        groups.groups = self.__dict__.get("_pod_groups", {})
        if not groups.groups and not groups.waiting_pods and not any(
                pod_group_name(r.pod) for r in pending):
            return None
        self._expire_permit_waits()
        states: dict[str, PodGroupState] = {}
        for rec in self._records.values():
            name = pod_group_name(rec.pod)
            if name is None or rec.phase not in ("Pending", "Running"):
                continue
            st = states.setdefault(f"{rec.pod.namespace}/{name}", PodGroupState())
            st.all_pods += 1
            if rec.pod.key in groups.waiting_pods:
                st.scheduled += 1
                st.waiting.append(rec.pod.key)
            elif rec.node is not None:
                st.scheduled += 1
        groups.states = states
        queue = _GangQueue()
        for rec in pending:
            if rec.pod.key in groups.waiting_pods:
                queue.gated.add(rec.pod.key)
                continue
            member = groups.group_of(rec.pod)
            if member is None:
                continue  # not a member: scheduled on its own
            gated = self._scheduler.pre_enqueue(rec.pod)
            if gated is not None or member[1] is None:  # the queue holds a group's pods for it
                queue.gated.add(rec.pod.key)
            if gated is not None:
                rec.unschedulable_plugins = {gated.plugin}
                if self.record:
                    rec.attempt = Attempt(pod=rec.pod, profile=rec.pod.scheduler_name,
                                          message=f"not queued (PreEnqueue {gated.plugin}): {gated.message()}",
                                          node_names=self._snapshot.names)
            if rec.pod.key in queue.gated:
                continue
            queue.group_of[rec.pod.key] = member[0]
            queue.members.setdefault(member[0], []).append(rec)
        for recs in queue.members.values():
            recs.sort(key=lambda r: (-r.pod.priority, r.pod.created, r.pod.key))
        return queue

    def _schedule_pod_group(self, gangs: _GangQueue, key: str) -> tuple[bool, list[PodRecord], bool]:
        """One pod group scheduling cycle; its members that fit go through Permit to bind.
        Returns (anything bound, members left unschedulable, victims evicted)."""
        groups = self._scheduler.pod_groups
        group = groups.groups[key]
        members = gangs.members[key]
        result = self._scheduler.schedule_pod_group(group, [r.pod for r in members], groups.state(key).scheduled)
        by_key = {r.pod.key: r for r in members}
        for rec in members:
            rec.attempts += 1
        if self.record:
            for a in result.attempts:
                by_key[a.pod.key].attempt = a
            for rec in members[len(result.attempts):]:
                rec.attempt = Attempt(pod=rec.pod, profile=rec.pod.scheduler_name,
                                      message=result.messages[rec.pod.key], node_names=self._snapshot.names)
        self.__dict__.setdefault("_pod_group_conditions", {})[key] = result.condition
        bound = False
        for a in result.scheduled:
            bound = self._permit(by_key[a.pod.key], a.node, key) or bound
        failed = []
        for pod_key, message in result.messages.items():
            rec = by_key[pod_key]
            rec.message = message
            a = rec.attempt
            rec.unschedulable_plugins = (set(a.diagnosis.unschedulable_plugins)
                                         if a is not None and a.diagnosis is not None and a.node is None
                                         else {"GangScheduling"})
            if a is not None and a.node is not None:  # it fit, but its group did not: not bound
                a.node, a.message = None, message
            failed.append(rec)
        post = result.post_filter
        if post is None or not post.victims:
            return bound, failed, False
        preemptor = members[0].pod
        for victim in post.victims:
            self._evict(victim, preemptor)
        for pod_key, i in post.nominated_pods.items():
            self._scheduler.nominate(by_key[pod_key].pod, i)
            by_key[pod_key].nominated_node = self._snapshot.nodes[i].name
        return bound, failed, True

    def _permit(self, rec: PodRecord, node: str, group_key: str) -> bool:
        """Assume the member on ``node`` and run Permit: bind it (and every member Permit
        released) now, or hold it with its resources reserved. Returns whether any bound."""
        from ..sim.podgroups import WaitingPod

        groups = self._scheduler.pod_groups
        state = groups.state(group_key)
        self._snapshot.add_pod(rec.pod, self._snapshot.index[node])  # assumed
        state.scheduled += 1
        status, waits = self._scheduler.run_permit(rec.pod, node)
        if status is not None and status.code == "Wait":
            timeout = min(waits.values())
            plugin = min(waits, key=waits.get)
            groups.waiting_pods[rec.pod.key] = WaitingPod(rec.pod, node, self._clock + timeout, plugin, timeout)
            state.waiting.append(rec.pod.key)
            self._timeline.push(self._clock + timeout, "wake", (_PERMIT_TIMER, rec.pod.key))
            return False
        self._snapshot.remove_pod(rec.pod)
        if status is not None:  # rejected at Permit: unreserved, back to the queue
            state.scheduled -= 1
            rec.message = status.message()
            return False
        released = [w for w in groups.waiting_pods.values() if w.allowed]
        for w in released:
            del groups.waiting_pods[w.pod.key]
            state.waiting.remove(w.pod.key)
            self._snapshot.remove_pod(w.pod)
        self._bind(rec, node)
        for w in released:
            self._bind(self._records[w.pod.key], w.node)
        return True

    def _expire_permit_waits(self) -> None:
        """Members whose wait at Permit ran out are rejected, their nodes freed."""
        groups = self._scheduler.pod_groups
        for key, w in list(groups.waiting_pods.items()):
            if w.deadline > self._clock:
                continue
            del groups.waiting_pods[key]
            self._snapshot.remove_pod(w.pod)
            rec = self._records.get(key)
            if rec is not None:
                rec.message = (f"rejected due to timeout after waiting {go_duration_string(w.timeout_s)} "
                               f"at plugin {w.plugin}")

    def _bind(self, rec: PodRecord, node: str) -> None:
        """The kubelet's admission, in its order: devices first, then the resource check."""
        snap = self._snapshot
        i = snap.index[node]
        pod = rec.pod
        dm = self._devices[node]
        device_requests = _device_requests(pod)
        failure = None
        if device_requests:  # the kubelet's device manager serves the resources it knows
            devices = dm.devices
            wanted = [(c, r, v) for c, r, v in device_requests if r in devices]
            if wanted:
                failure = admit_devices(dm, pod.key, wanted, self._plugin_config(node)).failure
        if failure:
            self._reject(rec, node, *failure)
            return
        free = snap.free.item
        needs, requests = _admission_needs(snap, pod), pod.requests
        skipped = dra.kubelet_skips(snap, pod, self._nodes[node])  # served by DRA on this node
        if skipped:
            needs = [(c, w) for c, w in needs if snap.resources[c] not in skipped]
            requests = {r: q for r, q in requests.items() if r not in skipped}
        if not all(free(i, col) >= want for col, want in needs):  # else: room for all of it
            used = {r: int(snap.requested[i, snap.rindex[r]]) for r in requests if r in snap.rindex}
            pods_used = int(snap.requested[i, snap.rindex["pods"]])
            failure = fit_failure(requests, used, pods_used, self._nodes[node].allocatable)
        if failure:
            dm.release(pod.key)
            self._reject(rec, node, *failure)
            return
        try:
            dra_devices = dra.bind(snap, pod, self._nodes[node])  # DynamicResources' Reserve + PreBind
        except dra.BindError as err:
            dm.release(pod.key)
            self._reject(rec, node, UNEXPECTED_ADMISSION_ERROR, str(err))
            return
        self._snapshot.add_pod(pod, i)
        if self._scheduler.nominated:
            self._scheduler.forget_nomination(pod)
        rec.node, rec.phase, rec.reason, rec.message = node, "Running", "", ""
        rec.nominated_node = None
        if device_requests:
            rec.devices = dm.pod_devices(pod.key)
            rec.container_devices = dm.allocations(pod.key)
        for container, claimed in dra_devices.items():
            for key, ids in claimed.items():
                rec.container_devices.setdefault(container, {}).setdefault(key, []).extend(ids)
                rec.devices.setdefault(key, []).extend(ids)
        rec.start_time = self._clock
        self._running_on.setdefault(node, {})[pod.key] = pod
        self._queue.pop(pod.key, None)
        self._gpus_allocated += _gpus(pod)
        self._generation += 1
        if rec.owner is self._jobs:
            self._jobs.pod_started(rec.owner_key)
            if rec.owner_key in self._rendezvous_jobs:
                self._rendezvous.pod_started(rec.owner_key, pod.key, _gpus(pod), self._clock)
                return
        seconds = _duration(pod)
        if seconds is not None:
            self._finish_at(pod.key, self._clock + seconds)

    def _finish_at(self, key: str, at: float) -> None:
        rec = self._records[key]
        rec.finish_token += 1
        self._timeline.push(at, "finish", (key, rec.finish_token))

    def _cancel_finish(self, key: str) -> None:
        self._records[key].finish_token += 1

    def _fail_pod(self, key: str, reason: str, message: str) -> None:
        rec = self._records.get(key)
        if rec is not None and rec.phase in ("Pending", "Running"):
            self._end(rec, "Failed", reason, message)

    def _notify(self, rec: PodRecord, phase: str, reason: str) -> None:
        if rec.owner is not None:
            rec.owner.pod_finished(rec.owner_key, rec.pod.key, phase, reason)

    def _end(self, rec: PodRecord, phase: str, reason: str, message: str = "") -> None:
        """A pod stops: its resources are freed and its controller is told."""
        self._release(rec)
        rec.phase, rec.reason, rec.message = phase, reason, message
        self._notify(rec, phase, reason)

    def _remove(self, rec: PodRecord) -> None:
        """A pod is deleted (by a user or a controller): freed, forgotten, its controller told."""
        self._release(rec)
        del self._records[rec.pod.key]
        self._scheduler.forget_nomination(rec.pod)
        self._notify(rec, "", "")
        if rec.phase in ("Pending", "Running"):
            rec.phase, rec.reason = "Failed", "Deleted"
        self._gone.append(rec)

    def _start_autoscaler(self, spec) -> None:
        """(Re)start the autoscaler over every NodePool so far; nodes it asked for keep coming."""
        old = self._autoscaler
        spec = spec if spec is not None else (old.spec if old is not None else None)
        new = ClusterAutoscalerController(_Cluster(self), spec, self._pool_docs, self.seed)
        if old is not None:
            new.joined_at, new.provisioning, new.events = old.joined_at, old.provisioning, old.events
            self._controllers.remove(old)
        self._autoscaler = new
        self._controllers.append(new)

    def autoscaler_events(self) -> pd.DataFrame:
        """What the autoscaler decided and why, in cluster-autoscaler's (or Karpenter's) words."""
        rows = [{"time": t, "object": e.involved, "reason": e.reason, "message": e.message}
                for t, e in (self._autoscaler.events if self._autoscaler else [])]
        return pd.DataFrame(rows, columns=["time", "object", "reason", "message"])

    def _add_nodes(self, nodes: list[Node]) -> None:
        for n in nodes:
            if n.name in self._nodes:
                raise GpuLabError(f'nodes "{n.name}" already exists')
            self._nodes[n.name] = n
            self._devices[n.name] = self._device_manager(n)
        self._snapshot.set_nodes(self._nodes.values())
        self._fleet = None
        self._generation += 1

    def _can_reschedule(self, pods: list[Pod], without: set[str]) -> bool | str:
        """Would ``pods`` all fit on the nodes not in ``without`` (first fit, in node order,
        by free resources and the filters an empty node of the same pool passes)? True, or
        the key of the first pod that would not."""
        snap = self._snapshot
        order = [i for i, n in enumerate(snap.nodes) if n.name not in without and not n.unschedulable]
        vectors = [snap.request_vector(p) for p in pods]  # may add columns: before copying free
        free = np.array(snap.free, copy=True)
        for p, vec in zip(pods, vectors, strict=True):
            for i in order:
                if (free[i] >= vec).all() and self._fits_on_new(p, snap.nodes[i]):
                    free[i] -= vec
                    break
            else:
                return p.key
        return True

    def _remove_node(self, name: str, reason: str) -> list[str]:
        evicted = []
        for rec in list(self._records.values()):
            if rec.node == name and rec.phase == "Running":
                self._end(rec, "Failed", "Evicted", f"evicted: {reason}")
                evicted.append(rec.pod.key)
        del self._nodes[name]
        self._devices.pop(name, None)
        self._plugin_configs.pop(name, None)
        self._snapshot.set_nodes(self._nodes.values())
        self._fleet = None
        self._generation += 1
        return evicted

    def _fits_on_new(self, pod: Pod, node: Node) -> bool:
        """The scheduler's verdict for ``pod`` on a cluster holding only an empty ``node``
        (what cluster-autoscaler asks of a node group's template node)."""
        # One verdict per pool (a plain Node is its own) and pod template, until the scheduler's
        # configuration changes (apply clears the cache).
        cache = self._fit_cache.setdefault(node.pool or node.name, {})
        sig = id(pod.memo)  # pods of one template share their memo: one verdict per template
        if sig not in cache:
            snap = Snapshot()
            snap.set_nodes([node])
            dra.what_if(self._snapshot, snap)  # the claims the pod names, for DynamicResources
            sched = Scheduler.from_config(self._scheduler_config_raw, snap, self.seed, True, False)
            cache[sig] = sched.schedule_one(pod).node is not None
        return cache[sig]

    def _plugin_config(self, node: str) -> DevicePluginConfig:
        """The node's NVIDIA device-plugin config (NodePool spec.devicePlugin; defaults otherwise)."""
        cfg = self._plugin_configs.get(node)
        if cfg is None:
            spec = (self._nodes[node].raw.get("nodePool") or {}).get("devicePlugin")
            pool = self._nodes[node].pool
            # The nodes of a pool share their config: parse each distinct one once.
            key = (pool, json.dumps(spec, sort_keys=True, default=str))
            cfg = self._parsed_configs.get(key)
            if cfg is None:
                cfg = self._parsed_configs[key] = parse_config(spec, f'NodePool "{pool}": spec.devicePlugin')
            self._plugin_configs[node] = cfg
        return cfg

    def _release(self, rec: PodRecord) -> None:
        if rec.node is not None and rec.pod.key in self._snapshot.pod_node:
            self._snapshot.remove_pod(rec.pod)
            self._devices[rec.node].release(rec.pod.key)
            self._running_on.get(rec.node, {}).pop(rec.pod.key, None)
            self._gpus_allocated -= _gpus(rec.pod)
            self._generation += 1
            if rec.owner_key in self._rendezvous_jobs and rec.owner is self._jobs:
                self._rendezvous.pod_stopped(rec.owner_key, rec.pod.key, self._clock)
        self._queue.pop(rec.pod.key, None)
        if rec.end_time is None or rec.phase in ("Pending", "Running"):
            rec.end_time = self._clock

    def _evict(self, victim: Pod, preemptor: Pod) -> None:
        rec = self._records[victim.key]
        self._end(rec, "Failed", "PreemptionByScheduler", PREEMPTED_MESSAGE.format(preemptor.scheduler_name))

    # -------------------------------------------------------------- time
    def advance(self, seconds: float | None = None) -> pd.DataFrame:
        """Move the clock; pods that finish free their resources and the queue runs again.

        ``seconds=None`` runs until no timed pod is left running.
        """
        self._tick(args.check_seconds(seconds))
        return self.pods()

    def _tick(self, seconds: float | None) -> None:
        """Run the clock ``seconds`` forward (None: until nothing is left to happen)."""
        target = self._clock + (HORIZON_S if seconds is None else seconds)
        self._settle()
        self._observe()
        while (t := self._timeline.next_at()) is not None and t <= target:
            self._clock = max(self._clock, t)
            submitted: list = []
            while (t := self._timeline.next_at()) is not None and t <= self._clock:
                ev = self._timeline.pop()
                if ev.kind == "submit":
                    submitted.append(ev.payload)
                else:
                    self._handle(ev)
            if submitted:
                self._submit(submitted)
            self._settle()
            self._observe()
        if seconds is not None:
            self._clock = target
        for name in self._nodes:  # grace periods may have run out
            n, dm = self._nodes[name], self._devices[name]
            if dm.capacity() != {r: n.capacity.get(r) for r in dm.capacity()}:
                self._sync_device_status(name)
        self._settle()
        self._observe()

    def _handle(self, ev) -> None:
        if ev.kind == "finish":
            key, token = ev.payload
            rec = self._records.get(key)
            if rec is not None and rec.phase == "Running" and rec.finish_token == token:
                self._end(rec, "Succeeded", "Completed")
        elif ev.kind == "wake":
            controller, key = ev.payload
            controller.wake(key)
        elif ev.kind == "rendezvous":
            self._rendezvous.wake(ev.payload, self._clock)

    def _observe(self) -> None:
        self._recorder.observe(self._clock, self._levels())

    def _levels(self) -> Levels:
        if self._fleet is None:
            gpu_nodes = gpus = 0
            dollars = 0.0
            for n in self._nodes.values():
                g = physical_gpus(n.labels, n.capacity)
                if g or any(r.startswith("nvidia.com/") and v for r, v in n.capacity.items()):
                    gpu_nodes += 1
                gpus += g
                dollars += node_price_per_hour(n.labels, n.capacity, n.raw.get("nodePool")) or 0.0
            self._fleet = (gpu_nodes, gpus, dollars)
        gpu_nodes, gpus, dollars = self._fleet
        coming = 0
        if self._autoscaler is not None:  # asked-for nodes are billed while they boot
            coming, extra = self._autoscaler.provisioning_cost()
            dollars += extra
        return Levels(len(self._nodes) + coming, gpu_nodes, gpus, self._gpus_allocated,
                      self._rendezvous.stranded_gpus, len(self._queue), round(dollars, 4))

    def label_node(self, node: str, labels: dict[str, str | None], *, evict: bool = False) -> list[str]:
        """``kubectl label node``: set (or, with None, remove) labels; returns evicted pods.

        Changing ``nvidia.com/mig.config`` runs the MIG manager: the node's GPUs are
        repartitioned, the device plugin re-advertises, and resources it no longer
        serves drop to 0. Refused while pods hold the node's GPUs unless ``evict``.
        """
        args.check_name(node, "label_node")
        args.check_labels(node, labels)
        args.check_bool(evict, "label_node", "evict")
        if node not in self._nodes:
            raise GpuLabError(f'nodes "{node}" not found')
        current = self._nodes[node]
        evicted: list[str] = []
        wanted = labels.get(MIG_CONFIG_LABEL)
        if wanted is not None and wanted != current.labels.get(MIG_CONFIG_LABEL):
            holders = sorted(k for k, rec in self._records.items()
                             if rec.node == node and rec.phase == "Running" and rec.devices)
            result = reconfigure(current, wanted, pods_holding=holders, evict=evict)
            if result.state == "failed":
                raise GpuLabError(f'node "{node}": nvidia.com/mig.config={wanted}: {result.message}')
            for key in result.evicted:
                self._end(self._records[key], "Failed", "Evicted",
                          f"evicted from {node} to apply nvidia.com/mig.config={wanted}")
                evicted.append(key)
            current = result.node
            self._devices[node] = self._device_manager(current)
            self._plugin_configs.pop(node, None)
        new_labels = dict(current.labels)
        for k, v in labels.items():
            if k == MIG_CONFIG_LABEL:
                continue
            if v is None:
                new_labels.pop(k, None)
            else:
                new_labels[k] = v
        current.labels = new_labels
        self._nodes[node] = current
        self._snapshot.set_nodes(self._nodes.values())
        self._fleet = None
        self._settle()
        return evicted

    def _device_manager(self, node: Node) -> DeviceManager:
        """The node's kubelet device manager, on the simulated clock (grace periods elapse
        with ``advance``)."""
        return DeviceManager(_advertised_devices(node), clock=lambda: self._clock)

    def _sync_device_status(self, node: str) -> None:
        """Write the device manager's capacity/allocatable into the node, as the kubelet does."""
        n, dm = self._nodes[node], self._devices[node]
        n.capacity.update(dm.capacity())
        n.allocatable.update(dm.allocatable())
        self._snapshot.touch_nodes()

    def kill_plugin(self, node: str) -> None:
        """The node's device plugin dies: allocatable for its resources drops to 0 at once,
        capacity stays until the kubelet's grace period (5 min) has passed on the clock.
        Running pods keep their GPUs; new GPU pods stop landing there."""
        args.check_name(node, "kill_plugin")
        if node not in self._nodes:
            raise GpuLabError(f'nodes "{node}" not found')
        dm = self._devices[node]
        for resource in list(dm.devices):
            dm.endpoint_stopped(resource)
        self._sync_device_status(node)
        self._settle()

    def restart_plugin(self, node: str) -> None:
        """The plugin comes back and re-registers: capacity and allocatable are restored."""
        args.check_name(node, "restart_plugin")
        if node not in self._nodes:
            raise GpuLabError(f'nodes "{node}" not found')
        dm = self._devices[node]
        for resource, ids in _advertised_devices(self._nodes[node]).items():
            dm.register(resource, None)
            dm.update_devices(resource, ids)
        self._sync_device_status(node)
        self._settle()

    def cordon(self, node: str, unschedulable: bool = True) -> None:
        """``kubectl cordon``: no new pods land on the node (``uncordon`` with False)."""
        args.check_name(node, "cordon")
        args.check_bool(unschedulable, "cordon", "unschedulable")
        if node not in self._nodes:
            raise GpuLabError(f'nodes "{node}" not found')
        self._nodes[node].unschedulable = unschedulable
        self._snapshot.touch_nodes()
        self._settle()

    def delete(self, pod: str) -> None:
        """Delete a pod (``namespace/name`` or ``name`` in default); waiting pods get another try."""
        self._remove(self._record(pod))
        self._settle()

    # ----------------------------------------------------------- reading
    def _record(self, pod: str, call: str = "delete") -> PodRecord:
        args.check_name(pod, call, "pod")
        key = pod if "/" in pod else f"default/{pod}"
        rec = self._records.get(key)
        if rec is None:
            raise GpuLabError(f'pods "{key.split("/", 1)[1]}" not found (namespace {key.split("/", 1)[0]})')
        return rec

    def explain(self, pod: str) -> Explanation:
        args.check_name(pod, "explain", "pod")
        rec = self._record(pod)
        if rec.attempt is None:
            if rec.pod.node_name:
                why = "spec.nodeName is set: the scheduler never saw this pod"
            elif not self.record:
                why = "this session was created with record=False"
            else:
                why = "the scheduler has not tried this pod yet: call schedule()"
            return Explanation(rec.pod.key, rec.node, rec.message or why, rec.pod.scheduler_name,
                               pd.DataFrame(), pd.DataFrame(), [why])
        exp = build_explanation(rec.attempt, rec.attempt.filter_verdicts)
        exp.notes += dra.explain_notes(self._snapshot, rec.pod)  # the pod's ResourceClaims, if any
        if rec.node and rec.node != exp.node:
            exp.notes.append(f"now on {rec.node}")
        if rec.phase != "Pending" and rec.phase != "Running":
            exp.notes.append(f"phase {rec.phase}: {rec.message}")
        return exp

    def _run_for(self, seconds: float):
        """Run the clock ``seconds`` (the window every total covers); the Simulation."""
        from ..sim.simulation import Simulation, job_counts, makespan

        self._tick(seconds)
        jobs, timeline = self.jobs(), self.timeline()
        metrics = {**self._recorder.totals(), "makespan_s": makespan(jobs, timeline), **job_counts(jobs)}
        return Simulation(self.backend, seconds, jobs, timeline, self._recorder.series(), metrics)

    def _pod_manifests(self) -> dict[str, Pod]:
        return {k: r.pod for k, r in self._records.items() if r.phase == "Running"}

    def timeline(self) -> pd.DataFrame:
        """One row per pod ever created, with when it was created, started and finished
        (seconds on the simulated clock) and how long it held GPUs idle in a rendezvous."""
        rows = []
        now = self._clock
        for r in [*self._records.values(), *self._gone]:
            p = r.pod
            owner = p.owner_name if p.owner_kind in WORKLOAD_TIMELINE else None
            stranded = (self._rendezvous.stranded_now(r.owner_key, p.key, now)
                        if r.owner_key in self._rendezvous_jobs else 0.0)
            node = self._nodes.get(r.node) if r.node else None
            rows.append({"namespace": p.namespace, "pod": p.name,
                         "owner_kind": p.owner_kind if owner else None, "owner": owner,
                         "node": r.node, "pool": node.pool if node else None, "gpus": _gpus(p),
                         "phase": r.phase, "reason": r.reason, "created_at": r.created_at,
                         "started_at": r.start_time if r.start_time is not None else math.nan,
                         "finished_at": (r.end_time if r.end_time is not None and r.phase not in
                                         ("Pending", "Running") else math.nan),
                         "stranded_s": stranded})
        return pd.DataFrame(rows, columns=TIMELINE_COLUMNS)

    def jobs(self) -> pd.DataFrame:
        """One row per Job: its state (Complete, Running, Pending, Suspended, Failed), its
        queue, the GPUs it asks for, and when it was admitted, started and finished."""
        rows = []
        for job in self._jobs.jobs.values():
            r = job.record
            proto = r.get("prototype")
            per_pod = _gpus(proto) if proto is not None else _template_gpus(r["template"])
            rows.append({"namespace": r["namespace"], "name": r["name"], "state": job.state(),
                         "queue": job.queue, "gpus": per_pod * r["parallelism"],
                         "succeeded": job.succeeded, "failed": job.failed,
                         "reason": job.condition[0] if job.condition else "",
                         "message": job.condition[1] if job.condition else job.message,
                         "admitted_at": _seconds(job.admitted_at), "started_at": _seconds(job.started_at),
                         "finished_at": _seconds(job.finished_at)})
        return pd.DataFrame(rows, columns=JOB_COLUMNS)

    def _pod_rows(self) -> list[PodRow]:
        return [PodRow(r.pod.namespace, r.pod.name, r.node, r.phase, r.pod.priority, dict(r.pod.requests),
                       r.devices, r.nominated_node, r.reason, r.message, r.start_time, r.end_time)
                for r in self._records.values()]

    def _node_rows(self) -> list[NodeRow]:
        snap = self._snapshot
        rows = []
        for i, n in enumerate(snap.nodes):
            requested = {res: int(snap.requested[i, snap.rindex[res]]) for res in snap.resources}
            rows.append(NodeRow(n.name, n.pool, n.labels, n.taints, n.unschedulable, n.capacity,
                                n.allocatable, requested))
        return rows

