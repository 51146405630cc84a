"""The tables and the JSON document every backend returns, built from plain rows.

A backend only has to say, per pod and per node, what it knows (as
``PodRow``/``NodeRow``); the columns, units and the ``gpu-lab run --json``
shape are decided here once, so the simulator and a real cluster always
answer in the same form and can be compared cell by cell.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..model.objects import Taint
from ..model.quantity import format_quantity

POD_COLUMNS = ["namespace", "name", "node", "phase", "priority", "gpus", "requests", "devices",
               "nominated_node", "reason", "message", "start", "end"]


NODE_COLUMNS = ["name", "pool", "product", "pods", "cpu_requested", "cpu_allocatable", "cpu_capacity",
                "memory_requested_gib", "memory_allocatable_gib", "memory_capacity_gib", "unschedulable",
                "taints"]


@dataclass
class PodRow:
    namespace: str
    name: str
    node: str | None
    phase: str
    priority: int = 0
    requests: dict[str, int] = field(default_factory=dict)  # internal units (cpu milli, bytes)
    devices: dict[str, list[str]] = field(default_factory=dict)
    nominated_node: str | None = None
    reason: str = ""
    message: str = ""
    start: float | None = None
    end: float | None = None


@dataclass
class NodeRow:
    name: str
    pool: str | None
    labels: dict[str, str]
    taints: list[Taint]
    unschedulable: bool
    capacity: dict[str, int]
    allocatable: dict[str, int]
    requested: dict[str, int]


def _quantities(values: dict[str, int]) -> dict[str, str]:
    return {k: format_quantity(k, v) for k, v in values.items()}


def pods_frame(rows: list[PodRow]) -> pd.DataFrame:
    data = [{
        "namespace": r.namespace, "name": r.name, "node": r.node, "phase": r.phase,
        "priority": r.priority, "gpus": sum(v for k, v in r.requests.items() if k.startswith("nvidia.com/")),
        "requests": _quantities(r.requests), "devices": r.devices, "nominated_node": r.nominated_node,
        "reason": r.reason, "message": r.message, "start": r.start, "end": r.end,
    } for r in rows]
    df = pd.DataFrame(data, columns=POD_COLUMNS)
    # keep None (not NaN) for pods without a node, whatever pandas' string default is
    for c in ("node", "nominated_node"):
        df[c] = pd.Series([d[c] for d in data], dtype=object, index=df.index)
    return df


def nodes_frame(rows: list[NodeRow]) -> pd.DataFrame:
    gpu_resources = sorted({r for n in rows for r in (*n.capacity, *n.allocatable, *n.requested)
                            if r.startswith("nvidia.com/")})
    data = []
    for n in rows:
        row: dict[str, Any] = {
            "name": n.name, "pool": n.pool, "product": n.labels.get("nvidia.com/gpu.product"),
            "pods": n.requested.get("pods", 0),
            "cpu_requested": n.requested.get("cpu", 0) / 1000,
            "cpu_allocatable": n.allocatable.get("cpu", 0) / 1000,
            "cpu_capacity": n.capacity.get("cpu", 0) / 1000,
            "memory_requested_gib": n.requested.get("memory", 0) / 2**30,
            "memory_allocatable_gib": n.allocatable.get("memory", 0) / 2**30,
            "memory_capacity_gib": n.capacity.get("memory", 0) / 2**30,
        }
        # Capacity beside allocatable: a gap between them is how a dead device plugin shows.
        for r in gpu_resources:
            row[f"{r} requested"] = n.requested.get(r, 0)
            row[f"{r} allocatable"] = n.allocatable.get(r, 0)
            row[f"{r} capacity"] = n.capacity.get(r, 0)
        row["unschedulable"] = n.unschedulable
        row["taints"] = ", ".join(f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"
                                  for t in n.taints)
        data.append(row)
    # An empty cluster still has the columns, so code reading them needs no special case.
    return pd.DataFrame(data, columns=None if data else NODE_COLUMNS)


def document(backend: str, pods: list[PodRow], nodes: list[NodeRow]) -> dict[str, Any]:
    """The ``gpu-lab run --json`` contract."""
    return {
        "backend": backend,
        "pods": [{"namespace": p.namespace, "name": p.name, "node": p.node, "phase": p.phase,
                  "message": p.message, "requests": _quantities(p.requests), "devices": p.devices}
                 for p in pods],
        "nodes": [{"name": n.name, "labels": dict(n.labels), "capacity": _quantities(n.capacity),
                   "allocatable": _quantities(n.allocatable),
                   "requested": _quantities({k: v for k, v in n.requested.items()
                                             if k in n.allocatable or v})}
                  for n in nodes],
    }
