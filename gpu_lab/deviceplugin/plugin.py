"""A fake NVIDIA device plugin that speaks the real kubelet device-plugin API (v1beta1, gRPC).

It behaves like NVIDIA/k8s-device-plugin (checked against v0.15.0) on a node
with ``gpus`` GPUs of one model, minus the hardware:

* **Resources and devices** come from ``advertised_devices`` (the seam MIG
  support will extend): whole GPUs as ``nvidia.com/gpu`` with stable fake UUIDs
  ``GPU-<uuid>`` derived from the node name and GPU index, the same IDs a
  simulated node from a ``NodePool`` carries (``gpu_uuids``); time-slicing or
  MPS replicas as ``<uuid>::<n>``, NVIDIA's annotated IDs, advertised as
  ``nvidia.com/gpu.shared`` under ``renameByDefault``.
* **One gRPC server and one unix socket per resource** in the plugin dir,
  named like NVIDIA's (``nvidia-gpu.sock``, ``nvidia-gpu.shared.sock``), each
  registering with ``Registration.Register`` on ``DIR/kubelet.sock`` (version
  ``v1beta1``, ``get_preferred_allocation_available: true``).
* ``ListAndWatch`` sends the full list at once and again after every health
  change. ``GetPreferredAllocation`` answers with ``manager.preferred_allocation``
  (lowest free GPUs first; replicas spread across GPUs as NVIDIA's
  ``distributedAlloc`` does), ``must_include`` first. ``Allocate`` returns
  ``NVIDIA_VISIBLE_DEVICES`` with the GPU UUIDs (replica suffix stripped, as
  NVIDIA does; GPU indices under ``deviceIDStrategy: index``), the
  ``volume-mounts`` list strategy, MPS pipe/shm mounts, ``passDeviceSpecs``
  device nodes; a request for more than one replica fails with NVIDIA's
  message under ``failRequestsGreaterThanOne`` (always under MPS). CDI list
  strategies are refused at start, as NVIDIA does on hosts without NVML.
  ``PreStartContainer`` does nothing.
* **Kubelet restarts**: like NVIDIA's plugin (which watches the folder with
  inotify) the plugin restarts its servers and registers again whenever
  ``kubelet.sock`` is created anew; it polls the socket's identity every
  ``poll`` seconds (0.1 s), and also restarts when one of its own sockets
  disappears (a starting kubelet wipes the folder), so a swap faster than
  the poll is not missed. A registration that fails (no kubelet yet) is
  retried on the next change of the socket or every ``retry`` seconds (5 s).
  ``SIGHUP`` restarts too; ``SIGTERM``/``SIGINT`` stop the plugin and remove
  its sockets.
* **Health** flips per device in-process (``set_health``) or from outside
  through a control file, ``DIR/gpu-lab-health``: each line names a device
  (a GPU UUID, which covers all its replicas, or one replica ID) or ``all``,
  optionally followed by ``Healthy`` or ``Unhealthy`` (the default). Whenever
  the file's content changes, devices it names take that health and every
  other device turns healthy; an empty file makes all devices healthy;
  deleting the file changes nothing. ``#`` starts a comment. For example::

      echo GPU-1b2c... Unhealthy > /var/lib/kubelet/device-plugins/gpu-lab-health

Run it with ``python -m gpu_lab.deviceplugin.plugin --model H100-80GB --gpus 8
--plugin-dir DIR [--config FILE] [--node-name N]`` (``main`` is what a
``gpu-lab device-plugin`` subcommand calls). It logs one line per
registration and per allocation on stderr.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Iterable
from concurrent import futures
from pathlib import Path

import grpc

from ..errors import GpuLabError
from ..gpus.catalog import GpuModel, get_model
from ..model.objects import stable_uid
from . import stubs
from .config import DevicePluginConfig, allocation_problem, load_config, parse_config
from .manager import (
    HEALTHY,
    UNHEALTHY,
    VISIBLE_DEVICES,
    preferred_allocation,
    split_replica,
    visible_devices,
)

API_VERSION = "v1beta1"
DEFAULT_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"
KUBELET_SOCKET = "kubelet.sock"
HEALTH_FILE = "gpu-lab-health"
MAX_SOCKET_PATH = 107  # sun_path is 108 bytes with the terminating NUL
VOLUME_MOUNTS_ROOT = "/var/run/nvidia-container-devices"
MPS_CONTAINER_ROOT = "/mps"

log = logging.getLogger("gpu_lab.deviceplugin")

try:  # the one function that shapes a GPU node (NodePools use it too); arrives with the MIG work
    from ..gpus.labels import gpu_node_state as _gpu_node_state
except ImportError:  # pragma: no cover - until then the same rule is applied below
    _gpu_node_state = None


# ------------------------------------------------------------------ what is advertised
def gpu_uuids(node_name: str, count: int) -> list[str]:
    """Stable fake GPU UUIDs of a node, ``GPU-<uuid>`` by index.

    The same IDs ``gpu_lab.model.nodepool`` gives the node's GPUs, so a plugin
    started with ``--node-name h100-0`` and the simulated node ``h100-0`` agree
    (tests/deviceplugin/test_dp_plugin.py checks it).
    """
    return [f"GPU-{stable_uid(node_name, str(g))}" for g in range(count)]


def advertised_devices(model: GpuModel | str, count: int, config: DevicePluginConfig | None = None,
                       node_name: str = "node") -> dict[str, list[str]]:
    """Resource name -> device IDs (advertised order) the plugin serves on this node.

    This is the seam MIG support extends: ``single`` and ``mixed`` strategies
    will add ``MIG-...`` devices and ``nvidia.com/mig-<profile>`` resources
    here. Until then they are refused.
    """
    model = get_model(model)
    config = config or parse_config(None)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise GpuLabError(f"GPU count must be a non-negative integer, got {count!r}")
    if config.mig_strategy != "none":
        raise GpuLabError(f'flags.migStrategy: "{config.mig_strategy}": MIG strategies are not '
                          "supported yet in this version of gpu-lab (use none)")
    if count == 0:
        return {}  # NVIDIA starts no plugin without devices
    if _gpu_node_state is not None:
        return {r: list(ids) for r, ids in
                _gpu_node_state(node_name, model, count, sharing=config.sharing).devices.items()}
    ids = gpu_uuids(node_name, count)
    sharing = config.sharing
    if sharing.shared:
        ids = [f"{u}::{r}" for u in ids for r in range(sharing.replicas)]
    return {sharing.resource: ids}


def socket_name(resource: str) -> str:
    """NVIDIA's socket file for a resource: ``nvidia.com/gpu`` -> ``nvidia-gpu.sock``."""
    return f"nvidia-{resource.split('/', 1)[-1]}.sock"


