"""The GPU models gpu-lab can put in a fake node, with the facts a real node shows.

Every number here is something a learner would see on a real cluster, so that
notebooks can say "this is what `kubectl describe node` prints on an H100 box":

* ``product`` is the ``nvidia.com/gpu.product`` label GPU Feature Discovery
  writes: the NVML device name with spaces turned into ``-`` (k8s-device-plugin
  ``internal/lm/resource.go``, ``getProductName``/``sanitise``), for the common
  SXM/PCIe variant named.
* ``memory_mib`` is ``nvidia.com/gpu.memory``: NVML total memory in MiB, the
  figure ``nvidia-smi`` prints (``device.GetTotalMemoryMB`` in the same file).
  It is a little under the marketing size (an "80GB" H100 reports 81559).
* ``family`` and ``compute_*`` are ``nvidia.com/gpu.family`` and
  ``nvidia.com/gpu.compute.major/minor``; the family follows GFD's
  ``getArchFamily`` (7.5 turing, 8.0-8.8 ampere, 8.9 ada-lovelace, 9.x hopper).
* ``price_per_hour`` is a reference on-demand price per GPU-hour: the AWS
  us-east-1 Linux on-demand price of one instance type divided by its GPU count
  (so it includes that instance's CPU and memory). It is for cost exercises,
  not a quote; ``price_source`` names the instance and the page.

Where each label value was checked (public node dumps and docs, November 2026):
Tesla-T4/15360, NVIDIA-L4/23034, NVIDIA-A10G/23028, NVIDIA-L40S/46068,
NVIDIA-A100-SXM4-40GB/40960, NVIDIA-A100-SXM4-80GB/81920 and
NVIDIA-H100-80GB-HBM3/81559 appear verbatim in ``kubectl describe node``
output published with GPU Operator installs; ``NVIDIA H200`` with
``143771MiB`` is what ``nvidia-smi`` prints on H200 SXM nodes (GFD turns the
name into ``NVIDIA-H200``). AWS prices are the us-east-1 Linux on-demand rates
in the public price file dated 2026-09-25 (https://aws.amazon.com/ec2/pricing/on-demand/),
as quoted by several public write-ups; re-check before relying on them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import GpuLabError

AWS_ON_DEMAND = "https://aws.amazon.com/ec2/pricing/on-demand/"
AWS_PRICE_DATE = "2026-09-25"


@dataclass(frozen=True)
class GpuModel:
    name: str  # gpu-lab's canonical key, e.g. "H100-80GB"
    product: str  # nvidia.com/gpu.product
    memory_mib: int  # nvidia.com/gpu.memory
    family: str  # nvidia.com/gpu.family
    compute_major: int  # nvidia.com/gpu.compute.major
    compute_minor: int  # nvidia.com/gpu.compute.minor
    mig_capable: bool  # nvidia.com/mig.capable
    price_per_hour: float  # USD per GPU-hour, on-demand reference
    price_source: str
    price_date: str
    aliases: tuple[str, ...] = ()

    def __str__(self) -> str:
        return self.name


def _aws(instance: str, instance_price: float, gpus: int) -> dict:
    return {
        "price_per_hour": round(instance_price / gpus, 4),
        "price_source": (
            f"AWS EC2 On-Demand, us-east-1 Linux: {instance} ${instance_price}/h"
            f" / {gpus} GPU{'s' if gpus > 1 else ''} ({AWS_ON_DEMAND})"
        ),
        "price_date": AWS_PRICE_DATE,
    }


_ENTRIES = (
    # Turing, compute 7.5, no MIG. g4dn.xlarge has one T4.
    GpuModel("T4", "Tesla-T4", 15360, "turing", 7, 5, False,
             **_aws("g4dn.xlarge", 0.526, 1),
             aliases=("nvidia-tesla-t4", "nvidia-t4")),
    # Ampere GA102, compute 8.6, no MIG. AWS-only part (g5).
    GpuModel("A10G", "NVIDIA-A10G", 23028, "ampere", 8, 6, False,
             **_aws("g5.xlarge", 1.006, 1),
             aliases=("nvidia-a10g",)),
    # Ada Lovelace, compute 8.9, no MIG.
    GpuModel("L4", "NVIDIA-L4", 23034, "ada-lovelace", 8, 9, False,
             **_aws("g6.xlarge", 0.8048, 1),
             aliases=("nvidia-l4",)),
    GpuModel("L40S", "NVIDIA-L40S", 46068, "ada-lovelace", 8, 9, False,
             **_aws("g6e.xlarge", 1.861, 1),
             aliases=("nvidia-l40s",)),
    # Ampere GA100, compute 8.0, MIG-capable (7 slices).
    GpuModel("A100-40GB", "NVIDIA-A100-SXM4-40GB", 40960, "ampere", 8, 0, True,
             **_aws("p4d.24xlarge", 21.957642, 8),
             aliases=("a100-sxm4-40gb", "nvidia-tesla-a100", "nvidia-a100-40gb")),
    GpuModel("A100-80GB", "NVIDIA-A100-SXM4-80GB", 81920, "ampere", 8, 0, True,
             **_aws("p4de.24xlarge", 27.44705, 8),
             aliases=("a100-sxm4-80gb", "nvidia-a100-80gb")),
    # Hopper, compute 9.0, MIG-capable.
    GpuModel("H100-80GB", "NVIDIA-H100-80GB-HBM3", 81559, "hopper", 9, 0, True,
             **_aws("p5.48xlarge", 55.04, 8),
             aliases=("h100", "nvidia-h100-80gb")),
    GpuModel("H200-141GB", "NVIDIA-H200", 143771, "hopper", 9, 0, True,
             **_aws("p5en.48xlarge", 63.296, 8),
             aliases=("h200", "nvidia-h200-141gb")),
)

MODELS: dict[str, GpuModel] = {m.name: m for m in _ENTRIES}


def _key(text: str) -> str:
    return "-".join(text.strip().lower().replace("_", " ").split())


_INDEX: dict[str, GpuModel] = {}
for _m in _ENTRIES:
    for _alias in (_m.name, _m.product, *_m.aliases):
        assert _INDEX.get(_key(_alias), _m) is _m, f"GPU alias {_alias} names two models"
        _INDEX[_key(_alias)] = _m


def get_model(name: str | GpuModel) -> GpuModel:
    """Look a model up by canonical name, GFD product label or alias, any case.

    ``"h100"``, ``"H100-80GB"`` and ``"nvidia-h100-80gb-hbm3"`` all give the
    same model, so manifests may use whichever name the learner has in hand.
    A bare ``"a100"`` is refused on purpose: it is 40GB on some clouds and
    80GB on others.
    """
    if isinstance(name, GpuModel):
        return name
    model = _INDEX.get(_key(name)) if isinstance(name, str) else None
    if model is None:
        raise GpuLabError(f'unknown GPU model "{name}" (known: {", ".join(sorted(MODELS))})')
    return model
