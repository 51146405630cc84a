"""The node labels NVIDIA's GPU Feature Discovery and device plugin write.

Learners select GPU nodes with these labels (``nodeSelector:
{nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}``), so a fake node must carry
exactly the keys and values a real one does. The rules below follow
NVIDIA/k8s-device-plugin (GFD lives there since v0.15):

* ``internal/lm/resource.go`` ``baseLabeler``: ``nvidia.com/gpu.product``,
  ``.count`` (physical GPUs, never multiplied), ``.replicas`` (the configured
  replicas per GPU, 1 without sharing) and ``.sharing-strategy`` (``none``
  unless replicas > 1); ``.memory`` in MiB; ``.family``, ``.compute.major``,
  ``.compute.minor`` from the compute capability.
* ``getProductName``: a shared (replicas > 1) resource that is *not* renamed
  gets ``-SHARED`` appended, e.g. ``Tesla-T4-SHARED``. With
  ``renameByDefault: true`` the resource becomes ``nvidia.com/gpu.shared`` and
  the product keeps its plain name.
* ``internal/lm/nvml.go``: ``nvidia.com/mig.capable`` (any GPU MIG-capable),
  ``nvidia.com/mps.capable`` and ``nvidia.com/gpu.mode`` (``compute`` for
  data-centre parts).
* ``internal/lm/mig-strategy.go``: ``nvidia.com/mig.strategy`` is written only
  when the strategy is ``single`` or ``mixed``; with ``none`` the label is
  absent. Clusters installed by the GPU Operator usually show ``single`` (its
  default), which is why node dumps on the web carry it.
* ``nvidia.com/gpu.present=true`` comes from the GPU Operator's node-feature
  rules, not from GFD; every operator-managed GPU node has it.
* ``api/config/v1/replicas.go``: shared resources need ``replicas >= 2`` and at
  least one entry in ``resources``; ``renameByDefault`` names the resource
  ``<name>.shared``. Time-slicing and MPS are mutually exclusive (README).

MIG (``internal/lm/mig-strategy.go``, ``resource.go``, ``internal/rm/device_map.go``):

* Every GPU, MIG-enabled or not, counts in ``nvidia.com/gpu.count``. When all
  GPUs have MIG enabled the whole-GPU labels carry no sharing: ``replicas=0``,
  ``sharing-strategy=none``, the plain product.
* ``none``: the plugin still advertises MIG-enabled GPUs as whole
  ``nvidia.com/gpu`` devices (it skips MIG-enabled GPUs only under single and
  mixed), but a container handed one sees no usable CUDA device because no MIG
  device was exposed to it. ``GpuNodeState.warnings`` says so.
* ``single``: every GPU must have MIG enabled with instances of one profile;
  they are advertised as ``nvidia.com/gpu`` (count = instances) and the
  ``nvidia.com/gpu.*`` labels describe one instance: product
  ``<product>-MIG-<profile>``, ``memory`` in MiB, ``multiprocessors``,
  ``slices.gi``, ``slices.ci``, ``engines.{copy,decoder,encoder,jpeg,ofa}``.
  Otherwise GFD writes ``<product>-MIG-INVALID`` with count, replicas and
  memory 0 and the plugin refuses to start (nothing advertised).
* ``mixed``: ``nvidia.com/mig-<profile>`` per profile (``+me`` written
  ``.me``) with the same label set under ``nvidia.com/mig-<profile>.*``;
  whole GPUs without MIG stay ``nvidia.com/gpu``. A MIG-enabled GPU with no
  instances makes the plugin fail to start.
* Time-slicing applies per resource name (``nvidia.com/mig-1g.10gb`` may be
  replicated); MPS is refused on MIG-enabled GPUs, as the plugin does.
* Fake device IDs: ``GPU-<uuid>`` per GPU and ``MIG-<uuid>`` per instance,
  derived from node, GPU index, profile and first memory slice, so the same
  layout always gets the same IDs; replicas append ``::<n>``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import DeviceListTooLarge, GpuLabError
from ..names import GPU_RESOURCE, stable_uid
from .catalog import GpuModel, get_model
from .mig import geometry, profiles, validate_layout
from .topology import gpu_numa

MAX_GPUS_PER_NODE = 64  # more than any machine holds (DGX/HGX boards: 8 or 16)
# The kubelet reads a device plugin's ListAndWatch stream with gRPC's default 4 MiB
# receive limit: a resource with more devices than fit one message never shows up.
GRPC_MAX_RECEIVE = 4 * 1024 * 1024
SHARING_STRATEGIES = ("none", "time-slicing", "mps")
MIG_STRATEGIES = ("none", "single", "mixed")
_CONFIG_KEY = {"timeSlicing": "time-slicing", "mps": "mps"}


@dataclass(frozen=True)
class Sharing:
    """The part of a device-plugin ``sharing:`` block that shapes a node."""

    strategy: str = "none"  # none | time-slicing | mps
    replicas: int = 1  # per physical GPU (the nvidia.com/gpu entry)
    renamed: bool = False  # renameByDefault: advertise <resource>.shared
    fail_requests_greater_than_one: bool = False
    # Every replicated resource, e.g. (("nvidia.com/gpu", 4), ("nvidia.com/mig-1g.10gb", 2)).
    resources: tuple[tuple[str, int], ...] = field(default=(), compare=False)

    @property
    def resource(self) -> str:
        """The extended resource whole GPUs are advertised as."""
        return self.advertised(GPU_RESOURCE)

    @property
    def shared(self) -> bool:
        return self.strategy != "none" and self.replicas > 1

    def replicas_for(self, resource: str) -> int:
        """Replicas of one device of ``resource`` (1 when it is not shared)."""
        if self.strategy == "none":
            return 1
        if resource == GPU_RESOURCE:
            return self.replicas
        return dict(self.resources).get(resource, 1)

    def advertised(self, resource: str) -> str:
        """The name ``resource`` is advertised under (``<name>.shared`` when renamed)."""
        return f"{resource}.shared" if self.renamed and self.replicas_for(resource) > 1 else resource


def parse_sharing(raw: Any, where: str = "sharing") -> Sharing:
    """Read the device plugin's ``sharing:`` section (``timeSlicing`` or ``mps``).

    ``replicas`` is the ``nvidia.com/gpu`` entry; entries for MIG resources
    (``nvidia.com/mig-1g.10gb``) are kept in ``resources`` for the mixed strategy.
    """
    if raw is None:
        return Sharing()
    if not isinstance(raw, dict):
        raise GpuLabError(f"{where}: must be a mapping")
    unknown = sorted(set(raw) - set(_CONFIG_KEY))
    if unknown:
        raise GpuLabError(f'{where}: unknown field "{unknown[0]}" (known: mps, timeSlicing)')
    present = [k for k in _CONFIG_KEY if raw.get(k) is not None]
    if len(present) > 1:
        raise GpuLabError(f"{where}: timeSlicing and mps are mutually exclusive")
    if not present:
        return Sharing()
    key = present[0]
    block, here = raw[key], f"{where}.{key}"
    if not isinstance(block, dict):
        raise GpuLabError(f"{here}: must be a mapping")
    rename = block.get("renameByDefault", False)
    fail = block.get("failRequestsGreaterThanOne", key == "mps")  # MPS defaults to true
    for fld, val in (("renameByDefault", rename), ("failRequestsGreaterThanOne", fail)):
        if not isinstance(val, bool):
            raise GpuLabError(f"{here}.{fld}: must be true or false")
    resources = block.get("resources")
    if not isinstance(resources, list) or not resources:
        raise GpuLabError(f"{here}.resources: no resources specified")
    replicated: dict[str, int] = {}
    for i, res in enumerate(resources):
        at = f"{here}.resources[{i}]"
        if not isinstance(res, dict) or not res.get("name"):
            raise GpuLabError(f"{at}.name: no resource name specified")
        n = res.get("replicas")
        if isinstance(n, bool) or not isinstance(n, int):
            raise GpuLabError(f"{at}.replicas: no replicas specified" if n is None
                              else f"{at}.replicas: must be an integer")
        if n < 2:
            raise GpuLabError(f"{at}.replicas: number of replicas must be >= 2")
        for fld in ("rename", "devices"):
            if fld in res and not (fld == "devices" and res[fld] == "all"):
                raise GpuLabError(f"{at}.{fld}: not supported (sharing applies to every GPU of the node)")
        name = res["name"]
        if name != GPU_RESOURCE and not str(name).startswith("nvidia.com/mig-"):
            raise GpuLabError(f'{at}.name: unsupported resource "{name}" (nvidia.com/gpu or nvidia.com/mig-<profile>)')
        if name in replicated:
            raise GpuLabError(f'{at}.name: resource "{name}" is listed twice')
        replicated[name] = n
    return Sharing(_CONFIG_KEY[key], replicated.get(GPU_RESOURCE, 1), rename, fail,
                   tuple(replicated.items()))


def _varint_len(n: int) -> int:
    return max(1, (n.bit_length() + 6) // 7)


def list_and_watch_bytes(id_lengths: Sequence[int], replicas: int) -> int:
    """Size of a ``ListAndWatchResponse`` listing every replica of devices whose IDs have
    these lengths (``<id>::<r>`` when replicated), each ``Healthy``, without topology;
    worked out per digit count, without building the list."""
    total = 0
    for base in id_lengths:
        if replicas <= 1:
            spans = [(base, 1)]
        else:  # replica r has ID "<id>::<r>": count the r of each digit length
            spans, low, digits = [], 0, 1
            while low < replicas:
                high = min(replicas, 10**digits)
                spans.append((base + 2 + digits, high - low))
                low, digits = high, digits + 1
        for length, count in spans:
            device = 1 + _varint_len(length) + length + 1 + 1 + len("Healthy")
            total += count * (1 + _varint_len(device) + device)
    return total


@dataclass(frozen=True)
class GpuNodeState:
    """What GFD, the device plugin and the MIG manager put on a GPU node."""

    labels: dict[str, str]
    capacity: dict[str, int]  # extended resources, as the kubelet shows them
    devices: dict[str, list[str]]  # resource -> device IDs in ListAndWatch order
    warnings: tuple[str, ...] = ()
    numa: dict[str, int] = field(default_factory=dict)  # device ID -> its GPU's NUMA node (topology)


def gfd_labels(
    model: GpuModel | str,
    count: int,
    *,
    sharing: Sharing | dict | None = None,
    mig_strategy: str = "none",
    replicas: int = 1,
    sharing_strategy: str = "none",
    machine: str | None = None,
    mig_layouts: Sequence[Mapping[str, int] | None] | None = None,
) -> dict[str, str]:
    """Labels GFD and the GPU Operator put on a node with ``count`` GPUs.

    Sharing comes either from ``sharing`` (a ``Sharing`` or the device-plugin
    ``sharing:`` mapping, which can also rename the resource) or from the
    ``replicas``/``sharing_strategy`` shorthand, not both. ``machine`` is the
    optional ``nvidia.com/gpu.machine`` (the host's DMI product name, e.g. an
    EC2 instance type). ``mig_layouts`` gives each GPU's MIG instances
    (``None`` = MIG disabled, ``{}`` = enabled without instances). A node
    without GPUs gets no labels, as GFD writes none.
    """
    share = _sharing(sharing, replicas, sharing_strategy)
    return gpu_node_state("node", model, count, sharing=share, mig_strategy=mig_strategy,
                          machine=machine, mig_layouts=mig_layouts).labels


def gpu_uuids(node: str, count: int) -> list[str]:
    """The fake but stable UUIDs of a node's GPUs: the one formula every backend uses."""

    return [f"GPU-{stable_uid(node, str(g))}" for g in range(count)]