def default_node_name() -> str:
    return os.environ.get("NODE_NAME") or socket.gethostname()


def _unix(path: str) -> str:
    return "unix:" + os.path.abspath(path)


def _unlink(path: str) -> None:
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)


# ------------------------------------------------------------------ one resource
class ResourceServer:
    """The gRPC ``DevicePlugin`` service for one resource, on its own socket."""

    def __init__(self, resource: str, ids: list[str], gpu_index: dict[str, int],
                 config: DevicePluginConfig, plugin_dir: str):
        self.pb2, self.pb2_grpc = stubs.load()
        self.resource = resource
        self.config = config
        self.gpu_index = gpu_index  # GPU UUID -> index
        self.socket = os.path.join(plugin_dir, socket_name(resource))
        self.order = list(ids)
        self.replicated = any(split_replica(d)[1] is not None for d in ids)
        self._health = dict.fromkeys(ids, True)
        self._cond = threading.Condition()
        self._version = 0
        self._server: grpc.Server | None = None
        self._stopping = threading.Event()

    # lifecycle ----------------------------------------------------------
    def start(self) -> None:
        self._stopping = threading.Event()
        _unlink(self.socket)  # a crashed predecessor may have left it
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="dp"))
        self.pb2_grpc.add_DevicePluginServicer_to_server(self, server)
        try:
            server.add_insecure_port(_unix(self.socket))
        except RuntimeError as err:
            raise GpuLabError(f"cannot serve {self.resource} on {self.socket}: {err}") from None
        server.start()
        self._server = server

    def stop(self) -> None:
        self._stopping.set()
        with self._cond:
            self._cond.notify_all()
        if self._server is not None:
            self._server.stop(grace=None).wait(5)
            self._server = None
        _unlink(self.socket)

    def register(self, kubelet_socket: str, timeout: float = 5.0) -> None:
        """``Registration.Register`` on the kubelet's socket (raises ``grpc.RpcError``)."""
        pb2 = self.pb2
        request = pb2.RegisterRequest(
            version=API_VERSION,
            endpoint=os.path.basename(self.socket),
            resource_name=self.resource,
            options=pb2.DevicePluginOptions(get_preferred_allocation_available=True),
        )
        with grpc.insecure_channel(_unix(kubelet_socket)) as channel:
            self.pb2_grpc.RegistrationStub(channel).Register(request, timeout=timeout, wait_for_ready=True)

    # health -------------------------------------------------------------
    def ids_for(self, device_id: str) -> list[str]:
        """The advertised IDs ``device_id`` names: itself, or every replica of a GPU UUID."""
        if device_id in self._health:
            return [device_id]
        return [d for d in self.order if split_replica(d)[0] == device_id]

    def set_health(self, healthy_by_id: dict[str, bool]) -> bool:
        """Apply health changes; push a ListAndWatch update if anything changed."""
        with self._cond:
            changed = [d for d, ok in healthy_by_id.items() if d in self._health and self._health[d] != ok]
            for d in changed:
                self._health[d] = healthy_by_id[d]
            if changed:
                self._version += 1
                self._cond.notify_all()
                for state in (HEALTHY, UNHEALTHY):
                    ids = [d for d in changed if healthy_by_id[d] == (state == HEALTHY)]
                    if ids:
                        log.info("%s: %d device(s) now %s: %s", self.resource, len(ids), state, ",".join(ids))
        return bool(changed)

    def health(self) -> dict[str, bool]:
        with self._cond:
            return dict(self._health)

    def _devices(self):
        Device = self.pb2.Device
        return [Device(ID=d, health=HEALTHY if ok else UNHEALTHY) for d, ok in self._health.items()]

    # DevicePlugin service -------------------------------------------------
    def GetDevicePluginOptions(self, request, context):
        return self.pb2.DevicePluginOptions(get_preferred_allocation_available=True)

    def ListAndWatch(self, request, context):
        stopping = self._stopping
        context.add_callback(self._wake)
        seen = None
        while not stopping.is_set() and context.is_active():
            with self._cond:
                if seen == self._version:
                    self._cond.wait(0.5)
                    if seen == self._version:
                        continue
                seen = self._version
                devices = self._devices()
            yield self.pb2.ListAndWatchResponse(devices=devices)

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify_all()

    def GetPreferredAllocation(self, request, context):
        response = self.pb2.PreferredAllocationResponse()
        for req in request.container_requests:
            offered = set(req.available_deviceIDs)
            available = [d for d in self.order if d in offered]
            try:
                ids = preferred_allocation(available, req.must_include_deviceIDs,
                                           req.allocation_size, self.order)
            except GpuLabError as err:
                context.abort(grpc.StatusCode.UNKNOWN,
                              f"error getting list of preferred allocation devices: {err}")
            response.container_responses.add(deviceIDs=ids)
        return response

    def Allocate(self, request, context):
        response = self.pb2.AllocateResponse()
        for req in request.container_requests:
            ids = list(req.devices_ids)
            problem = self.validate(ids)
            if problem:
                log.info("allocate %s refused: %s", self.resource, problem)
                context.abort(grpc.StatusCode.UNKNOWN,
                              f'invalid allocation request for "{self.resource}": invalid request: {problem}')
            response.container_responses.append(self.container_response(ids))
            log.info("allocate %s: %s -> %s=%s", self.resource, ",".join(ids), VISIBLE_DEVICES,
                     response.container_responses[-1].envs.get(VISIBLE_DEVICES, ""))
        return response

    def PreStartContainer(self, request, context):
        return self.pb2.PreStartContainerResponse()

    # Allocate's answer ----------------------------------------------------
    def validate(self, ids: list[str]) -> str | None:
        """NVIDIA's ``ValidateRequest`` (shared with the simulator)."""
        return allocation_problem(self.config, ids, self._health)

    def container_response(self, ids: list[str]):
        cfg = self.config
        gpus = visible_devices(ids)
        if cfg.device_id_strategy == "index":
            listed = [str(self.gpu_index[g]) for g in gpus]
        else:
            listed = gpus
        resp = self.pb2.ContainerAllocateResponse()
        if "envvar" in cfg.device_list_strategy:
            resp.envs[VISIBLE_DEVICES] = ",".join(listed)
        if "volume-mounts" in cfg.device_list_strategy:
            resp.envs[VISIBLE_DEVICES] = VOLUME_MOUNTS_ROOT
            for d in listed:
                resp.mounts.add(host_path="/dev/null", container_path=f"{VOLUME_MOUNTS_ROOT}/{d}")
        if cfg.sharing.strategy == "mps":
            pipe = f"{MPS_CONTAINER_ROOT}/{self.resource}/pipe"
            resp.envs["CUDA_MPS_PIPE_DIRECTORY"] = pipe
            resp.mounts.add(container_path=pipe, host_path=os.path.join(cfg.mps_root, self.resource, "pipe"))
            resp.mounts.add(container_path="/dev/shm", host_path=os.path.join(cfg.mps_root, "shm"))
        if cfg.pass_device_specs:
            for i in dict.fromkeys(self.gpu_index[g] for g in gpus):
                resp.devices.add(container_path=f"/dev/nvidia{i}", permissions="rw",
                                 host_path=os.path.join(cfg.nvidia_driver_root, f"dev/nvidia{i}"))
        if cfg.gds_enabled:
            resp.envs["NVIDIA_GDS"] = "enabled"
        if cfg.mofed_enabled:
            resp.envs["NVIDIA_MOFED"] = "enabled"
        return resp


