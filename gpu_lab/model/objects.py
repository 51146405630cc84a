"""The Kubernetes objects the scheduler reasons about, as small typed records.

Manifests stay real Kubernetes YAML; these records hold only what scheduling
needs, already parsed (quantities as integers: cpu in millicores, memory and
storage in bytes, everything else in whole units), so that every backend and
every plugin reads the same facts the same way.
"""

from __future__ import annotations

import functools
import json
import weakref
from dataclasses import dataclass, field
from typing import Any

from ..names import DEFAULT_SCHEDULER

# kube-scheduler's stand-ins for a container that states no cpu/memory request
# (pkg/scheduler/util: DefaultMilliCPURequest, DefaultMemoryRequest); used only
# for scoring, never for fit.
DEFAULT_MILLI_CPU_REQUEST = 100
DEFAULT_MEMORY_REQUEST = 200 * 1024 * 1024

TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


@dataclass(frozen=True)
class Taint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"

    def __str__(self) -> str:
        # The scheduler prints taints as Go's %v of the struct fields it keeps.
        return f"{{{self.key}: {self.value}}}" if self.value else f"{{{self.key}: }}"


@dataclass(frozen=True)
class Toleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""
    toleration_seconds: int | None = None

    def tolerates(self, taint: Taint) -> bool:
        """``v1.Toleration.ToleratesTaint`` (k8s.io/api/core/v1/toleration.go)."""
        if self.effect and self.effect != taint.effect:
            return False
        if self.key and self.key != taint.key:
            return False
        if self.operator == "Exists":
            return True
        if self.operator in ("Equal", ""):
            return self.value == taint.value
        return False


@dataclass
class ContainerResources:
    name: str
    requests: dict[str, int]
    limits: dict[str, int]
    # which of cpu/memory the manifest actually states (missing != explicit 0)
    stated: frozenset[str] = frozenset()


@dataclass(frozen=True)
class HostPort:
    port: int
    protocol: str = "TCP"
    ip: str = "0.0.0.0"


@dataclass
class Node:
    name: str
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    taints: list[Taint] = field(default_factory=list)
    unschedulable: bool = False
    capacity: dict[str, int] = field(default_factory=dict)
    allocatable: dict[str, int] = field(default_factory=dict)
    pool: str | None = None  # the gpu-lab NodePool that made it, if any
    # Device IDs per resource the node's device plugin advertises (what
    # ListAndWatch would list), e.g. {"nvidia.com/gpu": ["GPU-...", ...]}.
    devices: dict[str, list[str]] = field(default_factory=dict)
    # NUMA node of each device (the TopologyInfo NVIDIA's plugin reports), and the
    # kubelet's topologyManagerPolicy, which acts on it at admission.
    device_numa: dict[str, int] = field(default_factory=dict, repr=False)
    topology_manager_policy: str = "none"
    raw: dict[str, Any] = field(default_factory=dict, repr=False)


@dataclass
class Pod:
    namespace: str
    name: str
    uid: str = ""
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)
    owner_kind: str | None = None
    owner_name: str | None = None
    scheduler_name: str = DEFAULT_SCHEDULER
    priority_class_name: str = ""
    priority: int = 0
    preemption_policy: str = "PreemptLowerPriority"
    node_name: str = ""  # spec.nodeName as written (bypasses the scheduler)
    node_selector: dict[str, str] = field(default_factory=dict)
    affinity: dict[str, Any] = field(default_factory=dict)
    tolerations: list[Toleration] = field(default_factory=list)
    topology_spread_constraints: list[dict[str, Any]] = field(default_factory=list)
    host_ports: list[HostPort] = field(default_factory=list)
    containers: list[ContainerResources] = field(default_factory=list)
    init_containers: list[ContainerResources] = field(default_factory=list)
    overhead: dict[str, int] = field(default_factory=dict)
    requests: dict[str, int] = field(default_factory=dict)
    nonzero_cpu: int = 0
    nonzero_memory: int = 0
    created: int = 0  # creation order: the queue's tie-break after priority
    raw: dict[str, Any] = field(default_factory=dict, repr=False)
    # Facts the scheduler derives from the pod (parsed terms, request vectors),
    # worked out once. Pods parsed from equal manifests share one memo (see
    # ``spec_memo``), so only what follows from namespace, labels, owner kind and
    # spec may go in. Never part of equality.
    memo: dict[Any, Any] = field(default_factory=dict, repr=False, compare=False)

    @functools.cached_property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    def extended_requests(self) -> dict[str, int]:
        return {r: v for r, v in self.requests.items() if is_extended_resource(r)}