def gpu_node_state(
    node: str,
    model: GpuModel | str,
    count: int,
    *,
    sharing: Sharing | dict | None = None,
    mig_strategy: str = "none",
    mig_layouts: Sequence[Mapping[str, int] | None] | None = None,
    machine: str | None = None,
    numa_nodes: int | None = None,
) -> GpuNodeState:
    """Labels, advertised resources and device IDs of node ``node`` with ``count`` GPUs.

    This is the single place that decides what a GPU node looks like; the
    NodePool expansion and MIG reconfiguration both call it. ``numa_nodes``
    splits the GPUs over NUMA nodes (``gpu_lab.gpus.topology.gpu_numa``; default:
    gpu-lab's model of the machine), which every device of a GPU inherits.
    """

    model = get_model(model)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise GpuLabError(f"GPU count must be a non-negative integer, got {count!r}")
    if count > MAX_GPUS_PER_NODE:
        raise GpuLabError(f"GPU count {count}: no machine has more than {MAX_GPUS_PER_NODE} GPUs")
    if mig_strategy not in MIG_STRATEGIES:
        raise GpuLabError(f'unknown MIG strategy "{mig_strategy}" (choose from {", ".join(MIG_STRATEGIES)})')
    share = sharing if isinstance(sharing, Sharing) else parse_sharing(sharing)
    if count == 0:
        return GpuNodeState({}, {}, {})
    placements = _placements(model, count, mig_layouts)
    enabled = [g for g, p in enumerate(placements) if p is not None]
    full = [g for g, p in enumerate(placements) if p is None]

    labels = {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.mode": "compute",
        "nvidia.com/mig.capable": str(model.mig_capable).lower(),
        "nvidia.com/mps.capable": str(share.strategy == "mps").lower(),
    }
    # Whole-GPU labels: every GPU counts; sharing shows only when some GPU has MIG off.
    labels.update(_resource_labels(GPU_RESOURCE, model.product, count, share if full else None,
                                   {"memory": model.memory_mib, "family": model.family,
                                    "compute.major": model.compute_major,
                                    "compute.minor": model.compute_minor}))
    if machine:
        labels["nvidia.com/gpu.machine"] = "-".join(str(machine).split())

    gpu_ids = gpu_uuids(node, count)

    def mig_ids(gpus, profile=None):
        return [f"MIG-{stable_uid(node, str(g), s.profile, str(s.start))}"
                for g in gpus for s in placements[g].slots if profile in (None, s.profile)]

    resources: dict[str, list[str]] = {}
    warnings: list[str] = []
    if mig_strategy == "none":
        resources[GPU_RESOURCE] = gpu_ids
        if enabled:
            warnings.append(f"migStrategy none: {_gpus(enabled)} MIG enabled; the device plugin still "
                            "advertises them as nvidia.com/gpu, but a container given one sees no "
                            "usable CUDA device (no MIG device is exposed to it)")
    elif mig_strategy == "single":
        labels["nvidia.com/mig.strategy"] = "single"
        problem = None
        if enabled:
            kinds = {s.profile for g in enabled for s in placements[g].slots}
            if any(not placements[g].slots for g in enabled):
                problem = "at least one MIG device is enabled but empty"
            elif full:
                problem = "devices with MIG enabled and disable detected"
            elif len(kinds) != 1:
                problem = "more than one MIG device type present on node"
        if problem:
            labels.update({f"{GPU_RESOURCE}.product": f"{model.product}-MIG-INVALID",
                           f"{GPU_RESOURCE}.count": "0", f"{GPU_RESOURCE}.replicas": "0",
                           f"{GPU_RESOURCE}.memory": "0"})
            warnings.append(f"migStrategy single: {problem}; GFD labels the node "
                            f"{model.product}-MIG-INVALID and the device plugin advertises no GPUs")
        elif enabled:
            (name,) = kinds
            p = _mig_profile(model, name)
            ids = mig_ids(enabled)
            resources[GPU_RESOURCE] = ids
            labels.update(_resource_labels(GPU_RESOURCE, f"{model.product}-MIG-{p.label_name}",
                                           len(ids), share, p.attributes()))
        else:
            resources[GPU_RESOURCE] = gpu_ids
    else:  # mixed
        labels["nvidia.com/mig.strategy"] = "mixed"
        if full:
            resources[GPU_RESOURCE] = [gpu_ids[g] for g in full]
        for p in _mig_profiles(model) if enabled else ():
            ids = mig_ids(enabled, p.name)
            if ids:
                resources[p.resource] = ids
                labels.update(_resource_labels(p.resource, f"{model.product}-MIG-{p.label_name}",
                                               len(ids), share, p.attributes()))
        empty = [g for g in enabled if not placements[g].slots]
        if empty:
            resources = {}
            warnings.append(f"migStrategy mixed: {_gpus(empty)} MIG enabled but no MIG devices; the "
                            "device plugin fails to start (at least one device with migEnabled=true "
                            "was not configured correctly) and advertises nothing")

    if enabled and share.strategy == "mps":
        resources = {}
        warnings.append(f"MPS sharing is not supported for MIG devices ({_gpus(enabled)} MIG enabled); "
                        "the device plugin fails to start and advertises nothing")
    devices: dict[str, list[str]] = {}
    for res, ids in resources.items():  # check every size before building any list
        n = share.replicas_for(res)
        if n > 1 and ids:
            size = list_and_watch_bytes([len(i) for i in ids], n)
            if size > GRPC_MAX_RECEIVE:
                raise DeviceListTooLarge(share.advertised(res), len(ids), n, size, GRPC_MAX_RECEIVE)
    for res, ids in resources.items():
        n = share.replicas_for(res)
        devices[share.advertised(res)] = [f"{i}::{r}" for i in ids for r in range(n)] if n > 1 else list(ids)
    capacity = {res: len(ids) for res, ids in devices.items()}
    gpu_numa_nodes = gpu_numa(count, numa_nodes)
    gpu_of = {u: g for g, u in enumerate(gpu_ids)}
    if enabled:
        gpu_of.update({m: g for g in enabled for m in mig_ids([g])})
    numa = {d: gpu_numa_nodes[gpu_of[d.partition("::")[0]]]
            for ids in devices.values() for d in ids}
    return GpuNodeState(labels, capacity, devices, tuple(warnings), numa)


