"""Lab 03 checks: share GPUs between dev notebooks, keep inference on dedicated GPUs.

The task (``solutions/03_sharing.ipynb``): a team has four NVIDIA L4 GPUs, one per node.
Twelve dev notebooks (``Deployment dev-notebook``: about 3 GiB of GPU memory each,
busy about 10% of the time, a typical request needs 10 ms of GPU alone) and two
latency-sensitive inference services (``infer-chat``, ``infer-search``: one replica
each) must all run:

* the dev notebooks on at most 2 GPUs, shared by time-slicing, through a renamed
  resource (``nvidia.com/gpu.shared``) so a pod asking for ``nvidia.com/gpu`` can never
  land on a shared GPU by accident;
* each inference service alone on a GPU nobody else uses;
* no dev notebook's memory allocation failing, and the contention model's worst-case
  latency of a dev notebook's 10 ms request under ``DEV_WORST_LIMIT_MS``.

The latency and memory figures come from ``gpu_lab.gpus.timeslice_latency`` and
``timeslice_memory``: a MODEL, not a measurement (see ``gpu_lab/gpus/sharing.py``).

Every check reads only the public session API (``pods()``, ``to_dict()``), so it works
on every backend.
"""

from __future__ import annotations

import math
import numbers
from collections import defaultdict
from typing import Any

from ...gpus import get_model, timeslice_latency, timeslice_memory
from .feedback import Checklist, Feedback

TITLE = "Lab 03"

HINTS = (
    "Start from what waits: `kubectl get pods --field-selector=status.phase=Pending` lists ten notebooks; "
    "`kubectl describe node <node>` shows each node's Allocatable nvidia.com/gpu and who holds it.",
    "Time-slicing makes one GPU look like several (replicas) to the scheduler, with no memory isolation; "
    "size the replicas with the contention model (task.dev_latency, gpu_lab.gpus.timeslice_memory). Sharing "
    "is set per node in the device-plugin config, so shared and dedicated GPUs need separate pools.",
    "renameByDefault advertises the shared GPUs as nvidia.com/gpu.shared, so a pod asking for nvidia.com/gpu "
    "never lands there; the notebooks then ask for the renamed resource. `kubectl get node <node> -o "
    "jsonpath='{.status.allocatable}'` shows which resource a node offers.",
    "The answer: two pools of two g6.2xlarge L4 nodes; l4-shared with devicePlugin.sharing.timeSlicing "
    "{renameByDefault: true, failRequestsGreaterThanOne: true, resources: [{name: nvidia.com/gpu, replicas: 6}]}, "
    "l4-dedicated without sharing; the dev-notebook Deployment's limit {nvidia.com/gpu.shared: 1}; "
    "max_per_gpu is the largest n whose memory fits and worst ms stays under the goal (6).",
)
GPU_MODEL = "L4"
PRODUCT = "NVIDIA-L4"  # nvidia.com/gpu.product without the -SHARED suffix
FLEET_GPUS = 4
MAX_SHARED_GPUS = 2
SHARED = "nvidia.com/gpu.shared"
WHOLE = "nvidia.com/gpu"

DEV_PREFIX = "dev-notebook-"
DEV_PODS = 12
DEV_MEMORY_MIB = 3 * 1024  # each notebook's GPU memory footprint
DEV_DUTY = 0.1  # fraction of time a notebook keeps the GPU busy when alone
DEV_SERVICE_MS = 10.0  # GPU time one notebook request needs when alone
DEV_WORST_LIMIT_MS = 65.0  # the goal: modelled worst case of that request, under this

SLICE_MS = 2.0  # the contention model's default time slice (gpu_lab.gpus.timeslice_latency)

INFERENCE = ("infer-chat", "infer-search")
INFER_DUTY = 0.6
INFER_SERVICE_MS = 25.0

__all__ = [
    "HINTS",
    "DEV_DUTY",
    "DEV_MEMORY_MIB",
    "DEV_PODS",
    "DEV_SERVICE_MS",
    "DEV_WORST_LIMIT_MS",
    "FLEET_GPUS",
    "INFERENCE",
    "INFER_DUTY",
    "INFER_SERVICE_MS",
    "MAX_SHARED_GPUS",
    "check_dev_notebooks",
    "check_fleet",
    "check_inference",
    "check_sizing",
    "max_notebooks_per_gpu",
    "dev_latency",
    "shared_gpus",
]


