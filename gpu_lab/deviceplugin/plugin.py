"""A fake NVIDIA device plugin that speaks the real kubelet device-plugin API (v1beta1, gRPC).

It behaves like NVIDIA/k8s-device-plugin (checked against v0.15.0) on a node
with ``gpus`` GPUs of one model, minus the hardware:

* **Resources and devices** come from ``gpu_lab.gpus.labels.gpu_node_state``,
  the one function that also shapes a simulated node from a ``NodePool``, so
  a plugin started with ``--node-name h100-0`` advertises exactly the
  resources and device IDs the simulated node ``h100-0`` carries: whole GPUs
  as ``nvidia.com/gpu`` with stable fake UUIDs ``GPU-<uuid>``; time-slicing or
  MPS replicas as ``<uuid>::<n>``, NVIDIA's annotated IDs, advertised as
  ``<resource>.shared`` under ``renameByDefault``.
* **MIG**: ``--mig-config`` names one of NVIDIA's predefined mig-parted
  configs for the model (``all-balanced``, ``all-1g.10gb``, ...) or a
  mig-parted file (with ``--mig-config-name`` when it holds several configs);
  ``gpu_lab.gpus.migparted.resolve`` turns it into each GPU's instances, as
  the GPU Operator's MIG manager would have created them. With
  ``flags.migStrategy`` ``single`` the instances are ``nvidia.com/gpu``
  devices; with ``mixed`` each profile is its own resource,
  ``nvidia.com/mig-<profile>`` (``+me`` written ``.me``), with its own server,
  socket and registration; MIG devices are ``MIG-<uuid>``. With ``none`` the
  plugin keeps advertising MIG-enabled GPUs as whole ``nvidia.com/gpu``
  devices and logs that containers given one see no CUDA device. Where
  NVIDIA's plugin refuses to start (single with several profiles or with
  some GPUs not in MIG mode, a MIG-enabled GPU without instances under
  single/mixed, MPS on MIG-enabled GPUs) ours refuses too, with one line.
* **One gRPC server and one unix socket per resource** in the plugin dir,
  named like NVIDIA's (``"nvidia-" + <name after the slash> + ".sock"``:
  ``nvidia-gpu.sock``, ``nvidia-gpu.shared.sock``, ``nvidia-mig-1g.10gb.sock``), each
  registering with ``Registration.Register`` on ``DIR/kubelet.sock`` (version
  ``v1beta1``, ``get_preferred_allocation_available: true``).
* ``ListAndWatch`` sends the full list at once and again after every health
  change, each device with its GPU's NUMA node as ``topology`` (``--numa-nodes``;
  ``gpu_lab.gpus.topology``). ``GetPreferredAllocation`` answers with
  ``deviceids.preferred_allocation`` (whole GPUs by NVIDIA's best-effort policy: one
  NUMA node when the request fits one, keeping fuller ones whole; replicas spread
  across GPUs as NVIDIA's ``distributedAlloc`` does), ``must_include`` first, and
  logs each answer. ``Allocate`` returns
  ``NVIDIA_VISIBLE_DEVICES`` with the GPU or MIG UUIDs (replica suffix
  stripped, as NVIDIA does; under ``deviceIDStrategy: index`` NVIDIA's
  indices, ``<gpu>`` or ``<gpu>:<mig>`` for the MIG device's position on its
  GPU, ordered by first memory slice), the ``volume-mounts`` list strategy,
  MPS pipe/shm mounts, ``passDeviceSpecs`` device nodes (``/dev/nvidia<gpu>``;
  for a MIG device its parent GPU's, without the ``nvidia-caps`` nodes, whose
  minors depend on driver-assigned instance IDs); a request for more than
  one replica fails with NVIDIA's message under
  ``failRequestsGreaterThanOne`` (always under MPS). Under the CDI list
  strategies the answer names CDI devices ``k8s.device-plugin.nvidia.com/gpu=<id>``
  (NVIDIA's vendor; ``gds=all``/``mofed=all`` added when enabled): ``cdi-annotations``
  as one annotation ``cdi.k8s.io/nvidia-device-plugin_<response uuid>`` (the prefix is
  ``cdiAnnotationPrefix``), ``cdi-cri`` as the response's ``cdi_devices``, which the
  kubelet passes to the runtime in the CRI's ``CDIDevices``; the runtime resolves them
  against a CDI spec. The spec NVIDIA's plugin generates with NVML
  (``/var/run/cdi/k8s.device-plugin.nvidia.com-gpu.json``) is built as data by
  ``cdispec.cdi_spec`` but not written: its device nodes do not exist on a fake node, so
  on a real runtime such a container fails to start with "unresolvable CDI devices", as
  it does on a node whose spec is missing. The answer itself is ``response.allocate_response``.
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
  (a GPU or MIG UUID, which covers all its replicas; a GPU UUID also covers
  the MIG devices on that GPU, as an XID on the whole GPU does; or one
  replica ID) or ``all``, optionally followed by ``Healthy`` or
  ``Unhealthy`` (the default). Whenever
  the file's content changes, devices it names take that health and every
  other device turns healthy; an empty file makes all devices healthy;
  deleting the file changes nothing. ``#`` starts a comment. For example::

      echo GPU-1b2c... Unhealthy > /var/lib/kubelet/device-plugins/gpu-lab-health

Run it with ``python -m gpu_lab.deviceplugin.plugin --model H100-80GB --gpus 8
--plugin-dir DIR [--config FILE] [--mig-config NAME|FILE [--mig-config-name NAME]]
[--node-name N]`` (``main`` is what a ``gpu-lab device-plugin`` subcommand
calls). It logs one line per registration and per allocation on stderr.
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
from collections.abc import Iterable, Mapping, Sequence
from concurrent import futures
from pathlib import Path

# gRPC C-core prints INFO lines ("chttp2_transport ... Got goaway") to the terminal unless
# told otherwise, and reads this when it starts: quiet by default, the user's choice wins.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

import grpc  # noqa: E402

from ..errors import GpuLabError
from ..gpus.catalog import GpuModel, get_model
from ..gpus.labels import GpuNodeState, gpu_node_state
from ..gpus.migparted import resolve
from . import stubs
from .config import (
    DevicePluginConfig,
    allocation_problem,
    allocation_refusal,
    load_config,
    parse_config,
)
from .deviceids import (
    HEALTHY,
    UNHEALTHY,
    VISIBLE_DEVICES,
    preferred_allocation,
    split_replica,
)
from .response import (
    DeviceInfo,
    allocate_response,
    device_info,
)

API_VERSION = "v1beta1"
DEFAULT_PLUGIN_DIR = "/var/lib/kubelet/device-plugins"
KUBELET_SOCKET = "kubelet.sock"
HEALTH_FILE = "gpu-lab-health"
MAX_SOCKET_PATH = 107  # sun_path is 108 bytes with the terminating NUL

log = logging.getLogger("gpu_lab.deviceplugin")


# ------------------------------------------------------------------ what is advertised
def node_state(model: GpuModel | str, count: int, config: DevicePluginConfig | None = None,
               node_name: str = "node", mig_layouts: Sequence[Mapping[str, int] | None] | None = None,
               numa_nodes: int | None = None) -> GpuNodeState:
    """``gpu_node_state`` for this plugin's config: what GFD and the plugin make of the node."""
    config = config or parse_config(None)
    return gpu_node_state(node_name, get_model(model), count, sharing=config.sharing,
                          mig_strategy=config.mig_strategy, mig_layouts=mig_layouts,
                          numa_nodes=numa_nodes)


