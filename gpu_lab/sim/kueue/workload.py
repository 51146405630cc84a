"""Workloads: what Kueue makes of a Job, and the status conditions it keeps on it.

Kueue's Job integration (pkg/controller/jobs/job/job_controller.go ``PodSets``) gives a Job
one pod set, ``main``, with ``count = min(parallelism, completions)`` and the pod
template's requests (``resourcehelpers.PodRequests``, limits filling missing requests).
Its priority comes from the ``kueue.x-k8s.io/priority-class`` label (a
WorkloadPriorityClass), else the pod template's PriorityClass, else the cluster's
globalDefault PriorityClass, else 0 (pkg/controller/jobframework/reconciler.go
``ExtractPriority``, pkg/util/priority). The Workload is named ``job-<name>-<hash>``
(pkg/controller/jobframework/workload_names.go).

Conditions follow ``apimeta.SetStatusCondition``: the transition time moves only when
the status changes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any

from ...errors import GpuLabError
from ...model.kueue.objects import EVICTION_TIMESTAMP, KueueConfig
from ...model.objects import Toleration
from ...model.parse import parse_pod
from ...names import QUEUE_LABEL, stable_uid
from . import messages as m

PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
MAX_NAME = 253  # longMaxWorkloadNameLength (the ShortWorkloadNames gate is off by default)
HASH_LENGTH = 5


def workload_name(owner_name: str, owner_uid: str, kind: str = "Job", group: str = "batch") -> str:
    """``GetWorkloadNameForOwnerWithGVK``: ``<kind>-<name>`` truncated, ``-`` and 5 hex of a sha1."""
    h = hashlib.sha1("\n".join((kind, group, owner_name, owner_uid)).encode()).hexdigest()
    prefix = f"{kind.lower()}-{owner_name}"[:MAX_NAME - 1 - HASH_LENGTH]
    return f"{prefix}-{h[:HASH_LENGTH]}"


@dataclass(frozen=True)
class WorkloadSpec:
    """One Workload as the model needs it. ``requests`` are per pod, in Kueue's int64 units
    (millicores for cpu, whole units otherwise); ``created`` is the creation time (s)."""

    namespace: str
    name: str
    queue: str  # the LocalQueue (label kueue.x-k8s.io/queue-name)
    count: int
    requests: dict[str, int]
    created: float = 0.0
    priority: int = 0
    priority_class: str | None = None
    job: str | None = None  # the owning Job's name
    uid: str = ""
    job_uid: str = ""
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity: dict[str, Any] = field(default_factory=dict)  # the pod template's spec.affinity
    tolerations: tuple[Toleration, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def job_key(self) -> str:
        return f"{self.namespace}/{self.job or self.name}"

    def total(self) -> dict[str, int]:
        """The pod set's total requests (``TotalRequests``): per pod times count."""
        return {r: q * self.count for r, q in self.requests.items() if q}


def job_workload(job: dict, *, created: float = 0.0, uid: str = "", config: KueueConfig | None = None,
                 priority_classes: dict[str, dict] | None = None) -> WorkloadSpec | None:
    """The Workload Kueue creates for a ``batch/v1`` Job manifest, or None when the Job has no
    ``kueue.x-k8s.io/queue-name`` label (Kueue leaves it alone, ``manageJobsWithoutQueueName``
    being false by default). ``priority_classes`` are the cluster's PriorityClasses
    (``{name: {"value": ..., "globalDefault": ...}}``)."""
    meta = job.get("metadata") or {}
    labels = meta.get("labels") or {}
    queue = labels.get(QUEUE_LABEL)
    if not queue:
        return None
    ns, name = meta.get("namespace") or "default", meta.get("name") or ""
    uid = uid or meta.get("uid") or stable_uid(ns, "Job", name)
    spec = job.get("spec") or {}
    parallelism, completions = spec.get("parallelism"), spec.get("completions")
    if parallelism is None and completions is None:
        parallelism = completions = 1
    parallelism = 1 if parallelism is None else parallelism
    count = min(parallelism, completions) if completions is not None else parallelism
    template = spec.get("template") or {}
    pod = parse_pod({"metadata": {**(template.get("metadata") or {}), "name": name, "namespace": ns,
                                  "ownerReferences": []},
                     "spec": template.get("spec") or {}}, priority_classes=priority_classes)
    priority, class_name = pod.priority, pod.priority_class_name or None
    wpc_name = labels.get(PRIORITY_CLASS_LABEL)
    if wpc_name:
        wpc = (config.priority_classes if config else {}).get(wpc_name)
        if wpc is None:
            # the Job reconciler's Get fails and it creates no Workload (ExtractPriority)
            raise GpuLabError(f'workloadpriorityclasses.kueue.x-k8s.io "{wpc_name}" not found')
        priority, class_name = wpc.value, wpc.name
    wl_name = workload_name(name, uid)
    return WorkloadSpec(
        namespace=ns, name=wl_name, queue=str(queue), count=int(count), requests=dict(pod.requests),
        created=created, priority=priority, priority_class=class_name, job=name,
        uid=stable_uid(ns, "Workload", wl_name), job_uid=uid, node_selector=dict(pod.node_selector),
        affinity=dict(pod.affinity or {}), tolerations=tuple(pod.tolerations))