# ---------------------------------------------------------------- reading the session

def _nodes(lab) -> dict[str, dict[str, Any]]:
    """name -> the node's labels and capacity, from the ``gpu-lab run --json`` document."""
    return {n["name"]: n for n in lab.to_dict()["nodes"]}


def _label(node: dict, key: str, default: str = "") -> str:
    return (node.get("labels") or {}).get(key, default)


def _count(node: dict, key: str) -> int:
    try:
        return int(str((node.get("capacity") or {}).get(key, "0")))
    except ValueError:
        return 0


def _gpus(node: dict) -> int:
    try:
        return int(_label(node, "nvidia.com/gpu.count", "0"))
    except ValueError:
        return 0


def _strategy(node: dict) -> str:
    return _label(node, "nvidia.com/gpu.sharing-strategy", "none") or "none"


def _replicas(node: dict) -> int:
    try:
        return int(_label(node, "nvidia.com/gpu.replicas", "1"))
    except ValueError:
        return 1


def _pods(lab, prefix: str):
    pods = lab.pods()
    return pods[pods["name"].str.startswith(prefix)]


def _physical(device_id: str) -> str:
    """The GPU behind a device ID: a time-slicing replica ``GPU-x::3`` is GPU ``GPU-x``."""
    return device_id.split("::", 1)[0]


def _short(device_id: str) -> str:
    gpu, _, replica = device_id.partition("::")
    head = gpu[:12] + "..." if len(gpu) > 12 else gpu
    return f"{head}::{replica}" if replica else head


def _ids(row) -> list[str]:
    devices = row["devices"] if isinstance(row["devices"], dict) else {}
    return [d for ids in devices.values() for d in ids]


def _holders(lab) -> dict[str, list[str]]:
    """Physical GPU -> names of the running pods holding one of its devices."""
    held: dict[str, list[str]] = defaultdict(list)
    for _, row in lab.pods().iterrows():
        for gpu in dict.fromkeys(_physical(d) for d in _ids(row)):
            held[gpu].append(row["name"])
    return held


def shared_gpus(lab) -> dict[str, dict[str, Any]]:
    """Every physical GPU that runs dev notebooks: node, notebooks, shared or not, memory (MiB).

    ``{"GPU-...": {"node": "l4-shared-0", "pods": ["dev-notebook-..."], "shared": True,
    "memory_mib": 23034}}``
    """
    nodes = _nodes(lab)
    out: dict[str, dict[str, Any]] = {}
    for _, row in _pods(lab, DEV_PREFIX).iterrows():
        for gpu in dict.fromkeys(_physical(d) for d in _ids(row)):
            node = nodes.get(row["node"], {})
            entry = out.setdefault(gpu, {"node": row["node"], "pods": [], "shared": _replicas(node) > 1,
                                         "memory_mib": int(_label(node, "nvidia.com/gpu.memory", "0") or 0)})
            entry["pods"].append(row["name"])
    return out


def dev_latency(sharers: int):
    """The model's latency of one dev-notebook request with ``sharers`` notebooks on its GPU."""
    return timeslice_latency(DEV_SERVICE_MS, [DEV_DUTY] * sharers)


def _n(k: int, word: str) -> str:
    return f"{k} {word}" + ("" if k == 1 else "s")


def _ms(ms: float) -> str:
    return f"{round(ms, 2):g} ms"


def _gib(mib: float) -> str:
    return f"{mib / 1024:.1f} GiB"


def max_notebooks_per_gpu(memory_mib: int) -> tuple[int, int, int]:
    """(by memory, by the latency goal, both): the most notebooks one GPU can hold."""
    by_memory = max((n for n in range(1, DEV_PODS + 1)
                     if timeslice_memory([DEV_MEMORY_MIB] * n, memory_mib).fits), default=0)
    by_latency = max((n for n in range(1, DEV_PODS + 1)
                      if dev_latency(n).worst_ms < DEV_WORST_LIMIT_MS and not dev_latency(n).saturated),
                     default=0)
    return by_memory, by_latency, min(by_memory, by_latency)


# ---------------------------------------------------------------- the checks

