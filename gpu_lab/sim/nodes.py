"""Changes to the simulated cluster's nodes: join, drain and delete, relabel, cordon.

Relabelling ``nvidia.com/mig.config`` runs NVIDIA's MIG manager (``kubelet.reconfigure``):
the GPUs are repartitioned, the pods holding them are evicted (only when asked) and the
node's device plugin re-advertises what the new layout serves.
"""

from __future__ import annotations

from ..errors import GpuLabError
from ..kubelet.reconfigure import eviction_message, failure, reconfigure
from ..model.nodepool import MIG_CONFIG_LABEL
from ..model.objects import Node
from .binder import Binder
from .cluster import Cluster
from .kubelet import Kubelets


class Nodes:
    def __init__(self, cluster: Cluster, kubelets: Kubelets, binder: Binder) -> None:
        self.cluster, self.kubelets, self.binder = cluster, kubelets, binder

    def add(self, nodes: list[Node]) -> None:
        """Nodes join, each with its kubelet's device manager."""
        c = self.cluster
        for n in nodes:
            if n.name in c.nodes:
                raise GpuLabError(f'nodes "{n.name}" already exists')
            c.nodes[n.name] = n
            c.node_joined[n.name] = c.now
            self.kubelets.start(n)
        c.nodes_changed()
        c.generation += 1  # the autoscaler looks again: pods may now move
        c.wakeups += 1

    def remove(self, name: str, reason: str) -> list[str]:
        """Drain and delete a node: its running pods are evicted; returns their keys."""
        c = self.cluster
        evicted = []
        for rec in list(c.records.values()):
            if rec.node == name and rec.phase == "Running":
                self.binder.end(rec, "Failed", "Evicted", f"evicted: {reason}")
                evicted.append(rec.pod.key)
        del c.nodes[name]
        c.node_joined.pop(name, None)
        self.kubelets.stop(name)
        c.nodes_changed()
        c.generation += 1
        c.wakeups += 1
        return evicted

    def relabel(self, node: str, labels: dict[str, str | None], evict: bool) -> list[str]:
        """Set (or, with None, remove) labels; a new ``nvidia.com/mig.config`` repartitions
        the GPUs first. Returns the pods evicted for it."""
        c = self.cluster
        current = c.nodes[node]
        evicted: list[str] = []
        wanted = labels.get(MIG_CONFIG_LABEL)
        if wanted is not None and wanted != current.labels.get(MIG_CONFIG_LABEL):
            holders = sorted(k for k, rec in c.records.items()
                             if rec.node == node and rec.phase == "Running" and rec.devices)
            result = reconfigure(current, wanted, pods_holding=holders, evict=evict)
            if result.state == "failed":
                raise GpuLabError(failure(node, wanted, result.message))
            for key in result.evicted:
                self.binder.end(c.records[key], "Failed", "Evicted", eviction_message(node, wanted))
                evicted.append(key)
            current = result.node
            c.nodes[node] = current
            self.kubelets.replug(current)
        new_labels = dict(current.labels)
        for k, v in labels.items():
            if k == MIG_CONFIG_LABEL and v is not None:  # set by reconfigure; removing it changes no layout
                continue
            if v is None:
                new_labels.pop(k, None)
            else:
                new_labels[k] = v
        current.labels = new_labels
        c.nodes[node] = current
        c.nodes_changed()
        c.wakeups += 1
        return evicted

    def cordon(self, node: str, unschedulable: bool = True) -> None:
        self.cluster.nodes[node].unschedulable = unschedulable
        self.cluster.snapshot.touch_nodes()
        self.cluster.wakeups += 1
