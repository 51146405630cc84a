"""The kubeconfig backend: an existing cluster (a real GPU node, a cloud cluster, a kind
cluster), reached through a kubeconfig.

Read-only unless asked: :func:`~gpu_lab.backends.kubeconfig.inventory.inventory` only
reads (GPU nodes, allocatable, GPU Feature Discovery labels, MIG state).
:class:`~gpu_lab.backends.kubeconfig.session.KubeconfigSession` creates workloads only in
a namespace gpu-lab creates and labels itself, deletes nothing but that namespace, and
changes a node only when the node carries gpu-lab's ownership label or the caller passes
``allow_node_changes=True``.
"""

from __future__ import annotations

MANAGED_LABEL = "gpulab.dev/managed"  # on the namespace gpu-lab created: value "true"
OWNED_LABEL = "gpulab.dev/owned"  # on a node gpu-lab may change: value "true"

__all__ = ["MANAGED_LABEL", "OWNED_LABEL"]
