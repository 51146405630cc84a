"""``gpu-lab probe``: the NVIDIA GPUs of this machine, read through NVML, changing nothing.

For the driver: its version, the CUDA version it supports, NVML's version. Per GPU:
index, name, UUID, memory total/used (MiB), compute capability, MIG mode (current and
pending), the MIG devices (GPU instance profile, placement start/size in memory slices,
memory, GI/CI ids, MIG UUIDs), utilisation (GPU and memory, %; NVML does not report it
for a GPU in MIG mode), and the labels GPU Feature Discovery would give the node: the
``nvidia.com/gpu.product`` (the NVML name with spaces turned into ``-``, as
k8s-device-plugin's ``internal/lm/resource.go`` writes it; ``<product>-MIG-<profile>``
under the MIG ``single`` strategy), ``.memory`` (total MiB), ``.family`` and
``.compute.*``, plus the matching model of :mod:`gpu_lab.gpus.catalog` where there is one.

Read-only by construction: the only NVML functions this module calls are ``nvmlInit``,
``nvmlShutdown`` and ``nvml{System,Device,GpuInstance}Get*`` queries
(:data:`READ_ONLY_CALLS`; the tests hold the module to it). It never sets a mode, a
clock, a limit or a MIG layout.

MIG profile names follow NVIDIA's go-nvlib (``pkg/nvlib/device/mig_profile.go``):
``<g>g.<gb>gb`` with the memory rounded to eighths of the GPU's memory, ``+me`` for the
media-extension profiles, ``<c>c.<g>g.<gb>gb`` when the compute instance is smaller than
its GPU instance. NVML's own profile name (``MIG 1g.10gb``, profile info v2) wins when
the driver gives one.

Needs NVIDIA's bindings, ``pip install nvidia-ml-py`` (imported as ``pynvml``), and a
driver. Without either it prints one line, ``no NVIDIA driver found: ...``, and exits 1.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import re
import sys
from dataclasses import asdict, dataclass, field
from typing import Any

from .errors import GpuLabError, NoDriver
from .gpus.catalog import MODELS, get_model

#: every NVML function this module may call: setup, teardown and Get queries
READ_ONLY_CALLS = re.compile(r"^nvml(Init(WithFlags)?|Shutdown|(System|Device|GpuInstance)Get\w*)$")
MIB = 1024 * 1024
GIB = 1024 * MIB

# NVML return codes (nvml.h); a fake module may omit the constants
NOT_SUPPORTED, NO_PERMISSION, NOT_FOUND, FUNCTION_NOT_FOUND = 3, 4, 6, 13
_ABSENT = (NOT_SUPPORTED, NO_PERMISSION, NOT_FOUND, FUNCTION_NOT_FOUND, 2)  # 2: invalid argument

# NVML_GPU_INSTANCE_PROFILE_* (the profile *index*) -> (GPU instance slices, media extensions)
GI_PROFILES = {
    0: (1, False),
    1: (2, False),
    2: (3, False),
    3: (4, False),
    4: (7, False),
    5: (8, False),
    6: (6, False),
    7: (1, True),
    8: (2, True),
    9: (1, False),
}


@dataclass
class MigDevice:
    index: int  # MIG device index on its parent GPU
    uuid: str | None
    gpu_instance_id: int | None
    compute_instance_id: int | None
    profile: str | None  # "1g.10gb", "1g.5gb+me", "1c.3g.20gb"
    profile_id: int | None  # NVML's GPU instance profile ID (nvidia-smi mig -lgip "ID")
    placement_start: int | None  # first memory slice
    placement_size: int | None  # memory slices
    memory_total_mib: int | None
    memory_used_mib: int | None
    multiprocessors: int | None
    gpu_instance_slices: int | None
    compute_instance_slices: int | None


@dataclass
class Gpu:
    index: int
    name: str
    uuid: str | None
    memory_total_mib: int | None
    memory_used_mib: int | None
    compute_capability: str | None  # "9.0"
    mig_capable: bool
    mig_mode_current: bool | None  # None: the GPU has no MIG
    mig_mode_pending: bool | None
    utilization_gpu: int | None  # percent over NVML's last sample period
    utilization_memory: int | None
    product_label: str  # nvidia.com/gpu.product GFD would write (no sharing, no MIG single)
    family: str | None
    catalog_model: str | None  # gpu_lab.gpus.catalog name
    catalog_match: str | None  # "exact" (same product label) or "closest" (name and memory)
    mig_devices: list[MigDevice] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def mig_single_product_label(self) -> str | None:
        """The product label under MIG strategy ``single`` (one profile on the GPU)."""
        names = {m.profile for m in self.mig_devices}
        if not self.mig_mode_current or len(names) != 1 or None in names:
            return None
        return f"{self.product_label}-MIG-{names.pop()}"


@dataclass
class ProbeResult:
    driver_version: str | None
    cuda_version: str | None  # the CUDA version the driver supports ("12.4")
    nvml_version: str | None
    gpus: list[Gpu] = field(default_factory=list)

    def labels(self) -> dict[str, str]:
        """The GFD labels a node with these GPUs would get (first GPU's model, as GFD does)."""
        if not self.gpus:
            return {}
        g = self.gpus[0]
        out = {
            "nvidia.com/gpu.present": "true",
            "nvidia.com/gpu.product": g.product_label,
            "nvidia.com/gpu.count": str(len(self.gpus)),
            "nvidia.com/mig.capable": "true" if any(x.mig_capable for x in self.gpus) else "false",
        }
        if g.memory_total_mib:
            out["nvidia.com/gpu.memory"] = str(g.memory_total_mib)
        if g.family:
            out["nvidia.com/gpu.family"] = g.family
        if g.compute_capability:
            out["nvidia.com/gpu.compute.major"], out["nvidia.com/gpu.compute.minor"] = (
                g.compute_capability.split(".")
            )
        if self.driver_version:
            parts = self.driver_version.split(".")
            for key, value in zip(("major", "minor", "revision"), parts):
                out[f"nvidia.com/cuda.driver-version.{key}"] = value
        if self.cuda_version:
            major, minor = self.cuda_version.split(".")
            out["nvidia.com/cuda.runtime-version.major"] = major
            out["nvidia.com/cuda.runtime-version.minor"] = minor
        return dict(sorted(out.items()))

    def to_dict(self) -> dict[str, Any]:
        gpus = []
        for g in self.gpus:
            d = asdict(g)
            d["mig_single_product_label"] = g.mig_single_product_label
            gpus.append(d)
        return {
            "driver_version": self.driver_version,
            "cuda_version": self.cuda_version,
            "nvml_version": self.nvml_version,
            "gpus": gpus,
            "labels": self.labels(),
        }

    def frame(self):
        """One row per GPU (pandas)."""
        import pandas as pd

        cols = [
            "index",
            "name",
            "uuid",
            "memory_total_mib",
            "memory_used_mib",
            "compute_capability",
            "mig_mode_current",
            "mig_mode_pending",
            "utilization_gpu",
            "utilization_memory",
            "product_label",
            "catalog_model",
        ]
        rows = [
            {**{c: getattr(g, c) for c in cols}, "mig_devices": len(g.mig_devices)}
            for g in self.gpus
        ]
        return pd.DataFrame(rows, columns=[*cols, "mig_devices"])

    def __str__(self) -> str:
        lines = [
            f"driver {self.driver_version or '?'}, CUDA {self.cuda_version or '?'}"
            f" (NVML {self.nvml_version or '?'}), {len(self.gpus)} GPU(s)"
        ]
        for g in self.gpus:
            lines.append(f"GPU {g.index}: {g.name}  {g.uuid or ''}".rstrip())
            mem = (
                f"{g.memory_used_mib} / {g.memory_total_mib} MiB used"
                if g.memory_total_mib is not None
                else "memory ?"
            )
            util = (
                f"utilisation gpu {g.utilization_gpu} %, memory {g.utilization_memory} %"
                if g.utilization_gpu is not None
                else "utilisation n/a"
            )
            lines.append(f"  memory {mem}, {util}, compute {g.compute_capability or '?'}")
            if g.mig_mode_current is None:
                lines.append("  MIG: not supported")
            else:
                cur = "enabled" if g.mig_mode_current else "disabled"
                pend = (
                    ""
                    if g.mig_mode_pending == g.mig_mode_current
                    else (
                        f" (pending: {'enabled' if g.mig_mode_pending else 'disabled'} after a GPU reset)"
                    )
                )
                lines.append(f"  MIG: {cur}{pend}, {len(g.mig_devices)} MIG device(s)")
            model = (
                f" = catalog {g.catalog_model} ({g.catalog_match})"
                if g.catalog_model
                else " (not in gpu-lab's catalog)"
            )
            lines.append(f"  nvidia.com/gpu.product={g.product_label}{model}")
            if g.mig_single_product_label:
                lines.append(f"  under MIG strategy single: {g.mig_single_product_label}")
            for m in g.mig_devices:
                where = (
                    f"slices {m.placement_start}+{m.placement_size}"
                    if m.placement_start is not None
                    else "placement ?"
                )
                lines.append(
                    f"    MIG {m.index}: {m.profile or '?'}  GI {m.gpu_instance_id} "
                    f"CI {m.compute_instance_id}  {where}  {m.memory_total_mib} MiB  "
                    f"{m.uuid or ''}".rstrip()
                )
            lines += [f"  note: {n}" for n in g.notes]
        return "\n".join(lines)


# ------------------------------------------------------------------ helpers


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value)


