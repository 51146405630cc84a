"""The devices a running pod on kind got: the ``NVIDIA_VISIBLE_DEVICES`` its container got
from our plugin's ``Allocate``, read from the container runtime on its node (``crictl
inspect`` in the node's container), so ``pods()`` shows them as on the other backends."""

from __future__ import annotations

import json
import subprocess

from ...deviceplugin.deviceids import VISIBLE_DEVICES
from ..tables import PodRow
from .cluster import KindCluster


class VisibleDevices:
    """Fills in the devices of pod rows; each container's environment is read once."""

    def __init__(self, cluster: KindCluster):
        self.cluster = cluster
        self._env_cache: dict[str, str] = {}  # container ID -> NVIDIA_VISIBLE_DEVICES

    def fill(self, pods: list[dict], rows: list[PodRow]) -> list[PodRow]:
        """``rows`` (one per pod of ``pods``), each running one-GPU-resource pod's devices set."""
        containers: dict[str, str] | None = None  # read only when a row needs it
        for pod, row in zip(pods, rows):
            wanted = [r for r in row.requests if r.startswith("nvidia.com/")]
            if row.devices or row.phase != "Running" or len(wanted) != 1:
                continue
            if containers is None:
                containers = self.cluster.containers_of_nodes()
            ids = self._of(pod, containers.get(row.node or ""))
            if ids:
                row.devices = {wanted[0]: ids}
        return rows

    def _of(self, pod: dict, container: str | None) -> list[str]:
        if container is None:
            return []
        ids: list[str] = []
        for st in (pod.get("status") or {}).get("containerStatuses") or []:
            cid = (st.get("containerID") or "").split("://", 1)[-1]
            if not cid:
                continue
            if cid not in self._env_cache:
                self._env_cache[cid] = container_env(container, cid).get(VISIBLE_DEVICES, "")
            ids += [i for i in self._env_cache[cid].split(",") if i and i not in ids]
        return ids


def container_env(node_container: str, container_id: str) -> dict[str, str]:
    """A pod container's environment as containerd holds it on its kind node."""
    try:
        res = subprocess.run(["docker", "exec", node_container, "crictl", "inspect", container_id],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return {}
    if res.returncode != 0:
        return {}
    try:
        envs = json.loads(res.stdout)["info"]["config"]["envs"]
    except (ValueError, KeyError, TypeError):
        return {}
    return {e.get("key", ""): e.get("value", "") for e in envs or [] if isinstance(e, dict)}
