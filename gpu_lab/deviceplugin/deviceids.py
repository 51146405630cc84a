"""Device IDs as NVIDIA's device plugin hands them out, and which free ones it prefers.

Shared by the fake plugin (its ``ListAndWatch``, ``GetPreferredAllocation`` and
``Allocate`` answers) and the kubelet's device manager when no plugin process is asked
(the simulator, fixed-device nodes), so both hand out the same IDs:

* whole GPUs: NVIDIA's best-effort policy over the GPUs' NUMA nodes
  (``gpu_lab.gpus.topology.best_effort``): a set on one NUMA node when one fits,
  leaving the other nodes whole; with one NUMA node, the lowest free devices;
* time-sliced or MPS replicas (``<uuid>::<n>``, NVIDIA's annotated IDs): NVIDIA's
  ``distributedAlloc``, one replica at a time from the GPU with the fewest replicas
  already taken, so co-located pods spread over the node's GPUs (ties go to the lower GPU).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping

from ..errors import GpuLabError
from ..gpus.topology import best_effort

HEALTHY, UNHEALTHY = "Healthy", "Unhealthy"  # the device-plugin API's device health
VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"


def split_replica(device_id: str) -> tuple[str, int | None]:
    """``"GPU-x::3"`` -> ``("GPU-x", 3)``; an ID without a replica -> ``(id, None)``."""
    base, sep, rest = device_id.partition("::")
    if not sep:
        return device_id, None
    try:
        return base, int(rest)
    except ValueError:
        return base, 0  # NVIDIA's AnnotatedID.Split ignores a malformed number


def visible_devices(ids: Iterable[str]) -> list[str]:
    """The GPU UUIDs a container sees: replica suffixes stripped, order and repeats kept.

    That is NVIDIA's ``AnnotatedIDs.GetIDs`` under ``deviceIDStrategy: uuid``:
    two time-slicing replicas of one GPU show that GPU twice.
    """
    return [split_replica(i)[0] for i in ids]


def visible_devices_env(ids: list[str]) -> dict[str, str]:
    """What NVIDIA's plugin puts in the container's environment (deviceListStrategy envvar)."""
    return {VISIBLE_DEVICES: ",".join(visible_devices(ids))}


def preferred_allocation(available: Iterable[str], must_include: Iterable[str], size: int,
                         all_devices: Iterable[str] | None = None,
                         numa: Mapping[str, int | None] | None = None) -> list[str]:
    """NVIDIA's preferred ``size`` devices from ``available`` (in advertised order).

    ``must_include`` come first. Whole GPUs go by NVIDIA's best-effort policy over
    ``numa`` (device -> NUMA node; ``gpu_lab.gpus.topology.best_effort``), which without
    topology is the lowest free ones; replicated IDs are spread over GPUs (see the
    module docstring); ``all_devices`` is the resource's full list, needed to
    know how many replicas of each GPU are already taken (default: ``available``).
    """
    must = list(dict.fromkeys(must_include))
    taken = set(must)
    candidates = [d for d in dict.fromkeys(available) if d not in taken]
    needed = size - len(must)
    if needed <= 0:
        return must
    if len(candidates) < needed:
        raise GpuLabError("not enough available devices to satisfy allocation")
    if not any(split_replica(d)[1] is not None for d in candidates):
        if not numa or not any(d.startswith("GPU-") for d in candidates):
            return must + candidates[:needed]  # MIG devices: NVIDIA's greedy spread, one each
        pool = must + candidates
        picked = best_effort([numa.get(d) for d in pool], range(len(must)), size)
        return must + [pool[i] for i in sorted(picked) if i >= len(must)]
    bases = {d: split_replica(d)[0] for d in candidates}
    free = Counter(bases.values())
    total = Counter(split_replica(d)[0] for d in (candidates if all_devices is None else all_devices))
    out = []
    for _ in range(needed):
        # min() keeps the first of equals: ties go to the lower GPU / replica.
        best = min(candidates, key=lambda d: total[bases[d]] - free[bases[d]])
        free[bases[best]] -= 1
        out.append(best)
        candidates.remove(best)
    return must + out