def check_sizing(max_per_gpu) -> Feedback:
    """``max_per_gpu``: the most notebooks one L4 holds within memory and the latency goal."""
    c = Checklist(f"{TITLE}: notebooks per GPU", look="kubectl describe node <shared node>")
    memory_mib = get_model(GPU_MODEL).memory_mib
    by_memory, by_latency, best = max_notebooks_per_gpu(memory_mib)
    if isinstance(max_per_gpu, bool) or not isinstance(max_per_gpu, numbers.Integral):
        c.require(False, f"max_per_gpu should be a whole number of notebooks, got {max_per_gpu!r}")
        return c.done()
    n = int(max_per_gpu)
    if n > best:
        lat, mem = dev_latency(n), timeslice_memory([DEV_MEMORY_MIB] * n, memory_mib)
        why = []
        if not mem.fits:
            why.append(f"{_n(n, 'notebook')} x {_gib(DEV_MEMORY_MIB)} = {_gib(n * DEV_MEMORY_MIB)} "
                       f"does not fit in {_gib(memory_mib)}")
        if lat.worst_ms >= DEV_WORST_LIMIT_MS or lat.saturated:
            why.append(f"the worst case of a {_ms(DEV_SERVICE_MS)} request is {_ms(lat.worst_ms)}, "
                       f"not under {_ms(DEV_WORST_LIMIT_MS)} (each of its "
                       f"{math.ceil(DEV_SERVICE_MS / SLICE_MS)} turns of {SLICE_MS:g} ms waits for "
                       f"{n - 1} others)")
        c.require(False, f"{n} per GPU is too many: " + "; ".join(why))
    elif n < best:
        lat = dev_latency(best)
        c.require(False, f"{n} per GPU leaves room: {best} notebooks still meet both limits "
                         f"({_gib(best * DEV_MEMORY_MIB)} of {_gib(memory_mib)}, worst case "
                         f"{_ms(lat.worst_ms)} < {_ms(DEV_WORST_LIMIT_MS)})")
    else:
        lat = dev_latency(n)
        c.require(True, "", f"{n} notebooks per GPU: {_gib(n * DEV_MEMORY_MIB)} of {_gib(memory_mib)} "
                            f"(memory alone would allow {by_memory}), worst case {_ms(lat.worst_ms)} "
                            f"< {_ms(DEV_WORST_LIMIT_MS)} (latency allows {by_latency})")
    return c.done()


def check_fleet(lab) -> Feedback:
    """The nodes: 4 L4s, at most 2 time-sliced under a renamed resource, the rest whole."""
    c = Checklist(f"{TITLE}: the GPU fleet", look="kubectl get nodes -L nvidia.com/gpu.count,nvidia.com/gpu.replicas")
    nodes = _nodes(lab)
    gpu_nodes = {n: node for n, node in nodes.items() if _gpus(node) > 0}
    total = sum(_gpus(node) for node in gpu_nodes.values())
    foreign = sorted(f"{n} ({_label(node, 'nvidia.com/gpu.product')})" for n, node in gpu_nodes.items()
                     if not _label(node, "nvidia.com/gpu.product").startswith(PRODUCT))
    c.require(not foreign and total == FLEET_GPUS,
              f"the team owns {FLEET_GPUS} {GPU_MODEL} GPUs, your nodes have {total} GPUs"
              + (f", some not {GPU_MODEL}: {', '.join(foreign)}" if foreign else "")
              + " (nvidia.com/gpu.count labels): keep the same hardware, change only the"
                " device-plugin config (and how the GPUs are split into pools)",
              f"{total} {GPU_MODEL} GPUs, as the team owns")

    shared = {n: node for n, node in gpu_nodes.items() if _strategy(node) != "none"}
    n_shared = sum(_gpus(node) for node in shared.values())
    c.require(0 < n_shared <= MAX_SHARED_GPUS,
              "no node shares its GPUs: every node advertises each GPU once, so one notebook holds a whole GPU "
              f"(the dev notebooks may share at most {MAX_SHARED_GPUS} GPUs)" if not n_shared else
              f"{n_shared} GPUs are shared ({', '.join(sorted(shared))}): the dev notebooks may use "
              f"at most {MAX_SHARED_GPUS}; sharing applies to every GPU of a node, so put the shared "
              "GPUs in their own pool",
              f"{n_shared} GPU(s) shared ({', '.join(sorted(shared))})")
    if shared:
        mps = sorted(n for n, node in shared.items() if _strategy(node) == "mps")
        c.require(not mps,
                  f"{', '.join(mps)} share(s) by MPS: the task asks for time-slicing (MPS would also cap "
                  "each notebook at 100 // replicas % of the SMs even when the GPU is otherwise idle)",
                  "sharing by time-slicing")
        unrenamed = sorted(f"{n} advertises {_count(node, WHOLE)} {WHOLE}" for n, node in shared.items()
                           if _count(node, WHOLE) > 0)
        c.require(not unrenamed,
                  "shared GPUs must be advertised under a renamed resource: " + "; ".join(unrenamed)
                  + f", so any pod asking for {WHOLE} (an inference service, tomorrow's new deployment) "
                    "can land on a shared GPU. Set renameByDefault: true: the resource becomes "
                    f"{SHARED} and only pods that ask for it by name land there",
                  f"shared GPUs advertised only as {SHARED} "
                  f"({', '.join(f'{n}: {_count(node, SHARED)}' for n, node in sorted(shared.items()))})")
    whole = sum(_gpus(node) for node in gpu_nodes.values() if _strategy(node) == "none")
    c.require(whole >= len(INFERENCE),
              f"only {whole} GPU(s) are left unshared: the {len(INFERENCE)} inference services need "
              f"one dedicated GPU each",
              f"{whole} whole GPU(s) for the inference services")
    return c.done()


