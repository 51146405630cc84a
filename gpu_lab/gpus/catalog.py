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

``interconnect`` is how the model's GPUs reach each other in the servers it ships in
(``Interconnect``): NVSwitch all-to-all with 12 (A100) or 18 (H100, H200) NVLinks per
GPU, as ``nvidia-smi topo -m`` prints ``NV12``/``NV18``, or PCIe only, from NVIDIA's
datasheets and architecture whitepapers. Which NUMA node each GPU hangs off is a model
of the node, not of the GPU: ``gpu_lab.gpus.topology``.

``reference`` is the machine a ``NodePool`` without ``cpu``/``memory`` is
modelled on: the same AWS instance type the price comes from, with its GPU
count, vCPUs and memory (GiB). A pool of ``N`` GPUs of the model gets the
reference machine's vCPUs and memory *per GPU* times ``N``, so 8 H100 give
``192`` cpu and ``2048Gi`` (a whole p5.48xlarge) and 4 L4 give ``16`` cpu and
``64Gi`` (4 x g6.xlarge's 4 vCPU / 16 GiB). The figures, per instance type
(GPUs, vCPUs, GiB): g4dn.xlarge 1 T4 / 4 / 16, g5.xlarge 1 A10G / 4 / 16,
g6.xlarge 1 L4 / 4 / 16, g6e.xlarge 1 L40S / 4 / 32, p4d.24xlarge 8 A100-40GB /
96 / 1152, p4de.24xlarge 8 A100-80GB / 96 / 1152, p5.48xlarge 8 H100 / 192 /
2048, p5en.48xlarge 8 H200 / 192 / 2048. AWS publishes them on
https://aws.amazon.com/ec2/instance-types/ and
https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html; we checked them
(November 2026) against AWS Batch's GPU job table
(https://docs.aws.amazon.com/batch/latest/userguide/gpu-jobs.html: g4dn, g5,
g6), Red Hat's ROSA instance list
(https://github.com/openshift/openshift-docs/blob/main/modules/rosa-sdpolicy-am-aws-compute-types.adoc:
p4d, p4de, p5, g4dn, g5), TorchX's AWS named resources
(https://github.com/meta-pytorch/torchx/blob/main/torchx/specs/named_resources_aws.py:
p4d, p4de, p5, p5en, g4dn, g5, g6e) and dstack's p5en offer listing
(https://github.com/dstackai/dstack/pull/4110: p5en.48xlarge, 192 vCPU, 2048 GB,
8 x H200).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from math import ceil

from ..errors import GpuLabError

AWS_ON_DEMAND = "https://aws.amazon.com/ec2/pricing/on-demand/"
AWS_PRICE_DATE = "2026-09-25"
AWS_INSTANCE_TYPES = "https://aws.amazon.com/ec2/instance-types/"


@dataclass(frozen=True)
class ReferenceMachine:
    """The cloud machine a model's NodePool defaults are scaled from."""

    instance_type: str  # e.g. "p5.48xlarge"
    gpus: int
    vcpus: int
    memory_gib: int
    source: str

    def cpu(self, gpus: int) -> str:
        """vCPUs per GPU times ``gpus``, as a quantity (``"192"``, or millicores if fractional)."""
        v = Fraction(self.vcpus * gpus, self.gpus)
        return str(v.numerator) if v.denominator == 1 else f"{ceil(v * 1000)}m"

    def memory(self, gpus: int) -> str:
        """Memory per GPU times ``gpus``, as a quantity (``"2048Gi"``, or ``Mi`` if fractional)."""
        v = Fraction(self.memory_gib * gpus, self.gpus)
        return f"{v.numerator}Gi" if v.denominator == 1 else f"{ceil(v * 1024)}Mi"


@dataclass(frozen=True)
class Interconnect:
    """How a model's GPUs talk to each other in the servers it ships in (datasheet facts)."""

    kind: str  # "nvswitch": every GPU to every other through NVSwitch chips; "pcie": no NVLink
    nvlinks: int  # NVLink links per GPU (0 for PCIe only); nvidia-smi topo -m prints NV<n>
    gpu_to_gpu: str  # peak GPU-to-GPU bandwidth per GPU, as the datasheet gives it
    pcie: str  # the GPU's host link
    source: str

    @property
    def topo(self) -> str:
        """What ``nvidia-smi topo -m`` prints between two GPUs of one node on this interconnect
        (for PCIe, the cross-socket case; same-socket pairs print NODE or PIX/PXB by board)."""
        return f"NV{self.nvlinks}" if self.nvlinks else "SYS"


NVSWITCH_H = Interconnect(
    "nvswitch", 18, "900 GB/s (NVLink 4)", "PCIe Gen5 x16, 128 GB/s",
    "NVIDIA H100 and H200 datasheets (SXM: NVLink 900GB/s); the H100 architecture whitepaper "
    "(18 fourth-generation NVLinks per GPU; HGX H100 8-GPU connects all eight through NVSwitch)")
NVSWITCH_A100 = Interconnect(
    "nvswitch", 12, "600 GB/s (NVLink 3)", "PCIe Gen4 x16, 64 GB/s",
    "NVIDIA A100 datasheet (SXM: NVLink 600GB/s); the A100 architecture whitepaper (12 "
    "third-generation NVLinks per GPU; HGX A100 8-GPU connects all eight through six NVSwitches)")


def _pcie_only(link: str, datasheet: str) -> Interconnect:
    return Interconnect("pcie", 0, f"{link} (PCIe, through the host)", link,
                        f"NVIDIA {datasheet} datasheet: no NVLink, interconnect {link}")


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
    reference: ReferenceMachine | None = None  # default cpu/memory for NodePools
    interconnect: Interconnect | None = None  # GPU-to-GPU links (gpu_lab.gpus.topology)

    def __str__(self) -> str:
        return self.name


def _aws(instance: str, instance_price: float, gpus: int, vcpus: int, memory_gib: int) -> dict:
    return {
        "reference": ReferenceMachine(
            instance, gpus, vcpus, memory_gib,
            f"AWS EC2 {instance}: {gpus} GPU{'s' if gpus > 1 else ''}, {vcpus} vCPUs, "
            f"{memory_gib} GiB ({AWS_INSTANCE_TYPES})"),
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
             **_aws("g4dn.xlarge", 0.526, 1, 4, 16),
             aliases=("nvidia-tesla-t4", "nvidia-t4"),
             interconnect=_pcie_only("PCIe Gen3 x16, 32 GB/s", "T4")),
    # Ampere GA102, compute 8.6, no MIG. AWS-only part (g5).
    GpuModel("A10G", "NVIDIA-A10G", 23028, "ampere", 8, 6, False,
             **_aws("g5.xlarge", 1.006, 1, 4, 16),
             aliases=("nvidia-a10g",),
             interconnect=_pcie_only("PCIe Gen4 x16, 64 GB/s", "A10 (the A10G is AWS's variant)")),
    # Ada Lovelace, compute 8.9, no MIG.
    GpuModel("L4", "NVIDIA-L4", 23034, "ada-lovelace", 8, 9, False,
             **_aws("g6.xlarge", 0.8048, 1, 4, 16),
             aliases=("nvidia-l4",),
             interconnect=_pcie_only("PCIe Gen4 x16, 64 GB/s", "L4")),
    GpuModel("L40S", "NVIDIA-L40S", 46068, "ada-lovelace", 8, 9, False,
             **_aws("g6e.xlarge", 1.861, 1, 4, 32),
             aliases=("nvidia-l40s",),
             interconnect=_pcie_only("PCIe Gen4 x16, 64 GB/s", "L40S")),
    # Ampere GA100, compute 8.0, MIG-capable (7 slices).
    GpuModel("A100-40GB", "NVIDIA-A100-SXM4-40GB", 40960, "ampere", 8, 0, True,
             **_aws("p4d.24xlarge", 21.957642, 8, 96, 1152),
             aliases=("a100-sxm4-40gb", "nvidia-tesla-a100", "nvidia-a100-40gb"),
             interconnect=NVSWITCH_A100),
    GpuModel("A100-80GB", "NVIDIA-A100-SXM4-80GB", 81920, "ampere", 8, 0, True,
             **_aws("p4de.24xlarge", 27.44705, 8, 96, 1152),
             aliases=("a100-sxm4-80gb", "nvidia-a100-80gb"),
             interconnect=NVSWITCH_A100),
    # Hopper, compute 9.0, MIG-capable.
    GpuModel("H100-80GB", "NVIDIA-H100-80GB-HBM3", 81559, "hopper", 9, 0, True,
             **_aws("p5.48xlarge", 55.04, 8, 192, 2048),
             aliases=("h100", "nvidia-h100-80gb"),
             interconnect=NVSWITCH_H),
    GpuModel("H200-141GB", "NVIDIA-H200", 143771, "hopper", 9, 0, True,
             **_aws("p5en.48xlarge", 63.296, 8, 192, 2048),
             aliases=("h200", "nvidia-h200-141gb"),
             interconnect=NVSWITCH_H),
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
