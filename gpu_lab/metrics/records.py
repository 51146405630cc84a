"""The input of every utilisation figure: which container holds which GPU device, and what it declares.

One ``GpuUse`` per (container, device): a pod with 2 GPUs gives two. A
``GpuNode`` lists a node's physical GPUs, so GPUs no pod holds still show (at
0 %, as dcgm-exporter shows them). Everything else (framebuffer size, the
share of a GPU a device is, the physical GPU's UUID) is derived from
``gpu_lab.gpus`` here, once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import GpuLabError
from ..gpus.catalog import GpuModel, get_model
from ..gpus.labels import gpu_uuids
from ..gpus.mig import COMPUTE_SLICES, MigProfile, geometry
from .annotations import declared, pod_name

SHARING = ("none", "time-slicing", "mps", "mig")


@dataclass(frozen=True)
class GpuUse:
    """One container's hold on one GPU device and its pod's declared use of it."""

    namespace: str
    pod: str
    container: str
    node: str
    model: str  # catalog name, GFD product or alias ("H100-80GB", "NVIDIA-H100-80GB-HBM3", "h100")
    gpu: int  # index of the physical GPU on the node: DCGM's ``gpu`` label, device ``nvidia<gpu>``
    device_id: str  # as the device plugin hands it out: GPU-<uuid>, GPU-<uuid>::<n>, MIG-<uuid>
    utilization: float | None = None  # declared percent busy (gpulab.dev/gpu-utilization)
    memory_mib: float | None = None  # declared framebuffer use (gpulab.dev/gpu-memory)
    requested: int = 1  # GPU devices the pod requested, all containers (nvidia.com/* limits)
    sharing: str = "none"  # none, time-slicing, mps or mig
    replicas: int = 1  # time-slicing/MPS replicas per GPU: one replica is 1/replicas of a GPU
    mig_profile: str | None = None  # "1g.10gb" when sharing is mig
    gpu_instance_id: int | None = None  # DCGM's GPU_I_ID; None: numbered per GPU in input order
    uuid: str | None = None  # the physical GPU's UUID; None: from device_id or gpu-lab's formula
    hours: float = 1.0  # how long the pod held the device (GPU-hours = share x hours)

    @classmethod
    def from_annotations(cls, annotations: Mapping[str, Any] | None, **fields: Any) -> GpuUse:
        """Build a use from a pod's ``metadata.annotations`` (validated, one-line errors)."""
        d = declared(annotations, pod=fields.get("pod", ""), namespace=fields.get("namespace"))
        return cls(utilization=d.utilization, memory_mib=d.memory_mib, **fields)

    @property
    def key(self) -> str:
        return pod_name(self.namespace, self.pod)


@dataclass(frozen=True)
class GpuNode:
    """A node's physical GPUs: ``gpus`` of ``model``, indexes 0..gpus-1.

    ``mig``: every GPU has MIG enabled, so a GPU no pod holds an instance of
    shows no whole-GPU series (its idle instances are not listed: the layout is
    not part of this record)."""

    name: str
    model: str
    gpus: int
    mig: bool = False


def gpu_model(name: str) -> GpuModel:
    return get_model(name)


def physical_uuid(use: GpuUse) -> str:
    """The GPU's UUID (DCGM's ``UUID`` label; for a MIG device, its parent's)."""
    if use.uuid:
        return use.uuid
    if use.device_id.startswith("GPU-"):
        return use.device_id.split("::", 1)[0]
    return uuid_of(use.node, use.gpu)


def uuid_of(node: str, gpu: int) -> str:
    """gpu-lab's stable fake UUID of GPU ``gpu`` on ``node`` (the formula the sim's plugin uses)."""
    return gpu_uuids(node, gpu + 1)[gpu]


def mig_profile(use: GpuUse) -> MigProfile:
    assert use.mig_profile is not None  # called for MIG uses only (sharing == "mig")
    return geometry(gpu_model(use.model).name).profile(use.mig_profile)


def device_memory_mib(use: GpuUse) -> int:
    """Framebuffer of the device the container sees: the whole GPU, or its MIG instance."""
    if use.sharing == "mig":
        return mig_profile(use).memory_mib
    return gpu_model(use.model).memory_mib


def gpu_share(use: GpuUse) -> float:
    """The fraction of one physical GPU the device is: 1, 1/replicas, or compute slices / 7."""
    if use.sharing == "mig":
        return mig_profile(use).compute_slices / COMPUTE_SLICES
    if use.sharing in ("time-slicing", "mps"):
        return 1 / use.replicas
    return 1.0


def check(use: GpuUse) -> GpuUse:
    """Refuse a record that cannot describe a real hold, naming the pod; returns it."""
    at = f"{use.key} on {use.node or '?'}"
    try:
        gpu_model(use.model)
    except GpuLabError as err:
        raise GpuLabError(f"pod {at}: {err}") from None
    if use.sharing not in SHARING:
        raise GpuLabError(f'pod {at}: unknown sharing "{use.sharing}" (choose from {", ".join(SHARING)})')
    if isinstance(use.gpu, bool) or not isinstance(use.gpu, int) or use.gpu < 0:
        raise GpuLabError(f"pod {at}: gpu index must be a non-negative integer, got {use.gpu!r}")
    if not isinstance(use.device_id, str) or not use.device_id:
        raise GpuLabError(f"pod {at}: device_id must be the device plugin's ID, got {use.device_id!r}")
    if isinstance(use.replicas, bool) or not isinstance(use.replicas, int) or use.replicas < 1:
        raise GpuLabError(f"pod {at}: replicas must be an integer >= 1, got {use.replicas!r}")
    if isinstance(use.requested, bool) or not isinstance(use.requested, int) or use.requested < 1:
        raise GpuLabError(f"pod {at}: requested must be an integer >= 1, got {use.requested!r}")
    if not isinstance(use.hours, (int, float)) or not math.isfinite(use.hours) or use.hours < 0:
        raise GpuLabError(f"pod {at}: hours must be a non-negative number, got {use.hours!r}")
    if use.sharing == "mig":
        if not use.mig_profile:
            raise GpuLabError(f"pod {at}: a MIG device needs mig_profile (e.g. 1g.10gb)")
        try:
            mig_profile(use)
        except GpuLabError as err:
            raise GpuLabError(f"pod {at}: {err}") from None
    if use.memory_mib is not None and use.memory_mib > device_memory_mib(use):
        what = f"MIG {use.mig_profile} instance" if use.sharing == "mig" else gpu_model(use.model).name
        raise GpuLabError(f"pod {at}: declares {use.memory_mib:g} MiB of GPU memory but one {what} has "
                          f"{device_memory_mib(use)} MiB: it would fail with CUDA out of memory")
    return use
