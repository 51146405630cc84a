"""The rules of an existing cluster, each in one place: what gpu-lab may create there
(workloads, only in its own namespace: ``admit``) and when it may change a node
(``check_node_change``, ``change_node``)."""

from __future__ import annotations

import copy
from typing import Any, cast

from ...errors import GpuLabError, NamespaceRefused, NodeChangeRefused
from ...kube import ApiError, KubeClient
from . import OWNED_LABEL

WORKLOAD_KINDS = {
    ("v1", "Pod"),
    ("apps/v1", "Deployment"),
    ("apps/v1", "ReplicaSet"),
    ("batch/v1", "Job"),
    ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"),
    ("v1", "Service"),
    ("policy/v1", "PodDisruptionBudget"),
    ("v1", "ResourceQuota"),
    ("v1", "LimitRange"),
}


def admit(doc: dict, namespace: str) -> dict:
    """Refuse what gpu-lab may not create here; place workloads in ``namespace``."""
    gvk = (doc.get("apiVersion"), doc.get("kind"))
    meta = doc.get("metadata")
    if not isinstance(meta, dict):
        meta = {}
    name = meta.get("name") or meta.get("generateName") or "?"
    kind = gvk[1]
    if kind in ("Node", "NodePool"):
        raise NodeChangeRefused(
            f'refusing to create {kind} "{name}": the kubeconfig backend never adds nodes to '
            "an existing cluster (simulated GPU nodes live on the sim and local backends)"
        )
    if kind == "Namespace" and gvk[0] == "v1":
        if meta.get("name") != namespace:
            raise NamespaceRefused(
                f'refusing to create Namespace "{name}": gpu-lab works only in its own '
                f'namespace "{namespace}"'
            )
        return doc
    if gvk not in WORKLOAD_KINDS:
        raise GpuLabError(
            f'refusing to create {kind or "an object without kind"} "{name}": the kubeconfig '
            "backend creates only Pods, Deployments, ReplicaSets, Jobs, StatefulSets, DaemonSets, "
            "Services, PodDisruptionBudgets, ResourceQuotas and LimitRanges, in its own namespace"
        )
    ns = meta.get("namespace")
    if ns not in (None, "", namespace):
        raise NamespaceRefused(
            f'refusing to create {kind} "{name}" in namespace "{ns}": the kubeconfig backend '
            f'creates workloads only in its own namespace "{namespace}"'
        )
    doc = copy.deepcopy(doc)
    doc.setdefault("metadata", {})["namespace"] = namespace
    return doc


def known_priority_classes(client: KubeClient) -> dict[str, dict]:
    """The cluster's PriorityClasses by name ({} where RBAC forbids listing them)."""
    try:
        items = client.list("PriorityClass")["items"]
    except ApiError as exc:
        if exc.code == 403:
            return {}
        raise
    return {pc["metadata"]["name"]: pc for pc in items}


def check_node_change(node: dict, what: str, allow_node_changes: bool = False) -> None:
    """THE rule for touching a node of an existing cluster: allowed only when the node
    carries ``gpulab.dev/owned=true`` or the caller said ``allow_node_changes=True``.

    ``node`` is the API object as read just before the change; ``what`` names the change
    (``labels``, ``taints``, ``spec.unschedulable``, ``status``). Raises
    :class:`NodeChangeRefused` with one line that says how to proceed."""
    if allow_node_changes:
        return
    meta = node.get("metadata") or {}
    if (meta.get("labels") or {}).get(OWNED_LABEL) == "true":
        return
    raise NodeChangeRefused(
        f'refusing to change the {what} of node "{meta.get("name", "?")}": gpu-lab does not own '
        f"it (no label {OWNED_LABEL}=true); pass allow_node_changes=True to change it anyway"
    )


def change_node(client: KubeClient, node: str, what: str, patch: dict, allow_node_changes: bool,
                subresource: str | None = None, obj: dict | None = None) -> dict:
    """Patch ``node`` if :func:`check_node_change` allows it (``obj``: the node as just read)."""
    obj = client.get("Node", node) if obj is None else obj
    check_node_change(obj, what, allow_node_changes)
    # the resourceVersion makes the API server refuse the patch (409) if the node
    # changed since we checked it, e.g. lost its ownership label meanwhile
    patch = {**patch, "metadata": {**patch.get("metadata", {}),
                                   "resourceVersion": obj["metadata"]["resourceVersion"]}}
    return client.patch("Node", node, patch, subresource=subresource)


def in_namespace(client: KubeClient, namespace: str) -> KubeClient:
    """The client as the shared policy code sees it: its lists confined to gpu-lab's
    namespace (quotas, PDBs, limit ranges and the pods they count are all here; the
    cluster's other namespaces are not ours to read)."""
    return cast(KubeClient, _Namespaced(client, namespace))


class _Namespaced:
    """A :class:`KubeClient` whose namespace-less ``list`` means gpu-lab's namespace, not
    all of them; everything else goes to the client as it is."""

    def __init__(self, client: KubeClient, namespace: str) -> None:
        self._client, self._namespace = client, namespace

    def list(self, kind: str, namespace: str | None = None, **kw: Any) -> dict:
        return self._client.list(kind, namespace=namespace or self._namespace, **kw)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._client, name)
