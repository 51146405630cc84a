"""The kind cluster config for a scenario: one control plane, one worker per scenario node.

kind (``kind.x-k8s.io/v1alpha4``) runs each node as a Docker container. A worker can only
be given labels, which kind passes to the kubelet as ``--node-labels``; the kubelet refuses
to start when one of them is in the ``kubernetes.io`` or ``k8s.io`` namespaces and is not
one it may set on itself (``kubelet_accepts_label``). So the kind config carries:

* ``gpulab.dev/node=<scenario node name>`` (the node-patch steps select on it) and
  ``gpulab.dev/owned=true`` (node changes allowed: the cluster is gpu-lab's),
* ``gpulab.dev/pool`` (the device-plugin DaemonSet of each pool selects on it),
* the scenario node's other labels the kubelet accepts that are not GFD's.

Everything else (GPU Feature Discovery's ``nvidia.com/*`` labels, labels the kubelet
refuses such as ``node-role.kubernetes.io/gpu``) and the taints are applied once the nodes
exist (``manifests.node_patches``). The kubelet sets ``kubernetes.io/hostname``, ``os``
and ``arch`` itself, from the real container; they are left alone.

Each worker registers under its scenario node's own name (a ``JoinConfiguration`` patch sets
``nodeRegistration.name``), so pods land on ``h100-0`` on kind as on every other backend; the
containers keep kind's names (``<cluster>-worker``, ``<cluster>-worker2``, ...).

The node image is gpu-lab's own build of Kubernetes v1.37.2 (``gpu-lab kind build``, see
``build``): no image can be pulled here, and kind publishes no v1.37.2 node image. The
clusters run without kube-proxy and with no CNI daemon (``networking``: containerd writes each
node's pod network config), and tell the kubelet that a cgroup v1 host is fine
(``failCgroupV1: false``, still honoured by v1.37; kind itself only warns). kubeadm's
kube-scheduler gets the local control plane's ``--vmodule`` (``scheduler_extra_args``), so it
logs every score plugin's weighted score per node and explain shows the real scheduler's own
arithmetic on kind too (``scheduler.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import yaml

from ...errors import KindError
from ...model.nodepool import POOL_LABEL
from ...model.objects import Node, Taint
from ..kubeconfig import OWNED_LABEL
from ..local.flags import SCORE_LOG_VMODULE

API_VERSION = "kind.x-k8s.io/v1alpha4"
#: the kubeadm configuration kind v0.33 writes for Kubernetes v1.37 (extraArgs: a list of
#: name/value pairs, which kind merges with its own)
KUBEADM_API_VERSION = "kubeadm.k8s.io/v1beta4"
KIND_RELEASE = "v0.33.0"
KIND_MIN_VERSION = (0, 33, 0)
KUBERNETES_VERSION = "v1.37.2"
NODE_IMAGE = f"gpu-lab/kind-node:{KUBERNETES_VERSION}"  # built by `gpu-lab kind build`
NODE_LABEL = "gpulab.dev/node"
DEFAULT_NAME = "gpu-lab"
#: one container per node, roughly half a GB of memory each
MAX_WORKERS = 12

#: labels the kubelet writes itself, from the machine it runs on
KUBELET_OWN_LABELS = ("kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch")
#: the labels in the kubernetes.io / k8s.io namespaces a kubelet may set on its own Node
#: (k8s.io/kubelet/pkg/apis: KubeletLabels, KubeletLabelNamespaces)
KUBELET_LABELS = frozenset({
    "kubernetes.io/hostname",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
})
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")
GFD_PREFIX = "nvidia.com/"

# kind's own rule for cluster names (pkg/internal/apis/config/validate.go); we also keep
# them short enough for "<name>-control-plane" and DNS labels
_NAME = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,38}[a-z0-9])?$")


def check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise KindError(
            f"invalid kind cluster name {name!r}: use 1-40 lower-case letters, digits, '-' or "
            "'.', starting and ending with a letter or digit"
        )
    return name


def _namespace(key: str) -> str:
    return key.split("/", 1)[0] if "/" in key else ""


def is_kubernetes_label(key: str) -> bool:
    ns = _namespace(key)
    return any(ns == d or ns.endswith("." + d) for d in ("kubernetes.io", "k8s.io"))


def kubelet_accepts_label(key: str) -> bool:
    """Whether ``kubelet --node-labels`` takes ``key`` (cmd/kubelet/app/options: labels in
    the kubernetes.io/k8s.io namespaces must be kubelet labels, else the kubelet exits)."""
    if not is_kubernetes_label(key) or key in KUBELET_LABELS:
        return True
    ns = _namespace(key)
    return any(ns == a or ns.endswith("." + a) for a in KUBELET_LABEL_NAMESPACES)


def kind_node_names(cluster: str, workers: int) -> tuple[str, list[str]]:
    """The names kind gives its node containers (``common.MakeNodeNamer``): control plane,
    workers."""
    names = [f"{cluster}-worker" + (str(i + 1) if i else "") for i in range(workers)]
    return f"{cluster}-control-plane", names


@dataclass
class Worker:
    """One scenario node as a kind worker."""

    node: str  # the scenario's node name, e.g. h100-0 (also the Kubernetes node's)
    container: str  # the name kind gives its container, e.g. gpu-lab-worker2
    pool: str | None
    kind_labels: dict[str, str]  # in the kind config (kubelet --node-labels)
    patch_labels: dict[str, str]  # applied after creation (GFD's and the kubelet-refused)
    taints: list[Taint] = field(default_factory=list)
    record: Node | None = field(default=None, repr=False)

    @property
    def selector(self) -> str:
        return f"{NODE_LABEL}={self.node}"


def plan_workers(cluster: str, nodes: list[Node],
                 containers: dict[str, str] | None = None) -> list[Worker]:
    """Split each node's labels between the kind config and the post-creation patch.

    ``containers`` (node name -> container) places the nodes on the workers of a cluster
    that exists (``reshape``); otherwise they get kind's containers in order."""
    check_name(cluster)
    if containers is None:
        _, names = kind_node_names(cluster, len(nodes))
    else:
        names = [containers[n.name] for n in nodes]
    workers = []
    for node, container in zip(nodes, names):
        kind_labels = {NODE_LABEL: node.name, OWNED_LABEL: "true"}
        patch: dict[str, str] = {}
        for key, val in node.labels.items():
            if key in KUBELET_OWN_LABELS or key in (NODE_LABEL, OWNED_LABEL):
                continue
            if key.startswith(GFD_PREFIX) or not kubelet_accepts_label(key):
                patch[key] = val
            else:
                kind_labels[key] = val
        if node.pool is not None:
            kind_labels[POOL_LABEL] = node.pool
        workers.append(
            Worker(node.name, container, node.pool, kind_labels, patch, list(node.taints), node)
        )
    return workers