def product_label(name: str) -> str:
    """GFD's ``nvidia.com/gpu.product`` for an NVML device name (spaces -> ``-``)."""
    return "-".join(p for p in name.strip().split(" ") if p)


def arch_family(major: int, minor: int) -> str:
    """GFD's ``nvidia.com/gpu.family`` (with the catalog's 8.9 = ada-lovelace)."""
    if major == 7:
        return "volta" if minor < 5 else "turing"
    if major == 8:
        return "ada-lovelace" if minor >= 9 else "ampere"
    return {
        1: "tesla",
        2: "fermi",
        3: "kepler",
        5: "maxwell",
        6: "pascal",
        9: "hopper",
        10: "blackwell",
        12: "blackwell",
    }.get(major, "undefined")


def catalog_match(name: str, memory_mib: int | None) -> tuple[str | None, str | None]:
    """The catalog model an NVML name is: ``exact`` when the product label is the
    catalog's, ``closest`` when the model's key (``H100``, ``A100``...) is a word of the
    name and the memory is within 5 % (a PCIe part next to the catalog's SXM one)."""

    label = product_label(name)
    try:
        return get_model(label).name, "exact"
    except GpuLabError:
        pass
    words = {w.upper() for w in re.split(r"[\s\-_]+", name)}
    for model in MODELS.values():
        key = model.name.split("-")[0].upper()
        if (
            key in words
            and memory_mib
            and abs(memory_mib - model.memory_mib) <= 0.05 * model.memory_mib
        ):
            return model.name, "closest"
    return None, None