def _gpus(indexes: list[int]) -> str:
    if len(indexes) == 1:
        return f"GPU {indexes[0]} has"
    return f"GPUs {', '.join(map(str, indexes))} have"


def _resource_labels(resource: str, product: str, count: int, share: Sharing | None,
                     extra: dict[str, Any]) -> dict[str, str]:
    """``resourceLabeler.baseLabeler`` plus extra keys; ``share=None`` means sharing disabled."""
    replicas = 0 if share is None else share.replicas_for(resource)
    shared = share is not None and replicas > 1
    if share is not None and shared and not share.renamed:
        product += "-SHARED"
    labels = {
        f"{resource}.product": product,
        f"{resource}.count": str(count),
        f"{resource}.replicas": str(replicas),
        f"{resource}.sharing-strategy": share.strategy if share is not None and shared else "none",
    }
    labels.update({f"{resource}.{k}": str(v) for k, v in extra.items()})
    return labels


def _mig_profiles(model: GpuModel):

    return profiles(model)


def _mig_profile(model: GpuModel, name: str):

    return geometry(model).profile(name)


def _placements(model: GpuModel, count: int, layouts) -> list:
    """Each GPU's MIG placement (None when MIG is off), validated against the geometry."""
    if layouts is None:
        return [None] * count

    layouts = list(layouts)
    if len(layouts) != count:
        raise GpuLabError(f"MIG layouts: {len(layouts)} given for {count} GPUs")
    if any(lay is not None for lay in layouts) and not model.mig_capable:
        raise GpuLabError(f"{model.name} GPUs do not support MIG")
    return [None if lay is None else validate_layout(model, lay) for lay in layouts]


def _sharing(sharing: Sharing | dict | None, replicas: int, strategy: str) -> Sharing:
    if sharing is not None:
        if replicas != 1 or strategy != "none":
            raise GpuLabError("give either sharing or replicas/sharing_strategy, not both")
        return sharing if isinstance(sharing, Sharing) else parse_sharing(sharing)
    if strategy not in SHARING_STRATEGIES:
        raise GpuLabError(f'unknown sharing strategy "{strategy}" (choose from {", ".join(SHARING_STRATEGIES)})')
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise GpuLabError(f"replicas must be a positive integer, got {replicas!r}")
    if (strategy == "none") != (replicas == 1):
        raise GpuLabError(f'sharing strategy "{strategy}" needs replicas {"of 1" if strategy == "none" else ">= 2"}')
    return Sharing(strategy, replicas, resources=((GPU_RESOURCE, replicas),) if replicas > 1 else ())