class SpecMemo(dict):
    """A pod memo shared by every pod of one equivalence class (a dict that can be weakly held)."""


_SPEC_MEMOS: weakref.WeakValueDictionary[tuple, SpecMemo] = weakref.WeakValueDictionary()


def spec_key(spec: dict[str, Any]) -> str:
    """A pod spec's identity as text: equal for equal specs, whatever their key order."""
    return json.dumps(spec, sort_keys=True, default=str)


def spec_memo(namespace: str, labels: dict[str, str], owner_kind: str | None, spec: dict[str, Any],
              key: str | None = None) -> SpecMemo:
    """The memo for pods with this namespace, labels, owner kind and spec (``key``: the spec's
    ``spec_key``, where the caller has it already).

    Like kube-scheduler's equivalence classes: the pods of one Job or ReplicaSet
    (or any identical manifests) are the same to every plugin, so what a plugin
    derives from one of them holds for all. The memo lives while such a pod does.
    """
    memo_key = (namespace, owner_kind, json.dumps(labels, sort_keys=True, default=str),
                spec_key(spec) if key is None else key)
    memo = _SPEC_MEMOS.get(memo_key)
    if memo is None:
        memo = SpecMemo()
        _SPEC_MEMOS[memo_key] = memo
    return memo


def is_extended_resource(name: str) -> bool:
    """``v1helper.IsExtendedResourceName``: a qualified name outside kubernetes.io."""
    if "/" not in name:
        return False
    prefix = name.split("/", 1)[0]
    if prefix == "kubernetes.io" or prefix.endswith(".kubernetes.io"):
        return False
    return not name.startswith("requests.")


def compute_pod_requests(pod: Pod) -> None:
    """Fill ``pod.requests`` and the non-zero cpu/memory used for scoring.

    Follows ``resourcehelper.PodRequests`` for pods without sidecars: the sum
    over app containers, at least the largest init container, plus overhead.
    """
    total: dict[str, int] = {}
    nz_cpu = nz_mem = 0
    for c in pod.containers:
        for r, v in c.requests.items():
            total[r] = total.get(r, 0) + v
        nz_cpu += c.requests.get("cpu", 0) if "cpu" in c.stated else DEFAULT_MILLI_CPU_REQUEST
        nz_mem += c.requests.get("memory", 0) if "memory" in c.stated else DEFAULT_MEMORY_REQUEST
    for c in pod.init_containers:
        for r, v in c.requests.items():
            if v > total.get(r, 0):
                total[r] = v
        cpu = c.requests.get("cpu", 0) if "cpu" in c.stated else DEFAULT_MILLI_CPU_REQUEST
        mem = c.requests.get("memory", 0) if "memory" in c.stated else DEFAULT_MEMORY_REQUEST
        nz_cpu, nz_mem = max(nz_cpu, cpu), max(nz_mem, mem)
    for r, v in pod.overhead.items():
        total[r] = total.get(r, 0) + v
    nz_cpu += pod.overhead.get("cpu", 0)
    nz_mem += pod.overhead.get("memory", 0)
    pod.requests = {r: v for r, v in total.items() if v}
    pod.nonzero_cpu, pod.nonzero_memory = nz_cpu, nz_mem


