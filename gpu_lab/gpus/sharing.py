"""Sharing a whole GPU between pods: time-slicing and MPS, and a simple contention model.

What NVIDIA's device plugin does (k8s-device-plugin; the fake plugin and
``labels.gpu_node_state`` implement the advertising part):

* **Time-slicing** (``sharing.timeSlicing``): each GPU is advertised
  ``replicas`` times (``<uuid>::0`` ... ``<uuid>::R-1``), so 8 GPUs with
  ``replicas: 10`` show ``nvidia.com/gpu: 80``. Every pod handed a replica
  gets the *whole* GPU: all of its memory (no isolation at all) and all of its
  SMs, taking turns with the other pods' CUDA contexts. With
  ``failRequestsGreaterThanOne`` a container asking for more than one replica
  fails admission; without it, two replicas may be the same GPU.
* **MPS** (``sharing.mps``): same advertising, but one MPS server per GPU runs
  every pod's kernels concurrently. The plugin's MPS daemon
  (``cmd/mps-control-daemon/mps/daemon.go``) caps each client at
  ``floor(total_bytes / replicas / MiB)`` MiB of device memory
  (``set_default_device_pinned_mem_limit``) and ``100 // replicas`` percent of
  the SMs (``set_default_active_thread_percentage``): equal shares, enforced.
  Requests for more than one replica always fail. MPS is not offered on
  MIG-enabled GPUs.

THE CONTENTION MODEL BELOW IS A MODEL, NOT A MEASUREMENT. It exists so a
lesson can show, with numbers a learner can recompute by hand, why
time-slicing is the wrong tool for latency-sensitive multi-tenant inference.
Real interference also comes from memory bandwidth, L2, PCIe and power, which
it ignores. Its assumptions:

1. A pod alternates between wanting the GPU and not. Alone on the GPU it is
   busy a fraction ``d`` of the time, its **duty cycle** (0 < d <= 1).
2. Time-slicing: only one CUDA context runs at a time. When two or more want
   the GPU, the driver gives them equal turns of ``slice_ms`` in round robin,
   and each switch costs ``switch_ms`` of dead time, so a busy shared GPU does
   useful work only ``slice_ms / (slice_ms + switch_ms)`` of the time (the
   efficiency). NVIDIA does not document the slice length; the defaults
   (2 ms slices, 0.1 ms switches) are illustrative.
3. Throughput: the GPU's useful time is split max-min fairly (a pod that
   needs less than an equal share keeps what it needs, the rest is shared
   among the others). A pod's **throughput** is the fraction of its work it
   completes compared with running alone (1.0 = unaffected).
4. Latency: a request needing ``t`` ms of GPU alone runs in ``ceil(t/slice)``
   turns, and each of its turns waits for one turn of every other pod that is
   busy. Other pods are busy independently with probability
   equal to their duty cycle (mean case) or all at once (worst case):
   ``latency = t + ceil(t / slice) * busy_others * (slice + switch)``. When
   the offered load exceeds what the GPU can serve the queue grows without
   bound; ``saturated`` says so and the latency figures are then lower bounds.
5. MPS: kernels of different pods run at the same time on separate SM shares
   with no switch cost; each pod is capped at ``100 // replicas`` percent of
   the SMs even when the others are idle. A pod's kernels can use a fraction
   ``width`` of the SMs (1.0 = the whole GPU) and run proportionally slower
   on fewer: speed ``min(width, cap) / width``. Neighbours do not change a
   pod's latency, but the cap does.
6. Memory: under time-slicing the pods' footprints add up on one GPU and the
   first allocation that does not fit fails with CUDA out-of-memory (pods
   allocate in the order given). Under MPS each pod has its own limit,
   ``memory / replicas``, and only a pod above its own limit fails.

Worked example (also a test): four pods at duty cycle 0.5 on one time-sliced
GPU offer 2.0 GPUs of work to a GPU that can deliver 2/2.1 = 0.952; each gets
0.238, i.e. throughput 0.476 of running alone, and a 4 ms request takes
4 + 2 * 1.5 * 2.1 = 10.3 ms on average and 4 + 2 * 3 * 2.1 = 16.6 ms worst
case. The same four pods under MPS (replicas 4, cap 25%) with full-width
kernels run at speed 0.25: busy 0.5/0.25 = 2.0 of the time they have, so
throughput 0.5 each, and the 4 ms request takes 16 ms every time.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ..errors import GpuLabError

MIB = 1024 * 1024
DEFAULT_SLICE_MS = 2.0
DEFAULT_SWITCH_MS = 0.1


@dataclass(frozen=True)
class MpsShare:
    """What the NVIDIA MPS daemon sets for each client of one GPU."""

    replicas: int
    memory_limit_mib: int  # set_default_device_pinned_mem_limit <gpu> <N>M
    active_thread_percentage: int  # set_default_active_thread_percentage <N>

    @property
    def pinned_mem_limit(self) -> str:
        return f"{self.memory_limit_mib}M"


@dataclass(frozen=True)
class ContentionResult:
    """Per-pod throughput on one shared GPU (1.0 = as fast as alone)."""

    mode: str  # "time-slicing" or "mps"
    duty_cycles: tuple[float, ...]
    throughput: tuple[float, ...]  # completed work relative to running alone
    granted: tuple[float, ...]  # GPU time (time-slicing) or GPU capacity (MPS) each pod gets
    offered: float  # sum of duty cycles: GPUs' worth of work the pods bring
    capacity: float  # useful GPU time the GPU can deliver (efficiency under time-slicing)
    saturated: bool  # some pod gets less than it needs: its queue grows without bound

    @property
    def slowdown(self) -> tuple[float, ...]:
        """How many times longer each pod's work takes than alone (1 / throughput)."""
        return tuple(math.inf if t == 0 else 1 / t for t in self.throughput)

    @property
    def useful(self) -> float:
        """Useful GPU time delivered (sum of granted time under time-slicing)."""
        return sum(self.granted)


