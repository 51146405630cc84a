"""What goes into the kind cluster once it runs: the fake device plugin and the node patches.

* ``Namespace`` ``gpu-lab-system``.
* ``ConfigMap`` ``gpu-lab-device-plugin-configs``: NVIDIA's device-plugin config per pool,
  one key per pool, the way NVIDIA's Helm chart turns its ``config.map`` values into a
  ConfigMap (each value a whole ``version: v1`` config file). A pool without
  ``devicePlugin`` gets ``version: v1``, which means NVIDIA's defaults.
* ``ConfigMap`` ``gpu-lab-mig-parted-config`` (only when a pool brings its own mig-parted
  file, ``spec.mig.migParted``): one key per such pool, like the GPU Operator's
  ``default-mig-parted-config``.
* One ``DaemonSet`` per GPU pool, ``gpu-lab-device-plugin-<pool>``, on the nodes labelled
  ``gpulab.dev/pool=<pool>``, running ``gpu-lab device-plugin`` with the pool's model, GPU
  count, config and MIG layout against the kubelet's ``/var/lib/kubelet/device-plugins``
  (a hostPath), so the real kubelet registers it. ``NODE_NAME`` comes from
  ``spec.nodeName``; the plugin derives its GPU UUIDs from it. It tolerates every taint
  (a GPU pool's taints must not keep its own device plugin away) and runs at
  ``system-node-critical`` as NVIDIA's does.
* No RBAC: the plugin talks to the kubelet over its unix socket, never to the API server
  (``automountServiceAccountToken: false``).
* ``NodePatch`` per worker: the labels the kind config could not carry (GPU Feature
  Discovery's, from the scenario's Node record) and the taints, addressed by the
  ``gpulab.dev/node`` label.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import yaml

from ...deviceplugin.plugin import DEFAULT_PLUGIN_DIR
from ...model.nodepool import MIG_CONFIG_LABEL, POOL_LABEL
from ...model.objects import Taint
from ...names import VERSION
from .config import Worker

NAMESPACE = "gpu-lab-system"
IMAGE_REPOSITORY = "gpu-lab/fake-device-plugin"
IMAGE = f"{IMAGE_REPOSITORY}:{VERSION}"
APP = "gpu-lab-device-plugin"
CONFIG_MAP = "gpu-lab-device-plugin-configs"
MIG_PARTED_CONFIG_MAP = "gpu-lab-mig-parted-config"
CONFIG_DIR = "/etc/gpu-lab/device-plugin"
MIG_PARTED_DIR = "/etc/gpu-lab/mig-parted"
CONFIG_FILE = "config.yaml"
DEFAULT_CONFIG = {"version": "v1"}
PRIORITY_CLASS = "system-node-critical"
#: on a node whose device plugin gpu-lab stopped (``KindSession.kill_plugin``)
PLUGIN_STOPPED_LABEL = "gpulab.dev/device-plugin-stopped"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpu-lab"}


@dataclass(frozen=True)
class GpuPool:
    """What the device plugin of one pool needs to know."""

    name: str
    model: str
    gpus: int
    config: dict  # NVIDIA's device-plugin config, verbatim (or DEFAULT_CONFIG)
    mig_config: str | None  # the mig-parted config name (nvidia.com/mig.config)
    mig_parted: dict | None  # the pool's own mig-parted file, if any
    resources: dict[str, int]  # what each node advertises, e.g. {"nvidia.com/gpu": 8}
    numa_nodes: int | None = None  # spec.gpu.numaNodes, when the pool sets it


def gpu_pools(workers: list[Worker]) -> list[GpuPool]:
    """The GPU pools among the workers, in scenario order (one entry per pool)."""
    pools: dict[str, GpuPool] = {}
    for w in workers:
        rec = w.record
        if w.pool is None or w.pool in pools or rec is None:
            continue
        spec = rec.raw.get("nodePool") or {}
        gpu = spec.get("gpu") or {}
        if not gpu.get("model") or not gpu.get("count"):
            continue
        mig = spec.get("mig") or {}
        resources = {
            r: n for r, n in sorted(rec.allocatable.items()) if r.startswith("nvidia.com/") and n > 0
        }
        pools[w.pool] = GpuPool(
            name=w.pool,
            model=str(gpu["model"]),
            gpus=int(gpu["count"]),
            config=copy.deepcopy(spec.get("devicePlugin") or DEFAULT_CONFIG),
            mig_config=rec.labels.get(MIG_CONFIG_LABEL) if mig else None,
            mig_parted=copy.deepcopy(mig.get("migParted")),
            resources=resources,
            numa_nodes=gpu.get("numaNodes"),
        )
    return list(pools.values())


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (the config files inside ConfigMaps) as ``|`` blocks."""


