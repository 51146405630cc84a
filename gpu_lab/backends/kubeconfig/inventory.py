"""What GPUs an existing cluster has, read (never written) through a kubeconfig.

``inventory("~/.kube/config")`` lists the cluster's GPU nodes (any node with an
``nvidia.com/*`` resource in its capacity or allocatable, or an ``nvidia.com/*`` label
written by GPU Feature Discovery, the device plugin, the MIG manager or the GPU
Operator) and answers in three tables:

* ``nodes``: the shared node table (:func:`gpu_lab.backends.tables.nodes_frame`), the
  same columns every backend returns: allocatable and requested per resource.
* ``gpus``: one row per GPU node: GFD's product (and the catalog model it names),
  count, memory, family, compute capability, driver and CUDA versions, sharing
  strategy and replicas, MIG capability, strategy, ``mig.config`` and its state, and a
  one-line MIG summary (``mixed: 16x 1g.5gb, 8x 2g.10gb``).
* ``resources``: one row per (node, NVIDIA resource): capacity, allocatable,
  requested by the pods bound there, free.

Only GET and LIST requests are sent: nodes, pods (to add up what is requested; when
RBAC forbids listing pods cluster-wide the ``requested`` figures are left at 0 and a
note says so) and ``/version``.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from ...errors import GpuLabError
from ...gpus.catalog import get_model
from ...kube import ApiError, KubeClient
from ...names import GPU_RESOURCE
from ..apiobjects import condition, node_row, requested_by_node
from ..tables import NodeRow, nodes_frame
from . import OWNED_LABEL
from .connect import open_client

NVIDIA = "nvidia.com/"
MIG_RESOURCE_PREFIX = "nvidia.com/mig-"
_ACTIVE_PODS = "status.phase!=Succeeded,status.phase!=Failed"

GPU_COLUMNS = [
    "node",
    "ready",
    "unschedulable",
    "owned",
    "product",
    "model",
    "gpus",
    "memory_mib",
    "family",
    "compute",
    "driver",
    "cuda",
    "sharing_strategy",
    "replicas",
    "mig_capable",
    "mig_strategy",
    "mig_config",
    "mig_config_state",
    "mig",
    "allocatable",
    "labels",
]
RESOURCE_COLUMNS = ["node", "resource", "capacity", "allocatable", "requested", "free"]


# ------------------------------------------------------------------ reading one node


def _meta(obj: dict) -> dict:
    return obj.get("metadata") or {}


def _labels(obj: dict) -> dict[str, str]:
    return dict(_meta(obj).get("labels") or {})


def is_gpu_node(node: dict) -> bool:
    """Whether a v1 Node looks like an NVIDIA GPU node: an ``nvidia.com/*`` resource in
    capacity or allocatable, or an ``nvidia.com/*`` label (GFD, GPU Operator, MIG manager)."""
    status = node.get("status") or {}
    resources = {*(status.get("capacity") or {}), *(status.get("allocatable") or {})}
    return any(r.startswith(NVIDIA) for r in resources) or any(
        k.startswith(NVIDIA) for k in _labels(node)
    )


def _ready(node: dict) -> bool | None:
    ready = condition(node, "Ready")
    return ready.get("status") == "True" if ready else None


# ------------------------------------------------------------------ GFD labels


def catalog_model(product: str | None) -> str | None:
    """The catalog model a ``nvidia.com/gpu.product`` label names (``-SHARED`` and
    ``-MIG-<profile>`` suffixes ignored), or None when the catalog does not know it."""
    if not product:
        return None
    base = product.split("-MIG-", 1)[0]
    base = base[: -len("-SHARED")] if base.endswith("-SHARED") else base
    try:
        return get_model(base).name
    except GpuLabError:
        return None


def _version(labels: dict[str, str], *prefixes: str, parts=("major", "minor", "rev")) -> str | None:
    """``550.54.15`` from GFD's ``<prefix>.full`` or ``.major``/``.minor``/``.rev`` labels
    (newer GFD: ``cuda.driver-version.*``, ``.revision``; older: ``cuda.driver.*``)."""
    for prefix in prefixes:
        if labels.get(f"{prefix}.full"):
            return labels[f"{prefix}.full"]
        found = []
        for part in parts:
            value = labels.get(f"{prefix}.{part}")
            if value is None and part == "rev":
                value = labels.get(f"{prefix}.revision")
            if value is None:
                break
            found.append(value)
        if found:
            return ".".join(found)
    return None


def mig_summary(labels: dict[str, str], allocatable: dict[str, int]) -> str:
    """One line on a node's MIG state, from what GFD, the device plugin and the MIG
    manager publish: ``not capable``, ``disabled``, ``single: 56x 1g.10gb``,
    ``mixed: 16x 1g.5gb, 8x 3g.20gb``; a ``mig.config`` not yet applied is appended."""
    strategy = labels.get("nvidia.com/mig.strategy", "none")
    product = labels.get("nvidia.com/gpu.product", "")
    mig = {
        r[len(MIG_RESOURCE_PREFIX) :]: n
        for r, n in sorted(allocatable.items())
        if r.startswith(MIG_RESOURCE_PREFIX)
    }
    if strategy == "single" and "-MIG-" in product:
        profile = product.split("-MIG-", 1)[1]
        text = (
            "single: invalid MIG configuration"
            if profile == "INVALID"
            else f"single: {allocatable.get(GPU_RESOURCE, 0)}x {profile}"
        )
    elif mig:
        text = f"{strategy}: " + ", ".join(f"{n}x {p}" for p, n in mig.items())
    elif labels.get("nvidia.com/mig.capable") == "false":
        text = "not capable"
    elif labels.get("nvidia.com/mig.capable") == "true":
        text = "disabled" if strategy == "none" else f"{strategy}: no MIG devices"
    else:
        text = "unknown"
    config, state = labels.get("nvidia.com/mig.config"), labels.get("nvidia.com/mig.config.state")
    if config and state and state != "success":
        text += f" (mig.config={config}: {state})"
    return text


def gpu_summary(node: dict, row: NodeRow) -> dict[str, Any]:
    """The ``gpus`` table's row for one GPU node."""
    labels = row.labels
    gpu_labels = {k: v for k, v in sorted(labels.items()) if k.startswith(NVIDIA)}
    product = labels.get("nvidia.com/gpu.product")
    major, minor = (
        labels.get("nvidia.com/gpu.compute.major"),
        labels.get("nvidia.com/gpu.compute.minor"),
    )
    count = labels.get("nvidia.com/gpu.count")
    memory = labels.get("nvidia.com/gpu.memory")
    replicas = labels.get("nvidia.com/gpu.replicas")
    return {
        "node": row.name,
        "ready": _ready(node),
        "unschedulable": row.unschedulable,
        "owned": labels.get(OWNED_LABEL) == "true",  # gpu-lab may change this node
        "product": product,
        "model": catalog_model(product),
        "gpus": int(count) if count and count.isdigit() else None,
        "memory_mib": int(memory) if memory and memory.isdigit() else None,
        "family": labels.get("nvidia.com/gpu.family"),
        "compute": f"{major}.{minor}" if major is not None and minor is not None else None,
        "driver": _version(labels, "nvidia.com/cuda.driver-version", "nvidia.com/cuda.driver"),
        "cuda": _version(
            labels,
            "nvidia.com/cuda.runtime-version",
            "nvidia.com/cuda.runtime",
            parts=("major", "minor"),
        ),
        "sharing_strategy": labels.get("nvidia.com/gpu.sharing-strategy"),
        "replicas": int(replicas) if replicas and replicas.isdigit() else None,
        "mig_capable": {"true": True, "false": False}.get(labels.get("nvidia.com/mig.capable", "")),
        "mig_strategy": labels.get("nvidia.com/mig.strategy"),
        "mig_config": labels.get("nvidia.com/mig.config"),
        "mig_config_state": labels.get("nvidia.com/mig.config.state"),
        "mig": mig_summary(labels, row.allocatable),
        "allocatable": {r: n for r, n in sorted(row.allocatable.items()) if r.startswith(NVIDIA)},
        "labels": gpu_labels,
    }


def resource_rows(row: NodeRow) -> list[dict[str, Any]]:
    names = sorted(
        r for r in {*row.capacity, *row.allocatable, *row.requested} if r.startswith(NVIDIA)
    )
    return [
        {
            "node": row.name,
            "resource": r,
            "capacity": row.capacity.get(r, 0),
            "allocatable": row.allocatable.get(r, 0),
            "requested": row.requested.get(r, 0),
            "free": row.allocatable.get(r, 0) - row.requested.get(r, 0),
        }
        for r in names
    ]


# ------------------------------------------------------------------ the inventory


@dataclass
class Inventory:
    """A read-only snapshot of a cluster's GPU nodes."""

    server: str
    version: str | None
    nodes: pd.DataFrame  # tables.nodes_frame of the GPU nodes
    gpus: pd.DataFrame  # one row per GPU node (GPU_COLUMNS)
    resources: pd.DataFrame  # one row per (node, nvidia.com/* resource) (RESOURCE_COLUMNS)
    rows: list[NodeRow] = field(default_factory=list)
    total_nodes: int = 0
    notes: list[str] = field(default_factory=list)

    @property
    def gpu_nodes(self) -> list[str]:
        return [r.name for r in self.rows]

    def to_dict(self) -> dict[str, Any]:
        return {
            "server": self.server,
            "version": self.version,
            "nodes": self.total_nodes,
            # through JSON: plain bools/ints/None instead of numpy scalars and NaN
            "gpu_nodes": json.loads(self.gpus.to_json(orient="records")),
            "resources": json.loads(self.resources.to_json(orient="records")),
            "notes": list(self.notes),
        }

    def __str__(self) -> str:
        head = (
            f"{self.server} (Kubernetes {self.version or '?'}): {len(self.rows)} GPU node(s) "
            f"of {self.total_nodes}"
        )
        if self.gpus.empty:
            return "\n".join([head, *self.notes])
        cols = [
            "node",
            "ready",
            "product",
            "gpus",
            "memory_mib",
            "sharing_strategy",
            "replicas",
            "mig",
        ]
        parts = [head, self.gpus[cols].to_string(index=False)]
        if not self.resources.empty:
            parts += ["", self.resources.to_string(index=False)]
        return "\n".join(parts + self.notes)


def read_inventory(client: KubeClient, *, all_nodes: bool = False) -> Inventory:
    """The GPU inventory of the cluster ``client`` talks to (GET/LIST requests only).

    ``all_nodes=True`` keeps nodes without GPUs in the ``nodes`` table."""
    notes: list[str] = []
    try:
        version = client.server_version().get("gitVersion")
    except ApiError:
        version = None
    items = client.list("Node")["items"]
    try:
        pods = client.list("Pod", field_selector=_ACTIVE_PODS)["items"]
    except ApiError as exc:
        if exc.code != 403:
            raise
        pods = []
        notes.append(f"note: cannot list pods cluster-wide ({exc}); requested shows 0")
    requested = requested_by_node(pods)
    rows, gpus, resources, kept = [], [], [], []
    for node in sorted(items, key=lambda n: _meta(n).get("name", "")):
        gpu = is_gpu_node(node)
        if not (gpu or all_nodes):
            continue
        name = _meta(node).get("name", "")
        try:
            row = node_row(node, requested.get(name, {"pods": 0}))
        except GpuLabError as exc:  # a node the simulator's parser cannot read: say so
            notes.append(f"note: node {name} left out: {exc}")
            continue
        kept.append(row)
        if gpu:
            rows.append(row)
            gpus.append(gpu_summary(node, row))
            resources += resource_rows(row)
    if not items:
        notes.append("note: the cluster has no nodes")
    elif not rows:
        notes.append(
            "note: no node advertises an nvidia.com/* resource or label "
            "(is NVIDIA's device plugin or GPU Operator installed?)"
        )
    return Inventory(
        server=client.server,
        version=version,
        nodes=nodes_frame(kept),
        gpus=pd.DataFrame(gpus, columns=GPU_COLUMNS),
        resources=pd.DataFrame(resources, columns=RESOURCE_COLUMNS),
        rows=rows,
        total_nodes=len(items),
        notes=notes,
    )


def inventory(
    kubeconfig: Path | str | None = None, context: str | None = None, *, all_nodes: bool = False
) -> Inventory:
    """Read the GPU inventory of the cluster a kubeconfig points at (default: ``$KUBECONFIG``
    or ``~/.kube/config``; ``context`` default: its current-context). Changes nothing."""
    with open_client(kubeconfig, context) as client:
        return read_inventory(client, all_nodes=all_nodes)


def main(argv: list[str] | None = None) -> int:
    """``python -m gpu_lab.backends.kubeconfig.inventory``: print a cluster's GPU inventory."""
    import argparse

    p = argparse.ArgumentParser(
        prog="gpu-lab inventory",
        description="Read-only inventory of the GPU nodes of an existing cluster.",
    )
    p.add_argument("--kubeconfig", help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context (default: its current-context)")
    p.add_argument("--all-nodes", action="store_true", help="keep nodes without GPUs in the table")
    p.add_argument("--json", action="store_true", help="print JSON")
    args = p.parse_args(argv)
    try:
        inv = inventory(args.kubeconfig, args.context, all_nodes=args.all_nodes)
    except GpuLabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps(inv.to_dict(), indent=2, default=str) if args.json else inv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
