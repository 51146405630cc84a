"""The scheduler's view of the cluster: nodes, what is bound to them, as arrays.

kube-scheduler keeps a ``NodeInfo`` per node (allocatable, requested,
non-zero requested, pods) and a snapshot list ordered by its node tree. We keep
the same facts column-wise in numpy so that filters and scores run over every
node at once, and update them incrementally on every bind and delete. The
arrays are column-major: plugins read one resource over many nodes at a time.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

from ..model.objects import Node, Pod
from ..model.selectors import LabelSelector

ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
REGION_LABELS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")
BASE_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pods")
NO_PODS_PRIORITY = 2**62
_LAYOUTS = itertools.count(1)


def _columns(rows: int, cols: int) -> np.ndarray:
    return np.zeros((rows, cols), dtype=np.int64, order="F")


def zone_key(labels: dict[str, str]) -> str:
    """``utilnode.GetZoneKey``: region and zone joined, empty when neither is set."""
    region = next((labels[k] for k in REGION_LABELS if labels.get(k)), "")
    zone = next((labels[k] for k in ZONE_LABELS if labels.get(k)), "")
    if not region and not zone:
        return ""
    return f"{region}:\x00:{zone}"


def node_tree_order(nodes: list[Node]) -> list[Node]:
    """The node tree's list(): zones in first-seen order, one node of each in turn."""
    zones: dict[str, list[Node]] = {}
    for n in nodes:
        zones.setdefault(zone_key(n.labels), []).append(n)
    out: list[Node] = []
    lists = list(zones.values())
    depth = max((len(z) for z in lists), default=0)
    for i in range(depth):
        for z in lists:
            if i < len(z):
                out.append(z[i])
    return out


