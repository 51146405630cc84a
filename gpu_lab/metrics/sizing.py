"""The common mistake, measured: a whole GPU per light inference pod, and how many GPUs the fix needs.

Light pods are those holding one whole, unshared GPU with a declared
utilisation of at most ``max_util`` percent and a declared memory. For each GPU
model they run on, three options:

* **whole GPUs**: what they hold now, one each.
* **time-slicing**: pods packed first-fit decreasing onto GPUs of the same
  model while their footprints fit the GPU's memory (``sharing.timeslice_memory``:
  no isolation, footprints add up) and the busy fractions stay within what a
  time-sliced GPU delivers (``sharing.timeslice_throughput``: offered load <=
  ``max_busy`` x its efficiency). The device plugin's ``replicas`` must be at
  least the most pods on one GPU; the scheduler counts replicas, not memory,
  so the packing is a placement to aim for, not one it finds by itself.
* **MIG** (MIG-capable models): the MIG planner (``planner.plan``) with one
  service per pod: its memory, and ``ceil(7 x busy / max_busy)`` compute
  slices, i.e. a busy fraction ``d`` on the whole GPU becomes ``7d/slices`` on
  an instance, assuming kernels run proportionally slower on fewer SMs (the
  same assumption ``sharing.mps_throughput`` makes). Pods too big for any
  instance keep a whole GPU.

A model, not a benchmark: latency under time-slicing grows with the
neighbours' load (``sharing.timeslice_latency``), which these counts ignore.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field

import pandas as pd

from ..errors import GpuLabError
from ..gpus.mig import COMPUTE_SLICES
from ..gpus.planner import MigPlan, Service
from ..gpus.planner import plan as plan_mig
from ..gpus.sharing import timeslice_memory, timeslice_throughput
from .records import GpuUse, check, gpu_model

OPTIONS = ("whole GPUs", "time-slicing", "MIG")
TABLE_COLUMNS = ["model", "option", "pods", "gpus", "gpus_saved", "setting", "usd_per_hour"]
POD_COLUMNS = ["namespace", "pod", "model", "util_percent", "memory_mib", "timeslice_gpu",
               "compute_slices", "mig_profile"]


@dataclass(frozen=True)
class Sizing:
    """Light pods, and the GPUs each option needs per model (``table``)."""

    table: pd.DataFrame
    pods: pd.DataFrame
    mig_plans: dict[str, MigPlan] = field(default_factory=dict)
    max_util: float = 50.0

    def gpus(self, option: str, model: str | None = None) -> int:
        """GPUs an option needs, summed over models (or for one)."""
        t = self.table[self.table["option"] == option]
        if model is not None:
            t = t[t["model"] == gpu_model(model).name]
        return int(t["gpus"].sum())

    def __str__(self) -> str:
        if self.pods.empty:
            return f"no pod holds a whole GPU at {self.max_util:g} % busy or less"
        lines = []
        for model, g in self.table.groupby("model", sort=False):
            p = self.pods[self.pods["model"] == model]
            row = g.set_index("option")
            whole, ts = row.loc["whole GPUs"], row.loc["time-slicing"]
            line = (f"{len(p)} pods hold a whole {model} each, {p['util_percent'].mean():.0f} % busy "
                    f"and {p['memory_mib'].mean() / 1024:.1f} GiB on average: {int(whole['gpus'])} GPUs "
                    f"(${whole['usd_per_hour']:,.2f}/h); time-slicing needs {int(ts['gpus'])} ({ts['setting']})")
            if "MIG" in row.index:
                mig = row.loc["MIG"]
                line += f", MIG needs {int(mig['gpus'])} ({mig['setting']})"
            lines.append(line)
        return "\n".join(lines)


def _light(uses: list[GpuUse], max_util: float) -> list[GpuUse]:
    return [u for u in uses if u.sharing == "none" and u.requested == 1 and u.utilization is not None
            and u.memory_mib is not None and u.utilization <= max_util]


def _busy(u: GpuUse) -> float:
    assert u.utilization is not None  # a light pod (``_light``) declares it
    return u.utilization


def _memory(u: GpuUse) -> float:
    assert u.memory_mib is not None  # a light pod (``_light``) declares it
    return u.memory_mib


def _fits(group: list[GpuUse], memory_mib: int, max_busy: float) -> bool:
    if not timeslice_memory([_memory(u) for u in group], memory_mib).fits:
        return False
    duties = [_busy(u) / 100 for u in group if _busy(u) > 0]
    if not duties:
        return True
    r = timeslice_throughput(len(duties), duties)
    return r.offered <= max_busy * r.capacity + 1e-12


def _time_slice(pods: list[GpuUse], memory_mib: int, max_busy: float) -> list[list[GpuUse]]:
    """First-fit decreasing (by busy fraction, then memory) onto GPUs of one model."""
    gpus: list[list[GpuUse]] = []
    for u in sorted(pods, key=lambda u: (-_busy(u), -_memory(u), u.namespace, u.pod)):
        for g in gpus:
            if _fits(g + [u], memory_mib, max_busy):
                g.append(u)
                break
        else:
            gpus.append([u])
    return gpus


def _slices(util: float, max_busy: float) -> int:
    return min(COMPUTE_SLICES, max(1, math.ceil(COMPUTE_SLICES * util / 100 / max_busy - 1e-9)))


def right_size(uses: Iterable[GpuUse], *, max_util: float = 50.0, max_busy: float = 1.0) -> Sizing:
    """The GPUs light pods need as whole GPUs, time-sliced and with MIG (see the module doc)."""
    if not 0 < max_util <= 100:
        raise GpuLabError(f"max_util must be a percent in (0, 100], got {max_util!r}")
    if not 0 < max_busy <= 1:
        raise GpuLabError(f"max_busy must be in (0, 1], got {max_busy!r}")
    light = _light([check(u) for u in uses], max_util)
    by_model: dict[str, list[GpuUse]] = {}
    for u in light:
        by_model.setdefault(gpu_model(u.model).name, []).append(u)
    rows, pod_rows, plans = [], [], {}
    for model, pods in by_model.items():
        gpu = gpu_model(model)
        price = gpu.price_per_hour
        whole = len({(u.node, u.gpu) for u in pods})
        packed = _time_slice(pods, gpu.memory_mib, max_busy)
        where = {u.key: i for i, g in enumerate(packed) for u in g}
        replicas = max(len(g) for g in packed)

        def row(option: str, n: int, setting: str, pods=pods, model=model, price=price,
                whole=whole) -> dict:
            return {"model": model, "option": option, "pods": len(pods), "gpus": n,
                    "gpus_saved": whole - n, "setting": setting, "usd_per_hour": round(n * price, 4)}

        rows.append(row("whole GPUs", whole, "nvidia.com/gpu: 1 each"))
        rows.append(row("time-slicing", len(packed), f"replicas: {replicas}"))
        slices = {u.key: _slices(_busy(u), max_busy) for u in pods}
        profile: dict[str, str] = {}
        if gpu.mig_capable:
            services = [Service(u.key, _memory(u) / 1024, slices[u.key]) for u in pods]
            mig = plans[model] = plan_mig(services, model)
            profile = dict(mig.profile_of)
            counts: dict[str, int] = {}
            for p in profile.values():
                counts[p] = counts.get(p, 0) + 1
            rows.append(row("MIG", mig.gpu_count, ", ".join(f"{n} x {p}" for p, n in sorted(counts.items()))))
        for u in pods:
            pod_rows.append({"namespace": u.namespace, "pod": u.pod, "model": model,
                             "util_percent": u.utilization, "memory_mib": u.memory_mib,
                             "timeslice_gpu": where[u.key], "compute_slices": slices[u.key],
                             "mig_profile": profile.get(u.key)})
    return Sizing(pd.DataFrame(rows, columns=TABLE_COLUMNS), pd.DataFrame(pod_rows, columns=POD_COLUMNS),
                  plans, max_util)