def configured_workers(config: dict[str, Any]) -> dict[str, str]:
    """Node name -> container of each worker of a kind config ``kind_config`` wrote (kind
    numbers its worker containers in config order)."""
    workers = [n for n in config.get("nodes") or [] if n.get("role") == "worker"]
    _, containers = kind_node_names(config.get("name", ""), len(workers))
    return {(n.get("labels") or {}).get(NODE_LABEL, c): c for n, c in zip(workers, containers)}


def configured_labels(config: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Node name -> the ``--node-labels`` each worker of a kind config was created with."""
    return {(n.get("labels") or {}).get(NODE_LABEL, ""): dict(n.get("labels") or {})
            for n in config.get("nodes") or [] if n.get("role") == "worker"}


def frame(config: dict[str, Any]) -> dict[str, Any]:
    """What a kind config fixes for the cluster's whole life: everything but which scenario
    node each worker plays (its name and labels), which ``reshape`` changes."""
    nodes = config.get("nodes") or []
    return {**{k: v for k, v in config.items() if k != "nodes"},
            "control-plane": [n for n in nodes if n.get("role") != "worker"],
            "worker images": sorted({str(n.get("image")) for n in nodes if n.get("role") == "worker"})}


def scheduler_extra_args() -> list[dict[str, str]]:
    """kube-scheduler's extra flags, in kubeadm v1beta4's form: the local control plane's own
    ``--vmodule`` (schedule_one.go at verbosity 10: each plugin's score for each node)."""
    name, value = SCORE_LOG_VMODULE.removeprefix("--").split("=", 1)
    return [{"name": name, "value": value}]


def kind_config(cluster: str, workers: list[Worker], image: str = NODE_IMAGE) -> dict[str, Any]:
    """The ``kind create cluster --config`` document."""
    check_name(cluster)
    nodes: list[dict[str, Any]] = [{"role": "control-plane", "image": image}]
    for w in workers:
        nodes.append({"role": "worker", "image": image, "labels": dict(w.kind_labels),
                      "kubeadmConfigPatches": [yaml.safe_dump(
                          {"kind": "JoinConfiguration", "nodeRegistration": {"name": w.node}},
                          sort_keys=False)]})
    return {
        "kind": "Cluster",
        "apiVersion": API_VERSION,
        "name": cluster,
        "networking": {"disableDefaultCNI": True, "kubeProxyMode": "none"},
        "kubeadmConfigPatches": [
            yaml.safe_dump({"kind": "KubeletConfiguration", "failCgroupV1": False}, sort_keys=False),
            yaml.safe_dump({"apiVersion": KUBEADM_API_VERSION, "kind": "ClusterConfiguration",
                            "scheduler": {"extraArgs": scheduler_extra_args()}}, sort_keys=False),
        ],
        "nodes": nodes,
    }


def dump(config: dict[str, Any]) -> str:
    head = (
        "# written by gpu-lab (gpu-lab up --backend kind): one worker per scenario node;\n"
        "# GPU Feature Discovery labels and taints are applied after creation\n"
    )
    return head + yaml.safe_dump(config, sort_keys=False, default_flow_style=False)
