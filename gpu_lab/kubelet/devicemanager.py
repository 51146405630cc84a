"""The kubelet's device manager: plugins, devices, health, capacity and who holds what.

One ``DeviceManager`` per node, shared by the simulator and the local
backend's node agent. It models ``pkg/kubelet/cm/devicemanager`` (checked
against Kubernetes v1.37.2):

* A plugin **registers** one resource with an endpoint (its socket file name);
  the kubelet then streams ``ListAndWatch`` and every message **replaces** the
  resource's device list and per-device health (``update_devices``).
* ``capacity()`` counts every device of a resource, ``allocatable()`` only the
  healthy ones (``GetCapacity``).
* When a plugin's endpoint goes away (its ListAndWatch stream ends: crash,
  restart, socket deleted) every device of its resource turns unhealthy at once
  (``markResourceUnhealthy``): **allocatable drops to 0 while capacity stays**.
  Once the endpoint has been stopped for longer than the grace period (the
  kubelet's ``endpointStopGracePeriod``, 5 minutes; ``grace_period`` here) the
  resource is dropped and **capacity drops too**. The kubelet's node-status
  setter then writes 0 for a removed resource instead of deleting it, so a
  stale name lingers at 0 on the Node (NVIDIA/k8s-device-plugin issue #214):
  ``capacity()`` and ``allocatable()`` show removed resources at 0 the same way.
* A new registration replaces the stopped endpoint; the next ListAndWatch
  message restores capacity and allocatable.
* Allocation (``devicesToAllocate``) takes only healthy devices that no
  container holds, with the kubelet's own error messages; a container that
  already holds its devices gets them again (container restart).
* Who holds which device, and the plugin's Allocate answers, are kept apart in
  ``manager.pods`` (:class:`~.poddevices.PodDevices`, the kubelet's ``podDevices``).

Time comes from ``clock`` (seconds, default ``time.monotonic``), so tests can
drive the grace period with a fake clock instead of waiting five minutes.

Which free devices a container gets, when no plugin process is asked, is
``gpu_lab.deviceplugin.deviceids.preferred_allocation``: the rule NVIDIA's plugin answers
``GetPreferredAllocation`` with, which the fake plugin calls too, so the simulator and a
real plugin-to-kubelet round trip hand out the same IDs.

``DeviceManager(devices)`` (what the simulator builds) registers every
resource with no endpoint and all devices healthy, as a node looks once its
plugin has reported.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..deviceplugin.deviceids import HEALTHY, preferred_allocation
from ..errors import DeviceAllocationError, GpuLabError
from .poddevices import PodDevices

ENDPOINT_STOP_GRACE_PERIOD = 5 * 60.0  # seconds; the kubelet's endpointStopGracePeriod
#: the plugin's GetPreferredAllocation: (available, must_include, size) -> device IDs
Prefer = Callable[[list[str], list[str], int], list[str]]


# ------------------------------------------------------------------ the manager
@dataclass
class Endpoint:
    """A registered plugin: its resource, socket file name and options."""

    resource: str
    endpoint: str | None  # socket file name in the device-plugin dir; None for the simulator
    options: dict = field(default_factory=dict)
    registered_at: float = 0.0
    stop_time: float | None = None  # when its ListAndWatch stream ended

    @property
    def stopped(self) -> bool:
        return self.stop_time is not None


class DeviceManager:
    """Devices per resource on one node, their health and who holds which (thread-safe)."""

    def __init__(self, devices: Mapping[str, Iterable[str]] | None = None, *,
                 grace_period: float = ENDPOINT_STOP_GRACE_PERIOD,
                 clock: Callable[[], float] = time.monotonic,
                 numa: Mapping[str, int] | None = None):
        self.grace_period = float(grace_period)
        self.clock = clock
        self._lock = threading.RLock()
        self._endpoints: dict[str, Endpoint] = {}
        self._health: dict[str, dict[str, bool]] = {}  # resource -> id -> healthy, advertised order
        self._numa: dict[str, dict[str, int | None]] = {}  # resource -> id -> NUMA node (topology)
        self._removed: set[str] = set()  # resources that left capacity (shown at 0)
        self._stopped: set[str] = set()  # resources whose endpoint is stopped (grace running)
        self.pods = PodDevices(self._lock)  # who holds which device (pod_devices.go)
        for resource, ids in (devices or {}).items():
            self.register(resource, None)
            self.update_devices(resource, [(d, True, (numa or {}).get(d)) for d in ids])

    # ------------------------------------------------------------- plugins
    def register(self, resource: str, endpoint: str | None, options: Mapping[str, Any] | None = None) -> None:
        """A plugin registered ``resource`` (replacing any earlier endpoint for it).

        Devices reported before stay as they are (unhealthy after a stop) until
        the new endpoint's first ListAndWatch message replaces them.
        """
        with self._lock:
            self._endpoints[resource] = Endpoint(resource, endpoint, dict(options or {}), self.clock())
            self._stopped.discard(resource)

    def endpoint_stopped(self, resource: str, endpoint: str | None = None) -> bool:
        """The plugin's stream for ``resource`` ended: all its devices turn unhealthy now.

        With ``endpoint`` given, a stop from an older endpoint that has since been
        replaced is ignored. Returns whether anything changed.
        """
        with self._lock:
            ep = self._endpoints.get(resource)
            if ep is None or ep.stopped or (endpoint is not None and ep.endpoint != endpoint):
                return False
            ep.stop_time = self.clock()
            self._stopped.add(resource)
            health = self._health.setdefault(resource, {})
            for d in health:
                health[d] = False
            return True

    def endpoint(self, resource: str) -> Endpoint | None:
        with self._lock:
            self._collect()
            return self._endpoints.get(resource)

    def endpoints(self) -> dict[str, Endpoint]:
        with self._lock:
            self._collect()
            return dict(self._endpoints)

    def update_devices(self, resource: str, devices: Mapping[str, Any] | Iterable[Any]) -> None:
        """A ListAndWatch message: the full device list of ``resource``, replacing the last.

        ``devices`` is IDs (all healthy), a mapping ID -> health, or tuples
        ``(id, health)`` or ``(id, health, numa_node)``; health is a bool or
        ``"Healthy"``/``"Unhealthy"``, ``numa_node`` the device's ``TopologyInfo`` (or None).
        """
        items = devices.items() if isinstance(devices, Mapping) else devices
        health: dict[str, bool] = {}
        numa: dict[str, int | None] = {}
        for item in items:
            if isinstance(item, str):
                health[item] = True
            else:
                dev_id, h, *node = item
                health[str(dev_id)] = h is True or h == HEALTHY
                if node and node[0] is not None:
                    numa[str(dev_id)] = int(node[0])
        with self._lock:
            if resource not in self._endpoints:
                raise GpuLabError(f"device update for {resource}, which no plugin registered")
            self._health[resource] = health
            self._numa[resource] = numa
            self._removed.discard(resource)

    def set_health(self, resource: str, device_id: str, healthy: bool) -> None:
        """Flip one device's health, as a ListAndWatch update for that device would."""
        with self._lock:
            health = self._health.get(resource, {})
            if device_id not in health:
                raise GpuLabError(f"unknown device {device_id} for {resource}")
            health[device_id] = bool(healthy)

    def health(self, resource: str) -> dict[str, bool]:
        """Device ID -> healthy, in advertised order."""
        with self._lock:
            self._collect()
            return dict(self._health.get(resource, {}))

    def numa(self, resource: str) -> dict[str, int | None]:
        """Device ID -> NUMA node for every device of ``resource`` (None: no topology)."""
        with self._lock:
            nodes = self._numa.get(resource, {})
            return {d: nodes.get(d) for d in self._health.get(resource, {})}

    def _collect(self) -> None:
        """Drop resources whose endpoint has been stopped for longer than the grace period."""
        if not self._stopped:
            return
        now = self.clock()
        for r in list(self._stopped):
            ep = self._endpoints[r]
            if ep.stop_time is not None and now - ep.stop_time > self.grace_period:
                del self._endpoints[r]
                self._health.pop(r, None)
                self._numa.pop(r, None)
                self._stopped.discard(r)
                self._removed.add(r)

    # ------------------------------------------------------------- node status
    def capacity(self) -> dict[str, int]:
        """Per resource, every device the plugin reported; removed resources at 0."""
        with self._lock:
            self._collect()
            out = {r: 0 for r in sorted(self._removed)}
            out.update({r: len(h) for r, h in self._health.items() if r in self._endpoints})
            return out

    def allocatable(self) -> dict[str, int]:
        """Per resource, the healthy devices (0 while the plugin is gone); removed at 0."""
        with self._lock:
            self._collect()
            out = {r: 0 for r in sorted(self._removed)}
            out.update({r: sum(h.values()) for r, h in self._health.items() if r in self._endpoints})
            return out

    @property
    def devices(self) -> Mapping[str, list[str]]:
        """Resource -> device IDs in advertised order, for resources in capacity (a live view)."""
        return _DevicesView(self)

    def _live(self) -> list[str]:
        with self._lock:
            self._collect()
            return [r for r in self._health if r in self._endpoints]

    # ------------------------------------------------------------- allocation
    def free_devices(self, resource: str) -> list[str]:
        """Healthy devices of ``resource`` no container holds, in advertised order."""
        with self._lock:
            self._collect()
            taken = self.pods.held_ids(resource)
            return [d for d, ok in self._health.get(resource, {}).items() if ok and d not in taken]

    def available(self, resource: str) -> list[str]:
        """``free_devices``, or the kubelet's error when the resource cannot be allocated at all."""
        with self._lock:
            self._collect()
            health = self._health.get(resource)
            if resource not in self._endpoints or health is None:
                raise DeviceAllocationError(f"cannot allocate unregistered device {resource}")
            if not any(health.values()):
                raise DeviceAllocationError(
                    f"no healthy devices present; cannot allocate unhealthy devices {resource}")
            return self.free_devices(resource)

    def allocate(self, pod_key: str, container: str, resource: str, count: int,
                 prefer: Prefer | None = None, affinity: Collection[int] | None = None) -> list[str]:
        """Give ``count`` healthy free devices of ``resource`` to a container and record them.

        As the kubelet's ``devicesToAllocate``: with ``affinity`` (the Topology Manager's
        NUMA nodes) devices on those nodes come first; the plugin's preference
        (``prefer(available, must_include, size)``: its GetPreferredAllocation, when a real
        plugin is asked; else ``preferred_allocation``, the same rule) chooses among them.
        A container that already holds devices of ``resource`` gets them back if the
        count matches. Raises ``DeviceAllocationError`` with the kubelet's message.
        """
        with self._lock:
            current = self.pods.get(pod_key, container, resource)
            if current:
                if len(current) != count:
                    raise DeviceAllocationError(
                        f'pod "{pod_key}" container "{container}" changed request for resource '
                        f'"{resource}" from {len(current)} to {count}')
                health = self._health.get(resource, {})
                if not all(health.get(d) for d in current):
                    raise DeviceAllocationError(
                        "previously allocated devices are no longer healthy; cannot allocate "
                        f"unhealthy devices {resource}")
                return list(current)
            free = self.available(resource)
            if len(free) < count:
                raise DeviceAllocationError(
                    f"requested number of devices unavailable for {resource}. "
                    f"Requested: {count}, Available: {len(free)}")
            if count <= 0:
                return []
            numa = self._numa.get(resource, {})
            if prefer is None:
                health = self._health[resource]

                def prefer(avail: list[str], must: list[str], size: int) -> list[str]:
                    return preferred_allocation(avail, must, size, health, numa)

            if affinity is None or not numa:
                aligned: list[str] = []
            else:
                aligned = [d for d in free if numa.get(d) in affinity]
            ids: list[str] = []

            def take(devices: Iterable[str]) -> bool:
                for d in devices:
                    if len(ids) == count:
                        break
                    if d not in ids:
                        ids.append(d)
                return len(ids) == count

            if count < len(aligned):
                done = take(d for d in prefer(aligned, [], count) if d in set(aligned)) or take(aligned)
            else:
                done = take(aligned)
                if not done:
                    ok = set(free)
                    done = take(d for d in prefer(free, list(ids), count) if d in ok)
                if not done:  # unaligned, then devices without topology, in advertised order
                    take(d for d in free if d in numa)
                    take(free)
            self.pods.insert(pod_key, container, resource, ids)
            return list(ids)


class _DevicesView(Mapping):
    """``DeviceManager.devices``: cheap membership tests, lists copied on access."""

    def __init__(self, manager: DeviceManager):
        self._m = manager

    def __contains__(self, resource: object) -> bool:
        return resource in self._m._live()

    def __getitem__(self, resource: str) -> list[str]:
        m = self._m
        with m._lock:
            if resource not in m._live():
                raise KeyError(resource)
            return list(m._health[resource])

    def __iter__(self) -> Iterator[str]:
        return iter(self._m._live())

    def __len__(self) -> int:
        return len(self._m._live())

    def __repr__(self) -> str:
        return repr(dict(self))
