"""What NVIDIA's DRA driver publishes for a simulated GPU node: ResourceSlices and DeviceClasses.

Pure functions from a ``gpu_lab.model.objects.Node`` record of a NodePool with ``spec.dra``
to ``resource.k8s.io/v1`` objects; the node agent sends them. Names, attributes and
capacities are those of NVIDIA's driver (github.com/NVIDIA/k8s-dra-driver-gpu, read at
commit 22407113, ``cmd/gpu-kubelet-plugin``):

* a whole GPU is device ``gpu-<minor>`` (``deviceinfo.go``, ``GpuInfo.CanonicalName``) with
  attributes ``type`` "gpu", ``uuid``, ``productName``, ``brand``, ``architecture``,
  ``cudaComputeCapability``, ``driverVersion``, ``cudaDriverVersion`` (``GpuInfo.Attributes``;
  no ``index``: removed in commit 36fc80ab) and capacity ``memory`` in bytes
  (``partitions.go``, ``fullGpuCapacity``);
* a MIG device is ``gpu-<minor>-mig-<profile>-<GI profile id>-<first memory slice>``
  (``mig.go``, ``ToCanonicalName``: the profile without dots, RFC 1123) with attributes
  ``type`` "mig", ``parentUUID``, ``profile`` and the parent's product attributes
  (``CommonAttributesMig``), capacities ``multiprocessors``, ``copyEngines``, ``decoders``,
  ``encoders``, ``jpegEngines``, ``ofaEngines``, ``memory`` (``CommonCapacitiesMig``);
* static MIG (instances made by mig-parted, ``spec.mig``): one slice of every device, each
  MIG device with its ``uuid`` and a ``memorySlice<i>: 1`` capacity per memory slice it
  covers (``MigDeviceInfo.GetDevice``); GPUs with MIG off stay whole (``publishResources``
  in ``driver.go``);
* dynamic MIG (``spec.dra.dynamicMIG``, the driver's ``DynamicMIG`` feature gate): one
  slice with only ``sharedCounters`` (a counter set ``gpu-<minor>-counter-set`` per GPU:
  each capacity of the largest profile as a counter, ``copyEngines`` -> ``copy-engines``,
  plus ``memory-slice-<i>`` = 1 for the 8 memory slices), then one slice of devices per GPU
  (``generateSplitResourceSlices``, the layout for Kubernetes 1.35+, since a slice may not
  hold both): every profile at every allowed placement, consuming its capacities and its
  memory slices, and the whole GPU consuming everything (``PartConsumesCounters``). On
  Ampere with MIG mode on the whole GPU is not offered: it cannot leave MIG mode without a
  reset (``nvlib.go``, ``supportsMIGModeToggle``). So the scheduler itself refuses two
  partitions that share a memory slice, or a seventh compute slice's worth of SMs.

Devices within a dynamic-MIG slice are sorted by name, as the driver does; the single slice
of the other modes lists them by GPU index, then name (the driver walks a Go map there, so
its order is unspecified; ours is fixed, so that both backends see the same one). The
scheduler takes the first device that fits. UUIDs are the ones the device-plugin path uses
(``gpu_lab.gpus.labels``), so a GPU has the same ID on both paths.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..gpus.catalog import get_model
from ..gpus.labels import gpu_uuids
from ..gpus.mig import MEMORY_SLICES, geometry, validate_layout
from ..gpus.migparted import resolve
from ..model.objects import Node
from ..names import stable_uid

API_VERSION = "resource.k8s.io/v1"
DRIVER = "gpu.nvidia.com"
#: NVML's driver and CUDA versions on the simulated nodes (R580, CUDA 13.0), as semver
DRIVER_VERSION = "580.95.5"
CUDA_DRIVER_VERSION = "13.0.0"
#: NVML's GPU instance profile ids (``nvidia-smi mig -lgip``), by compute slices and memory
#: slices; ``+me`` is 20. The same on A100, H100 and H200.
_GI_PROFILE_IDS = {(7, 8): 0, (4, 4): 5, (3, 4): 9, (2, 2): 14, (1, 2): 15, (1, 1): 19}
_ME_PROFILE_ID = 20
#: go-nvlib's GetArchitectureAsString, by gpu-lab's family label
_ARCHITECTURES = {"turing": "Turing", "ampere": "Ampere", "ada-lovelace": "Ada Lovelace",
                  "hopper": "Hopper"}
#: NVML's device name (``nvidia-smi``); GFD's product label is it with ``-`` for spaces
_PRODUCT_NAMES = {"T4": "Tesla T4", "A10G": "NVIDIA A10G", "L4": "NVIDIA L4", "L40S": "NVIDIA L40S",
                  "A100-40GB": "NVIDIA A100-SXM4-40GB", "A100-80GB": "NVIDIA A100-SXM4-80GB",
                  "H100-80GB": "NVIDIA H100 80GB HBM3", "H200-141GB": "NVIDIA H200"}
_MIB = 1024 * 1024
#: NVIDIA's DeviceClasses (deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-gpu.yaml
#: and deviceclass-mig.yaml; the chart sets extendedResourceName for resource.k8s.io/v1)
GPU_CLASS = "gpu.nvidia.com"
MIG_CLASS = "mig.nvidia.com"
_SELECTOR = "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == '{}'"


@dataclass(frozen=True)
class PublishedDevice:
    """One device of a node's pool: what the "kubelet plugin" needs to prepare it."""

    name: str
    uuid: str  # a dynamic MIG device's UUID is the one it gets when the driver creates it
    type: str  # "gpu" or "mig"
    gpu: int
    profile: str | None = None


