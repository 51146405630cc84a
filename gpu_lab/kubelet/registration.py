"""The kubelet's side of the device-plugin API: the Registration server and its plugin clients.

``KubeletServer`` does over real gRPC what the kubelet's
``pkg/kubelet/cm/devicemanager/plugin/v1beta1`` server and client do
(Kubernetes v1.37.2), feeding a ``DeviceManager``:

* On start it removes the files a previous run left in the device-plugin
  folder (``CleanupPluginDirectory``; this is also what tells plugins that
  the kubelet restarted) and serves ``Registration`` on ``DIR/kubelet.sock``.
* ``Register`` checks the API version and that the resource is an extended
  resource name, dials the plugin's socket (``DIR/<endpoint>``), calls
  ``GetDevicePluginOptions``, records the endpoint in the manager and answers;
  a thread then reads the plugin's ``ListAndWatch`` stream into the manager.
* When the stream ends (plugin stopped, crashed, socket gone: ``UNAVAILABLE``
  or end of stream) the manager marks the endpoint stopped: allocatable for
  the resource drops to 0 at once, capacity follows after the grace period.
  A new registration for the resource replaces the old client.
* ``allocate`` is the kubelet's admission-time allocation for one container
  and resource: healthy free devices, the plugin's ``GetPreferredAllocation``
  when it offers one, then ``Allocate``; errors carry the kubelet's messages
  (``DeviceAllocationError.admission_message`` is what a rejected pod shows).

Unlike the kubelet, a registration for a socket that is still connected
replaces the old connection instead of failing with "device plugin already
connected": a plugin restarted faster than its old stream was noticed to break
would otherwise have to retry.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections.abc import Callable, Collection
from concurrent import futures
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import grpc

from ..deviceplugin import stubs
from ..deviceplugin.plugin import API_VERSION, KUBELET_SOCKET, MAX_SOCKET_PATH
from ..errors import DeviceAllocationError
from ..model.objects import is_extended_resource
from .devicemanager import DeviceManager

CHECKPOINT = "kubelet_internal_checkpoint"
SUPPORTED_VERSIONS = (API_VERSION,)

log = logging.getLogger("gpu_lab.kubelet.registration")


@dataclass
class Allocation:
    """One container's devices of one resource and the plugin's Allocate answer."""

    resource: str
    device_ids: list[str]
    envs: dict[str, str] = field(default_factory=dict)
    mounts: list[dict[str, Any]] = field(default_factory=list)
    devices: list[dict[str, Any]] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)
    cdi_devices: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"envs": dict(self.envs), "mounts": list(self.mounts), "devices": list(self.devices),
                "annotations": dict(self.annotations), "cdi_devices": list(self.cdi_devices),
                "device_ids": list(self.device_ids)}


def _file_id(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino


def rpc_error_text(err: grpc.RpcError) -> str:
    """A gRPC error as Go's status package prints it: ``rpc error: code = X desc = Y``."""
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    name = "".join(w.capitalize() for w in code.name.split("_")) if code else "Unknown"
    details = err.details() if hasattr(err, "details") else str(err)
    return f"rpc error: code = {name} desc = {details}"


class _Client:
    """The kubelet's connection to one plugin endpoint."""

    def __init__(self, resource: str, endpoint: str, socket_path: str):
        self.resource, self.endpoint, self.socket_path = resource, endpoint, socket_path
        self.pb2, pb2_grpc = stubs.load()
        self.channel = grpc.insecure_channel("unix:" + socket_path)
        self.stub = pb2_grpc.DevicePluginStub(self.channel)
        self.options: dict[str, bool] = {}
        self.stream: Any = None  # ListAndWatch's response stream (iterable, cancellable); the stub is untyped
        self.thread: threading.Thread | None = None

    def close(self) -> None:
        if self.stream is not None:
            self.stream.cancel()
        self.channel.close()