def _str(dumper: yaml.SafeDumper, value: str):
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def config_text(config: dict) -> str:
    return yaml.safe_dump(config, sort_keys=False, default_flow_style=False)


def namespace() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": NAMESPACE, "labels": dict(MANAGED_BY)},
    }


def config_map(pools: list[GpuPool]) -> dict[str, Any]:
    """NVIDIA's device-plugin config of every pool, one key per pool."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": CONFIG_MAP, "namespace": NAMESPACE, "labels": dict(MANAGED_BY)},
        "data": {p.name: config_text(p.config) for p in pools},
    }


def mig_parted_config_map(pools: list[GpuPool]) -> dict[str, Any] | None:
    data = {p.name: config_text(p.mig_parted) for p in pools if p.mig_parted is not None}
    if not data:
        return None
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": MIG_PARTED_CONFIG_MAP,
            "namespace": NAMESPACE,
            "labels": dict(MANAGED_BY),
        },
        "data": data,
    }


def plugin_args(pool: GpuPool) -> list[str]:
    """The container's arguments (after the image's ``gpu-lab device-plugin``)."""
    args = [
        "--model", pool.model,
        "--gpus", str(pool.gpus),
        "--config", f"{CONFIG_DIR}/{CONFIG_FILE}",
        "--plugin-dir", DEFAULT_PLUGIN_DIR,
    ]  # fmt: skip
    if pool.mig_parted is not None:
        args += ["--mig-config", f"{MIG_PARTED_DIR}/{CONFIG_FILE}"]
        if pool.mig_config:
            args += ["--mig-config-name", pool.mig_config]
    elif pool.mig_config:
        args += ["--mig-config", pool.mig_config]
    if pool.numa_nodes is not None:
        args += ["--numa-nodes", str(pool.numa_nodes)]
    return args


def daemonset_name(pool: str) -> str:
    return f"{APP}-{pool}"


def daemonset(pool: GpuPool, image: str = IMAGE) -> dict[str, Any]:
    selector = {"app.kubernetes.io/name": APP, POOL_LABEL: pool.name}
    volumes: list[dict[str, Any]] = [
        {
            "name": "device-plugins",
            "hostPath": {"path": DEFAULT_PLUGIN_DIR, "type": "Directory"},
        },
        {
            "name": "config",
            "configMap": {"name": CONFIG_MAP, "items": [{"key": pool.name, "path": CONFIG_FILE}]},
        },
    ]
    mounts: list[dict[str, Any]] = [
        {"name": "device-plugins", "mountPath": DEFAULT_PLUGIN_DIR},
        {"name": "config", "mountPath": CONFIG_DIR, "readOnly": True},
    ]
    if pool.mig_parted is not None:
        volumes.append({
            "name": "mig-parted",
            "configMap": {
                "name": MIG_PARTED_CONFIG_MAP,
                "items": [{"key": pool.name, "path": CONFIG_FILE}],
            },
        })
        mounts.append({"name": "mig-parted", "mountPath": MIG_PARTED_DIR, "readOnly": True})
    container = {
        "name": "device-plugin",
        "image": image,
        "imagePullPolicy": "IfNotPresent",  # loaded into the nodes by `kind load docker-image`
        "args": plugin_args(pool),
        "env": [
            {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}},
        ],
        "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}},
        "securityContext": {"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
        "volumeMounts": mounts,
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "DaemonSet",
        "metadata": {
            "name": daemonset_name(pool.name),
            "namespace": NAMESPACE,
            "labels": {**selector, **MANAGED_BY},
        },
        "spec": {
            "selector": {"matchLabels": dict(selector)},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {
                "metadata": {"labels": dict(selector)},
                "spec": {
                    "nodeSelector": {POOL_LABEL: pool.name},
                    # `kill_plugin` labels a node out of its DaemonSet: the plugin pod is
                    # deleted, as when NVIDIA's DaemonSet pod dies and stays down
                    "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [
                            {"key": PLUGIN_STOPPED_LABEL, "operator": "DoesNotExist"}]}]}}},
                    "tolerations": [{"operator": "Exists"}],
                    "priorityClassName": PRIORITY_CLASS,
                    "automountServiceAccountToken": False,
                    "containers": [container],
                    "volumes": volumes,
                },
            },
        },
    }


def device_plugin_manifests(workers: list[Worker], image: str = IMAGE) -> list[dict[str, Any]]:
    """Every object to apply, in order (Namespace, ConfigMaps, DaemonSets); empty when no
    pool has GPUs."""
    pools = gpu_pools(workers)
    if not pools:
        return []
    out = [namespace(), config_map(pools)]
    mig = mig_parted_config_map(pools)
    if mig is not None:
        out.append(mig)
    out += [daemonset(p, image) for p in pools]
    return out


def dump_all(objects: list[dict[str, Any]]) -> str:
    head = "# written by gpu-lab (gpu-lab up --backend kind): the fake NVIDIA device plugin\n"
    return head + yaml.dump_all(objects, Dumper=_Dumper, sort_keys=False,
                                default_flow_style=False)


# ---------------------------------------------------------------------------- node patches


def _taint(t: Taint) -> dict[str, str]:
    out = {"key": t.key, "effect": t.effect}
    if t.value:
        out["value"] = t.value
    return out


@dataclass(frozen=True)
class NodePatch:
    """The labels and taints one kind worker gets after creation."""

    node: str  # scenario node name
    selector: str  # gpulab.dev/node=<node>
    labels: dict[str, str]
    taints: tuple[Taint, ...]

    def label_args(self) -> list[str]:
        """``kubectl label`` arguments: ``key=value`` (``key=`` for an empty value)."""
        return [f"{k}={v}" for k, v in self.labels.items()]

    def taint_args(self) -> list[str]:
        """``kubectl taint`` arguments: ``key=value:Effect`` (``key:Effect`` without value)."""
        return [f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"
                for t in self.taints]

    def merge_patch(self, node: dict[str, Any] | None = None) -> dict[str, Any]:
        """The same change as one JSON merge patch for the API. Taints are a list that a
        merge patch replaces whole, so those already on ``node`` (the live object) are
        kept unless ours has the same key and effect, as ``kubectl taint --overwrite``
        does."""
        patch: dict[str, Any] = {}
        if self.labels:
            patch["metadata"] = {"labels": dict(self.labels)}
        if self.taints:
            ours = [_taint(t) for t in self.taints]
            mine = {(t.key, t.effect) for t in self.taints}
            live = ((node or {}).get("spec") or {}).get("taints") or []
            kept = [t for t in live if (t.get("key"), t.get("effect")) not in mine]
            patch["spec"] = {"taints": kept + ours}
        return patch


def node_patches(workers: list[Worker]) -> list[NodePatch]:
    return [
        NodePatch(w.node, w.selector, dict(w.patch_labels), tuple(w.taints))
        for w in workers
        if w.patch_labels or w.taints
    ]


def gpu_resources(workers: list[Worker]) -> dict[str, dict[str, int]]:
    """Per pool, the GPU resources every node of it must end up advertising."""
    return {p.name: dict(p.resources) for p in gpu_pools(workers)}