def is_dra_node(node: Node) -> bool:
    return (node.raw.get("nodePool") or {}).get("dra") is not None


def device_classes() -> list[dict[str, Any]]:
    """NVIDIA's ``gpu.nvidia.com`` (whole GPUs, also serving ``nvidia.com/gpu``) and
    ``mig.nvidia.com`` DeviceClasses."""
    gpu = {"selectors": [{"cel": {"expression": _SELECTOR.format("gpu")}}],
           "extendedResourceName": "nvidia.com/gpu"}
    mig = {"selectors": [{"cel": {"expression": _SELECTOR.format("mig")}}]}
    return [{"apiVersion": API_VERSION, "kind": "DeviceClass", "metadata": {"name": name},
             "spec": spec} for name, spec in ((GPU_CLASS, gpu), (MIG_CLASS, mig))]


# ---------------------------------------------------------------------- devices


class _Gpus:
    """The GPUs of one DRA node: model, UUIDs, MIG layouts and mode."""

    def __init__(self, node: Node):
        spec = node.raw.get("nodePool") or {}
        gpu = spec.get("gpu") or {}
        self.node = node.name
        self.model = get_model(gpu["model"])
        self.count = int(gpu["count"])
        self.uuids = gpu_uuids(node.name, self.count)
        self.dynamic = bool((spec.get("dra") or {}).get("dynamicMIG"))
        self.layouts = _layouts(self.model.name, self.count, spec.get("mig"))

    def common(self) -> dict[str, dict]:
        m = self.model
        brand = "Tesla" if m.product.startswith("Tesla") else "Nvidia"
        return {
            "productName": {"string": _PRODUCT_NAMES.get(m.name, m.product.replace("-", " "))},
            "brand": {"string": brand},
            "architecture": {"string": _ARCHITECTURES.get(m.family, m.family.title())},
            "cudaComputeCapability": {"version": f"{m.compute_major}.{m.compute_minor}.0"},
            "driverVersion": {"version": DRIVER_VERSION},
            "cudaDriverVersion": {"version": CUDA_DRIVER_VERSION},
        }

    def whole(self, g: int) -> dict:
        attrs = {"type": {"string": "gpu"}, "uuid": {"string": self.uuids[g]}, **self.common()}
        capacity = {"memory": {"value": binary_si(self.model.memory_mib * _MIB)}}
        return {"name": f"gpu-{g}", "attributes": _sorted(attrs), "capacity": capacity}

    def mig(self, g: int, profile, start: int, with_uuid: bool) -> dict:
        attrs = {"type": {"string": "mig"}, "parentUUID": {"string": self.uuids[g]},
                 "profile": {"string": profile.name}, **self.common()}
        if with_uuid:
            attrs["uuid"] = {"string": mig_uuid(self.node, g, profile.name, start)}
        return {"name": mig_device_name(g, profile, start), "attributes": _sorted(attrs),
                "capacity": _mig_capacity(profile)}


def mig_uuid(node: str, gpu: int, profile: str, start: int) -> str:
    """The UUID of a MIG device: the formula of the device-plugin path (gpu_lab.gpus.labels)."""
    return f"MIG-{stable_uid(node, str(gpu), profile, str(start))}"


def mig_device_name(gpu: int, profile, start: int) -> str:
    """``gpu-0-mig-1g5gb-19-0``, ``gpu-0-mig-1g5gb-me-20-3`` (NVIDIA's ToCanonicalName)."""
    pname = profile.name.replace(".", "").replace("+", "-")
    return f"gpu-{gpu}-mig-{pname}-{gi_profile_id(profile)}-{start}"


def gi_profile_id(profile) -> int:
    if profile.media_extensions:
        return _ME_PROFILE_ID
    return _GI_PROFILE_IDS[(profile.compute_slices, profile.memory_slices)]


def _mig_capacity(profile) -> dict[str, dict]:
    return {
        "copyEngines": {"value": str(profile.copy_engines)},
        "decoders": {"value": str(profile.decoders)},
        "encoders": {"value": str(profile.encoders)},
        "jpegEngines": {"value": str(profile.jpeg)},
        "memory": {"value": binary_si(profile.memory_mib * _MIB)},
        "multiprocessors": {"value": str(profile.multiprocessors)},
        "ofaEngines": {"value": str(profile.ofa)},
    }


