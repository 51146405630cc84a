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

MIG-enabled GPUs (``-MIG-<profile>`` products, mixed-strategy
``nvidia.com/mig-<profile>.*`` labels) are a later addition; the keyword
arguments are already here so callers will not change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import GpuLabError
from .catalog import GpuModel, get_model

GPU_RESOURCE = "nvidia.com/gpu"
SHARING_STRATEGIES = ("none", "time-slicing", "mps")
MIG_STRATEGIES = ("none", "single", "mixed")
_CONFIG_KEY = {"timeSlicing": "time-slicing", "mps": "mps"}


@dataclass(frozen=True)
class Sharing:
    """The part of a device-plugin ``sharing:`` block that shapes a node."""

    strategy: str = "none"  # none | time-slicing | mps
    replicas: int = 1  # per physical GPU
    renamed: bool = False  # renameByDefault: advertise <resource>.shared
    fail_requests_greater_than_one: bool = False

    @property
    def resource(self) -> str:
        """The extended resource whole GPUs are advertised as."""
        return f"{GPU_RESOURCE}.shared" if self.renamed else GPU_RESOURCE

    @property
    def shared(self) -> bool:
        return self.strategy != "none" and self.replicas > 1


def parse_sharing(raw: Any, where: str = "sharing") -> Sharing:
    """Read the device plugin's ``sharing:`` section (``timeSlicing`` or ``mps``).

    Only the ``nvidia.com/gpu`` entry matters for whole GPUs; entries for MIG
    resources are accepted and left for the MIG support to use.
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
    for field, val in (("renameByDefault", rename), ("failRequestsGreaterThanOne", fail)):
        if not isinstance(val, bool):
            raise GpuLabError(f"{here}.{field}: must be true or false")
    resources = block.get("resources")
    if not isinstance(resources, list) or not resources:
        raise GpuLabError(f"{here}.resources: no resources specified")
    replicas = 1
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
        for field in ("rename", "devices"):
            if field in res and not (field == "devices" and res[field] == "all"):
                raise GpuLabError(f"{at}.{field}: not supported (sharing applies to every GPU of the node)")
        if res["name"] == GPU_RESOURCE:
            replicas = n
    if replicas == 1:
        return Sharing()
    return Sharing(_CONFIG_KEY[key], replicas, rename, fail)


def gfd_labels(
    model: GpuModel | str,
    count: int,
    *,
    sharing: Sharing | dict | None = None,
    mig_strategy: str = "none",
    replicas: int = 1,
    sharing_strategy: str = "none",
    machine: str | None = None,
) -> dict[str, str]:
    """Labels GFD and the GPU Operator put on a node with ``count`` whole GPUs.

    Sharing comes either from ``sharing`` (a ``Sharing`` or the device-plugin
    ``sharing:`` mapping, which can also rename the resource) or from the
    ``replicas``/``sharing_strategy`` shorthand, not both. ``machine`` is the
    optional ``nvidia.com/gpu.machine`` (the host's DMI product name, e.g. an
    EC2 instance type). A node without GPUs gets no labels, as GFD writes none.
    """
    model = get_model(model)
    if isinstance(count, bool) or not isinstance(count, int) or count < 0:
        raise GpuLabError(f"GPU count must be a non-negative integer, got {count!r}")
    if mig_strategy not in MIG_STRATEGIES:
        raise GpuLabError(f'unknown MIG strategy "{mig_strategy}" (choose from {", ".join(MIG_STRATEGIES)})')
    share = _sharing(sharing, replicas, sharing_strategy)
    if count == 0:
        return {}
    product = model.product + ("-SHARED" if share.shared and not share.renamed else "")
    labels = {
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.memory": str(model.memory_mib),
        "nvidia.com/gpu.count": str(count),
        "nvidia.com/gpu.family": model.family,
        "nvidia.com/gpu.compute.major": str(model.compute_major),
        "nvidia.com/gpu.compute.minor": str(model.compute_minor),
        "nvidia.com/gpu.replicas": str(share.replicas),
        "nvidia.com/gpu.sharing-strategy": share.strategy if share.shared else "none",
        "nvidia.com/gpu.mode": "compute",
        "nvidia.com/mig.capable": str(model.mig_capable).lower(),
        "nvidia.com/mps.capable": str(share.strategy == "mps").lower(),
    }
    if mig_strategy != "none":
        labels["nvidia.com/mig.strategy"] = mig_strategy
    if machine:
        labels["nvidia.com/gpu.machine"] = "-".join(str(machine).split())
    return labels


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
    return Sharing(strategy, replicas)