@dataclass
class Condition:
    type: str
    status: str  # "True" or "False"
    reason: str
    message: str
    last_transition_time: float

    def as_dict(self) -> dict[str, Any]:
        return {"type": self.type, "status": self.status, "reason": self.reason, "message": self.message,
                "lastTransitionTime": self.last_transition_time}


@dataclass
class Admission:
    cluster_queue: str
    flavors: dict[str, str]  # resource -> ResourceFlavor
    usage: dict[tuple[str, str], int]  # (flavor, resource) -> quantity


@dataclass
class Workload:
    spec: WorkloadSpec
    seq: int  # submission order: the tie-break where Kueue compares UIDs
    conditions: dict[str, Condition] = field(default_factory=dict)  # by type, in the order set
    cluster_queue: str | None = None  # the ClusterQueue its LocalQueue points to
    admission: Admission | None = None
    requeue_count: int = 0
    requeue_at: float | None = None
    active: bool = True  # spec.active; False once deactivated
    in_queue: bool = False  # in its ClusterQueue's heap or inadmissible set
    evaluated: int = -1  # the model's version when the scheduler last tried it
    admitted_at: float | None = None  # the last admission
    finished_at: float | None = None
    key: str = field(init=False)  # namespace/name, read on every scheduling step
    shape: tuple | None = None  # what the scheduler reads from the spec (scheduler._shape)

    def __post_init__(self) -> None:
        self.key = self.spec.key

    def condition(self, kind: str) -> Condition | None:
        return self.conditions.get(kind)

    def is_true(self, kind: str) -> bool:
        c = self.condition(kind)
        return c is not None and c.status == "True"

    def set(self, kind: str, status: bool, reason: str, message: str, now: float) -> bool:
        """``apimeta.SetStatusCondition``; returns whether anything changed."""
        value = "True" if status else "False"
        c = self.conditions.get(kind)
        if c is None:
            self.conditions[kind] = Condition(kind, value, reason, message, now)
            return True
        changed = (c.status, c.reason, c.message) != (value, reason, message)
        if c.status != value:
            c.status, c.last_transition_time = value, now
        c.reason, c.message = reason, message
        return changed

    @property
    def has_quota(self) -> bool:
        return self.is_true(m.QUOTA_RESERVED)

    @property
    def admitted(self) -> bool:
        return self.is_true(m.ADMITTED)

    @property
    def evicted(self) -> bool:
        return self.is_true(m.EVICTED)

    @property
    def finished(self) -> bool:
        return self.is_true(m.FINISHED)

    def queue_timestamp(self, requeuing_timestamp: str = EVICTION_TIMESTAMP) -> float:
        """``Ordering.GetQueueOrderTimestamp``: creation, or the PodsReady-timeout eviction."""
        c = self.condition(m.EVICTED)
        if (requeuing_timestamp == EVICTION_TIMESTAMP and c is not None and c.status == "True"
                and c.reason == m.EVICTED_BY_PODS_READY_TIMEOUT):
            return c.last_transition_time
        return self.spec.created

    def reservation_time(self, now: float) -> float:
        """``quotaReservationTime``: when quota was reserved, or now."""
        c = self.condition(m.QUOTA_RESERVED)
        return c.last_transition_time if c is not None and c.status == "True" else now

    @property
    def state(self) -> str:
        if self.finished:
            return "Finished"
        if not self.active:
            return "Deactivated"
        if self.has_quota:
            return "Evicting" if self.evicted else "Admitted"
        return "Pending"
