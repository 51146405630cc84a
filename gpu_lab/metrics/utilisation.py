"""Per-pod GPU utilisation and waste, from declared use (``records.GpuUse``).

``utilisation(uses)``: one row per (pod, GPU device): the declared busy percent,
framebuffer used and free on the device, and GPU-hours. ``waste(...)``: one row
per pod: GPU-hours requested, used and wasted, and what the waste costs.

GPU-hours of a device = its share of a physical GPU (1 for a whole GPU,
1/replicas for a time-slicing or MPS replica, compute slices / 7 for a MIG
instance) x the hours the pod held it. Used GPU-hours = busy fraction x hours,
where the busy fraction is of what the container sees: the instance under MIG
(so x its share), the whole GPU under time-slicing and MPS (every replica sees
the whole GPU), so for one whole GPU per pod waste = requested x (1 - util).
A busy percent is DCGM's ``DCGM_FI_DEV_GPU_UTIL`` sense: the fraction of time
a kernel runs, not how many SMs it fills, so 100 % can still leave SMs idle.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import pandas as pd

from .records import GpuUse, check, device_memory_mib, gpu_model, gpu_share, physical_uuid

COLUMNS = ["namespace", "pod", "container", "node", "model", "gpu", "uuid", "device_id", "sharing",
           "mig_profile", "gpus_requested", "util_percent", "fb_total_mib", "fb_used_mib",
           "fb_free_mib", "gpu_share", "hours", "gpu_hours_requested", "gpu_hours_used"]
WASTE_COLUMNS = ["namespace", "pod", "node", "model", "gpus_requested", "util_percent",
                 "memory_mib", "gpu_hours_requested", "gpu_hours_used", "gpu_hours_wasted",
                 "waste_percent", "waste_usd"]


def device_key(use: GpuUse) -> tuple[str, int, str]:
    """What shares one framebuffer: the physical GPU, or one MIG instance of it."""
    if use.sharing == "mig":
        return (use.node, use.gpu, use.device_id.split("::", 1)[0])
    return (use.node, use.gpu, "")


def _nan(x: float | None) -> float:
    return math.nan if x is None else float(x)


def utilisation(uses: Iterable[GpuUse]) -> pd.DataFrame:
    """One row per (pod, GPU device) with util %, FB used/free MiB and GPU-hours (see module doc).

    ``fb_free_mib`` is the device's framebuffer less what every pod on it
    declares (time-sliced pods share one framebuffer), floored at 0; NaN when a
    pod on it declares no memory. ``util_percent`` NaN: not declared.
    """
    uses = [check(u) for u in uses]
    on_device: dict[tuple, list[GpuUse]] = {}
    for u in uses:
        on_device.setdefault(device_key(u), []).append(u)
    rows = []
    for u in uses:
        total = device_memory_mib(u)
        sharers = on_device[device_key(u)]
        mems = [o.memory_mib for o in sharers if o.memory_mib is not None]
        free = math.nan if len(mems) < len(sharers) else max(total - sum(mems), 0.0)
        share = gpu_share(u)
        busy = _nan(u.utilization) / 100
        seen = share if u.sharing == "mig" else 1.0  # what 100 % busy means in physical GPUs
        rows.append({
            "namespace": u.namespace, "pod": u.pod, "container": u.container, "node": u.node,
            "model": gpu_model(u.model).name, "gpu": u.gpu, "uuid": physical_uuid(u),
            "device_id": u.device_id, "sharing": u.sharing, "mig_profile": u.mig_profile,
            "gpus_requested": u.requested, "util_percent": _nan(u.utilization),
            "fb_total_mib": total, "fb_used_mib": _nan(u.memory_mib), "fb_free_mib": free,
            "gpu_share": share, "hours": float(u.hours),
            "gpu_hours_requested": share * u.hours, "gpu_hours_used": busy * seen * u.hours,
        })
    return pd.DataFrame(rows, columns=COLUMNS)


def waste(data: Iterable[GpuUse] | pd.DataFrame) -> pd.DataFrame:
    """One row per pod: GPU-hours requested, used and wasted (requested - used, at least 0).

    ``data`` is a list of ``GpuUse`` or a ``utilisation()`` table. ``util_percent``
    is the mean over the pod's devices; ``waste_usd`` prices the wasted GPU-hours
    at the model's catalog price per GPU-hour. A pod that declares no utilisation
    gets NaN, not 0: unknown is not idle.
    """
    df = data if isinstance(data, pd.DataFrame) else utilisation(data)
    rows = []
    for (ns, pod), g in df.groupby(["namespace", "pod"], sort=False):
        requested = float(g["gpu_hours_requested"].sum())
        used = g["gpu_hours_used"].sum(min_count=len(g))  # any NaN device -> NaN
        wasted = max(requested - used, 0.0) if pd.notna(used) else math.nan
        model = g["model"].iloc[0]
        rows.append({
            "namespace": ns, "pod": pod, "node": g["node"].iloc[0], "model": model,
            "gpus_requested": int(g["gpus_requested"].iloc[0]),
            "util_percent": g["util_percent"].mean() if g["util_percent"].notna().all() else math.nan,
            "memory_mib": g["fb_used_mib"].max() if g["fb_used_mib"].notna().all() else math.nan,
            "gpu_hours_requested": requested, "gpu_hours_used": used, "gpu_hours_wasted": wasted,
            "waste_percent": 100 * wasted / requested if requested else math.nan,
            "waste_usd": wasted * gpu_model(model).price_per_hour,
        })
    return pd.DataFrame(rows, columns=WASTE_COLUMNS)
