"""The kubelet's device manager, reduced to what scheduling needs to show.

After the scheduler binds a pod, the kubelet asks the device manager for the
devices each container requested; the plugin's ``Allocate`` answer turns the
chosen device IDs into ``NVIDIA_VISIBLE_DEVICES``. We keep, per node, the
devices each resource advertises and which pod/container holds which IDs. The
choice is the lowest free IDs in advertised order, which is what NVIDIA's
plugin prefers for identical GPUs without NVLink topology (its
GetPreferredAllocation packs in index order).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class DeviceManager:
    devices: dict[str, list[str]]  # resource -> device IDs in advertised order
    # pod key -> container -> resource -> ids
    held: dict[str, dict[str, dict[str, list[str]]]] = field(default_factory=dict)

    def free_devices(self, resource: str) -> list[str]:
        taken = {
            d for ctrs in self.held.values() for per in ctrs.values() for ids in per.values() for d in ids
        }
        return [d for d in self.devices.get(resource, []) if d not in taken]

    def allocate(self, pod_key: str, container: str, resource: str, count: int) -> list[str]:
        """Pick ``count`` free devices of ``resource``; raise if the node lacks them."""
        free = self.free_devices(resource)
        if len(free) < count:
            raise RuntimeError(
                f"requested number of devices unavailable for {resource}. Requested: {count}, Available: {len(free)}"
            )
        ids = free[:count]
        self.held.setdefault(pod_key, {}).setdefault(container, {}).setdefault(resource, []).extend(ids)
        return ids

    def release(self, pod_key: str) -> None:
        self.held.pop(pod_key, None)

    def allocations(self, pod_key: str) -> dict[str, dict[str, list[str]]]:
        """container -> resource -> device IDs held by the pod."""
        return {c: {r: list(ids) for r, ids in per.items()} for c, per in self.held.get(pod_key, {}).items()}

    def pod_devices(self, pod_key: str) -> dict[str, list[str]]:
        """resource -> every device ID the pod's containers hold."""
        out: dict[str, list[str]] = {}
        for per in self.held.get(pod_key, {}).values():
            for r, ids in per.items():
                out.setdefault(r, []).extend(ids)
        return out


def visible_devices_env(ids: list[str]) -> dict[str, str]:
    """What NVIDIA's plugin puts in the container's environment (deviceListStrategy envvar)."""
    return {"NVIDIA_VISIBLE_DEVICES": ",".join(ids)}