def mig_memory_gb(device_memory_bytes: int, mig_memory_mib: int) -> int:
    """go-nvlib's ``getMigMemorySizeGB``: the GB in a MIG profile's name."""
    fraction = mig_memory_mib * MIB / device_memory_bytes
    fraction = math.ceil(fraction * 8) / 8
    total_gb = (device_memory_bytes + GIB - 1) // GIB
    return int(math.floor(fraction * total_gb + 0.5))  # Go's math.Round: halves away from 0


def mig_profile_name(gi_slices: int, ci_slices: int | None, memory_gb: int, media: bool) -> str:
    name = f"{gi_slices}g.{memory_gb}gb" + ("+me" if media else "")
    return name if not ci_slices or ci_slices == gi_slices else f"{ci_slices}c.{name}"


# ------------------------------------------------------------------ reading NVML


class _Reader:
    """NVML queries that turn 'not supported / not found / no permission' into None."""

    def __init__(self, nvml):
        self.nvml = nvml
        self.error = getattr(nvml, "NVMLError", Exception)

    def code(self, exc: Exception) -> int | None:
        return getattr(exc, "value", None)

    def get(self, fn: str, *args, notes: list[str] | None = None):
        assert READ_ONLY_CALLS.match(fn), fn  # never anything but a query
        func = getattr(self.nvml, fn, None)
        if func is None:
            return None
        try:
            return func(*args)
        except self.error as exc:
            code = self.code(exc)
            if notes is not None and code == NO_PERMISSION:
                notes.append(f"{fn}: insufficient permissions (run as root for this detail)")
            elif notes is not None and code not in _ABSENT:
                notes.append(f"{fn}: {exc}")
            return None


