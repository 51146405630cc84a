"""From gpu-lab's own records to the autoscaler's: NodePool documents, ``Node`` and ``Pod``.

The model itself never imports the simulator; these helpers let the engine
hand it what it already has.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from ...model.nodepool import node_pool
from ...model.objects import Node, Pod
from .cost import pool_price_per_hour
from .state import NodeGroup, NodeState, PodState


def node_group(raw_pool: dict[str, Any]) -> NodeGroup | None:
    """The node group of a ``NodePool`` document with ``spec.autoscaling`` (None without one).

    Its template is node ``<pool>-0`` renamed ``<pool>-template``; it is a GPU
    node when the pool has GPUs, since a GPU pool's nodes carry the GPU label
    cluster-autoscaler looks for even before (or without, under MIG mixed)
    advertising ``nvidia.com/gpu``.
    """
    pool = node_pool(raw_pool)
    if pool.autoscaling is None:
        return None
    first = pool.node(0)
    name = f"{pool.name}-template"
    template = dataclasses.replace(first, name=name, labels={**first.labels, "kubernetes.io/hostname": name})
    scaling = pool.autoscaling
    return NodeGroup(pool.name, scaling.max_count, scaling.min_count, scaling.provisioning_delay,
                     dict(first.allocatable), pool_price_per_hour(raw_pool), _has_gpus(first), template)


def pod_state(pod: Pod) -> PodState:
    return PodState(pod.namespace, pod.name, dict(pod.requests), pod.owner_kind, dict(pod.annotations), pod,
                    pod.owner_name, pod.priority_class_name, pod.preemption_policy)


def node_state(node: Node, pods: Iterable[Pod | PodState], created_at: float = 0.0,
               last_pod_event: float | None = None) -> NodeState:
    """``node`` with the pods bound to it (Running or starting; not finished ones)."""
    states = [p if isinstance(p, PodState) else pod_state(p) for p in pods]
    return NodeState(node.name, node.pool, dict(node.allocatable), states, created_at, _has_gpus(node),
                     dict(node.annotations), last_pod_event, node, node.unschedulable)


def _has_gpus(node: Node) -> bool:
    """The GPU label a cloud puts on GPU nodes: here GPU Feature Discovery's ``nvidia.com/gpu.present``
    (set on every node of a pool with GPUs), else advertised ``nvidia.com/gpu``."""
    return node.labels.get("nvidia.com/gpu.present") == "true" or node.allocatable.get("nvidia.com/gpu", 0) > 0
