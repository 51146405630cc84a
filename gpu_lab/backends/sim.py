"""The embedded backend: the Session API on the simulated cluster in ``gpu_lab.sim``.

Pods are queued by priority then creation order, scheduled one cycle at a time by our
kube-scheduler model, bound, given devices by their node's device manager, and (when
they carry a ``gpulab.dev/duration`` annotation) finish after that long on a simulated
clock, which frees their resources for whoever waits. Objects annotated
``gpulab.dev/submit-at`` are created at that simulated time. The Job and ReplicaSet
controllers (``sim/controllers``) create and replace their pods; rendezvous Jobs
(``sim/training.py``) progress only while all workers run.

The cluster itself is ``sim.runner.Runner`` and the modules beside it; this adapter checks
each call's arguments, hands it to them, and builds the tables every backend serves.
"""

from __future__ import annotations

import marshal
import math
import pickle
import time
import zlib

import pandas as pd

from ..collector import collector_paused
from ..errors import GpuLabError
from ..kubelet import gpuhealth
from ..kubelet.gpuhealth import DEFAULT_REASON
from ..model import arguments as args
from ..model.documents import load_documents
from ..model.duration import DURATION_ANNOTATION, parse_duration  # noqa: F401 - tests import them here
from ..model.objects import Pod
from ..model.quantity import parse_quantity, value
from ..sim.cluster import RECORD_CELLS, PodRecord, pod_gpus
from ..sim.dra import backend as dra
from ..sim.explain import Explanation, build_explanation
from ..sim.outcome import Simulation, job_counts, makespan
from ..sim.runner import Runner
from .base import Session, Source
from .events import EventRow
from .kubectl.output import KubectlOutput
from .kubectl.render import sim_kubectl
from .tables import NodeRow, PodRow

TIMELINE_COLUMNS = ["namespace", "pod", "owner_kind", "owner", "node", "pool", "gpus", "phase", "reason",
                    "created_at", "started_at", "finished_at", "stranded_s"]
JOB_COLUMNS = ["namespace", "name", "state", "queue", "gpus", "succeeded", "failed", "reason", "message",
               "admitted_at", "started_at", "finished_at"]
WORKLOAD_TIMELINE = ("Job", "ReplicaSet", "StatefulSet", "DaemonSet")


def _seconds(t: float | None) -> float:
    return math.nan if t is None else t


def _template_gpus(template: dict) -> int:
    total = 0
    for c in template["spec"].get("containers") or []:
        limits = (c.get("resources") or {}).get("limits") or {}
        requests = {**limits, **((c.get("resources") or {}).get("requests") or {})}
        total += sum(value(parse_quantity(v)) for r, v in requests.items() if r.startswith("nvidia.com/"))
    return total


def _frozen(docs: list) -> bytes:
    """The applied documents as bytes (their objects may change or go after the call): marshal,
    fast for what YAML and JSON give, pickle for anything else; compressed, as a file is."""
    try:
        return b"m" + zlib.compress(marshal.dumps(docs), 1)
    except ValueError:  # a type marshal does not take (a caller's own objects)
        return b"p" + zlib.compress(pickle.dumps(docs, protocol=pickle.HIGHEST_PROTOCOL), 1)


def _thawed(blob: bytes) -> list:
    with collector_paused():
        data = zlib.decompress(blob[1:])
        return marshal.loads(data) if blob[:1] == b"m" else pickle.loads(data)