def _gi_profiles(r: _Reader, handle) -> dict[int, tuple[int, Any]]:
    """NVML GPU instance profile ID -> (profile index, profile info), for this GPU."""
    out: dict[int, tuple[int, Any]] = {}
    for index in GI_PROFILES:
        info = r.get("nvmlDeviceGetGpuInstanceProfileInfo", handle, index)
        if info is None:  # drivers before the v2 call (nvmlDeviceGetGpuInstanceProfileInfoV)
            info = r.get("nvmlDeviceGetGpuInstanceProfileInfo", handle, index, 1)
        if info is None:
            continue
        instances = getattr(info, "instanceCount", 1)  # own line: inside a condition mypy wants a bool default
        if instances:
            out[int(info.id)] = (index, info)
    return out


def _mig_devices(r: _Reader, handle, total_bytes: int | None, notes: list[str]) -> list[MigDevice]:
    profiles = _gi_profiles(r, handle)
    count = r.get("nvmlDeviceGetMaxMigDeviceCount", handle, notes=notes) or 0
    out = []
    for j in range(int(count)):
        mig = r.get("nvmlDeviceGetMigDeviceHandleByIndex", handle, j)
        if mig is None:
            continue  # an empty MIG device slot
        gi_id = r.get("nvmlDeviceGetGpuInstanceId", mig, notes=notes)
        ci_id = r.get("nvmlDeviceGetComputeInstanceId", mig, notes=notes)
        mem = r.get("nvmlDeviceGetMemoryInfo", mig, notes=notes)
        attrs = r.get("nvmlDeviceGetAttributes", mig, notes=notes)
        gi_info = None
        if gi_id is not None:
            gi = r.get("nvmlDeviceGetGpuInstanceById", handle, gi_id, notes=notes)
            gi_info = r.get("nvmlGpuInstanceGetInfo", gi, notes=notes) if gi is not None else None
        profile_id = int(gi_info.profileId) if gi_info is not None else None
        index, pinfo = (
            profiles.get(profile_id, (None, None)) if profile_id is not None else (None, None)
        )
        gi_slices = getattr(attrs, "gpuInstanceSliceCount", None)
        ci_slices = getattr(attrs, "computeInstanceSliceCount", None)
        mig_mib = getattr(attrs, "memorySizeMB", None) or (
            mem.total // MIB if mem is not None else None
        )
        profile = None
        nvml_name = _text(getattr(pinfo, "name", b"") or b"").strip()
        if nvml_name:
            profile = nvml_name.removeprefix("MIG ").strip()
            if ci_slices and gi_slices and ci_slices != gi_slices and "c." not in profile:
                profile = f"{ci_slices}c.{profile}"
        elif gi_slices and mig_mib and total_bytes:
            media = GI_PROFILES.get(index, (0, False))[1] if index is not None else False
            profile = mig_profile_name(
                int(gi_slices),
                ci_slices and int(ci_slices),
                mig_memory_gb(total_bytes, int(mig_mib)),
                media,
            )
        placement = getattr(gi_info, "placement", None)
        out.append(
            MigDevice(
                index=j,
                uuid=_text(u)
                if (u := r.get("nvmlDeviceGetUUID", mig, notes=notes)) is not None
                else None,
                gpu_instance_id=None if gi_id is None else int(gi_id),
                compute_instance_id=None if ci_id is None else int(ci_id),
                profile=profile,
                profile_id=profile_id,
                placement_start=None if placement is None else int(placement.start),
                placement_size=None if placement is None else int(placement.size),
                memory_total_mib=None if mig_mib is None else int(mig_mib),
                memory_used_mib=None if mem is None else int(mem.used // MIB),
                multiprocessors=getattr(attrs, "multiprocessorCount", None),
                gpu_instance_slices=gi_slices,
                compute_instance_slices=ci_slices,
            )
        )
    return out


def _gpu(r: _Reader, index: int) -> Gpu:
    notes: list[str] = []
    handle = r.nvml.nvmlDeviceGetHandleByIndex(index)
    name = _text(r.get("nvmlDeviceGetName", handle, notes=notes) or "unknown")
    uuid = r.get("nvmlDeviceGetUUID", handle, notes=notes)
    mem = r.get("nvmlDeviceGetMemoryInfo", handle, notes=notes)
    total = int(mem.total) if mem is not None else None
    cc = r.get("nvmlDeviceGetCudaComputeCapability", handle, notes=notes)
    mig_mode = r.get("nvmlDeviceGetMigMode", handle)
    util = r.get("nvmlDeviceGetUtilizationRates", handle)
    total_mib = total // MIB if total is not None else None
    model, match = catalog_match(name, total_mib)
    family = None
    if model:
        family = get_model(model).family
    elif cc is not None:
        family = arch_family(int(cc[0]), int(cc[1]))
    gpu = Gpu(
        index=index,
        name=name,
        uuid=_text(uuid) if uuid is not None else None,
        memory_total_mib=total_mib,
        memory_used_mib=int(mem.used) // MIB if mem is not None else None,
        compute_capability=f"{int(cc[0])}.{int(cc[1])}" if cc is not None else None,
        mig_capable=mig_mode is not None,
        mig_mode_current=None if mig_mode is None else bool(mig_mode[0]),
        mig_mode_pending=None if mig_mode is None else bool(mig_mode[1]),
        utilization_gpu=None if util is None else int(util.gpu),
        utilization_memory=None if util is None else int(util.memory),
        product_label=product_label(name),
        family=family,
        catalog_model=model,
        catalog_match=match,
        notes=notes,
    )
    if gpu.mig_mode_current:
        gpu.mig_devices = _mig_devices(r, handle, total, notes)
        if util is None:
            notes.append("utilisation is not reported for a GPU in MIG mode")
    return gpu


def _import_nvml():
    try:
        import pynvml
    except ImportError as exc:
        raise NoDriver(
            f"the NVML bindings are not installed (pip install nvidia-ml-py): {exc}"
        ) from None
    return pynvml


def probe(nvml=None) -> ProbeResult:
    """Read this machine's GPUs through NVML (``nvml``: the ``pynvml`` module, or a stand-in)."""
    nvml = nvml if nvml is not None else _import_nvml()
    error = getattr(nvml, "NVMLError", Exception)
    try:
        nvml.nvmlInit()
    except error as exc:
        raise NoDriver(str(exc) or type(exc).__name__) from None
    except OSError as exc:  # a broken library
        raise NoDriver(str(exc)) from None
    try:
        r = _Reader(nvml)
        cuda = r.get("nvmlSystemGetCudaDriverVersion")
        result = ProbeResult(
            driver_version=_text(v)
            if (v := r.get("nvmlSystemGetDriverVersion")) is not None
            else None,
            cuda_version=f"{int(cuda) // 1000}.{int(cuda) % 1000 // 10}" if cuda else None,
            nvml_version=_text(v) if (v := r.get("nvmlSystemGetNVMLVersion")) is not None else None,
        )
        count = int(nvml.nvmlDeviceGetCount())
        result.gpus = [_gpu(r, i) for i in range(count)]
        return result
    finally:
        with contextlib.suppress(error):
            nvml.nvmlShutdown()


def main(argv: list[str] | None = None, nvml=None) -> int:
    p = argparse.ArgumentParser(
        prog="gpu-lab probe",
        description="Read-only NVML discovery of this machine's NVIDIA GPUs: model, memory, "
        "MIG mode and instances, utilisation, and the GFD labels the node would get.",
    )
    p.add_argument("--json", action="store_true", help="print JSON")
    args = p.parse_args(argv)
    try:
        result = probe(nvml)
    except NoDriver as exc:
        print(str(exc), file=sys.stderr)
        return 1
    if not result.gpus:
        print(
            f"no NVIDIA GPU found: driver {result.driver_version or '?'} reports 0 devices",
            file=sys.stderr,
        )
        return 1
    print(json.dumps(result.to_dict(), indent=2) if args.json else result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
