"""What the autoscaler is shown: pods, nodes and node groups, and a node's utilisation.

Plain records the engine fills in; nothing here knows the simulator. Resource
amounts use the scheduler's units: ``cpu`` in millicores, everything else in
whole units (``memory`` in bytes, ``nvidia.com/gpu`` in devices).
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ...names import GPU_RESOURCE

DEFAULT_PROVISIONING_DELAY = 300.0  # seconds; gpu_lab.model.nodepool.DEFAULT_PROVISIONING_DELAY says why


@dataclass(eq=False)
class PodState:
    """A pod as the autoscaler sees it.

    ``owner_kind`` is the kind of its controller (``ReplicaSet``, ``Job``,
    ``StatefulSet``, ``DaemonSet``, ...; None for a bare pod), ``owner_name``
    its name. ``ref`` is the caller's own object, handed back untouched in
    callbacks. ``priority_class_name`` and ``preemption_policy`` tell a
    ``system-node-critical`` daemon pod (it counts on a template node even
    without ``--force-ds``).
    """

    namespace: str
    name: str
    requests: Mapping[str, int] = field(default_factory=dict)
    owner_kind: str | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)
    ref: Any = None
    owner_name: str | None = None
    priority_class_name: str = ""
    preemption_policy: str = "PreemptLowerPriority"

    @functools.cached_property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def daemonset(self) -> bool:
        return self.owner_kind == "DaemonSet"


@dataclass(eq=False)
class NodeGroup:
    """A pool the autoscaler may resize (a NodePool with ``spec.autoscaling``).

    ``allocatable`` is what a new node of the group offers (its template);
    ``template`` is the caller's template node, handed to ``fits``.
    ``gpu_node`` says whether its nodes are GPU nodes in cluster-autoscaler's
    sense (None: they are when the template has ``nvidia.com/gpu``).
    ``pods`` are the pods a new node starts with (its DaemonSet pods, as
    ``templates`` finds them each loop; ``estimator.fresh`` is what they leave free).
    New nodes are named ``<name>-<i>``, like a NodePool's.
    """

    name: str
    max_count: int
    min_count: int = 0
    provisioning_delay: float = DEFAULT_PROVISIONING_DELAY
    allocatable: Mapping[str, int] = field(default_factory=dict)
    price_per_hour: float | None = None
    gpu_node: bool | None = None
    template: Any = None
    pods: Sequence[PodState] = ()

    @property
    def is_gpu_node(self) -> bool:
        return self.gpu_node if self.gpu_node is not None else self.allocatable.get(GPU_RESOURCE, 0) > 0


@dataclass(eq=False)
class NodeState:
    """A node now: its allocatable, the pods bound to it (DaemonSet pods included) and its age.

    ``pool`` names its NodeGroup (None, or a pool without autoscaling: the
    autoscaler never removes it). ``created_at`` is when it became Ready.
    ``gpu_node`` is cluster-autoscaler's test: the node carries the cloud's
    GPU label (in gpu-lab: its pool has ``spec.gpu``) or has ``nvidia.com/gpu``
    allocatable; None means the latter only. ``last_pod_event`` is Karpenter's
    ``lastPodEventTime``; None lets the autoscaler track it from the pods it
    sees come and go. ``annotations`` are the node's
    (``cluster-autoscaler.kubernetes.io/scale-down-disabled``,
    ``karpenter.sh/do-not-disrupt``). ``unschedulable``: cordoned.
    """

    name: str
    pool: str | None
    allocatable: Mapping[str, int]
    pods: Sequence[PodState] = ()
    created_at: float = 0.0
    gpu_node: bool | None = None
    annotations: Mapping[str, str] = field(default_factory=dict)
    last_pod_event: float | None = None
    ref: Any = None
    unschedulable: bool = False

    @property
    def is_gpu_node(self) -> bool:
        return self.gpu_node if self.gpu_node is not None else self.allocatable.get(GPU_RESOURCE, 0) > 0

    def requested(self, resource: str, ignore_daemonsets: bool = False) -> int:
        return sum(p.requests.get(resource, 0) for p in self.pods
                   if not (ignore_daemonsets and p.daemonset))

    @property
    def cpu_allocatable(self) -> int:
        return self.allocatable.get("cpu", 0)

    @property
    def memory_allocatable(self) -> int:
        return self.allocatable.get("memory", 0)

    @property
    def gpu_allocatable(self) -> int:
        return self.allocatable.get(GPU_RESOURCE, 0)

    @property
    def gpu_requested(self) -> int:
        return self.requested(GPU_RESOURCE)


@dataclass(frozen=True)
class Utilization:
    """cluster-autoscaler's ``utilization.Info``: what it judged the node by, and each ratio."""

    resource: str  # "nvidia.com/gpu" on a GPU node, else "cpu" or "memory", whichever is higher
    value: float
    cpu: float = 0.0
    memory: float = 0.0
    gpu: float = 0.0

    def __str__(self) -> str:
        return f"{{{self.resource} {self.value:.6g}}}"


def utilization(node: NodeState, ignore_daemonsets: bool = False) -> Utilization:
    """How cluster-autoscaler measures a node for scale-down (``simulator/utilization/info.go``).

    A GPU node is judged by GPU requests over GPU allocatable alone ("Skips cpu
    and memory utilization calculation for node with GPU"); a GPU node whose
    allocatable ``nvidia.com/gpu`` is 0 (driver or device plugin not up, or
    MIG under the mixed strategy) counts as 0, so that it can still be scaled
    down. Any other node: the larger of cpu and memory requests over allocatable
    (memory on a tie).
    """
    if node.is_gpu_node:
        alloc = node.gpu_allocatable
        gpu = node.requested(GPU_RESOURCE, ignore_daemonsets) / alloc if alloc > 0 else 0.0
        return Utilization(GPU_RESOURCE, gpu, gpu=gpu)
    cpu = _ratio(node.requested("cpu", ignore_daemonsets), node.cpu_allocatable)
    mem = _ratio(node.requested("memory", ignore_daemonsets), node.memory_allocatable)
    return Utilization("cpu", cpu, cpu, mem) if cpu > mem else Utilization("memory", mem, cpu, mem)


def _ratio(requested: int, allocatable: int) -> float:
    return requested / allocatable if allocatable > 0 else 0.0