class KubeletServer:
    """A Registration server on ``DIR/kubelet.sock`` feeding a ``DeviceManager``."""

    def __init__(self, plugin_dir: str | Path, manager: DeviceManager | None = None, *,
                 socket_name: str = KUBELET_SOCKET, cleanup: bool = True,
                 dial_timeout: float = 10.0, rpc_timeout: float = 10.0):
        self.pb2, self.pb2_grpc = stubs.load()
        self.plugin_dir = os.path.abspath(plugin_dir)
        self.socket_path = os.path.join(self.plugin_dir, socket_name)
        if len(self.socket_path.encode()) > MAX_SOCKET_PATH:
            raise ValueError(f"socket path too long for a unix socket: {self.socket_path}")
        self.manager = manager if manager is not None else DeviceManager()
        self.cleanup = cleanup
        self.dial_timeout, self.rpc_timeout = dial_timeout, rpc_timeout
        self.registrations: list[tuple[float, str, str]] = []  # (time.monotonic(), resource, endpoint)
        self._clients: dict[str, _Client] = {}
        self._lock = threading.RLock()
        self._changed = threading.Condition()
        self._server: grpc.Server | None = None
        self._socket_id: tuple[int, int] | None = None  # (device, inode) of the socket we serve

    # lifecycle ------------------------------------------------------------
    def start(self) -> KubeletServer:
        os.makedirs(self.plugin_dir, exist_ok=True)
        if self.cleanup:
            for entry in os.scandir(self.plugin_dir):
                if entry.name != CHECKPOINT and not entry.is_dir(follow_symlinks=False):
                    os.unlink(entry.path)
        elif os.path.exists(self.socket_path):
            os.unlink(self.socket_path)
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="kubelet"))
        self.pb2_grpc.add_RegistrationServicer_to_server(self, server)
        server.add_insecure_port("unix:" + self.socket_path)
        server.start()
        self._server = server
        self._socket_id = _file_id(self.socket_path)
        log.info("serving Registration on %s", self.socket_path)
        return self

    def stop(self) -> None:
        """Stop serving; every connected plugin's endpoint is marked stopped, as the kubelet does."""
        with self._lock:
            clients, self._clients = list(self._clients.values()), {}
        for c in clients:
            self.manager.endpoint_stopped(c.resource, c.endpoint)
            c.close()
        if self._server is not None:
            self._server.stop(grace=None).wait(5)
            self._server = None
            # only our own socket: a server started since in the same folder (the node
            # registered again under its name) keeps its own
            if self._socket_id is not None and _file_id(self.socket_path) == self._socket_id:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.socket_path)
            self._socket_id = None
        self._notify()

    def __enter__(self) -> KubeletServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # Registration service ---------------------------------------------------
    def Register(self, request, context):
        resource, endpoint = request.resource_name, request.endpoint
        log.info("registration request for %s, endpoint %s", resource, endpoint)
        if request.version not in SUPPORTED_VERSIONS:
            supported = "[" + " ".join(f'"{v}"' for v in SUPPORTED_VERSIONS) + "]"
            context.abort(grpc.StatusCode.UNKNOWN, f'requested API version "{request.version}" is not '
                          f"supported by kubelet. Supported version is {supported}")
        if not is_extended_resource(resource):
            context.abort(grpc.StatusCode.UNKNOWN, f'the ResourceName "{resource}" is invalid')
        try:
            self.connect(resource, endpoint)
        except grpc.RpcError as err:
            context.abort(grpc.StatusCode.UNKNOWN, f"failed to dial device plugin: {rpc_error_text(err)}")
        return self.pb2.Empty()

    def connect(self, resource: str, endpoint: str) -> None:
        """Dial the plugin, read its options, record it and start reading ListAndWatch."""
        client = _Client(resource, endpoint, os.path.join(self.plugin_dir, endpoint))
        try:
            opts = client.stub.GetDevicePluginOptions(self.pb2.Empty(), timeout=self.dial_timeout,
                                                      wait_for_ready=True)
        except grpc.RpcError:
            client.close()
            raise
        client.options = {"pre_start_required": opts.pre_start_required,
                          "get_preferred_allocation_available": opts.get_preferred_allocation_available}
        with self._lock:
            old = self._clients.get(resource)
            self._clients[resource] = client
            self.manager.register(resource, endpoint, client.options)
            self.registrations.append((time.monotonic(), resource, endpoint))
        if old is not None:
            old.close()
        client.thread = threading.Thread(target=self._run, args=(client,), daemon=True,
                                         name=f"listandwatch-{resource}")
        client.thread.start()
        log.info("registered %s at endpoint %s", resource, endpoint)
        self._notify()

    def _current(self, client: _Client) -> bool:
        with self._lock:
            return self._clients.get(client.resource) is client

    def _run(self, client: _Client) -> None:
        why = "ListAndWatch stream ended"
        try:
            client.stream = client.stub.ListAndWatch(self.pb2.Empty())
            for resp in client.stream:
                if not self._current(client):
                    return
                self.manager.update_devices(client.resource, [
                    (d.ID, d.health, d.topology.nodes[0].ID if d.HasField("topology")
                     and d.topology.nodes else None) for d in resp.devices])
                self._notify()
        except grpc.RpcError as err:
            why = f"ListAndWatch ended unexpectedly: {rpc_error_text(err)}"
        finally:
            with self._lock:
                current = self._clients.get(client.resource) is client
                if current:
                    del self._clients[client.resource]
                    self.manager.endpoint_stopped(client.resource, client.endpoint)
            if current:
                log.info("device plugin for %s disconnected (%s)", client.resource, why)
                client.channel.close()
                self._notify()

    # waiting ----------------------------------------------------------------
    def _notify(self) -> None:
        with self._changed:
            self._changed.notify_all()

    def wait_for(self, predicate: Callable[[], Any], timeout: float = 5.0) -> bool:
        """Block until ``predicate()`` is true after some plugin event, or ``timeout`` passes."""
        with self._changed:
            return bool(self._changed.wait_for(predicate, timeout))

    def connected(self) -> dict[str, str]:
        """Resource -> endpoint of every plugin with a live stream."""
        with self._lock:
            return {r: c.endpoint for r, c in self._clients.items()}

    # allocation -------------------------------------------------------------
    def allocate(self, pod_key: str, container: str, resource: str, count: int,
                 affinity: Collection[int] | None = None) -> Allocation:
        """The kubelet's allocation of ``count`` devices of ``resource`` for one container
        (``affinity``: the Topology Manager's NUMA nodes, devices on them first)."""
        pb2, m = self.pb2, self.manager
        held = m.pods.get(pod_key, container, resource)
        if held:  # container restart: same devices, no new Allocate call
            ids = m.allocate(pod_key, container, resource, count)
            resp = m.pods.response(pod_key, container, resource)
            return self._allocation(resource, ids, resp)
        with self._lock:
            client = self._clients.get(resource)
        prefer = None
        if client is not None and client.options.get("get_preferred_allocation_available"):
            def prefer(available: list[str], must: list[str], size: int) -> list[str]:
                request = pb2.PreferredAllocationRequest(container_requests=[
                    pb2.ContainerPreferredAllocationRequest(
                        available_deviceIDs=available, must_include_deviceIDs=must,
                        allocation_size=size)])
                try:
                    answer = client.stub.GetPreferredAllocation(request, timeout=self.rpc_timeout)
                except grpc.RpcError as err:
                    raise DeviceAllocationError(rpc_error_text(err)) from None
                return list(answer.container_responses[0].deviceIDs) if answer.container_responses else []
        else:
            def prefer(available: list[str], must: list[str], size: int) -> list[str]:
                return []  # no GetPreferredAllocation: the kubelet takes what is left
        ids = m.allocate(pod_key, container, resource, count, prefer=prefer, affinity=affinity)
        if not ids:
            return Allocation(resource, [])
        if client is None:
            m.pods.release_container(pod_key, container, resource)
            raise DeviceAllocationError(f"unknown Device Plugin {resource}")
        request = pb2.AllocateRequest(container_requests=[pb2.ContainerAllocateRequest(devices_ids=ids)])
        try:
            answer = client.stub.Allocate(request, timeout=self.rpc_timeout)
        except grpc.RpcError as err:
            m.pods.release_container(pod_key, container, resource)
            raise DeviceAllocationError(rpc_error_text(err)) from None
        if not answer.container_responses:
            m.pods.release_container(pod_key, container, resource)
            raise DeviceAllocationError(f"no containers return in allocation response {answer}")
        r = answer.container_responses[0]
        resp = {
            "envs": dict(r.envs),
            "mounts": [{"container_path": x.container_path, "host_path": x.host_path,
                        "read_only": x.read_only} for x in r.mounts],
            "devices": [{"container_path": x.container_path, "host_path": x.host_path,
                         "permissions": x.permissions} for x in r.devices],
            "annotations": dict(r.annotations),
            "cdi_devices": [x.name for x in r.cdi_devices],
        }
        m.pods.record_response(pod_key, container, resource, resp)
        log.info("allocated %s to %s/%s: %s", resource, pod_key, container, ",".join(ids))
        return self._allocation(resource, ids, resp)

    @staticmethod
    def _allocation(resource: str, ids: list[str], resp: dict[str, Any]) -> Allocation:
        return Allocation(resource, list(ids), dict(resp.get("envs", {})), list(resp.get("mounts", [])),
                          list(resp.get("devices", [])), dict(resp.get("annotations", {})),
                          list(resp.get("cdi_devices", [])))

    def pre_start_container(self, resource: str, device_ids: list[str]) -> None:
        """``PreStartContainer`` when the plugin asked for it (the kubelet allows 30 s)."""
        with self._lock:
            client = self._clients.get(resource)
        if client is None or not client.options.get("pre_start_required"):
            return
        try:
            client.stub.PreStartContainer(self.pb2.PreStartContainerRequest(devices_ids=device_ids), timeout=30)
        except grpc.RpcError as err:
            raise DeviceAllocationError(rpc_error_text(err)) from None
