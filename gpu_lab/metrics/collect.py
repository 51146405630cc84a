"""``GpuUse`` records from a session: who holds which device, read off ``pods()`` and node labels.

The session gives each running pod's device IDs per resource and each node's
GFD labels (model, GPU count, sharing strategy, replicas); the pods' own
manifests give the annotations and the container names. Device IDs follow the
fake device plugin (``gpu_lab.gpus.labels``): ``GPU-<uuid>[::<replica>]``
for GPU ``g`` of a node is ``gpu_uuids(node, count)[g]``, and a MIG device is
``MIG-<stable_uid(node, g, profile, first memory slice)>``, so both lead back
to the GPU index that DCGM's ``gpu`` label shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import Any

from ..errors import GpuLabError
from ..gpus.labels import gpu_uuids
from ..gpus.mig import MEMORY_SLICES
from ..gpus.pricing import model_of_product
from ..names import GPU_RESOURCE as GPU
from ..names import stable_uid
from .annotations import pod_name
from .records import GpuNode, GpuUse

MIG_PREFIX = "nvidia.com/mig-"


def _manifest_parts(obj: Any) -> tuple[dict, list[tuple[str, dict]]]:
    """(annotations, [(container, limits)]) of a manifest dict or a ``gpu_lab.model.objects.Pod``."""
    if obj is None:
        return {}, []
    if isinstance(obj, Mapping):
        meta = obj.get("metadata") or {}
        spec = obj.get("spec") or {}
        cons = [(c.get("name", ""), ((c.get("resources") or {}).get("limits") or {}))
                for c in spec.get("containers") or []]
        return dict(meta.get("annotations") or {}), cons
    return dict(getattr(obj, "annotations", {}) or {}), [
        (c.name, dict(c.limits)) for c in getattr(obj, "containers", [])]


@cache
def _mig_index(node: str, count: int, profile: str, device: str) -> int | None:
    for g in range(count):
        for start in range(MEMORY_SLICES):
            if f"MIG-{stable_uid(node, str(g), profile, str(start))}" == device:
                return g
    return None


def _gpu_index(node: str, count: int, resource: str, device: str, mig_profile: str | None) -> int:
    if mig_profile is not None:
        g = _mig_index(node, count, mig_profile, device.split("::", 1)[0])
    else:
        ids = gpu_uuids(node, count)
        base = device.split("::", 1)[0]
        g = ids.index(base) if base in ids else None
    if g is None:
        raise GpuLabError(f"node {node}: cannot tell which GPU holds {resource} device {device} "
                          "(not an ID gpu-lab's device plugin hands out)")
    return g


def gpu_uses(lab: Any, manifests: Mapping[str, Any] | None = None, *,
             hours: Mapping[str, float] | None = None) -> list[GpuUse]:
    """One ``GpuUse`` per (running pod, device) of ``lab`` (a ``Session``).

    ``manifests``: ``{pod: manifest}`` keyed ``namespace/name`` (bare name in
    ``default``), each a manifest dict or a ``gpu_lab.model.objects.Pod``; it
    gives the annotations and the container holding the devices (a pod without
    one declares nothing and its container is ``""``). Default: the pods the
    session itself holds. ``hours``: ``{pod: hours
    held}`` (e.g. from ``lab.timeline()``); default 1 hour each.
    """
    if manifests is None:  # the session's own pods: their annotations and containers
        manifests = lab._pod_manifests()
    hours = hours or {}
    pods = lab.pods()
    running = pods[pods["node"].notna() & (pods["phase"] == "Running")]
    labels_of: dict[str, dict] = {}
    out: list[GpuUse] = []
    for p in running.to_dict("records"):
        devices = p["devices"] if isinstance(p["devices"], dict) else {}
        devices = {r: ids for r, ids in devices.items() if r.startswith("nvidia.com/") and ids}
        if not devices:
            continue
        node = p["node"]
        if node not in labels_of:
            labels_of[node] = dict(lab.describe_node(node).labels or {})
        labels = labels_of[node]
        product = labels.get(f"{GPU}.product", "")
        model = model_of_product(product)
        if model is None:
            raise GpuLabError(f"node {node}: GPU model {product or '(no nvidia.com/gpu.product label)'} "
                              "is not in gpu-lab's catalog")
        count = int(labels.get(f"{GPU}.count", 0) or 0)
        key = pod_name(p["namespace"], p["name"])
        annotations, containers = _manifest_parts(manifests.get(key, manifests.get(
            f"{p['namespace']}/{p['name']}")))
        requested = sum(len(ids) for ids in devices.values())
        # Hand each container its own devices, in spec order, by its limits per resource.
        owners: list[tuple[str, str]] = []  # (resource, container) per device, in device order
        for resource, ids in devices.items():
            names = [c for c, lim in containers for _ in range(int(str(lim.get(resource, 0)) or 0))]
            owners += [(resource, names[i] if i < len(names) else (names[-1] if names else ""))
                       for i in range(len(ids))]
        flat = [(r, d) for r, ids in devices.items() for d in ids]
        for (resource, device), (_, container) in zip(flat, owners):
            if resource.startswith(MIG_PREFIX):
                profile = resource[len(MIG_PREFIX):]
            elif "-MIG-" in product:  # single strategy: nvidia.com/gpu is a MIG instance
                profile = product.split("-MIG-", 1)[1]
            else:
                profile = None
            # Resource names and GFD spell "+me" as ".me"; the device IDs use the profile's own name.
            profile = profile.replace(".me", "+me") if profile else None
            rlabel = resource if profile is None or resource.startswith(MIG_PREFIX) else GPU
            strategy = labels.get(f"{rlabel}.sharing-strategy", "none")
            sharing = "mig" if profile else (strategy if strategy in ("time-slicing", "mps") else "none")
            replicas = max(int(labels.get(f"{rlabel}.replicas", 1) or 1), 1) if sharing != "mig" else 1
            out.append(GpuUse.from_annotations(
                annotations, namespace=p["namespace"], pod=p["name"], container=container, node=node,
                model=model.name, gpu=_gpu_index(node, count, resource, device, profile),
                device_id=device, requested=requested, sharing=sharing, replicas=replicas,
                mig_profile=profile,
                hours=float(hours.get(key, 1.0))))
    return out


def gpu_nodes(lab: Any) -> list[GpuNode]:
    """Every GPU node of ``lab`` with its physical GPUs (``nvidia.com/gpu.count``), catalog models only."""
    out = []
    for name in lab.nodes()["name"]:
        desc = lab.describe_node(name)
        labels = dict(desc.labels or {})
        model = model_of_product(labels.get(f"{GPU}.product"))
        count = int(labels.get(f"{GPU}.count", 0) or 0)
        if model is not None and count:
            # MIG on every GPU: no whole nvidia.com/gpu left (mixed), or GFD's -MIG- product (single).
            # A node with MIG on only some GPUs is left as whole GPUs: which ones is not in the labels.
            whole = int(str((desc.capacity or {}).get(GPU, 0)) or 0)
            mig = "-MIG-" in labels.get(f"{GPU}.product", "") or (
                whole == 0 and any(r.startswith(MIG_PREFIX) for r in (desc.capacity or {})))
            out.append(GpuNode(name, model.name, count, mig))
    return out
