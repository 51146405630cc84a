"""A GPU that fails on a node: which advertised devices it takes with it, and how it is said.

NVIDIA's device plugin watches NVML for critical Xid events; when one hits a GPU, every
device it advertises on that GPU (the GPU itself, its time-slicing or MPS replicas, its MIG
devices) turns ``Unhealthy`` in the next ``ListAndWatch`` message. The kubelet's device
manager then counts them out of allocatable; capacity stays, and a pod already holding one
keeps running: the kubelet evicts nothing for a device's health (a DRA ``DeviceTaintRule``
with ``NoExecute`` does).

One model for every backend: ``gpu_devices`` is what the simulator's kubelet marks
unhealthy, and ``health_file`` what the local node agent writes into the fake plugin's
control file (``gpu-lab-health``), whose GPU UUID lines the plugin resolves to the same
devices (``device_info``'s parent GPU).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from ..deviceplugin.deviceids import UNHEALTHY, split_replica
from ..deviceplugin.plugin import device_info
from ..errors import GpuLabError
from ..gpus.labels import gpu_uuids
from ..gpus.migparted import resolve
from ..model.objects import Node

#: what fail_device says happened when the caller does not: the GPU fell off the bus
DEFAULT_REASON = "Xid 79"
MAX_REASON = 200
COUNT_LABEL = "nvidia.com/gpu.count"  # GFD's: every physical GPU, MIG or not
HEADER = "# written by gpu-lab's fail_device/heal_device: the GPUs that failed"
_LINE = re.compile(rf"^(GPU-\S+) {UNHEALTHY}  # GPU (\d+): (.+)$")


def mig_layouts(model: str, count: int, mig: dict | None):
    """The pool's per-GPU MIG layouts (``spec.mig``), as the plugin resolves ``--mig-config``."""
    if not mig:
        return None
    if mig.get("migParted") is not None:
        return resolve(model, count, mig["migParted"], mig.get("config"))
    return resolve(model, count, mig["config"])


def gpu_count(node: Node) -> int:
    """How many physical GPUs the node has (MIG or not)."""
    gpu = (node.raw.get("nodePool") or {}).get("gpu")
    if gpu:
        return int(gpu["count"])
    return int(node.capacity.get("nvidia.com/gpu", 0))


def check_index(node: str, count: int, index: object, call: str) -> int:
    """``index`` as a GPU index of node ``node`` (``count`` GPUs), or one line saying why not."""
    if isinstance(index, bool) or not isinstance(index, int):
        raise GpuLabError(f"{call}: index must be a GPU's index on the node (an int), got {index!r}")
    if count == 0:
        raise GpuLabError(f'{call}: node "{node}" has no GPUs')
    if not 0 <= index < count:
        raise GpuLabError(f'{call}: node "{node}" has {count} GPUs (indices 0-{count - 1}): '
                          f"there is no GPU {index}")
    return index


def check_reason(reason: object, call: str) -> str:
    """The failure's reason (e.g. "Xid 79"): one short line."""
    if not isinstance(reason, str) or not reason.strip():
        raise GpuLabError(f"{call}: reason must be a non-empty string such as {DEFAULT_REASON!r}, got {reason!r}")
    if "\n" in reason or len(reason) > MAX_REASON:
        raise GpuLabError(f"{call}: reason must be one line of at most {MAX_REASON} characters")
    return " ".join(reason.split())


def record(failed: dict[int, str], index: int, reason: str | None) -> None:
    """Note in ``failed`` (GPU index -> reason) that GPU ``index`` failed, or healed (None)."""
    if reason is None:
        failed.pop(index, None)
    else:
        failed[index] = reason


def gpu_devices(node: Node, index: int, devices: Mapping[str, list[str]]) -> dict[str, list[str]]:
    """The advertised device IDs (per resource, replicas included) that live on GPU ``index``."""
    pool = node.raw.get("nodePool") or {}
    gpu = pool.get("gpu")
    count = gpu_count(node)
    if gpu:
        info = device_info(gpu["model"], count, node.name, mig_layouts(gpu["model"], count, pool.get("mig")))
        on = {d for d, i in info.items() if i.gpu == index}
    else:  # a plain Node manifest: whole GPUs with the stable UUIDs of its name
        on = {gpu_uuids(node.name, count)[index]}
    out = {r: [d for d in ids if split_replica(d)[0] in on] for r, ids in devices.items()}
    return {r: ids for r, ids in out.items() if ids}


def health_file(node: str, count: int, failed: Mapping[int, str]) -> str:
    """The fake plugin's control file for these failed GPUs (index -> reason) of node ``node``
    with ``count`` GPUs: one GPU UUID per line, which the plugin applies to every device on
    that GPU; ``failed_in`` reads it back."""
    uuids = gpu_uuids(node, count)
    lines = [HEADER]
    lines += [f"{uuids[g]} {UNHEALTHY}  # GPU {g}: {why}" for g, why in sorted(failed.items())]
    return "\n".join(lines) + "\n"


def failed_in(text: str, node: str, count: int) -> dict[int, str]:
    """The failed GPUs (index -> reason) of node ``node`` that a file ``health_file`` wrote
    names (lines about another node's GPUs, left by an earlier use of the machine, are not)."""
    uuids = gpu_uuids(node, count)
    out = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if m and int(m.group(2)) < count and uuids[int(m.group(2))] == m.group(1):
            out[int(m.group(2))] = m.group(3)
    return out