class SimSession(Session):
    backend = "sim"

    def __init__(self, seed: int | None = 0, deterministic: bool = False, record: bool | str = True):
        """``record``: keep what ``explain`` shows (True; past RECORD_CELLS it is worked out
        again when asked), nothing (False), or only for the pod it names (``namespace/name``:
        what ``gpu-lab explain`` asks, at the speed of a run that keeps nothing)."""
        self.seed, self.deterministic = seed, deterministic
        self._only: str | None = None
        if isinstance(record, str):
            self.record, self._only = True, record if "/" in record else f"default/{record}"
        else:
            self.record = record
        self.reset()

    @property
    def now(self) -> float:
        """Seconds on the simulated clock (``advance`` moves it)."""
        return self._sim.cluster.now

    def reset(self) -> None:
        self._sim = Runner(self.seed, self.deterministic, self.record)
        self._epoch = time.time()  # the wall-clock second the clock's zero stands for (kubectl's dates)
        self._sim.cluster.record_only = self._only
        # every call that changed the cluster, in order, to replay for explain (``_replayed``)
        self._calls: list[tuple[str, tuple]] = []

    def _log(self, name: str, *call_args) -> None:
        if self.record:
            self._calls.append((name, call_args))

    def apply(self, src: Source) -> list[str]:
        docs = load_documents(src)
        with collector_paused():  # thousands of new long-lived objects: a pass would only re-scan them
            refs = self._sim.apiserver.create(docs)  # refused as a whole, or created: then logged
        if self.record:  # replayed for explain (``_replayed``)
            self._log("apply", _frozen(docs))
        return refs

    def schedule(self) -> pd.DataFrame:
        self._log("schedule")
        self._sim.settle()
        self._sim.observe()
        return self.pods()

    def advance(self, seconds: float | None = None) -> pd.DataFrame:
        """Move the clock; pods that finish free their resources and the queue runs again.

        ``seconds=None`` runs until no timed pod is left running.
        """
        seconds = args.check_seconds(seconds)
        self._log("advance", seconds)
        self._sim.tick(seconds)
        return self.pods()

    # ------------------------------------------------------------- nodes
    def _check_node(self, node: str, call: str) -> None:
        args.check_name(node, call)
        if node not in self._sim.cluster.nodes:
            raise GpuLabError(f'nodes "{node}" not found')

    def label_node(self, node: str, labels: dict[str, str | None], *, evict: bool = False) -> list[str]:
        """``kubectl label node``: set (or, with None, remove) labels; returns evicted pods.

        Changing ``nvidia.com/mig.config`` runs the MIG manager: the node's GPUs are
        repartitioned, the device plugin re-advertises, and resources it no longer
        serves drop to 0. Refused while pods hold the node's GPUs unless ``evict``.
        """
        args.check_name(node, "label_node")
        args.check_labels(node, labels)
        args.check_bool(evict, "label_node", "evict")
        self._check_node(node, "label_node")
        evicted = self._sim.nodes.relabel(node, labels, evict)
        self._log("label_node", node, dict(labels), evict)
        self._sim.settle()
        return evicted

    def kill_plugin(self, node: str) -> None:
        """The node's device plugin dies: allocatable for its resources drops to 0 at once,
        capacity stays until the kubelet's grace period (5 min) has passed on the clock.
        Running pods keep their GPUs; new GPU pods stop landing there."""
        self._check_node(node, "kill_plugin")
        self._log("kill_plugin", node)
        self._sim.kubelets.kill_plugin(node)
        self._sim.settle()

    def restart_plugin(self, node: str) -> None:
        """The plugin comes back and re-registers: capacity and allocatable are restored."""
        self._check_node(node, "restart_plugin")
        self._log("restart_plugin", node)
        self._sim.kubelets.restart_plugin(node)
        self._sim.settle()

    def fail_device(self, node: str, index: int, reason: str = DEFAULT_REASON) -> None:
        """GPU ``index`` of the node fails (``reason``, e.g. "Xid 79", as the plugin would log
        it): its devices (replicas and MIG devices included) turn Unhealthy, allocatable drops
        by them, capacity stays. The pod holding it keeps running: the kubelet evicts nothing
        for a device's health. New pods no longer get it until ``heal_device``."""
        self._check_node(node, "fail_device")
        index = self._gpu_index(node, index, "fail_device")
        reason = gpuhealth.check_reason(reason, "fail_device")
        self._log("fail_device", node, index, reason)
        self._sim.kubelets.set_gpu_health(node, index, reason)
        self._sim.settle()

    def heal_device(self, node: str, index: int) -> None:
        """GPU ``index`` of the node reports Healthy again: allocatable comes back."""
        self._check_node(node, "heal_device")
        index = self._gpu_index(node, index, "heal_device")
        self._log("heal_device", node, index)
        self._sim.kubelets.set_gpu_health(node, index, None)
        self._sim.settle()

    def _gpu_index(self, node: str, index: int, call: str) -> int:
        return gpuhealth.check_index(node, gpuhealth.gpu_count(self._sim.cluster.nodes[node]), index, call)

    def cordon(self, node: str, unschedulable: bool = True) -> None:
        """``kubectl cordon``: no new pods land on the node (``uncordon`` with False)."""
        args.check_name(node, "cordon")
        args.check_bool(unschedulable, "cordon", "unschedulable")
        self._check_node(node, "cordon")
        self._log("cordon", node, unschedulable)
        self._sim.nodes.cordon(node, unschedulable)
        self._sim.settle()

    # -------------------------------------------------------------- pods
    def delete(self, pod: str) -> None:
        """Delete a pod (``namespace/name`` or ``name`` in default); waiting pods get another try."""
        rec = self._record(pod)
        self._log("delete", pod)
        self._sim.binder.remove(rec)
        self._sim.settle()

    def _record(self, pod: str, call: str = "delete") -> PodRecord:
        args.check_name(pod, call, "pod")
        key = pod if "/" in pod else f"default/{pod}"
        rec = self._sim.cluster.records.get(key)
        if rec is None:
            raise GpuLabError(f'pods "{key.split("/", 1)[1]}" not found (namespace {key.split("/", 1)[0]})')
        return rec

    def explain(self, pod: str) -> Explanation:
        args.check_name(pod, "explain", "pod")
        rec = self._record(pod)
        attempt = rec.attempt
        if attempt is None and self._sim.cluster.dropped and not rec.pod.node_name and rec.attempts:
            attempt = self._replayed(rec)
        if attempt is None:
            if rec.pod.node_name:
                why = "spec.nodeName is set: the scheduler never saw this pod"
            elif not self.record:
                why = "this session was created with record=False"
            else:
                why = "the scheduler has not tried this pod yet: call schedule()"
            return Explanation(rec.pod.key, rec.node, rec.message or why, rec.pod.scheduler_name,
                               pd.DataFrame(), pd.DataFrame(), [why])
        exp = build_explanation(attempt, attempt.filter_verdicts)
        exp.notes += dra.explain_notes(self._sim.cluster.snapshot, rec.pod)  # the pod's ResourceClaims, if any
        if rec.node and rec.node != exp.node:
            exp.notes.append(f"now on {rec.node}")
        if rec.phase != "Pending" and rec.phase != "Running":
            exp.notes.append(f"phase {rec.phase}: {rec.message}")
        return exp

    def _replayed(self, rec: PodRecord):
        """The pod's last cycle, kept this time: past RECORD_CELLS the sim keeps no cycle's
        arrays, so this session's calls run again on a fresh sim (same seed: the same cycles)
        that keeps only this pod's. Checked: the replay must leave the pod where it is."""
        again = SimSession(self.seed, self.deterministic, self.record)
        again._sim.cluster.record_only = rec.pod.key
        for name, call_args in self._calls:
            if name == "apply":
                again._sim.apiserver.create(_thawed(call_args[0]))
            elif name == "schedule":
                again._sim.settle()
                again._sim.observe()
            elif name == "advance" or name == "run_for":
                again._sim.tick(call_args[0])
            else:
                getattr(again, name)(*call_args)
        twin = again._sim.cluster.records.get(rec.pod.key)
        if twin is None or (twin.node, twin.phase, twin.attempts) != (rec.node, rec.phase, rec.attempts):
            raise GpuLabError(f"explain {rec.pod.key}: replaying this session's calls did not reproduce the "
                              f"pod's scheduling (a bug in gpu-lab); create the session with fewer pods "
                              f"x nodes than {RECORD_CELLS:,} to keep every explanation")
        return twin.attempt

    # -------------------------------------------------------- the clock's tables
    def _run_for(self, seconds: float):
        """Run the clock ``seconds`` (the window every total covers); the Simulation."""

        self._log("run_for", seconds)
        self._sim.tick(seconds)
        jobs, timeline = self.jobs(), self.timeline()
        recorder = self._sim.recorder
        metrics = {**recorder.totals(), "makespan_s": makespan(jobs, timeline), **job_counts(jobs)}
        return Simulation(self.backend, seconds, jobs, timeline, recorder.series(), metrics)

    def timeline(self) -> pd.DataFrame:
        """One row per pod ever created, with when it was created, started and finished
        (seconds on the simulated clock) and how long it held GPUs idle in a rendezvous."""
        c, controllers = self._sim.cluster, self._sim.controllers
        rows = []
        now = c.now
        for r in [*c.records.values(), *c.gone]:
            p = r.pod
            owner = p.owner_name if p.owner_kind in WORKLOAD_TIMELINE else None
            stranded = (controllers.rendezvous.stranded_now(r.owner_key, p.key, now)
                        if r.owner_key in controllers.rendezvous_jobs else 0.0)
            node = c.nodes.get(r.node) if r.node else None
            rows.append({"namespace": p.namespace, "pod": p.name,
                         "owner_kind": p.owner_kind if owner else None, "owner": owner,
                         "node": r.node, "pool": node.pool if node else None, "gpus": pod_gpus(p),
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
        for job in self._sim.controllers.jobs.jobs.values():
            r = job.record
            proto = r.get("prototype")
            per_pod = pod_gpus(proto) if proto is not None else _template_gpus(r["template"])
            rows.append({"namespace": r["namespace"], "name": r["name"], "state": job.state(),
                         "queue": job.queue, "gpus": per_pod * r["parallelism"],
                         "succeeded": job.succeeded, "failed": job.failed,
                         "reason": job.condition[0] if job.condition else "",
                         "message": job.condition[1] if job.condition else job.message,
                         "admitted_at": _seconds(job.admitted_at), "started_at": _seconds(job.started_at),
                         "finished_at": _seconds(job.finished_at)})
        return pd.DataFrame(rows, columns=JOB_COLUMNS)

    def autoscaler_events(self) -> pd.DataFrame:
        """What the autoscaler decided and why, in cluster-autoscaler's (or Karpenter's) words."""
        autoscaler = self._sim.controllers.autoscaler
        rows = [{"time": t, "object": e.involved, "reason": e.reason, "message": e.message}
                for t, e in (autoscaler.events if autoscaler else [])]
        return pd.DataFrame(rows, columns=["time", "object", "reason", "message"])

    def _event_rows(self) -> list[EventRow]:
        """The scheduler's (Scheduled, FailedScheduling, Preempted), the controllers'
        (FailedCreate) and the autoscaler's Events, at their simulated times. The sim's pod
        uids (in "Preempted by pod <uid>") are its own, derived from names."""
        rows = [EventRow(e.namespace, e.kind, e.name, e.type, e.reason, e.message, e.count, e.time,
                         last=e.last) for e in self._sim.cluster.api_events]
        autoscaler = self._sim.controllers.autoscaler
        seen: dict[tuple, EventRow] = {}
        for t, e in (autoscaler.events if autoscaler else []):
            kind, _, ref = e.involved.partition(" ")
            ns, _, name = ref.rpartition("/")
            key = (ns or "default", kind, name, e.type, e.reason, e.message)  # a node's Events are in default
            if key in seen:
                seen[key].count += 1  # the event correlator, as in sim/events.py
                seen[key].last = t
            else:
                seen[key] = EventRow(*key, 1, t)
                rows.append(seen[key])
        return rows

    def kubectl(self, command: str) -> KubectlOutput:
        """What kubectl would print for this cluster, rendered by gpu-lab in kubectl's format:
        ``get pods [-o wide] [-A | -n NS]``, ``get nodes [-o wide] [-L LABEL]``, ``get events
        [-A | -n NS]`` and ``describe node NAME``; ages on the simulated clock. The sim has no
        pod IPs (``<none>``) and no restarts; anything else is one line saying what is served."""
        return sim_kubectl(self, command)

    # ---------------------------------------------------------- the tables
    def _pod_manifests(self) -> dict[str, Pod]:
        return {k: r.pod for k, r in self._sim.cluster.records.items() if r.phase == "Running"}

    def _pod_rows(self) -> list[PodRow]:
        return [PodRow(r.pod.namespace, r.pod.name, r.node, r.phase, r.pod.priority, dict(r.pod.requests),
                       r.devices, r.nominated_node, r.reason, r.message, r.start_time, r.end_time)
                for r in self._sim.cluster.records.values()]

    def _node_rows(self) -> list[NodeRow]:
        snap = self._sim.cluster.snapshot
        rows = []
        for i, n in enumerate(snap.nodes):
            requested = {res: int(snap.requested[i, snap.rindex[res]]) for res in snap.resources}
            rows.append(NodeRow(n.name, n.pool, n.labels, n.taints, n.unschedulable, n.capacity,
                                n.allocatable, requested))
        return rows
