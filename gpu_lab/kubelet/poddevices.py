"""Which devices each pod's containers hold, and what the plugins answered for them.

The kubelet keeps this book apart from its plugin and health bookkeeping
(``podDevices`` in ``pkg/kubelet/cm/devicemanager/pod_devices.go``); so does gpu-lab.
One ``PodDevices`` per node, owned by its ``DeviceManager``, which passes its lock so a
device is never counted free while it is being recorded as held.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from typing import Any


class PodDevices:
    """pod key -> container -> resource -> device IDs, and the Allocate answers beside them."""

    def __init__(self, lock: threading.RLock | None = None):
        self._lock = lock or threading.RLock()
        self.held: dict[str, dict[str, dict[str, list[str]]]] = {}
        # pod key -> container -> resource -> the plugin's ContainerAllocateResponse as a dict
        self.responses: dict[str, dict[str, dict[str, dict[str, Any]]]] = {}

    def get(self, pod_key: str, container: str, resource: str) -> list[str] | None:
        """The IDs a container holds of ``resource`` (None when it holds none)."""
        with self._lock:
            ids = self.held.get(pod_key, {}).get(container, {}).get(resource)
            return list(ids) if ids is not None else None

    def insert(self, pod_key: str, container: str, resource: str, ids: Iterable[str]) -> None:
        with self._lock:
            self.held.setdefault(pod_key, {}).setdefault(container, {})[resource] = list(ids)

    def held_ids(self, resource: str) -> set[str]:
        """Every device of ``resource`` some container holds."""
        with self._lock:
            return {d for ctrs in self.held.values() for per in ctrs.values() for d in per.get(resource, ())}

    def record_response(self, pod_key: str, container: str, resource: str, response: Mapping[str, Any]) -> None:
        """Keep the plugin's Allocate answer (envs, mounts, devices, ...) for a container."""
        with self._lock:
            self.responses.setdefault(pod_key, {}).setdefault(container, {})[resource] = dict(response)

    def response(self, pod_key: str, container: str, resource: str) -> dict[str, Any]:
        with self._lock:
            return dict(self.responses.get(pod_key, {}).get(container, {}).get(resource, {}))

    def container_envs(self, pod_key: str, container: str) -> dict[str, str]:
        """The environment the plugins' Allocate answers give a container."""
        with self._lock:
            envs: dict[str, str] = {}
            for resp in self.responses.get(pod_key, {}).get(container, {}).values():
                envs.update(resp.get("envs", {}))
            return envs

    def release_container(self, pod_key: str, container: str, resource: str | None = None) -> None:
        """Forget one container's devices (all resources, or one), e.g. after a failed Allocate."""
        with self._lock:
            for book in (self.held, self.responses):
                ctrs = book.get(pod_key, {})
                per = ctrs.get(container, {})
                if resource is None:
                    per.clear()
                else:
                    per.pop(resource, None)
                if not per:
                    ctrs.pop(container, None)
                if not ctrs:
                    book.pop(pod_key, None)

    def release(self, pod_key: str) -> None:
        """The pod is gone: its devices are free again."""
        with self._lock:
            self.held.pop(pod_key, None)
            self.responses.pop(pod_key, None)

    def allocations(self, pod_key: str) -> dict[str, dict[str, list[str]]]:
        """container -> resource -> device IDs held by the pod."""
        with self._lock:
            return {c: {r: list(ids) for r, ids in per.items()} for c, per in self.held.get(pod_key, {}).items()}

    def pod_devices(self, pod_key: str) -> dict[str, list[str]]:
        """resource -> every device ID the pod's containers hold."""
        with self._lock:
            out: dict[str, list[str]] = {}
            for per in self.held.get(pod_key, {}).values():
                for r, ids in per.items():
                    out.setdefault(r, []).extend(ids)
            return out

    def counts(self) -> dict[str, int]:
        """Resource -> devices held by all pods."""
        with self._lock:
            out: dict[str, int] = {}
            for per_pod in self.held.values():
                for per in per_pod.values():
                    for r, ids in per.items():
                        out[r] = out.get(r, 0) + len(ids)
            return out

    def holds_any(self, pod_key: str) -> bool:
        """Whether any container of the pod holds a device."""
        with self._lock:
            return any(ids for per in self.held.get(pod_key, {}).values() for ids in per.values())


__all__ = ["PodDevices"]