@dataclass(frozen=True)
class Latency:
    """Time for one request that needs ``alone_ms`` of GPU when alone."""

    alone_ms: float
    mean_ms: float
    worst_ms: float
    saturated: bool = False  # the GPU is oversubscribed: real queues make it worse than this

    @property
    def mean_inflation(self) -> float:
        return self.mean_ms / self.alone_ms

    @property
    def worst_inflation(self) -> float:
        return self.worst_ms / self.alone_ms


@dataclass(frozen=True)
class MemoryResult:
    """Whether pods' GPU memory footprints fit; ``oom`` lists the pods that fail."""

    fits: bool
    used_mib: float  # memory actually allocated by the pods that did not fail
    capacity_mib: int  # the GPU's memory (time-slicing) or each pod's limit (MPS)
    oom: tuple[int, ...]  # indexes of pods whose allocation fails (CUDA out of memory)


def _duties(n_pods: int, duty_cycles: float | Sequence[float]) -> tuple[float, ...]:
    if isinstance(n_pods, bool) or not isinstance(n_pods, int) or n_pods < 1:
        raise GpuLabError(f"number of pods must be a positive integer, got {n_pods!r}")
    if isinstance(duty_cycles, (int, float)) and not isinstance(duty_cycles, bool):
        duties = (float(duty_cycles),) * n_pods
    else:
        # a bool (a float to the checker) fails here as not iterable, as any non-sequence does
        duties = tuple(float(d) for d in duty_cycles)  # type: ignore[union-attr]
        if len(duties) != n_pods:
            raise GpuLabError(f"{len(duties)} duty cycles given for {n_pods} pods")
    for d in duties:
        if not 0 < d <= 1:
            raise GpuLabError(f"duty cycles must be in (0, 1], got {d}")
    return duties


