"""Node-side facts several plugins need, computed once per node version.

Like kube-scheduler's ``framework/plugins/helper`` and component-helpers'
``nodeaffinity``: the required node affinity of a pod, the taints it tolerates
and each node's topology domain are shared by NodeAffinity, TaintToleration,
PodTopologySpread and InterPodAffinity, so they live here once.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import numpy as np

from ...model.objects import Pod
from ...model.selectors import NodeSelectorTerm
from ..snapshot import Snapshot

_NODE_CACHE: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def node_cache(snap: Snapshot) -> dict:
    """A dict that lives as long as the snapshot's nodes stay unchanged."""
    got = _NODE_CACHE.get(snap)
    if got is None or got["version"] != snap.node_version or got["n"] != len(snap):
        got = {"version": snap.node_version, "n": len(snap)}
        _NODE_CACHE[snap] = got
    return got


class NodeObjectCache:
    """A plugin's values computed from the node objects alone, kept until a node changes."""

    def __init__(self) -> None:
        self._values: dict[Any, Any] = {}
        self._version: tuple[int, int] = (0, -1)

    def get(self, snap: Snapshot, key: Any, compute: Callable[[], Any]) -> Any:
        version = (id(snap), snap.node_version)
        if self._version != version:
            self._values.clear()
            self._version = version
        got = self._values.get(key, _MISSING)
        if got is _MISSING:
            got = self._values[key] = compute()
        return got


_MISSING = object()


def freeze(x: Any) -> Any:
    """A hashable copy of nested dicts/lists, for cache keys."""
    if isinstance(x, dict):
        return tuple(sorted((k, freeze(v)) for k, v in x.items()))
    if isinstance(x, list):
        return tuple(freeze(v) for v in x)
    return x


def topology_codes(snap: Snapshot, key: str) -> tuple[np.ndarray, list[str]]:
    """Each node's domain for ``key`` as an int code (-1 = no such label) and the values."""
    cache = node_cache(snap).setdefault("codes", {})
    got = cache.get(key)
    if got is None:
        index: dict[str, int] = {}
        col = snap.label_column(key)
        codes = np.fromiter(
            (-1 if v is None else index.setdefault(v, len(index)) for v in col), dtype=np.int64, count=len(col)
        )
        got = (codes, list(index))
        cache[key] = got
    return got


def _required(pod: Pod) -> Any:
    return ((pod.affinity or {}).get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")


def required_affinity_key(pod: Pod) -> tuple:
    """A hashable form of the pod's nodeSelector and required node affinity, cached on the pod."""
    got = pod.memo.get("required-node-affinity")
    if got is None:
        got = (freeze(pod.node_selector), freeze(_required(pod)))
        pod.memo["required-node-affinity"] = got
    return got


def required_node_affinity_mask(snap: Snapshot, pod: Pod) -> np.ndarray | None:
    """``nodeaffinity.GetRequiredNodeAffinity(pod).Match`` per node; None when it matches all.

    nodeSelector labels must all match, and one of the required terms (ORed).
    """
    required = _required(pod)
    if required is None and not pod.node_selector:
        return None
    cache = node_cache(snap).setdefault("affinity", {})
    key = required_affinity_key(pod)
    got = cache.get(key)
    if got is None:
        terms = None
        if required is not None:
            terms = [NodeSelectorTerm.parse(t) for t in required.get("nodeSelectorTerms") or []]
        got = np.ones(len(snap), dtype=bool)
        for i, node in enumerate(snap.nodes):
            if any(node.labels.get(k) != str(v) for k, v in pod.node_selector.items()) or (
                terms is not None and not any(t.matches(node.name, node.labels) for t in terms)
            ):
                got[i] = False
        cache[key] = got
    return got


def tolerated_mask(snap: Snapshot, pod: Pod) -> np.ndarray:
    """True where the pod tolerates every NoSchedule/NoExecute taint (``DoNotScheduleTaintsFilterFunc``)."""
    cache = node_cache(snap).setdefault("taints", {})
    key = tuple(pod.tolerations)
    got = cache.get(key)
    if got is None:
        got = np.array(
            [
                all(
                    any(t.tolerates(taint) for t in pod.tolerations)
                    for taint in node.taints
                    if taint.effect in ("NoSchedule", "NoExecute")
                )
                for node in snap.nodes
            ],
            dtype=bool,
        )
        cache[key] = got
    return got
