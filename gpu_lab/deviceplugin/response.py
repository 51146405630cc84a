"""What NVIDIA's device plugin answers ``Allocate`` with, as plain data (no gRPC).

``allocate_response`` is the ``ContainerAllocateResponse`` for one container's devices
under the plugin's config: the fake plugin sends it over gRPC, and lessons and the
simulator read it as a dict with the response's fields (``envs``, ``mounts``,
``devices``, ``annotations``, ``cdi_devices``), in the shapes the kubelet hands on to the
container runtime. What each field becomes in the container, and who acts on it:

* ``envs`` are set in the container's environment by the kubelet; ``NVIDIA_VISIBLE_DEVICES``
  is read by the NVIDIA Container Toolkit's runtime hook, which mounts the driver and the
  listed GPUs' device nodes (the ``envvar`` strategy);
* ``mounts`` are bind mounts: under ``volume-mounts`` one ``/dev/null`` file per device
  under ``/var/run/nvidia-container-devices``, which the toolkit reads instead of the
  variable (an unprivileged pod cannot forge a mount), and MPS's pipe and shared memory;
* ``devices`` (``passDeviceSpecs``) are device nodes the runtime creates in the container and
  allows in its device cgroup: ``/dev/nvidia<i>``;
* ``annotations`` (``cdi-annotations``) and ``cdi_devices`` (``cdi-cri``, the CRI's
  ``CDIDevices``) name CDI devices; a CDI-enabled runtime (containerd 1.7+, CRI-O 1.24+)
  looks each up in the CDI spec files on the node (``/var/run/cdi``) and applies its edits.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import GpuLabError
from ..gpus.catalog import GpuModel, get_model
from ..gpus.labels import GPU_RESOURCE, gpu_node_state
from ..gpus.mig import geometry, validate_layout
from .config import DevicePluginConfig, parse_config
from .deviceids import VISIBLE_DEVICES, visible_devices

VOLUME_MOUNTS_ROOT = "/var/run/nvidia-container-devices"
CDI_VENDOR = "k8s.device-plugin.nvidia.com"  # the vendor NVIDIA's plugin gives its CDI devices
CDI_ANNOTATION_PLUGIN = "nvidia-device-plugin"  # the plugin name in its CDI annotation keys
MPS_CONTAINER_ROOT = "/mps"


@dataclass(frozen=True)
class DeviceInfo:
    """What NVIDIA's ``rm.Device`` knows about an advertised device besides its ID."""

    gpu: int  # index of the (parent) GPU: its /dev/nvidia<gpu>
    index: str  # NVIDIA's Index: "<gpu>", or "<gpu>:<mig>" for a MIG device
    parent: str  # UUID of the (parent) GPU


def device_info(model: GpuModel | str, count: int, node_name: str = "node",
                mig_layouts: Sequence[Mapping[str, int] | None] | None = None) -> dict[str, DeviceInfo]:
    """GPU and MIG device ID (no replica suffix) -> its GPU, NVIDIA index and parent GPU UUID.

    The IDs are ``gpu_node_state``'s (whole GPUs from the plain node, MIG
    devices from the mixed strategy, whose per-profile lists run GPU by GPU
    and, on one GPU, by first memory slice, the order of
    ``mig.validate_layout``'s slots, which also numbers a GPU's MIG devices
    here as NVML enumerates them on real hardware).
    """
    model = get_model(model)
    gpus = gpu_node_state(node_name, model, count).devices.get(GPU_RESOURCE, [])
    info = {u: DeviceInfo(g, str(g), u) for g, u in enumerate(gpus)}
    if not mig_layouts or not any(mig_layouts):
        return info
    mixed = gpu_node_state(node_name, model, count, mig_strategy="mixed", mig_layouts=mig_layouts).devices
    queues = {r: iter(ids) for r, ids in mixed.items() if r != GPU_RESOURCE}
    if not queues:  # a MIG-enabled GPU without instances: no MIG device is ever advertised
        return info
    geom = geometry(model)
    for g, layout in enumerate(mig_layouts):
        if not layout:
            continue
        for j, slot in enumerate(validate_layout(model, layout).slots):
            info[next(queues[geom.profile(slot.profile).resource])] = DeviceInfo(g, f"{g}:{j}", gpus[g])
    left = [d for q in queues.values() for d in q]
    if left:  # pragma: no cover - gpu_node_state changed its order
        raise GpuLabError(f"internal error: MIG devices without a GPU: {', '.join(left)}")
    return info