def advertised_devices(model: GpuModel | str, count: int, config: DevicePluginConfig | None = None,
                       node_name: str = "node",
                       mig_layouts: Sequence[Mapping[str, int] | None] | None = None) -> dict[str, list[str]]:
    """Resource name -> device IDs (advertised order) the plugin serves on this node.

    Exactly ``gpu_node_state(...).devices``. ``mig_layouts`` gives each GPU's
    MIG instances (``None`` = MIG disabled; see ``migparted.resolve``). Raises
    ``GpuLabError`` where NVIDIA's plugin fails to start (``gpu_node_state``
    then advertises nothing and says why).
    """
    state = node_state(model, count, config, node_name, mig_layouts)
    if not state.devices and state.warnings:  # the last warning says why nothing is advertised
        raise GpuLabError(f"the device plugin cannot start: {state.warnings[-1]}")
    return {r: list(ids) for r, ids in state.devices.items()}


def resolve_mig_config(model: GpuModel | str, count: int, mig_config, name: str | None = None
                       ) -> list[dict[str, int] | None]:
    """``--mig-config NAME|FILE [--mig-config-name NAME]`` -> each GPU's MIG layout.

    A value naming an existing file, or one with a path separator, is a
    mig-parted file; anything else names one of NVIDIA's predefined configs.
    """
    model = get_model(model)
    if isinstance(mig_config, str) and (os.sep in mig_config or os.path.isfile(mig_config)):
        mig_config = Path(mig_config)
    try:
        return resolve(model, count, mig_config, name)
    except GpuLabError as err:
        raise GpuLabError(f"--mig-config: {err}") from None


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

    def __init__(self, resource: str, ids: list[str], info: dict[str, DeviceInfo],
                 config: DevicePluginConfig, plugin_dir: str, numa: Mapping[str, int] | None = None):
        self.pb2, self.pb2_grpc = stubs.load()
        self.resource = resource
        self.config = config
        self.info = info  # GPU or MIG UUID -> its GPU, NVIDIA index, parent GPU UUID
        self.socket = os.path.join(plugin_dir, socket_name(resource))
        self.order = list(ids)
        self.numa = {d: (numa or {}).get(d) for d in ids}  # NVIDIA reads it from sysfs per GPU
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
        """The advertised IDs ``device_id`` names: itself, every replica of a GPU or MIG
        UUID, or every MIG device (and replica) on a GPU named by its UUID."""
        if device_id in self._health:
            return [device_id]
        out = []
        for d in self.order:
            base = split_replica(d)[0]
            info = self.info.get(base)
            if base == device_id or (info is not None and info.parent == device_id):
                out.append(d)
        return out

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
        pb = self.pb2

        def topology(d: str):
            n = self.numa.get(d)
            return None if n is None else pb.TopologyInfo(nodes=[pb.NUMANode(ID=n)])

        return [pb.Device(ID=d, health=HEALTHY if ok else UNHEALTHY, topology=topology(d))
                for d, ok in self._health.items()]

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
                                           req.allocation_size, self.order, self.numa)
            except GpuLabError as err:
                context.abort(grpc.StatusCode.UNKNOWN,
                              f"error getting list of preferred allocation devices: {err}")
            response.container_responses.add(deviceIDs=ids)
            log.info("preferred allocation %s: %d of %s -> %s", self.resource, req.allocation_size,
                     ",".join(available), ",".join(ids))
        return response

    def Allocate(self, request, context):
        response = self.pb2.AllocateResponse()
        for req in request.container_requests:
            ids = list(req.devices_ids)
            problem = self.validate(ids)
            if problem:
                log.info("allocate %s refused: %s", self.resource, problem)
                context.abort(grpc.StatusCode.UNKNOWN, allocation_refusal(self.resource, problem))
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
        """NVIDIA's ``ContainerAllocateResponse`` for ``ids`` (``response.allocate_response``)."""
        answer = allocate_response(self.config, self.resource, ids, self.info)
        resp = self.pb2.ContainerAllocateResponse(envs=answer["envs"], annotations=answer["annotations"])
        for m in answer["mounts"]:
            resp.mounts.add(**m)
        for d in answer["devices"]:
            resp.devices.add(**d)
        for n in answer["cdi_devices"]:
            resp.cdi_devices.add(name=n)
        return resp