# ------------------------------------------------------------------ the plugin
class FakeDevicePlugin:
    """All resource servers of one fake node, plus the loop that keeps them registered."""

    def __init__(self, model: GpuModel | str, gpus: int, config: DevicePluginConfig | None = None,
                 plugin_dir: str | Path = DEFAULT_PLUGIN_DIR, node_name: str | None = None,
                 kubelet_socket: str | Path | None = None, *, poll: float = 0.1, retry: float = 5.0):
        self.model = get_model(model)
        self.config = config or parse_config(None)
        if any(s.startswith("cdi-") for s in self.config.device_list_strategy):
            raise GpuLabError("flags.plugin.deviceListStrategy: CDI --device-list-strategy options are "
                              "only supported on NVML-based systems (the fake plugin has no NVML)")
        self.node_name = node_name or default_node_name()
        self.plugin_dir = os.path.abspath(plugin_dir)
        self.kubelet_socket = os.path.abspath(kubelet_socket or os.path.join(self.plugin_dir, KUBELET_SOCKET))
        self.health_file = os.path.join(self.plugin_dir, HEALTH_FILE)
        self.poll, self.retry = poll, retry
        self.devices = advertised_devices(self.model, gpus, self.config, self.node_name)
        index = {u: i for i, u in enumerate(gpu_uuids(self.node_name, gpus))}
        self.servers = {r: ResourceServer(r, ids, index, self.config, self.plugin_dir)
                        for r, ids in self.devices.items()}
        for path in [self.kubelet_socket] + [s.socket for s in self.servers.values()]:
            if len(path.encode()) > MAX_SOCKET_PATH:
                raise GpuLabError(f"socket path too long ({len(path.encode())} bytes, unix sockets "
                                  f"allow {MAX_SOCKET_PATH}): {path}")
        self.registered: dict[str, bool] = dict.fromkeys(self.servers, False)
        self.registrations = 0
        self._kubelet_id = None
        self._health_stamp = None
        self._started = False
        self._lock = threading.RLock()

    # lifecycle ----------------------------------------------------------
    def start(self) -> bool:
        """Serve every resource, then register each; returns whether all registered."""
        with self._lock:
            try:
                os.makedirs(self.plugin_dir, exist_ok=True)
            except OSError as err:
                raise GpuLabError(f"cannot create the plugin dir {self.plugin_dir}: "
                                  f"{err.strerror or err}") from None
            self.registered = dict.fromkeys(self.servers, False)
            self._kubelet_id = self._socket_id()
            for srv in self.servers.values():
                srv.start()
            self._started = True
            if self._kubelet_id is None:
                log.info("waiting for the kubelet: %s does not exist yet", self.kubelet_socket)
                return False
            return self.register()

    def register(self) -> bool:
        with self._lock:
            for r, srv in self.servers.items():
                try:
                    srv.register(self.kubelet_socket)
                except grpc.RpcError as err:
                    self.registered[r] = False
                    detail = err.details() if hasattr(err, "details") else str(err)
                    log.info("could not register %s with the kubelet at %s: %s", r, self.kubelet_socket,
                             detail)
                    continue
                self.registered[r] = True
                self.registrations += 1
                log.info("registered %s (%d devices) with the kubelet at %s, endpoint %s", r,
                         len(srv.order), self.kubelet_socket, os.path.basename(srv.socket))
            return all(self.registered.values())

    def stop(self) -> None:
        with self._lock:
            for srv in self.servers.values():
                srv.stop()
            self._started = False

    def restart(self, why: str) -> bool:
        """Stop every server and start again (new sockets), as NVIDIA's plugin does."""
        log.info("%s, restarting", why)
        with self._lock:
            health = {r: s.health() for r, s in self.servers.items()}
            self.stop()
            for r, srv in self.servers.items():
                srv.set_health(health[r])
            return self.start()

    # health -------------------------------------------------------------
    def set_health(self, device_id: str, healthy: bool) -> None:
        """Mark a device (a replica ID, or a GPU UUID meaning all its replicas) healthy or not."""
        found = False
        for srv in self.servers.values():
            ids = srv.ids_for(device_id)
            if ids:
                found = True
                srv.set_health(dict.fromkeys(ids, bool(healthy)))
        if not found:
            raise GpuLabError(f"unknown device {device_id} (this plugin serves "
                              f"{', '.join(self.servers) or 'no resources'})")

    def health(self) -> dict[str, dict[str, bool]]:
        return {r: s.health() for r, s in self.servers.items()}

    def apply_health_file(self, text: str) -> None:
        """Apply the control file's content (see the module docstring)."""
        wanted = {r: dict.fromkeys(s.order, True) for r, s in self.servers.items()}
        for n, line in enumerate(text.splitlines(), 1):
            words = line.split("#", 1)[0].split()
            if not words:
                continue
            if len(words) > 2 or (len(words) == 2 and words[1] not in (HEALTHY, UNHEALTHY)):
                log.info("%s line %d ignored: expected DEVICE [Healthy|Unhealthy]", HEALTH_FILE, n)
                continue
            ok = len(words) == 2 and words[1] == HEALTHY
            hits = 0
            for r, srv in self.servers.items():
                ids = srv.order if words[0] == "all" else srv.ids_for(words[0])
                hits += len(ids)
                wanted[r].update(dict.fromkeys(ids, ok))
            if not hits:
                log.info("%s line %d ignored: unknown device %s", HEALTH_FILE, n, words[0])
        for r, srv in self.servers.items():
            srv.set_health(wanted[r])

    # the loop -------------------------------------------------------------
    def _socket_id(self):
        try:
            st = os.stat(self.kubelet_socket)
        except OSError:
            return None
        return (st.st_dev, st.st_ino, st.st_ctime_ns)

    def _check_health_file(self) -> None:
        try:
            st = os.stat(self.health_file)
        except OSError:
            return  # deleting the file changes nothing
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp == self._health_stamp:
            return
        self._health_stamp = stamp
        try:
            text = Path(self.health_file).read_text()
        except OSError:
            return
        self.apply_health_file(text)

    def step(self, since_retry: float) -> bool:
        """One pass of the watch loop; returns whether a registration retry happened."""
        self._check_health_file()
        current = self._socket_id()
        if current is not None and current != self._kubelet_id:
            self.restart(f"{self.kubelet_socket} created")
            return True
        gone = [s.socket for s in self.servers.values() if not os.path.exists(s.socket)]
        if gone:  # a starting kubelet wipes the folder; polling may miss the socket's swap itself
            self.restart(f"{gone[0]} removed")
            return True
        if not all(self.registered.values()) and since_retry >= self.retry and current is not None:
            self.register()
            return True
        return False

    def serve_forever(self, stop: threading.Event, restart: threading.Event | None = None) -> None:
        """Watch the kubelet socket and the health file until ``stop`` is set."""
        if not self._started:
            self.start()
        since = 0.0
        while not stop.wait(self.poll):
            if restart is not None and restart.is_set():
                restart.clear()
                self.restart("SIGHUP received")
                since = 0.0
                continue
            since += self.poll
            if self.step(since):
                since = 0.0