def cdi_names(cfg: DevicePluginConfig, listed: Sequence[str]) -> list[str]:
    """The CDI devices NVIDIA's plugin names for an allocation under a CDI strategy: each
    device (UUID or index, per deviceIDStrategy) of kind ``k8s.device-plugin.nvidia.com/gpu``,
    then ``gds=all`` / ``mofed=all`` when enabled. Empty without a CDI strategy."""
    if not any(s.startswith("cdi-") for s in cfg.device_list_strategy):
        return []
    names = [f"{CDI_VENDOR}/gpu={d}" for d in listed]
    if cfg.gds_enabled:
        names.append(f"{CDI_VENDOR}/gds=all")
    if cfg.mofed_enabled:
        names.append(f"{CDI_VENDOR}/mofed=all")
    return names



def allocate_response(cfg: DevicePluginConfig, resource: str, ids: Sequence[str],
                      info: Mapping[str, DeviceInfo]) -> dict[str, Any]:
    """NVIDIA's ``ContainerAllocateResponse`` for the device ``ids`` of ``resource``, as data."""
    gpus = visible_devices(ids)  # GPU or MIG UUIDs
    listed = [info[g].index for g in gpus] if cfg.device_id_strategy == "index" else gpus
    out: dict[str, Any] = {"envs": {}, "mounts": [], "devices": [], "annotations": {}, "cdi_devices": []}
    names = cdi_names(cfg, listed)
    if names and "cdi-annotations" in cfg.device_list_strategy:
        # one annotation per response, keyed by a fresh ID (NVIDIA's responseID), as
        # container-device-interface's UpdateAnnotations writes it
        key = f"{cfg.cdi_annotation_prefix}{CDI_ANNOTATION_PLUGIN}_{uuid.uuid4()}"
        out["annotations"][key] = ",".join(names)
    if names and "cdi-cri" in cfg.device_list_strategy:
        out["cdi_devices"] = list(names)
    if "envvar" in cfg.device_list_strategy:
        out["envs"][VISIBLE_DEVICES] = ",".join(listed)
    if "volume-mounts" in cfg.device_list_strategy:
        out["envs"][VISIBLE_DEVICES] = VOLUME_MOUNTS_ROOT
        out["mounts"] += [{"host_path": "/dev/null", "container_path": f"{VOLUME_MOUNTS_ROOT}/{d}",
                           "read_only": False} for d in listed]
    if cfg.sharing.strategy == "mps":
        pipe = f"{MPS_CONTAINER_ROOT}/{resource}/pipe"
        out["envs"]["CUDA_MPS_PIPE_DIRECTORY"] = pipe
        out["mounts"] += [
            {"container_path": pipe, "host_path": os.path.join(cfg.mps_root, resource, "pipe"), "read_only": False},
            {"container_path": "/dev/shm", "host_path": os.path.join(cfg.mps_root, "shm"), "read_only": False}]
    if cfg.pass_device_specs:
        out["devices"] = [{"container_path": f"/dev/nvidia{i}", "permissions": "rw",
                           "host_path": os.path.join(cfg.nvidia_driver_root, f"dev/nvidia{i}")}
                          for i in dict.fromkeys(info[g].gpu for g in gpus)]
    if cfg.gds_enabled:
        out["envs"]["NVIDIA_GDS"] = "enabled"
    if cfg.mofed_enabled:
        out["envs"]["NVIDIA_MOFED"] = "enabled"
    return out


def plugin_answer(device_ids: Sequence[str], *, model: GpuModel | str, gpus: int, node: str = "node",
                  device_plugin: Mapping[str, Any] | None = None,
                  resource: str = GPU_RESOURCE) -> dict[str, Any]:
    """``allocate_response`` for whole GPUs of a gpu-lab node: ``device_plugin`` is the
    NodePool's ``spec.devicePlugin`` (NVIDIA's config file, ``version: v1``)."""
    info = device_info(get_model(model), gpus, node)
    unknown = [d for d in visible_devices(device_ids) if d not in info]
    if unknown:
        raise GpuLabError(f"unknown device: {unknown[0]} (node {node} has {gpus} {get_model(model).name} GPUs)")
    return allocate_response(parse_config(device_plugin), resource, list(device_ids), info)