# ------------------------------------------------------------------ the plugin
class FakeDevicePlugin:
    """All resource servers of one fake node, plus the loop that keeps them registered."""

    def __init__(self, model: GpuModel | str, gpus: int, config: DevicePluginConfig | None = None,
                 plugin_dir: str | Path = DEFAULT_PLUGIN_DIR, node_name: str | None = None,
                 kubelet_socket: str | Path | None = None, *, poll: float = 0.1, retry: float = 5.0,
                 mig_config=None, mig_config_name: str | None = None,
                 mig_layouts: Sequence[Mapping[str, int] | None] | None = None,
                 numa_nodes: int | None = None):
        """``mig_config`` (+ ``mig_config_name``) is ``--mig-config``: a predefined
        mig-parted config name, a file path, or a parsed mapping; ``mig_layouts``
        gives the per-GPU layouts directly instead (what ``migparted.resolve``
        returns). Without either every GPU has MIG disabled."""
        self.model = get_model(model)
        self.config = config or parse_config(None)
        self.node_name = node_name or default_node_name()
        self.plugin_dir = os.path.abspath(plugin_dir)
        self.kubelet_socket = os.path.abspath(kubelet_socket or os.path.join(self.plugin_dir, KUBELET_SOCKET))
        self.health_file = os.path.join(self.plugin_dir, HEALTH_FILE)
        self.poll, self.retry = poll, retry
        if mig_config is not None and mig_layouts is not None:
            raise GpuLabError("give a MIG config or MIG layouts, not both")
        if mig_config_name is not None and mig_config is None:
            raise GpuLabError("--mig-config-name needs --mig-config FILE")
        if mig_config is not None:
            mig_layouts = resolve_mig_config(self.model, gpus, mig_config, mig_config_name)
        self.mig_layouts = None if mig_layouts is None else [None if lay is None else dict(lay)
                                                              for lay in mig_layouts]
        self.devices = advertised_devices(self.model, gpus, self.config, self.node_name, self.mig_layouts)
        state = node_state(self.model, gpus, self.config, self.node_name, self.mig_layouts, numa_nodes)
        self.warnings = state.warnings
        info = device_info(self.model, gpus, self.node_name, self.mig_layouts)
        self.servers = {r: ResourceServer(r, ids, info, self.config, self.plugin_dir, state.numa)
                        for r, ids in self.devices.items()}
        for path in [self.kubelet_socket] + [s.socket for s in self.servers.values()]:
            if len(path.encode()) > MAX_SOCKET_PATH:
                raise GpuLabError(f"socket path too long ({len(path.encode())} bytes, unix sockets "
                                  f"allow {MAX_SOCKET_PATH}): {path}")
        self.registered: dict[str, bool] = dict.fromkeys(self.servers, False)
        self.registrations = 0
        self._kubelet_id = None
        self._health_stamp: tuple[int, int, int] | None = None
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
        """Mark a device healthy or not: a replica ID, a GPU or MIG UUID (all its
        replicas), or a GPU UUID whose MIG devices are advertised (all of them)."""
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
            elif not ok:  # as NVIDIA's plugin logs an Xid it marks a device unhealthy for
                why = line.split("#", 1)[1].strip() if "#" in line else "named in the health file"
                log.info("%s: %s; marking its %d device(s) unhealthy", words[0], why, hits)
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
    p.add_argument("--mig-config", metavar="NAME|FILE",
                   help="MIG layout of every GPU, as the GPU Operator's MIG manager applied it: one of "
                        "NVIDIA's predefined mig-parted configs for the model (all-disabled, all-enabled, "
                        "all-<profile>, all-balanced) or a mig-parted file (version: v1, mig-configs)")
    p.add_argument("--mig-config-name", metavar="NAME",
                   help="the config to apply from the --mig-config file (needed when it holds several)")
    p.add_argument("--numa-nodes", type=int, metavar="N",
                   help="NUMA nodes the GPUs are split over, reported in ListAndWatch and used by "
                        "GetPreferredAllocation (default: 2 for 8 or more GPUs, else 1)")
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
                                  args.node_name, args.kubelet_socket, mig_config=args.mig_config,
                                  mig_config_name=args.mig_config_name, numa_nodes=args.numa_nodes)
    except GpuLabError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    stop, restart = threading.Event(), threading.Event()
    handlers = {sig: signal.signal(sig, handler) for sig, handler in (
        (signal.SIGTERM, lambda *_: stop.set()),
        (signal.SIGINT, lambda *_: stop.set()),
        (signal.SIGHUP, lambda *_: restart.set()),
    )}
    for warning in plugin.warnings:
        log.warning("%s", warning)
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
