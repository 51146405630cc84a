"""The scheduler's view of the cluster: nodes, what is bound to them, as arrays.

kube-scheduler keeps a ``NodeInfo`` per node (allocatable, requested,
non-zero requested, pods) and a snapshot list ordered by its node tree. We keep
the same facts column-wise in numpy so that filters and scores run over every
node at once, and update them incrementally on every bind and delete.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import numpy as np

from ..model.objects import Node, Pod
from ..model.selectors import LabelSelector

ZONE_LABELS = ("topology.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/zone")
REGION_LABELS = ("topology.kubernetes.io/region", "failure-domain.beta.kubernetes.io/region")
BASE_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pods")
NO_PODS_PRIORITY = 2**62


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
        self.allocatable = np.zeros((0, len(self.resources)), dtype=np.int64)
        self.requested = np.zeros((0, len(self.resources)), dtype=np.int64)
        self.nonzero = np.zeros((0, 2), dtype=np.int64)  # cpu, memory with scoring defaults
        self.pods_on: list[list[Pod]] = []
        self.min_priority = np.zeros(0, dtype=np.int64)  # lowest pod priority per node: who could be preempted
        self.node_gen = np.zeros(0, dtype=np.int64)  # bumped per node whenever its pods change
        self._names: list[str] = []
        self.pod_node: dict[str, int] = {}  # pod key -> node index
        # Bumped when node objects change (labels, taints, allocatable): static
        # filter results cached per pod shape are only valid within one version.
        self.node_version = 0
        self.version = 0
        self._label_cols: dict[str, np.ndarray] = {}
        self._counters: dict[tuple, np.ndarray] = {}
        self.listeners: list[Callable[[Pod, int, int], None]] = []

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
            pad = np.zeros((len(self.nodes), 1), dtype=np.int64)
            self.allocatable = np.hstack([self.allocatable, pad])
            self.requested = np.hstack([self.requested, pad.copy()])
        return i

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
        self.allocatable = np.zeros((len(ordered), len(self.resources)), dtype=np.int64)
        for i, n in enumerate(ordered):
            for r, v in n.allocatable.items():
                self.allocatable[i, self.rindex[r]] = v
        self.requested = np.zeros_like(self.allocatable)
        self.nonzero = np.zeros((len(ordered), 2), dtype=np.int64)
        self.pods_on = [[] for _ in ordered]
        self.min_priority = np.full(len(ordered), NO_PODS_PRIORITY, dtype=np.int64)
        self.node_gen = np.zeros(len(ordered), dtype=np.int64)
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
        vec = np.zeros(len(self.resources), dtype=np.int64)
        for r, v in pod.requests.items():
            vec[self.resource_column(r)] = v
        if len(vec) < len(self.resources):  # columns added while filling
            vec = np.concatenate([vec, np.zeros(len(self.resources) - len(vec), dtype=np.int64)])
        vec[self.rindex["pods"]] = 1
        return vec

    def add_pod(self, pod: Pod, i: int) -> None:
        vec = self.request_vector(pod)
        self.requested[i] += vec
        self.nonzero[i, 0] += pod.nonzero_cpu
        self.nonzero[i, 1] += pod.nonzero_memory
        self.pods_on[i].append(pod)
        self.min_priority[i] = min(self.min_priority[i], pod.priority)
        self.node_gen[i] += 1
        self.pod_node[pod.key] = i
        self._count(pod, i, +1)
        self.version += 1

    def remove_pod(self, pod: Pod) -> int:
        i = self.pod_node.pop(pod.key)
        vec = self.request_vector(pod)
        self.requested[i] -= vec
        self.nonzero[i, 0] -= pod.nonzero_cpu
        self.nonzero[i, 1] -= pod.nonzero_memory
        self.pods_on[i] = [p for p in self.pods_on[i] if p.key != pod.key]
        self.min_priority[i] = min((p.priority for p in self.pods_on[i]), default=NO_PODS_PRIORITY)
        self.node_gen[i] += 1
        self._count(pod, i, -1)
        self.version += 1
        return i

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
