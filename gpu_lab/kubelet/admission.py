"""The kubelet's admission of a pod the scheduler bound to its node.

Shared by the simulator and the local backend's node agent, so both reject the same
pods with the same words. The order is the kubelet's: the Topology Manager admits each
container and the device manager allocates its devices first (``admit_devices``; a NUMA
refusal is ``TopologyAffinityError``, an Allocate failure ``UnexpectedAdmissionError``),
then the resource check (``fit_failure``, ``OutOf<resource>``). Every rejection message
starts with ``Pod was rejected: `` (``kubelet.rejectPod``).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..deviceplugin.config import DevicePluginConfig, allocation_problem, allocation_refusal
from ..deviceplugin.deviceids import visible_devices_env
from ..errors import DeviceAllocationError
from ..model.objects import is_extended_resource
from .devicemanager import DeviceManager
from .topologymanager import (
    TOPOLOGY_AFFINITY_ERROR,
    TOPOLOGY_AFFINITY_MESSAGE,
    device_hints,
)
from .topologymanager import admit as topology_admit

if TYPE_CHECKING:  # the Registration server needs gRPC; the simulator never passes one
    from .registration import KubeletServer

REJECTED_PREFIX = "Pod was rejected: "
UNEXPECTED_ADMISSION_ERROR = "UnexpectedAdmissionError"
FIT_ORDER = ("pods", "cpu", "memory", "ephemeral-storage")


@dataclass
class DeviceAdmission:
    """What the device manager gave a pod's containers, or why the kubelet rejects the pod."""

    devices: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # container -> resource -> IDs
    failure: tuple[str, str] | None = None  # (reason, message); the pod's devices are released
    plugin_envs: dict[tuple[str, str], dict[str, str]] = field(default_factory=dict)  # Allocate answers

    @property
    def envs(self) -> dict[str, dict[str, str]]:
        """container -> the environment its devices set: a plugin's Allocate answer, or what
        NVIDIA's plugin would set (built on demand: the simulator never reads it)."""
        out: dict[str, dict[str, str]] = {}
        for container, per in self.devices.items():
            env = out.setdefault(container, {})
            for r, ids in per.items():
                got = self.plugin_envs.get((container, r))
                if got is None:
                    got = visible_devices_env(ids) if r.startswith("nvidia.com/") else {}
                env.update(got)
        return out


def admit_devices(
    manager: DeviceManager,
    pod_key: str,
    requests: Iterable[tuple[str, str, int]],
    config: DevicePluginConfig,
    *,
    kubelet: KubeletServer | None = None,
    plugin_resources: Collection[str] = (),
    topology_policy: str = "none",
) -> DeviceAdmission:
    """The device manager's ``Allocate`` for every (container, resource, count) of a pod.

    With a ``topology_policy`` other than ``none`` the Topology Manager admits each
    container first (``topologymanager``; a refusal is ``TopologyAffinityError``) and its
    NUMA nodes steer the allocation. A resource in ``plugin_resources`` goes through
    ``kubelet`` to its plugin process (``GetPreferredAllocation``, then ``Allocate``); any
    other is allocated here and validated as NVIDIA's plugin validates it (``config``,
    e.g. ``failRequestsGreaterThanOne``). The first failure releases what the pod got
    and rejects it (``UnexpectedAdmissionError``).
    """
    out, known = DeviceAdmission(), manager.devices
    by_container: dict[str, list[tuple[str, int]]] = {}
    for container, r, count in requests:
        by_container.setdefault(container, []).append((r, count))
    machine: frozenset[int] = frozenset()
    if topology_policy != "none":
        machine = frozenset(n for r in known for n in manager.numa(r).values() if n is not None)
    try:
        for container, wanted in by_container.items():
            affinity = None
            if machine:
                hints = [device_hints(manager.numa(r), manager.free_devices(r), count)
                         for r, count in wanted]
                ok, affinity = topology_admit(topology_policy, hints, machine)
                if not ok:
                    manager.pods.release(pod_key)
                    out.failure = (TOPOLOGY_AFFINITY_ERROR, REJECTED_PREFIX + TOPOLOGY_AFFINITY_MESSAGE)
                    return out
            for r, count in wanted:
                if kubelet is not None and r in plugin_resources:
                    a = kubelet.allocate(pod_key, container, r, count, affinity=affinity)
                    ids = a.device_ids
                    out.plugin_envs[container, r] = a.envs
                else:
                    ids = manager.allocate(pod_key, container, r, count, affinity=affinity)
                    problem = allocation_problem(config, ids, known.get(r, ()))
                    if problem:
                        # what the kubelet would read from the plugin's refusal
                        raise DeviceAllocationError(
                            f"rpc error: code = Unknown desc = {allocation_refusal(r, problem)}"
                        )
                if ids:
                    out.devices.setdefault(container, {})[r] = ids  # a fresh list
    except DeviceAllocationError as err:
        manager.pods.release(pod_key)
        out.failure = (UNEXPECTED_ADMISSION_ERROR, admission_error_message(err))
    return out


def fit_failure(
    requests: Mapping[str, int],
    used: Mapping[str, int],
    pods_used: int,
    allocatable: Mapping[str, int],
) -> tuple[str, str] | None:
    """(reason, message) when the node cannot hold the pod, else None."""

    def short(r: str, want: int, have_used: int, cap: int) -> tuple[str, str]:
        return (
            f"OutOf{r}",
            f"{REJECTED_PREFIX}Node didn't have enough resource: {r}, requested: {want}, "
            f"used: {have_used}, capacity: {cap}",
        )

    cap_pods = allocatable.get("pods", 0)
    if pods_used + 1 > cap_pods:
        return short("pods", 1, pods_used, cap_pods)
    rest = [r for r in requests if r not in FIT_ORDER]
    rest.sort()
    for r in (*FIT_ORDER[1:], *rest):
        want = requests.get(r, 0)
        if want <= 0:
            continue
        if r not in allocatable and is_extended_resource(r):
            continue  # removeMissingExtendedResources
        cap, u = allocatable.get(r, 0), used.get(r, 0)
        if want > cap - u:
            return short(r, want, u, cap)
    return None


def admission_error_message(err: Exception) -> str:
    """The pod message of a device-manager rejection (``DeviceAllocationError``)."""
    text = (
        getattr(err, "admission_message", None)
        or f"Allocate failed due to {err}, which is unexpected"
    )
    return REJECTED_PREFIX + text