def _times(slice_ms: float, switch_ms: float) -> None:
    if not slice_ms > 0:
        raise GpuLabError(f"slice_ms must be positive, got {slice_ms}")
    if not switch_ms >= 0:
        raise GpuLabError(f"switch_ms must be >= 0, got {switch_ms}")


def efficiency(n_busy: int, slice_ms: float = DEFAULT_SLICE_MS, switch_ms: float = DEFAULT_SWITCH_MS) -> float:
    """Useful fraction of GPU time when ``n_busy`` contexts take turns (1.0 for one)."""
    _times(slice_ms, switch_ms)
    return 1.0 if n_busy <= 1 else slice_ms / (slice_ms + switch_ms)


def _water_fill(demands: tuple[float, ...], capacity: float) -> tuple[float, ...]:
    """Max-min fair split of ``capacity`` among ``demands``."""
    grant = [0.0] * len(demands)
    left, todo = capacity, sorted(range(len(demands)), key=lambda i: demands[i])
    while todo:
        share = left / len(todo)
        i = todo[0]
        if demands[i] <= share:
            grant[i] = demands[i]
            left -= demands[i]
            todo.pop(0)
        else:
            for j in todo:
                grant[j] = share
            break
    return tuple(grant)


def timeslice_throughput(n_pods: int, duty_cycles: float | Sequence[float], *,
                         slice_ms: float = DEFAULT_SLICE_MS,
                         switch_ms: float = DEFAULT_SWITCH_MS) -> ContentionResult:
    """Throughput of ``n_pods`` pods sharing one GPU by time-slicing (see the module docstring)."""
    duties = _duties(n_pods, duty_cycles)
    capacity = efficiency(n_pods, slice_ms, switch_ms)
    offered = sum(duties)
    granted = _water_fill(duties, min(offered, capacity))
    throughput = tuple(g / d for g, d in zip(granted, duties))
    return ContentionResult("time-slicing", duties, throughput, granted, offered, capacity,
                            saturated=offered > capacity + 1e-12)


def timeslice_latency(service_ms: float, duty_cycles: float | Sequence[float], pod: int = 0, *,
                      n_pods: int | None = None, slice_ms: float = DEFAULT_SLICE_MS,
                      switch_ms: float = DEFAULT_SWITCH_MS) -> Latency:
    """Latency of one request of pod ``pod`` that needs ``service_ms`` of GPU time alone.

    ``duty_cycles`` lists every pod on the GPU (a single number needs ``n_pods``).
    """
    if not service_ms > 0:
        raise GpuLabError(f"service_ms must be positive, got {service_ms}")
    if n_pods is None:
        if isinstance(duty_cycles, (int, float)):
            raise GpuLabError("give n_pods with a single duty cycle")
        n_pods = len(duty_cycles)
    duties = _duties(n_pods, duty_cycles)
    _times(slice_ms, switch_ms)
    if not 0 <= pod < n_pods:
        raise GpuLabError(f"pod index {pod} out of range for {n_pods} pods")
    turns = math.ceil(service_ms / slice_ms - 1e-12)
    others_mean = sum(d for i, d in enumerate(duties) if i != pod)
    others_worst = n_pods - 1
    per_turn = slice_ms + switch_ms
    saturated = timeslice_throughput(n_pods, duties, slice_ms=slice_ms, switch_ms=switch_ms).saturated
    return Latency(service_ms, service_ms + turns * others_mean * per_turn,
                   service_ms + turns * others_worst * per_turn, saturated)