class Snapshot:
    """Every node's allocatable and requested resources, plus the pods bound to it."""

    def __init__(self) -> None:
        self.nodes: list[Node] = []
        self.index: dict[str, int] = {}
        self.resources: list[str] = list(BASE_RESOURCES)
        self.rindex: dict[str, int] = {r: i for i, r in enumerate(self.resources)}
        self.allocatable = _columns(0, len(self.resources))
        self.requested = _columns(0, len(self.resources))
        self.free = _columns(0, len(self.resources))  # allocatable - requested
        self.nonzero = _columns(0, 2)  # cpu, memory with scoring defaults
        # Changes whenever resource columns are added: request vectors cached
        # on a pod are valid only for the layout they were built for.
        self.layout = next(_LAYOUTS)
        self._positive: dict[int, bool] = {}
        self.pods_on: list[list[Pod]] = []
        self.min_priority = np.zeros(0, dtype=np.int64)  # lowest pod priority per node: who could be preempted
        self._names: list[str] = []
        self.pod_node: dict[str, int] = {}  # pod key -> node index
        # Bumped when node objects change (labels, taints, allocatable): static
        # filter results cached per pod shape are only valid within one version.
        self.node_version = 0
        self.version = 0
        # Every node whose pods changed, in order: caches of node-local results
        # remember how far they have read. Restarted (with a new epoch) when long.
        self.changed: list[int] = []
        self.change_epoch = 0
        self._label_cols: dict[str, np.ndarray] = {}
        self._counters: dict[tuple, np.ndarray] = {}
        self.listeners: list[Callable[[Pod, int, int], None]] = []
        self.listers: Any = None  # defaultselector.Listers: what default spreading selects on

    # ----- nodes -------------------------------------------------------
    def __len__(self) -> int:
        return len(self.nodes)

    @property
    def names(self) -> list[str]:
        return self._names

    def resource_column(self, name: str) -> int:
        """Column of a resource, added (zero everywhere) on first sight."""
        i = self.rindex.get(name)
        if i is None:
            i = len(self.resources)
            self.resources.append(name)
            self.rindex[name] = i
            pad = _columns(len(self.nodes), 1)
            self.allocatable = np.asfortranarray(np.hstack([self.allocatable, pad]))
            self.requested = np.asfortranarray(np.hstack([self.requested, pad]))
            self.free = np.asfortranarray(np.hstack([self.free, pad]))
            self.layout = next(_LAYOUTS)
        return i

    def offered_everywhere(self, col: int) -> bool:
        """True when every node has some of this resource (scores then need no guards)."""
        got = self._positive.get(col)
        if got is None:
            got = bool((self.allocatable[:, col] != 0).all())
            self._positive[col] = got
        return got

    def set_nodes(self, nodes: Iterable[Node]) -> None:
        """(Re)build from a node list, keeping bound pods of nodes that remain."""
        bound = [(p, self.nodes[i].name) for i, pods in enumerate(self.pods_on) for p in pods]
        ordered = node_tree_order(list(nodes))
        self.nodes = ordered
        self.index = {n.name: i for i, n in enumerate(ordered)}
        for n in ordered:
            for r in n.allocatable:
                if r not in self.rindex:  # arrays are rebuilt just below
                    self.rindex[r] = len(self.resources)
                    self.resources.append(r)
        self.layout = next(_LAYOUTS)
        self.allocatable = _columns(len(ordered), len(self.resources))
        for i, n in enumerate(ordered):
            for r, v in n.allocatable.items():
                self.allocatable[i, self.rindex[r]] = v
        self.requested = _columns(len(ordered), len(self.resources))
        self.free = self.allocatable.copy(order="F")
        self.nonzero = _columns(len(ordered), 2)
        self.pods_on = [[] for _ in ordered]
        self.min_priority = np.full(len(ordered), NO_PODS_PRIORITY, dtype=np.int64)
        self._names = [n.name for n in ordered]
        self.pod_node = {}
        self._counters.clear()
        self.touch_nodes()
        for p, name in bound:
            if name in self.index:
                self.add_pod(p, self.index[name])

    def touch_nodes(self) -> None:
        """Call after changing node labels, taints or allocatable in place."""
        for i, n in enumerate(self.nodes):
            for r in n.allocatable:
                self.resource_column(r)
            row = np.zeros(len(self.resources), dtype=np.int64)
            for r, v in n.allocatable.items():
                row[self.rindex[r]] = v
            self.allocatable[i] = row
        self.free = np.asfortranarray(self.allocatable - self.requested)
        self._positive.clear()
        self.node_version += 1
        self.version += 1
        self._label_cols.clear()

    def label_column(self, key: str) -> np.ndarray:
        """Each node's value for a label key (None where absent), cached per node version."""
        col = self._label_cols.get(key)
        if col is None:
            col = np.array([n.labels.get(key) for n in self.nodes], dtype=object)
            self._label_cols[key] = col
        return col

    # ----- pods --------------------------------------------------------
    def request_vector(self, pod: Pod) -> np.ndarray:
        """The pod's requests as a row of ``requested`` (``pods`` counts 1), cached on the pod."""
        vec = pod.memo.get(("request_vector", self.layout))
        if vec is None:
            for r in pod.requests:  # may add columns, and so change the layout
                self.resource_column(r)
            key = ("request_vector", self.layout)
            vec = np.zeros(len(self.resources), dtype=np.int64)
            for r, v in pod.requests.items():
                vec[self.rindex[r]] = v
            vec[self.rindex["pods"]] = 1
            vec.flags.writeable = False
            pod.memo[key] = vec
        return vec

    def add_pod(self, pod: Pod, i: int) -> None:
        vec = self.request_vector(pod)
        self.requested[i] += vec
        self.free[i] -= vec
        self.nonzero[i] += (pod.nonzero_cpu, pod.nonzero_memory)
        self.pods_on[i].append(pod)
        if pod.priority < self.min_priority[i]:
            self.min_priority[i] = pod.priority
        self.pod_node[pod.key] = i
        if self._counters or self.listeners:
            self._count(pod, i, +1)
        self._changed(i)

    def remove_pod(self, pod: Pod) -> int:
        i = self.pod_node.pop(pod.key)
        vec = self.request_vector(pod)
        self.requested[i] -= vec
        self.free[i] += vec
        self.nonzero[i, 0] -= pod.nonzero_cpu
        self.nonzero[i, 1] -= pod.nonzero_memory
        self.pods_on[i] = [p for p in self.pods_on[i] if p.key != pod.key]
        self.min_priority[i] = min((p.priority for p in self.pods_on[i]), default=NO_PODS_PRIORITY)
        self._count(pod, i, -1)
        self._changed(i)
        return i

    def _changed(self, i: int) -> None:
        self.version += 1
        if len(self.changed) >= 1 << 16:
            self.changed = []
            self.change_epoch += 1
        self.changed.append(i)

    def pod_count(self) -> np.ndarray:
        return self.requested[:, self.rindex["pods"]]

    # ----- matching-pod counters, kept incrementally -------------------
    def count_matching(self, namespaces: frozenset[str] | None, selector: LabelSelector) -> np.ndarray:
        """Pods per node whose labels match ``selector`` (in ``namespaces``; None = all).

        PodTopologySpread and InterPodAffinity ask this for every pod; the
        answer is built once per selector and then updated on each bind/delete.
        """
        key = (namespaces, selector)
        counts = self._counters.get(key)
        if counts is None:
            counts = np.zeros(len(self.nodes), dtype=np.int64)
            for i, pods in enumerate(self.pods_on):
                for p in pods:
                    if (namespaces is None or p.namespace in namespaces) and selector.matches(p.labels):
                        counts[i] += 1
            self._counters[key] = counts
        return counts

    def _count(self, pod: Pod, i: int, delta: int) -> None:
        for (namespaces, selector), counts in self._counters.items():
            if (namespaces is None or pod.namespace in namespaces) and selector.matches(pod.labels):
                counts[i] += delta
        for fn in self.listeners:
            fn(pod, i, delta)
