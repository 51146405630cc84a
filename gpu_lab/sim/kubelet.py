"""The simulated nodes' kubelet side: each node's device manager and NVIDIA device-plugin config,
and the kubelet's admission of a pod bound to its node (``gpu_lab.kubelet.admission``, the
same code the local backend's node agent runs).

A node's device manager (``gpu_lab.kubelet.devicemanager``) runs on the simulated clock, so
the kubelet's grace period after a plugin dies elapses with ``advance``; what it reports is
written into the node's capacity and allocatable as the kubelet's node status does.
"""

from __future__ import annotations

import json

import numpy as np

from ..deviceplugin.config import DevicePluginConfig, parse_config
from ..gpus.labels import gpu_uuids
from ..kubelet.admission import admit_devices, fit_failure
from ..kubelet.devicemanager import DeviceManager
from ..kubelet.gpuhealth import gpu_devices, record
from ..model.objects import Node, Pod, is_extended_resource
from .cluster import Cluster
from .dra import backend as dra
from .snapshot import Snapshot


def advertised_devices(node: Node) -> dict[str, list[str]]:
    """Device IDs per NVIDIA resource. NodePool nodes carry theirs; a plain Node manifest
    that advertises whole GPUs gets the same stable UUIDs a NodePool node of that name would."""
    devices = {r: list(ids) for r, ids in node.devices.items()}
    count = node.capacity.get("nvidia.com/gpu", 0)
    if count and "nvidia.com/gpu" not in devices:
        devices["nvidia.com/gpu"] = gpu_uuids(node.name, count)
    return devices


def device_requests(pod: Pod) -> tuple[tuple[str, str, int], ...]:
    """(container, resource, count) for every extended resource a container asks for:
    the only ones a device plugin can serve."""
    got = pod.memo.get("device_requests")
    if got is None:
        got = tuple((c.name, r, v) for c in pod.containers for r, v in c.requests.items()
                    if v > 0 and is_extended_resource(r))
        pod.memo["device_requests"] = got
    return got


def _admission_needs(snap: Snapshot, pod: Pod) -> list[tuple[int, int]]:
    """(column, amount) of everything the pod asks for, and one pod slot: when a node
    has that much free, the kubelet's resource check passes."""
    key = ("admission_needs", snap.layout)
    got = pod.memo.get(key)
    if got is None:
        vec = snap.request_vector(pod)  # may add columns
        key = ("admission_needs", snap.layout)
        got = pod.memo[key] = [(int(c), int(vec[c])) for c in np.flatnonzero(vec)]
    return got