# ------------------------------------------------------------------ the program
def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="gpu-lab device-plugin",
        description="Run a fake NVIDIA device plugin that registers with a kubelet over the real "
                    "device-plugin API (v1beta1). Runs until SIGTERM.")
    p.add_argument("--model", required=True, help="GPU model, e.g. H100-80GB")
    p.add_argument("--gpus", type=int, required=True, help="number of GPUs on the node")
    p.add_argument("--config", help="NVIDIA device-plugin config file (version: v1)")
    p.add_argument("--node-name", help="node the GPU UUIDs derive from (default: $NODE_NAME or the hostname)")
    p.add_argument("--plugin-dir", default=DEFAULT_PLUGIN_DIR,
                   help=f"the kubelet's device-plugin folder (default {DEFAULT_PLUGIN_DIR})")
    p.add_argument("--kubelet-socket", help="the kubelet's registration socket (default PLUGIN_DIR/kubelet.sock)")
    return p


def main(argv: Iterable[str] | None = None) -> int:
    args = build_parser().parse_args(None if argv is None else list(argv))
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s device-plugin: %(message)s")
    try:
        plugin = FakeDevicePlugin(args.model, args.gpus, load_config(args.config), args.plugin_dir,
                                  args.node_name, args.kubelet_socket)
    except GpuLabError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    stop, restart = threading.Event(), threading.Event()
    handlers = {sig: signal.signal(sig, handler) for sig, handler in (
        (signal.SIGTERM, lambda *_: stop.set()),
        (signal.SIGINT, lambda *_: stop.set()),
        (signal.SIGHUP, lambda *_: restart.set()),
    )}
    log.info("serving %s on node %s: %s", plugin.model.name, plugin.node_name,
             ", ".join(f"{r}={len(ids)}" for r, ids in plugin.devices.items()) or "no devices")
    try:
        plugin.start()
        plugin.serve_forever(stop, restart)
    except GpuLabError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    finally:
        plugin.stop()
        for sig, previous in handlers.items():
            signal.signal(sig, previous)
        log.info("stopped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
