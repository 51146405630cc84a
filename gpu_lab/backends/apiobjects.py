"""API objects (the API server's JSON, as dicts) read into the shared table rows.

Every real-cluster backend (``local``, ``kubeconfig``) reads pods and nodes this way, so
both answer alike: requests are parsed by the simulator's own admission code, quantities
like the simulator's, and a pod's devices come from the node agent's annotation.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from ..errors import GpuLabError
from ..model.nodepool import node_from_manifest
from ..model.parse import internal_resources, parse_pod
from ..names import DEVICES_ANNOTATION, POOL_LABEL, TERMINAL_PHASES
from .tables import NodeRow, PodRow


def condition(obj: dict[str, Any], kind: str) -> dict[str, Any]:
    """The object's status condition of type ``kind`` ({} when it has none)."""
    return next((c for c in (obj.get("status") or {}).get("conditions") or []
                 if c.get("type") == kind), {})


def device_allocatable(node: dict) -> dict[str, int]:
    """A Node's allocatable of NVIDIA's device resources (``nvidia.com/*``)."""
    alloc = (node.get("status") or {}).get("allocatable") or {}
    return {k: int(v) for k, v in alloc.items() if k.startswith("nvidia.com/")}


def pod_row(obj: dict) -> PodRow:
    """An API pod as a table row (requests parsed by the simulator's own admission code)."""
    meta, spec, status = obj["metadata"], obj.get("spec") or {}, obj.get("status") or {}
    classes = {}
    if spec.get("priorityClassName"):
        classes[spec["priorityClassName"]] = {
            "value": spec.get("priority", 0),
            "preemptionPolicy": spec.get("preemptionPolicy"),
        }
    pod = parse_pod(obj, priority_classes=classes)
    devices: dict[str, list[str]] = {}
    for per in json.loads((meta.get("annotations") or {}).get(DEVICES_ANNOTATION) or "{}").values():
        for resource, ids in per.items():
            devices.setdefault(resource, []).extend(ids)
    scheduled = condition(obj, "PodScheduled")
    phase = status.get("phase") or "Pending"
    message = status.get("message") or ""
    reason = status.get("reason") or ""
    if phase == "Pending" and scheduled.get("status") == "False":
        message, reason = scheduled.get("message", ""), scheduled.get("reason", "")
    return PodRow(
        meta.get("namespace", "default"),
        meta["name"],
        spec.get("nodeName") or None,
        phase,
        spec.get("priority", 0),
        dict(pod.requests),
        devices,
        status.get("nominatedNodeName"),
        reason,
        message,
    )


def pod_requests(pod: dict) -> dict[str, int]:
    """What a pod requests (internal units), the scheduler's way; tolerant of pods the
    simulator's admission would refuse (they exist on a real cluster all the same)."""
    try:
        return dict(pod_row(pod).requests)
    except (GpuLabError, KeyError, TypeError, ValueError):
        pass
    spec = pod.get("spec") or {}

    def requests(c: dict) -> dict[str, int]:
        res = c.get("resources") or {}
        merged = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        try:
            return internal_resources(merged)
        except (GpuLabError, ValueError):
            return {}

    total: dict[str, int] = {}
    for c in spec.get("containers") or []:
        for r, v in requests(c).items():
            total[r] = total.get(r, 0) + v
    for c in spec.get("initContainers") or []:
        for r, v in requests(c).items():
            total[r] = max(total.get(r, 0), v)
    try:
        for r, v in internal_resources(spec.get("overhead")).items():
            total[r] = total.get(r, 0) + v
    except (GpuLabError, ValueError):
        pass
    return {r: v for r, v in total.items() if v}


def requested_by_node(pods: Iterable[dict]) -> dict[str, dict[str, int]]:
    """Sum of the requests of the non-terminal pods bound to each node (plus ``pods``)."""
    out: dict[str, dict[str, int]] = {}
    for p in pods:
        node = (p.get("spec") or {}).get("nodeName")
        if not node or (p.get("status") or {}).get("phase") in TERMINAL_PHASES:
            continue
        acc = out.setdefault(node, {"pods": 0})
        acc["pods"] += 1
        for r, v in pod_requests(p).items():
            acc[r] = acc.get(r, 0) + v
    return out


def node_row(node: dict, requested: dict[str, int] | None = None) -> NodeRow:
    """An API Node as the shared table row (quantities parsed like the simulator's)."""
    status = node.get("status") or {}
    parsed = node_from_manifest(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": node.get("metadata") or {},
            "spec": node.get("spec") or {},
            "status": {
                "capacity": status.get("capacity") or {},
                "allocatable": status.get("allocatable") or {},
            },
        }
    )
    return NodeRow(
        parsed.name,
        parsed.labels.get(POOL_LABEL),
        parsed.labels,
        parsed.taints,
        parsed.unschedulable,
        parsed.capacity,
        parsed.allocatable,
        dict(requested or {"pods": 0}),
    )


def node_rows(nodes: Iterable[dict], pods: Iterable[dict]) -> list[NodeRow]:
    """``nodes`` as table rows, each with what the non-terminal ``pods`` bound there
    request."""
    requested = requested_by_node(pods)
    return [node_row(n, requested.get((n.get("metadata") or {}).get("name", ""), {"pods": 0}))
            for n in nodes]


__all__ = ["condition", "node_row", "node_rows", "pod_requests", "pod_row", "requested_by_node"]
