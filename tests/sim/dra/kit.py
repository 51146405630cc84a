"""Builders for the DRA tests: NodePools with NVIDIA's DRA driver, claims, templates, pods.

``SCENARIOS`` are the YAML files the local backend's DRA suite applies to the real control
plane (tests/backends/dra): the sim tests apply the same files and expect the same words.
"""

from __future__ import annotations

from pathlib import Path

import yaml

import gpu_lab
from gpu_lab.model.nodepool import expand_node_pool
from gpu_lab.sim.dra.state import dra_state

SCENARIOS = Path(__file__).parents[2] / "backends" / "dra"
AV = "resource.k8s.io/v1"
PREEMPTION = "preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling."
CANNOT = "0/{n} nodes are available: {n} cannot allocate all claims. " + PREEMPTION


def pool(name: str, model: str, gpus: int, count: int = 1, **dra) -> dict:
    return {"apiVersion": "gpulab.dev/v1alpha1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"count": count, "gpu": {"model": model, "count": gpus}, "dra": dict(dra)}}


def node_of(pool_doc: dict, index: int = 0):
    return expand_node_pool(pool_doc)[index]


def exactly(name: str, cls: str = "gpu.nvidia.com", count: int | None = None, selectors=(), **extra) -> dict:
    body = {"deviceClassName": cls, **extra}
    if count is not None:
        body["count"] = count
    if selectors:
        body["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    return {"name": name, "exactly": body}


def profile(p: str) -> str:
    return f"device.attributes['gpu.nvidia.com'].profile == '{p}'"


def template(name: str, requests: list[dict], constraints: list[dict] | None = None) -> dict:
    devices = {"requests": requests, **({"constraints": constraints} if constraints else {})}
    return {"apiVersion": AV, "kind": "ResourceClaimTemplate", "metadata": {"name": name},
            "spec": {"spec": {"devices": devices}}}


def claim(name: str, requests: list[dict], constraints: list[dict] | None = None) -> dict:
    devices = {"requests": requests, **({"constraints": constraints} if constraints else {})}
    return {"apiVersion": AV, "kind": "ResourceClaim", "metadata": {"name": name}, "spec": {"devices": devices}}


def pod(name: str, *, template_name: str | None = None, claim_name: str | None = None, ref: str = "gpu",
        duration: str | None = None) -> dict:
    entry = {"name": ref}
    if template_name:
        entry["resourceClaimTemplateName"] = template_name
    if claim_name:
        entry["resourceClaimName"] = claim_name
    meta = {"name": name}
    if duration:
        meta["annotations"] = {"gpulab.dev/duration": duration}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {
        "resourceClaims": [entry],
        "containers": [{"name": "c", "image": "app", "resources": {"claims": [{"name": ref}]}}]}}


def dump(docs) -> str:
    return yaml.safe_dump_all(docs, sort_keys=False)


def lab_with(*sources) -> gpu_lab.Session:
    lab = gpu_lab.connect("sim", seed=0)
    for src in sources:
        lab.apply(SCENARIOS / f"{src}.yaml" if isinstance(src, str) and "\n" not in src else src)
    return lab


def by_name(pods):
    return pods.set_index("name").sort_index()


def state(lab):
    return dra_state(lab._sim.cluster.snapshot)  # noqa: SLF001 (the session's DRA objects)


def claim_of(lab, pod_name: str, namespace: str = "default"):
    """The ResourceClaim reserved for a pod."""
    key = f"{namespace}/{pod_name}"
    (got,) = [c for c in state(lab).claims.values() if key in c.reserved_for]
    return got


def allocated(c) -> list[tuple[str, str, str]]:
    """(request, pool, device) of each device a claim got."""
    return [(r.request, r.pool, r.device) for r in c.allocation.results]
