"""The kind backend: a kind cluster shaped like a scenario, with the fake NVIDIA device plugin
registered with each GPU node's real kubelet (``gpu-lab up --backend kind``).

``config`` writes the kind config, ``manifests`` the device-plugin DaemonSets, ConfigMaps and
node patches, ``commands`` the exact docker/kind/kubectl commands and runs them, ``cluster``
puts it together: ``KindCluster(name).plan(scenario)`` (no Docker needed) and ``.up()``.
"""

from ...errors import KindError
from .cluster import KindCluster, KindPlan

__all__ = ["KindCluster", "KindError", "KindPlan"]