def check_dev_notebooks(lab) -> Feedback:
    """All 12 notebooks run on at most 2 shared GPUs; memory fits; modelled latency in budget."""
    c = Checklist(f"{TITLE}: the dev notebooks",
                  look="kubectl get pods -l app=dev-notebook -o wide")
    pods = _pods(lab, DEV_PREFIX)
    nodes = _nodes(lab)
    c.require(len(pods) == DEV_PODS,
              f"{len(pods)} dev-notebook pods found, the team runs {DEV_PODS}: keep "
              f"Deployment dev-notebook at replicas: {DEV_PODS}",
              f"{DEV_PODS} dev-notebook pods")
    if pods.empty:
        return c.done()

    asks = sorted({r for reqs in pods["requests"] for r in (reqs or {}) if r.startswith("nvidia.com/")})
    c.require(asks == [SHARED] and all(str((reqs or {}).get(SHARED)) == "1" for reqs in pods["requests"]),
              f"the dev notebooks ask for {', '.join(asks) or 'no GPU'}: not one replica of the renamed, "
              "time-sliced resource a shared node advertises, so they could land on a dedicated GPU",
              f"each notebook asks for 1 {SHARED}")

    pending = pods[pods["phase"] != "Running"]
    if len(pending):
        advertised = {n: _count(node, SHARED) for n, node in nodes.items() if _count(node, SHARED)}
        total = sum(advertised.values())
        shared_gpu_count = sum(_gpus(nodes[n]) for n in advertised) or MAX_SHARED_GPUS
        need = -(-DEV_PODS // shared_gpu_count)
        where = (", ".join(f"{n}: {k}" for n, k in sorted(advertised.items())) if advertised
                 else "no node")
        first = pending.iloc[0]
        detail = (f"{SHARED} advertises {total} in total ({where}); {DEV_PODS} notebooks on "
                  f"{shared_gpu_count} shared GPU(s) need replicas >= {need}"
                  if asks == [SHARED] and total < DEV_PODS
                  else f"the scheduler says: {first['message'] or first['reason']}")
        c.require(False, f"{len(pending)} dev notebook(s) not running ({first['phase']}): {detail}")
    else:
        c.require(True, "", f"all {DEV_PODS} dev notebooks running")

    gpus = shared_gpus(lab)
    c.require(len(gpus) <= MAX_SHARED_GPUS,
              f"the dev notebooks use {len(gpus)} physical GPUs, at most {MAX_SHARED_GPUS} allowed: "
              + ", ".join(f"{_short(g)} on {e['node']}: {len(e['pods'])}" for g, e in sorted(gpus.items())),
              f"dev notebooks on {len(gpus)} physical GPU(s)")
    whole = sorted(f"{n} ({_short(d)})" for n, ids in zip(pods["name"], (_ids(r) for _, r in pods.iterrows()))
                   for d in ids if "::" not in d)
    c.require(not whole,
              f"{len(whole)} notebook(s) hold a whole, unshared GPU: {', '.join(whole[:3])}"
              + (" ..." if len(whole) > 3 else ""),
              "every notebook holds a replica of a shared GPU (<uuid>::n)")

    for gpu, entry in sorted(gpus.items()):
        if not entry["shared"]:
            continue  # a whole GPU: flagged above
        n, cap = len(entry["pods"]), entry["memory_mib"]
        mem = timeslice_memory([DEV_MEMORY_MIB] * n, cap)
        c.require(mem.fits,
                  f"memory on {_short(gpu)} ({entry['node']}): {_n(n, 'notebook')} x {_gib(DEV_MEMORY_MIB)} = "
                  f"{_gib(n * DEV_MEMORY_MIB)} on one {_gib(cap)} {GPU_MODEL}: time-slicing does not "
                  f"split memory, so {len(mem.oom)} notebook(s) fail with CUDA out of memory; at most "
                  f"{cap // DEV_MEMORY_MIB} fit",
                  f"memory on {_short(gpu)}: {n} x {_gib(DEV_MEMORY_MIB)} = {_gib(n * DEV_MEMORY_MIB)} "
                  f"of {_gib(cap)}")
        lat = dev_latency(n)
        ok_n = max((k for k in range(1, DEV_PODS + 1)
                    if dev_latency(k).worst_ms < DEV_WORST_LIMIT_MS), default=0)
        c.require(lat.worst_ms < DEV_WORST_LIMIT_MS and not lat.saturated,
                  f"latency on {_short(gpu)} ({entry['node']}): {_n(n, 'notebook')} take turns, so a "
                  f"{_ms(DEV_SERVICE_MS)} request takes up to {_ms(lat.worst_ms)} in the model "
                  f"(goal: under {_ms(DEV_WORST_LIMIT_MS)}); at most {ok_n} notebooks per GPU meet it",
                  f"latency on {_short(gpu)}: {_n(n, 'notebook')}, modelled worst case {_ms(lat.worst_ms)} "
                  f"(mean {_ms(lat.mean_ms)}) < {_ms(DEV_WORST_LIMIT_MS)}")
    return c.done()


def check_inference(lab) -> Feedback:
    """Each inference service runs, alone on a whole GPU of an unshared node."""
    c = Checklist(f"{TITLE}: the inference services", look="kubectl get pods -l app -o wide")
    pods = lab.pods()
    nodes = _nodes(lab)
    held = _holders(lab)
    for service in INFERENCE:
        mine = pods[pods["name"].str.startswith(service + "-")]
        if mine.empty:
            c.require(False, f"no pod of {service} found: apply ../lessons/scenarios/03_inference.yaml")
            continue
        for _, row in mine.iterrows():
            name = row["name"]
            if row["phase"] != "Running":
                c.require(False, f"{name} is {row['phase']}: {row['message'] or row['reason']}")
                continue
            ids = _ids(row)
            node = nodes.get(row["node"], {})
            replicas = [d for d in ids if "::" in d]
            if replicas or _strategy(node) != "none":
                others = sorted({p for d in ids for p in held.get(_physical(d), []) if p != name})
                lat = timeslice_latency(INFER_SERVICE_MS, [INFER_DUTY] + [DEV_DUTY] * len(others))
                rid = replicas[0] if replicas else (ids[0] if ids else "?")
                c.require(False,
                          f"{name} landed on a shared GPU (replica ID {_short(rid)} on {row['node']}, "
                          f"sharing strategy {_strategy(node)}) with {len(others)} other pod(s): a noisy "
                          f"neighbour can stall it; the model puts a {_ms(INFER_SERVICE_MS)} request at up "
                          f"to {_ms(lat.worst_ms)} instead of {_ms(INFER_SERVICE_MS)} alone")
                continue
            others = sorted({p for d in ids for p in held.get(_physical(d), []) if p != name})
            c.require(not others,
                      f"{name} shares its GPU with {', '.join(others)}",
                      f"{name} alone on {_short(ids[0]) if ids else '?'} ({row['node']}, not shared)")
    return c.done()
