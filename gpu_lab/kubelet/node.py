"""One node the node agent plays the kubelet of (the local backend's node, not the
simulator's): its device manager, plugin process and Registration server, its figures and
the pods it holds.

A node whose pool the fake device plugin can serve (``advertised_devices`` gives
exactly the record's devices) gets a plugin process and a ``KubeletServer`` feeding
its ``DeviceManager`` (whole GPUs, time-slicing, MPS and MIG single/mixed, the pool's
mig-parted config passed as ``--mig-config``); a NodePool with ``spec.dra`` gets no plugin:
its GPUs are ResourceSlices (``dra_devices``, see ``dradriver.resourceslices``); otherwise
(plain Node manifests listing ``nvidia.com/*`` capacity) the manager holds fixed devices, as the
simulator's does. Used by :mod:`gpu_lab.kubelet.agent`.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import queue
import tempfile
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from ..deviceplugin.config import DevicePluginConfig, parse_config
from ..deviceplugin.plugin import (
    HEALTH_FILE,
    KUBELET_SOCKET,
    MAX_SOCKET_PATH,
    advertised_devices,
    socket_name,
)
from ..dradriver.resourceslices import DRIVER, PublishedDevice, is_dra_node, published_devices
from ..errors import GpuLabError, NodeAgentError
from ..model.nodepool import MIG_CONFIG_LABEL
from ..model.objects import Node
from ..names import stable_uid
from . import nodestatus as ns
from .devicemanager import DeviceManager
from .gpuhealth import gpu_count, gpu_devices, health_file, mig_layouts, record
from .migmanager import MigOutcome
from .pluginprocess import PluginProcess
from .registration import KubeletServer

log = logging.getLogger("gpu_lab.nodeagent")


@dataclass
class PodState:
    uid: str
    key: str
    requests: dict[str, int] = field(default_factory=dict)
    admitted: bool = False  # holds resources on the node
    terminal: bool = False
    deleting: bool = False
    started: str | None = None
    prepare_error: str = ""  # why its ResourceClaims could not be prepared (retried)


class AgentNode:
    """One node of the node agent: its record, device manager, plugin and pods (the pods
    are touched only by the node's worker thread)."""

    def __init__(self, node: Node, index: int, work_dir: Path, grace_period: float,
                 clock: Callable[[], float] = time.monotonic):
        self.node, self.name, self.index = node, node.name, index
        self.ip = ns.node_ip(index)
        self.dir = work_dir / node.name
        self.plugin_dir = self.dir / "device-plugins"
        self.plugin_dir_note = ""
        self.config: DevicePluginConfig = parse_config(None)
        self.kubelet: KubeletServer | None = None
        self.plugin: PluginProcess | None = None
        self.plugin_resources: set[str] = set()
        self.static_reason = ""
        self.dra_devices: dict[str, PublishedDevice] = {}
        self.manager = self._plan(grace_period, clock)
        self.pods: dict[str, PodState] = {}
        self.queue: queue.Queue = queue.Queue()
        self.uid: str | None = None
        self.boot_id = str(uuid.uuid4())
        self.ready_since = ns.rfc3339()
        self.last_status: dict | None = None
        self.retired = False  # its Node was deleted: the agent no longer plays it (agent.py)
        self.last_beat = self.last_lease = 0.0
        self._ips = itertools.count()
        # the MIG manager (migmanager.py): the mig.config value it last took up, the one
        # config the session allowed it to evict GPU pods for, and how its runs ended
        self.mig_seen: str | None = node.labels.get(MIG_CONFIG_LABEL)
        self.mig_evict: str | None = None
        self.failed_gpus: dict[int, str] = {}  # GPU index -> reason (fail_device/heal_device)
        self.mig_outcome: MigOutcome | None = None
        self.mig_runs = 0

    # ------------------------------------------------------------------ devices
    def _plan(self, grace_period: float, clock: Callable[[], float]) -> DeviceManager:
        """A device plugin process when the fake plugin advertises exactly the record's
        devices; else fixed devices (or none)."""
        node = self.node
        spec = node.raw.get("nodePool") or {}
        gpu = spec.get("gpu") or {}
        if is_dra_node(node):  # NVIDIA's DRA driver publishes the GPUs: no device plugin
            self.dra_devices = published_devices(node)
            self.static_reason = f"GPUs published as ResourceSlices by the DRA driver {DRIVER}"
            return DeviceManager(grace_period=grace_period, clock=clock)
        if node.pool and gpu.get("model") and gpu.get("count"):
            where = f'NodePool "{node.pool}": spec.devicePlugin'
            self.config = parse_config(spec.get("devicePlugin"), where)
            offered: dict[str, list[str]] | None = None
            try:
                self.mig_layouts = mig_layouts(gpu["model"], int(gpu["count"]), spec.get("mig"))
                offered = advertised_devices(gpu["model"], gpu["count"], self.config, node.name,
                                             mig_layouts=self.mig_layouts)
            except GpuLabError as err:
                why = str(err)
            else:
                why = f"the fake plugin would advertise {_counts(offered)}, not {_counts(node.devices)}"
            if offered is not None and offered == node.devices:
                self.plugin_resources = set(offered)
                return DeviceManager(grace_period=grace_period, clock=clock)
            self.static_reason = why
            log.warning("%s: no device-plugin process (%s); fixed devices instead", node.name, why)
        return DeviceManager(_fixed_devices(node), grace_period=grace_period, clock=clock)

    @property
    def has_plugin(self) -> bool:
        return bool(self.plugin_resources)

    def _too_long(self, plugin_dir: Path) -> Path | None:
        names = [KUBELET_SOCKET] + [socket_name(r) for r in self.plugin_resources]
        for n in names:
            path = plugin_dir.absolute() / n
            if len(str(path).encode()) > MAX_SOCKET_PATH:
                return path
        return None

    def check_socket_paths(self) -> None:
        """Unix socket paths are limited to 107 bytes: a work dir too deep for them gets
        its sockets in a short folder of the temporary directory instead (logged)."""
        if self._too_long(self.plugin_dir) is None:
            return
        digest = hashlib.sha1(str(self.plugin_dir.absolute()).encode()).hexdigest()[:12]
        short = Path(tempfile.gettempdir()) / f"gpu-lab-{os.getuid()}" / digest
        if self._too_long(short) is not None:
            path = self._too_long(self.plugin_dir)
            raise NodeAgentError(
                f"work dir too deep for unix sockets ({len(str(path).encode())} > "
                f"{MAX_SOCKET_PATH} bytes): {path}; use a shorter --work-dir"
            )
        self.plugin_dir_note = f"{self.plugin_dir} is too deep for unix sockets"
        log.info("%s: %s; device-plugin sockets in %s", self.name, self.plugin_dir_note, short)
        self.plugin_dir = short

    def start_devices(self) -> None:
        if not self.has_plugin:
            return
        self.check_socket_paths()
        self.dir.mkdir(parents=True, exist_ok=True)
        config_path = None
        raw = (self.node.raw.get("nodePool") or {}).get("devicePlugin")
        if raw:
            config_path = self.dir / "device-plugin.yaml"
            config_path.write_text(yaml.safe_dump(raw, sort_keys=False))
        gpu = self.node.raw["nodePool"]["gpu"]
        self.kubelet = KubeletServer(self.plugin_dir, self.manager).start()
        self.plugin = PluginProcess(
            self.name,
            str(gpu["model"]),
            int(gpu["count"]),
            self.plugin_dir,
            self.dir / "device-plugin.log",
            config_path,
            extra_args=self._plugin_args(),
        )
        self.plugin.start()

    def _plugin_args(self) -> list[str]:
        """The plugin's ``--numa-nodes`` and ``--mig-config`` for the record's pool."""
        spec = self.node.raw.get("nodePool") or {}
        numa = (spec.get("gpu") or {}).get("numaNodes")
        return ([] if numa is None else ["--numa-nodes", str(numa)]) + self._mig_args()

    def _mig_args(self) -> list[str]:
        """The plugin's ``--mig-config`` for the record's MIG config (none without one)."""
        mig = (self.node.raw.get("nodePool") or {}).get("mig") or {}
        if mig.get("migParted") is not None:
            parted = self.dir / "mig-parted.yaml"
            parted.write_text(yaml.safe_dump(mig["migParted"], sort_keys=False))
            return ["--mig-config", str(parted)] + (
                ["--mig-config-name", str(mig["config"])] if mig.get("config") else [])
        return ["--mig-config", str(mig["config"])] if mig.get("config") else []

    def repartitioned(self, node: Node) -> None:
        """The MIG manager applied a new layout: ``node`` is the record after it (the shared
        model's, ``kubelet.reconfigure``); the plugin's next start serves its devices. The
        plugin must be stopped (it is restarted by the caller)."""
        gpu = node.raw["nodePool"]["gpu"]
        layouts = mig_layouts(gpu["model"], int(gpu["count"]), node.raw["nodePool"].get("mig"))
        offered = advertised_devices(gpu["model"], gpu["count"], self.config, node.name, mig_layouts=layouts)
        if offered != node.devices:  # the plugin and the shared model disagree: a bug, said plainly
            raise NodeAgentError(f"{node.name}: the fake plugin would advertise {_counts(offered)}, "
                                 f"not {_counts(node.devices)}")
        self.node, self.mig_layouts = node, layouts
        self.plugin_resources = set(offered)
        self.started()[1].extra_args = self._plugin_args()

    def started(self) -> tuple[KubeletServer, PluginProcess]:
        """The kubelet side and the plugin process, for a node with a plugin once ``start_devices`` ran."""
        assert self.kubelet is not None and self.plugin is not None, f"{self.name}: no device plugin started"
        return self.kubelet, self.plugin

    def plugin_serving(self, since: float = 0.0) -> bool:
        """Every plugin resource registered (after ``since``) and reported healthy devices."""
        m = self.manager
        for r in self.plugin_resources:
            ep = m.endpoint(r)
            if ep is None or ep.stopped or ep.registered_at < since:
                return False
            if not any(m.health(r).values()):
                return False
        return True

    def restart_plugin(self, wait: bool = True, timeout: float = 15.0) -> bool:
        """Start the plugin again (stopping it first if it runs); with ``wait``, whether it
        registered and reported healthy devices within ``timeout``."""
        kubelet, plugin = self.started()
        if plugin.alive:
            plugin.stop()
        t0 = time.monotonic()
        plugin.start()
        if not wait:
            return True
        deadline = t0 + timeout
        while time.monotonic() < deadline:
            if kubelet.wait_for(lambda: self.plugin_serving(t0), timeout=0.2):
                return True
            if not plugin.alive:
                return False
        return False

    def set_gpu_health(self, index: int, reason: str | None, timeout: float = 15.0) -> bool:
        """GPU ``index`` fails (``reason``, e.g. "Xid 79") or heals (None): the plugin's control
        file lists the failed GPUs and the plugin turns their devices Unhealthy in ListAndWatch.
        Returns whether the kubelet side saw the change within ``timeout`` (at once when the
        plugin is down: it reads the file when it starts again)."""
        kubelet, plugin = self.started()
        record(self.failed_gpus, index, reason)
        path = self.plugin_dir / HEALTH_FILE
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(health_file(self.name, gpu_count(self.node), self.failed_gpus))
        os.replace(tmp, path)  # the plugin never reads half a file
        if not plugin.alive:
            return True
        want = gpu_devices(self.node, index, self.manager.devices)
        healthy = reason is None
        return kubelet.wait_for(lambda: all(self.manager.health(r).get(d) == healthy
                                            for r, ids in want.items() for d in ids), timeout=timeout)

    def stop_devices(self) -> None:
        if self.plugin is not None:
            self.plugin.stop()
        if self.kubelet is not None:
            self.kubelet.stop()

    # ------------------------------------------------------------------ figures
    def published(self) -> tuple[dict[str, int], dict[str, int]]:
        """(capacity, allocatable) as the Node shows them."""
        return ns.resources(self.node, self.manager.capacity(), self.manager.allocatable())

    def held(self) -> dict[str, int]:
        """Resource -> devices held by this node's pods."""
        return self.manager.pods.counts()

    def admission_allocatable(self) -> dict[str, int]:
        """Allocatable for the kubelet's fit predicate: device resources at least what is
        allocated (``sanitizeNodeAllocatable``)."""
        _, alloc = self.published()
        for r, n in self.held().items():
            alloc[r] = max(alloc.get(r, 0), n)
        return alloc

    def used(self) -> tuple[dict[str, int], int]:
        total: dict[str, int] = {}
        count = 0
        for st in self.pods.values():
            if st.admitted:
                count += 1
                for r, v in st.requests.items():
                    total[r] = total.get(r, 0) + v
        return total, count

    def next_pod_ip(self) -> str:
        n = next(self._ips) % 253 + 2
        return f"10.{244 + self.index // 256}.{self.index % 256}.{n}"


def wait_plugins(nodes: Iterable[AgentNode], deadline: float) -> None:
    """Until every node's plugin serves; :class:`NodeAgentError` with its log's tail when
    one exits or ``deadline`` (monotonic) passes first."""
    waiting = [sn for sn in nodes if sn.has_plugin]
    while waiting:
        for sn in list(waiting):
            plugin = sn.started()[1]  # has_plugin nodes, after start_devices
            if sn.plugin_serving():
                waiting.remove(sn)
            elif not plugin.alive:
                assert plugin.proc is not None  # it was started
                raise NodeAgentError(
                    f"the device plugin of {sn.name} exited with code "
                    f"{plugin.proc.returncode}: {plugin.log_tail()}"
                )
        if not waiting:
            return
        if time.monotonic() > deadline:
            sn = waiting[0]
            raise NodeAgentError(
                f"the device plugin of {sn.name} did not register in time: "
                f"{sn.started()[1].log_tail() or 'no output'}"
            )
        waiting[0].started()[0].wait_for(waiting[0].plugin_serving, timeout=0.1)


def _counts(devices: dict[str, list[str]]) -> str:
    return ", ".join(f"{r}={len(ids)}" for r, ids in sorted(devices.items())) or "nothing"


def _fixed_devices(node: Node) -> dict[str, list[str]]:
    """The record's device IDs; made-up stable ones for ``nvidia.com/*`` capacity a
    plain Node manifest lists (the simulator's rule)."""
    devices = {r: list(ids) for r, ids in node.devices.items()}
    for r, count in node.capacity.items():
        if r.startswith("nvidia.com/") and r not in devices:
            prefix = "MIG" if r.startswith("nvidia.com/mig-") else "GPU"
            devices[r] = [f"{prefix}-{stable_uid(node.name, r, str(i))}" for i in range(count)]
    return devices