class Kubelets:
    """Every node's device manager and device-plugin config, by node name."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.devices: dict[str, DeviceManager] = {}
        self._plugin_configs: dict[str, DevicePluginConfig] = {}
        self._parsed_configs: dict[tuple, DevicePluginConfig] = {}
        self.failed_gpus: dict[str, dict[int, str]] = {}  # node -> GPU index -> reason

    def start(self, node: Node) -> None:
        """A node joins (or its GPUs were repartitioned): a fresh device manager for what it advertises."""
        self.devices[node.name] = DeviceManager(advertised_devices(node), clock=lambda: self.cluster.now,
                                                numa=node.device_numa)
        self._plugin_configs.pop(node.name, None)
        self.failed_gpus.pop(node.name, None)  # a new machine

    def replug(self, node: Node) -> None:
        """The MIG manager restarted the node's plugin on a new layout. As on a real kubelet the
        old endpoints stop first, so a name the new layout no longer serves keeps its capacity
        with allocatable 0 for the grace period, then drops to 0 (``GetCapacity``); the new
        plugin registers what it serves now."""
        dm = self.devices.get(node.name)
        if dm is None:
            self.start(node)
            return
        for resource in list(dm.devices):
            dm.endpoint_stopped(resource)
        self._replug(dm, node)
        self._plugin_configs.pop(node.name, None)
        self._mark_failed(node.name)
        self.sync_status(node.name)

    def stop(self, name: str) -> None:
        self.devices.pop(name, None)
        self._plugin_configs.pop(name, None)
        self.failed_gpus.pop(name, None)

    def plugin_config(self, node: str) -> DevicePluginConfig:
        """The node's NVIDIA device-plugin config (NodePool spec.devicePlugin; defaults otherwise)."""
        cfg = self._plugin_configs.get(node)
        if cfg is None:
            n = self.cluster.nodes[node]
            spec = (n.raw.get("nodePool") or {}).get("devicePlugin")
            pool = n.pool
            # The nodes of a pool share their config: parse each distinct one once.
            key = (pool, json.dumps(spec, sort_keys=True, default=str))
            cfg = self._parsed_configs.get(key)
            if cfg is None:
                cfg = self._parsed_configs[key] = parse_config(spec, f'NodePool "{pool}": spec.devicePlugin')
            self._plugin_configs[node] = cfg
        return cfg

    def admit(self, pod: Pod, node: str) -> tuple[str, str] | None:
        """The kubelet's admission, in its order: devices first, then the resource check.
        None, or the rejection's (reason, message), with the pod's devices released."""
        snap = self.cluster.snapshot
        i = snap.index[node]
        dm = self.devices[node]
        wanted_devices = device_requests(pod)
        failure = None
        if wanted_devices:  # the kubelet's device manager serves the resources it knows
            devices = dm.devices
            wanted = [(c, r, v) for c, r, v in wanted_devices if r in devices]
            if wanted:
                failure = admit_devices(dm, pod.key, wanted, self.plugin_config(node),
                                        topology_policy=self.cluster.nodes[node].topology_manager_policy
                                        ).failure
        if failure:
            return failure
        free = snap.free.item
        needs, requests = _admission_needs(snap, pod), pod.requests
        n = self.cluster.nodes[node]
        skipped = dra.kubelet_skips(snap, pod, n)  # served by DRA on this node
        if skipped:
            needs = [(c, w) for c, w in needs if snap.resources[c] not in skipped]
            requests = {r: q for r, q in requests.items() if r not in skipped}
        if not all(free(i, col) >= want for col, want in needs):  # else: room for all of it
            used = {r: int(snap.requested[i, snap.rindex[r]]) for r in requests if r in snap.rindex}
            pods_used = int(snap.requested[i, snap.rindex["pods"]])
            failure = fit_failure(requests, used, pods_used, n.allocatable)
        if failure:
            dm.pods.release(pod.key)
        return failure

    def kill_plugin(self, node: str) -> None:
        """The node's device plugin dies: its endpoints stop; allocatable drops at once."""
        dm = self.devices[node]
        for resource in list(dm.devices):
            dm.endpoint_stopped(resource)
        self.sync_status(node)

    @staticmethod
    def _replug(dm: DeviceManager, node: Node) -> None:
        """The plugin registers again: its first ListAndWatch, each device with its NUMA node."""
        for resource, ids in advertised_devices(node).items():
            dm.register(resource, None)
            dm.update_devices(resource, [(d, True, node.device_numa.get(d)) for d in ids])

    def restart_plugin(self, node: str) -> None:
        """The plugin comes back and re-registers its devices."""
        self._replug(self.devices[node], self.cluster.nodes[node])
        self._mark_failed(node)  # its first ListAndWatch still reports the failed GPUs
        self.sync_status(node)

    def set_gpu_health(self, node: str, index: int, reason: str | None) -> None:
        """GPU ``index`` fails (``reason``, e.g. "Xid 79") or heals (None): the plugin reports
        its devices Unhealthy (or Healthy) and allocatable follows; capacity stays and the pods
        holding them keep running. While the plugin is down the change waits for its return."""
        record(self.failed_gpus.setdefault(node, {}), index, reason)
        self._mark(node, index, reason is None)
        self.sync_status(node)

    def _mark_failed(self, node: str) -> None:
        for index in self.failed_gpus.get(node, {}):
            self._mark(node, index, False)

    def _mark(self, node: str, index: int, healthy: bool) -> None:
        """The plugin's ListAndWatch reports GPU ``index``'s devices so (resources whose
        plugin endpoint is live: a stopped one reports nothing until it registers again)."""
        dm = self.devices[node]
        live = {r for r, ep in dm.endpoints().items() if not ep.stopped}
        for resource, ids in gpu_devices(self.cluster.nodes[node], index, dm.devices).items():
            if resource in live:
                for d in ids:
                    dm.set_health(resource, d, healthy)

    def sync_status(self, node: str) -> None:
        """Write the device manager's capacity/allocatable into the node, as the kubelet does."""
        n, dm = self.cluster.nodes[node], self.devices[node]
        n.capacity.update(dm.capacity())
        n.allocatable.update(dm.allocatable())
        self.cluster.snapshot.touch_nodes()
        self.cluster.wakeups += 1  # a node update: allocatable may have grown

    def sync_expired(self) -> None:
        """After the clock moved: nodes whose grace periods ran out report their new capacity."""
        nodes = self.cluster.nodes
        for name in nodes:
            n, dm = nodes[name], self.devices[name]
            if dm.capacity() != {r: n.capacity.get(r) for r in dm.capacity()}:
                self.sync_status(name)