def mps_share(gpu_memory_mib: int, replicas: int) -> MpsShare:
    """Each MPS client's memory limit and SM percentage, as NVIDIA's MPS daemon computes them."""
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise GpuLabError(f"replicas must be a positive integer, got {replicas!r}")
    if isinstance(gpu_memory_mib, bool) or not isinstance(gpu_memory_mib, int) or gpu_memory_mib <= 0:
        raise GpuLabError(f"GPU memory must be a positive number of MiB, got {gpu_memory_mib!r}")
    return MpsShare(replicas, gpu_memory_mib * MIB // replicas // MIB, 100 // replicas)


def _widths(n: int, widths: float | Sequence[float] | None) -> tuple[float, ...]:
    if widths is None:
        return (1.0,) * n
    if isinstance(widths, (int, float)):
        widths = (float(widths),) * n
    widths = tuple(float(w) for w in widths)
    if len(widths) != n or not all(0 < w <= 1 for w in widths):
        raise GpuLabError(f"kernel widths must be {n} numbers in (0, 1], got {list(widths)}")
    return widths


def mps_throughput(replicas: int, duty_cycles: float | Sequence[float], *, n_pods: int | None = None,
                   widths: float | Sequence[float] | None = None) -> ContentionResult:
    """Throughput of pods on one MPS-shared GPU with ``replicas`` equal shares.

    ``n_pods`` defaults to ``replicas`` (every share taken); it cannot exceed it.
    """
    n = replicas if n_pods is None else n_pods
    if isinstance(replicas, bool) or not isinstance(replicas, int) or replicas < 1:
        raise GpuLabError(f"replicas must be a positive integer, got {replicas!r}")
    if n > replicas:
        raise GpuLabError(f"{n} pods cannot share a GPU advertised as {replicas} MPS replicas")
    duties = _duties(n, duty_cycles)
    cap = (100 // replicas) / 100
    speeds = [min(w, cap) / w for w in _widths(n, widths)]
    # Busy fraction needed at the capped speed is d / speed; above 1 the pod falls behind.
    throughput = tuple(min(1.0, s / d) for s, d in zip(speeds, duties))
    granted = tuple(cap for _ in duties)
    return ContentionResult("mps", duties, throughput, granted, sum(duties), cap * n,
                            saturated=any(t < 1 for t in throughput))


def mps_latency(service_ms: float, replicas: int, *, width: float = 1.0) -> Latency:
    """Latency of a request needing ``service_ms`` alone, on an MPS share: neighbours do not matter."""
    if not service_ms > 0:
        raise GpuLabError(f"service_ms must be positive, got {service_ms}")
    (w,) = _widths(1, width)
    cap = (mps_share(1, replicas).active_thread_percentage) / 100
    t = service_ms * w / min(w, cap)
    return Latency(service_ms, t, t)


def timeslice_memory(footprints_mib: Sequence[float], gpu_memory_mib: int) -> MemoryResult:
    """Time-slicing has no memory isolation: footprints add up; allocations beyond the GPU fail."""
    used: float = 0
    oom = []
    for i, f in enumerate(_footprints(footprints_mib)):
        if used + f > gpu_memory_mib:
            oom.append(i)
        else:
            used += f
    return MemoryResult(not oom, used, gpu_memory_mib, tuple(oom))


def mps_memory(footprints_mib: Sequence[float], gpu_memory_mib: int, replicas: int) -> MemoryResult:
    """MPS: each pod may allocate up to ``memory / replicas``; only pods above it fail."""
    fp = _footprints(footprints_mib)
    if len(fp) > replicas:
        raise GpuLabError(f"{len(fp)} pods cannot share a GPU advertised as {replicas} MPS replicas")
    limit = mps_share(gpu_memory_mib, replicas).memory_limit_mib
    oom = tuple(i for i, f in enumerate(fp) if f > limit)
    return MemoryResult(not oom, sum(f for i, f in enumerate(fp) if i not in oom), limit, oom)


def _footprints(footprints_mib: Sequence[float]) -> list[float]:
    out = []
    for f in footprints_mib:
        if isinstance(f, bool) or not isinstance(f, (int, float)) or f < 0:
            raise GpuLabError(f"memory footprints must be non-negative MiB, got {f!r}")
        out.append(f)
    return out