def binary_si(n: int) -> str:
    """A byte count as the API server writes a BinarySI quantity (NVIDIA's driver makes them
    with ``resource.NewQuantity(bytes, resource.BinarySI)``): ``40Gi``, ``23034Mi``."""
    for suffix, size in (("Ei", 1 << 60), ("Pi", 1 << 50), ("Ti", 1 << 40), ("Gi", 1 << 30),
                         ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if n >= size and n % size == 0:
            return f"{n // size}{suffix}"
    return str(n)


def _counter_name(capacity: str) -> str:
    """NVIDIA's camelToDNSName: ``copyEngines`` -> ``copy-engines``."""
    return "".join("-" + c.lower() if c.isupper() else c for c in capacity)


def _sorted(d: dict) -> dict:
    return dict(sorted(d.items()))


def _layouts(model: str, count: int, mig: dict | None) -> list:
    if not mig:
        return [None] * count

    if mig.get("migParted") is not None:
        return list(resolve(model, count, mig["migParted"], mig.get("config")))
    return list(resolve(model, count, mig["config"]))


def published_devices(node: Node) -> dict[str, PublishedDevice]:
    """Device name -> what it is, for every device the node's pool offers."""
    gpus = _Gpus(node)
    out: dict[str, PublishedDevice] = {}
    for g in range(gpus.count):
        whole = PublishedDevice(f"gpu-{g}", gpus.uuids[g], "gpu", g)
        if gpus.dynamic:
            for p in geometry(gpus.model).profiles:
                for start in p.starts:
                    name = mig_device_name(g, p, start)
                    out[name] = PublishedDevice(name, mig_uuid(node.name, g, p.name, start), "mig",
                                                g, p.name)
            if gpus.model.family != "ampere":
                out[whole.name] = whole
        elif gpus.layouts[g] is None:
            out[whole.name] = whole
        else:
            for slot in validate_layout(gpus.model, gpus.layouts[g]).slots:
                p = geometry(gpus.model).profile(slot.profile)
                name = mig_device_name(g, p, slot.start)
                out[name] = PublishedDevice(name, mig_uuid(node.name, g, p.name, slot.start), "mig",
                                            g, p.name)
    return out


# ---------------------------------------------------------------------- slices


def _slice(node: Node, node_uid: str | None, index: int, total: int, generation: int,
           body: dict) -> dict:
    meta: dict[str, Any] = {"name": f"{node.name}-{DRIVER}-{index}"}
    if node_uid:  # the kubelet's slice controller makes the Node the owner: gone with it
        meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Node", "name": node.name,
                                    "uid": node_uid, "controller": True}]
    spec = {"driver": DRIVER, "nodeName": node.name,
            "pool": {"name": node.name, "generation": generation, "resourceSliceCount": total},
            **body}
    return {"apiVersion": API_VERSION, "kind": "ResourceSlice", "metadata": meta, "spec": spec}


def resource_slices(node: Node, node_uid: str | None = None, generation: int = 1) -> list[dict]:
    """The ResourceSlices NVIDIA's driver publishes for ``node`` (pool = the node's name)."""
    gpus = _Gpus(node)
    if not gpus.dynamic:
        devices = []
        for g in range(gpus.count):
            if gpus.layouts[g] is None:
                devices.append(gpus.whole(g))
                continue
            geo = geometry(gpus.model)
            for slot in validate_layout(gpus.model, gpus.layouts[g]).slots:
                dev = gpus.mig(g, geo.profile(slot.profile), slot.start, with_uuid=True)
                for i in range(slot.start, slot.start + slot.size):
                    dev["capacity"][f"memorySlice{i}"] = {"value": "1"}
                dev["capacity"] = _sorted(dev["capacity"])
                devices.append(dev)
        devices.sort(key=lambda d: (int(d["name"].split("-")[1]), d["name"]))
        return [_slice(node, node_uid, 0, 1, generation, {"devices": devices})]
    geo = geometry(gpus.model)
    largest = geo.profiles[0]  # 7g: the largest value of every capacity
    full = {_counter_name(k): {"value": v["value"]} for k, v in _mig_capacity(largest).items()}
    full.update({f"memory-slice-{i}": {"value": "1"} for i in range(MEMORY_SLICES)})
    full = _sorted(full)
    counter_sets = [{"name": f"gpu-{g}-counter-set", "counters": full} for g in range(gpus.count)]
    total = 1 + gpus.count
    out = [_slice(node, node_uid, 0, total, generation, {"sharedCounters": counter_sets})]
    for g in range(gpus.count):
        devices = []
        if gpus.model.family != "ampere":
            whole = gpus.whole(g)
            whole["capacity"] = {k: v for k, v in _mig_capacity(largest).items()}
            whole["consumesCounters"] = [{"counterSet": f"gpu-{g}-counter-set", "counters": full}]
            devices.append(whole)
        for p in geo.profiles:
            for start in p.starts:
                dev = gpus.mig(g, p, start, with_uuid=False)
                counters = {_counter_name(k): {"value": v["value"]} for k, v in _mig_capacity(p).items()}
                counters.update({f"memory-slice-{i}": {"value": "1"}
                                 for i in range(start, start + p.memory_slices)})
                dev["consumesCounters"] = [{"counterSet": f"gpu-{g}-counter-set",
                                            "counters": _sorted(counters)}]
                devices.append(dev)
        devices.sort(key=lambda d: d["name"])
        out.append(_slice(node, node_uid, g + 1, total, generation, {"devices": devices}))
    return out
