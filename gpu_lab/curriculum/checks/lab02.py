"""Lab 02 checks: a fleet moved to A100-40GB nodes, pending on H100 MIG names.

The task (``solutions/02_mig_fleet.ipynb``, ticket in ``lessons/scenarios/02_a100_migration.yaml``):
four inference services moved from the H100 cluster to the research cluster's two nodes of
8 A100-40GB. Their Deployments still ask for the H100 MIG resources, and the pool still runs
an ``all-1g.5gb`` layout under the single strategy, so every replica pends. Serve every
replica in its own MIG instance big enough for its model, with no pod pending, and keep at
least half of the cluster's GPUs whole (MIG off, ``nvidia.com/gpu``) for training.

"GPUs tied up" counts, per node, every GPU with MIG enabled (its instances serve only
MIG requests, used or not) plus every whole GPU a pod holds. It is read from what the
node reports, as on a real cluster: ``nvidia.com/gpu.count`` (physical GPUs, every GPU
counts, MIG or not), the ``nvidia.com/gpu`` capacity (under the mixed strategy, the GPUs
with MIG disabled) and the product label (``...-MIG-<profile>`` under the single
strategy, where every GPU has MIG enabled). A replica's slice memory is the
``<resource>.memory`` label GPU Feature Discovery writes (MiB, what ``nvidia-smi``
shows), compared with the service's need in GiB, as ``gpu_lab.gpus.plan_mig`` does.

Services are ``gpu_lab.gpus.Service`` objects (name, memory_gb, compute_slices,
replicas); a pod belongs to the service whose name starts its own
(``chat-5d8f...-x2k4q`` is a ``chat`` replica, the way a Deployment names its pods).

Every check reads only the public session API (``to_dict()``), so it works on every
backend.
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import Any

import pandas as pd

from ...gpus import MigPlan, get_model, mig_capable_models, models, plan_mig
from ...gpus import mig_profiles as _mig_profiles
from .feedback import Checklist, Feedback

TITLE = "Lab 02"

HINTS = (
    "Start from what pends and why: `kubectl get pods --field-selector=status.phase=Pending` and "
    "`kubectl describe pod <pod>` name the resource each replica asks for; `kubectl describe node a100-0` "
    "shows what the node advertises (Capacity, and the labels nvidia.com/gpu.product, nvidia.com/mig.strategy). "
    "A resource name no node advertises pends forever, whatever the free memory.",
    "These are not the lesson's GPUs: an A100-40GB has its own profiles (gpu_lab.gpus.mig_profiles(MODEL)), "
    "and a profile's name rounds its memory in GB while the services' needs are GiB, as nvidia-smi shows: "
    "compare memory_gib, not the name. Under the single strategy every GPU of the node has MIG on and its "
    "instances are advertised as nvidia.com/gpu, so no GPU stays whole.",
    "Whole GPUs next to MIG GPUs need migStrategy: mixed (each profile is then nvidia.com/mig-<profile>, "
    "MIG-disabled GPUs stay nvidia.com/gpu) and a mig-parted config that names the GPU indexes to partition "
    "(devices: [...]); a predefined config partitions every GPU. Check each GPU's layout with "
    "gpu_lab.gpus.validate_mig_layout(MODEL, {...}): the slices start at fixed places. On a live cluster the "
    "relabel restarts the device plugin and evicts the node's GPU pods: drain first.",
    "The answer: translate 3g.20gb, guard 4g.20gb, rerank 1g.10gb (1g.5gb is 4.75 GiB < 5), ocr 1g.5gb. "
    "Per node, GPU 0 {4g.20gb: 1, 3g.20gb: 1} and GPU 1 {1g.10gb: 2, 1g.5gb: 2}, GPUs 2-7 mig-enabled: false, "
    "in the NodePool's mig.migParted config with devicePlugin flags migStrategy: mixed; each Deployment's "
    "limit nvidia.com/mig-<its profile>: 1. That ties up 4 of 16 GPUs.",
)
GPU_MODEL = "A100-40GB"
HOURS_PER_MONTH = 730
WHOLE = "nvidia.com/gpu"
MIG_PREFIX = "nvidia.com/mig-"
COMPUTE_SLICES = 7  # a whole GPU's compute, in MIG compute slices

__all__ = ["HINTS", "GPU_MODEL", "check_cost", "check_fleet", "fleet_usage", "replica_slices"]


# ---------------------------------------------------------------- reading the session

def _int(text: Any) -> int:
    """A Kubernetes quantity of a countable resource ("8") as an int; 0 when absent."""
    try:
        return int(float(str(text)))
    except (TypeError, ValueError):
        return 0


def _nodes(doc: dict) -> dict[str, dict[str, Any]]:
    return {n["name"]: n for n in doc.get("nodes", [])}


def _label(node: dict, key: str, default: str = "") -> str:
    return (node.get("labels") or {}).get(key, default)


def _product_model(product: str):
    """The catalogued GpuModel of a ``nvidia.com/gpu.product`` value (MIG/SHARED suffix ignored)."""
    base = product.split("-MIG-")[0].removesuffix("-SHARED")
    for m in models():
        if m.product == base:
            return m
    return None


def _single(node: dict) -> bool:
    """Single MIG strategy: every GPU has MIG on and instances are advertised as nvidia.com/gpu."""
    return "-MIG-" in _label(node, "nvidia.com/gpu.product")


def _single_gpus(node: dict, instances: int) -> int:
    """Physical GPUs behind a single-strategy node's ``instances`` MIG devices."""
    product = _label(node, "nvidia.com/gpu.product")
    model, profile = _product_model(product), product.split("-MIG-")[-1]
    per_gpu = next((p.max_instances for p in (_mig_profiles(model) if model else ())
                    if p.label_name == profile), 1)
    return math.ceil(instances / per_gpu)


def _node_usage(name: str, node: dict) -> dict[str, Any]:
    gpus = _int(_label(node, "nvidia.com/gpu.count", "0"))
    cap = node.get("capacity") or {}
    alloc = node.get("allocatable") or {}
    req = node.get("requested") or {}
    replicas = max(_int(_label(node, "nvidia.com/gpu.replicas", "1")), 1)
    mig_total = sum(_int(v) for r, v in cap.items() if r.startswith(MIG_PREFIX))
    mig_used = sum(_int(v) for r, v in req.items() if r.startswith(MIG_PREFIX))
    if _single(node):
        # gpu.count is the number of instances here; the GPUs holding them are at least
        # instances / (instances of the profile per GPU), exactly that for all-<profile>.
        mig_total, mig_used = _int(cap.get(WHOLE)), _int(req.get(WHOLE))
        gpus = mig_enabled = _single_gpus(node, mig_total)
        held, free = 0, 0
    else:
        whole = _int(cap.get(WHOLE)) // replicas
        mig_enabled = max(gpus - whole, 0)
        held = min(math.ceil(_int(req.get(WHOLE)) / replicas), whole)
        free = max(min(whole, _int(alloc.get(WHOLE)) // replicas) - held, 0)
    return {"node": name, "gpus": gpus, "mig_enabled": mig_enabled, "mig_instances": mig_total,
            "mig_instances_used": mig_used, "whole_gpus_held": held, "whole_gpus_free": free,
            "tied_up": mig_enabled + held}


def fleet_usage(lab) -> pd.DataFrame:
    """Per GPU node: GPUs, MIG-enabled GPUs, MIG instances (used), whole GPUs held/free, tied up.

    ``tied_up`` = MIG-enabled GPUs + whole GPUs held by pods: the GPUs the fleet keeps
    from other work. The lab's goal is ``fleet_usage(lab)["tied_up"].sum() <= 7``.
    """
    doc = lab.to_dict()
    rows = [_node_usage(name, n) for name, n in _nodes(doc).items()
            if _int(_label(n, "nvidia.com/gpu.count", "0"))]
    cols = ["node", "gpus", "mig_enabled", "mig_instances", "mig_instances_used",
            "whole_gpus_held", "whole_gpus_free", "tied_up"]
    return pd.DataFrame(rows, columns=cols)


def _profile_facts(resource_name: str, doc: dict) -> tuple[str, float | None, int | None]:
    """(profile, usable GiB, compute slices) of a ``nvidia.com/mig-<profile>`` name from the
    cluster's GPU models, for a pod that has no node to read labels from."""
    name = resource_name.removeprefix(MIG_PREFIX)
    candidates = []
    for n in _nodes(doc).values():
        m = _product_model(_label(n, "nvidia.com/gpu.product"))
        if m is not None and m.name in mig_capable_models() and m not in candidates:
            candidates.append(m)
    if not candidates:
        candidates = [get_model(GPU_MODEL)]
    for m in candidates:
        for p in _mig_profiles(m):
            if name in (p.name, p.label_name):
                return p.name, p.memory_gib, p.compute_slices
    return name, None, None


def _slice(pod: dict, doc: dict) -> dict[str, Any]:
    """What one pod's GPU request gives it: resource, profile, GiB, compute slices, problem."""
    gpu_reqs = {r: _int(v) for r, v in (pod.get("requests") or {}).items()
                if r.startswith("nvidia.com/") and _int(v)}
    out: dict[str, Any] = {"resource": None, "profile": None, "gib": None, "compute": None,
                           "problem": None}
    if not gpu_reqs:
        out["problem"] = "asks for no GPU"
        return out
    if len(gpu_reqs) > 1 or sum(gpu_reqs.values()) > 1:
        ask = " + ".join(f"{n} x {r}" for r, n in gpu_reqs.items())
        out["resource"] = next(iter(gpu_reqs))
        out["problem"] = (f"asks for {ask}: a replica must fit in ONE MIG instance (MIG instances "
                          "have no peer-to-peer path between them, so a model cannot span two)")
        return out
    resource = next(iter(gpu_reqs))
    out["resource"] = resource
    node = _nodes(doc).get(pod.get("node") or "")
    if resource.startswith(MIG_PREFIX):
        if node is not None and _label(node, f"{resource}.memory"):
            out["profile"] = resource.removeprefix(MIG_PREFIX)
            out["gib"] = _int(_label(node, f"{resource}.memory")) / 1024
            out["compute"] = _int(_label(node, f"{resource}.slices.gi")) or None
        else:
            out["profile"], out["gib"], out["compute"] = _profile_facts(resource, doc)
        return out
    if resource != WHOLE:
        out["problem"] = (f"asks for {resource}: a shared (time-sliced) GPU gives no memory "
                          "isolation; give each replica its own MIG instance")
        return out
    if node is None:  # pending on nvidia.com/gpu: a whole GPU of the cluster's model
        m = next((_product_model(_label(n, "nvidia.com/gpu.product")) for n in _nodes(doc).values()
                  if _product_model(_label(n, "nvidia.com/gpu.product"))), None) or get_model(GPU_MODEL)
        out["profile"], out["gib"], out["compute"] = "whole GPU", m.memory_mib / 1024, COMPUTE_SLICES
        return out
    if _single(node):
        out["profile"] = _label(node, "nvidia.com/gpu.product").split("-MIG-")[-1]
        out["gib"] = _int(_label(node, "nvidia.com/gpu.memory")) / 1024
        out["compute"] = _int(_label(node, "nvidia.com/gpu.slices.gi")) or None
        return out
    if _int(_label(node, "nvidia.com/gpu.replicas", "1")) > 1:
        out["problem"] = (f"runs on a GPU of {node['name']} shared by "
                          f"{_label(node, 'nvidia.com/gpu.sharing-strategy')} "
                          f"({_label(node, 'nvidia.com/gpu.replicas')} replicas): no memory isolation; "
                          "give each replica its own MIG instance")
        return out
    out["profile"] = "whole GPU"
    out["gib"] = _int(_label(node, "nvidia.com/gpu.memory")) / 1024
    out["compute"] = COMPUTE_SLICES
    return out


def _owner(pod_name: str, names: list[str]) -> str | None:
    for name in sorted(names, key=len, reverse=True):
        if pod_name.startswith(name + "-"):
            return name
    return None


def _replicas(doc: dict, services) -> list[dict[str, Any]]:
    """One dict per live pod of the services: the pod, its service and its slice."""
    svcs = {s.name: s for s in services}
    out = []
    for pod in doc.get("pods", []):
        owner = _owner(pod["name"], list(svcs))
        if owner is None or pod.get("phase") in ("Failed", "Succeeded"):
            continue
        s, sl = svcs[owner], _slice(pod, doc)
        fits = (sl["problem"] is None and sl["gib"] is not None and sl["gib"] + 1e-9 >= s.memory_gb
                and (not s.compute_slices or (sl["compute"] or 0) >= s.compute_slices))
        out.append({"service": s, "pod": pod, "slice": sl, "fits": fits})
    return out


def replica_slices(lab, services) -> pd.DataFrame:
    """One row per pod of the services: service, pod, phase, node, resource, profile, GiB,
    compute slices, the service's need, and whether the slice holds it (``fits``)."""
    rows = []
    for r in _replicas(lab.to_dict(), list(services)):
        s, pod, sl = r["service"], r["pod"], r["slice"]
        rows.append({"service": s.name, "pod": f"{pod['namespace']}/{pod['name']}",
                     "phase": pod.get("phase"), "node": pod.get("node"),
                     "resource": sl["resource"], "profile": sl["profile"],
                     "gib": None if sl["gib"] is None else round(sl["gib"], 2),
                     "compute_slices": sl["compute"], "need_gib": s.memory_gb,
                     "need_compute_slices": s.compute_slices, "fits": r["fits"], "problem": sl["problem"]})
    cols = ["service", "pod", "phase", "node", "resource", "profile", "gib", "compute_slices",
            "need_gib", "need_compute_slices", "fits", "problem"]
    return pd.DataFrame(rows, columns=cols).astype({"compute_slices": "Int64", "need_compute_slices": "Int64"})


# ---------------------------------------------------------------- feedback text

def _s(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else (plural or word + 's')}"


def _too_small(s, sl: dict) -> str | None:
    """Why the slice ``sl`` cannot hold service ``s``, or None."""
    if sl["gib"] is not None and sl["gib"] + 1e-9 < s.memory_gb:
        return (f"the MIG profile you chose for {s.name} ({sl['profile']}) has {sl['gib']:.2f} GiB "
                f"(`nvidia-smi` memory), the model needs {s.memory_gb:g} GiB")
    if s.compute_slices and sl["compute"] is not None and sl["compute"] < s.compute_slices:
        return (f"the MIG profile you chose for {s.name} ({sl['profile']}) has "
                f"{_s(sl['compute'], 'compute slice')}, {s.name} needs {s.compute_slices}")
    return None


def _cluster_model(doc: dict) -> str:
    for n in _nodes(doc).values():
        m = _product_model(_label(n, "nvidia.com/gpu.product"))
        if m is not None:
            return m.name
    return GPU_MODEL


def _pending_reason(resource: str, doc: dict) -> str:
    cap = sum(_int((n.get("capacity") or {}).get(resource)) for n in _nodes(doc).values())
    used = sum(_int((n.get("requested") or {}).get(resource)) for n in _nodes(doc).values())
    if resource.startswith(MIG_PREFIX) and cap == 0:
        return f"no node advertises {resource}"
    if cap == 0:
        return f"no node advertises {resource}"
    return f"the nodes offer {cap} {resource} in all and {used} are taken"


def _pending_lines(doc: dict, services) -> list[str]:
    svcs = {s.name: s for s in services}
    groups: dict[tuple[str, str | None], list[dict]] = defaultdict(list)
    others = []
    for pod in doc.get("pods", []):
        if pod.get("phase") != "Pending":
            continue
        owner = _owner(pod["name"], list(svcs))
        if owner is None:
            others.append(pod)
            continue
        groups[(owner, _slice(pod, doc)["resource"])].append(pod)
    lines = []
    for (owner, resource), pods in groups.items():
        s = svcs[owner]
        sl = _slice(pods[0], doc)
        why = [w for w in (_too_small(s, sl), _pending_reason(resource, doc) if resource else None) if w]
        if sl["problem"]:
            why.insert(0, sl["problem"])
        msg = (pods[0].get("message") or "").strip()
        lines.append(f"{_s(len(pods), owner + ' replica')} ask{'s' if len(pods) == 1 else ''} for "
                     f"{resource or 'no GPU'}: " + "; ".join(why)
                     + (f' (scheduler: "{msg}")' if msg else ""))
    for pod in others:
        msg = (pod.get("message") or "").strip()
        lines.append(f"{pod['namespace']}/{pod['name']}" + (f' (scheduler: "{msg}")' if msg else ""))
    return lines


# ---------------------------------------------------------------- the checks

def _requirements(c: Checklist, lab, services, doc: dict) -> dict[str, Any]:
    """The three service requirements both checks share; returns what they measured."""
    services = list(services)
    pending = [p for p in doc.get("pods", []) if p.get("phase") == "Pending"]
    lines = _pending_lines(doc, services)
    c.require(not pending,
              f"{_s(len(pending), 'pod')} still pending: " + " | ".join(lines),
              "no pod is pending")

    reps = _replicas(doc, services)
    missing = []
    for s in services:
        mine = [r for r in reps if r["service"] is s]
        running = sum(1 for r in mine if r["pod"].get("phase") == "Running")
        if running >= s.replicas:
            continue
        if not mine:
            missing.append(f"{s.name}: no pods found (name its Deployment {s.name}, "
                           f"so its pods are called {s.name}-...)")
        elif len(mine) < s.replicas:
            missing.append(f"{s.name}: only {_s(len(mine), 'pod')} exist{'s' if len(mine) == 1 else ''}, "
                           f"{running} running, of {s.replicas} replicas the service needs")
        else:
            missing.append(f"{s.name}: {running} of {s.replicas} replicas running")
    total = sum(s.replicas for s in services)
    c.require(not missing, "not every replica runs: " + "; ".join(missing),
              f"all {len(services)} services run every replica ({total} pods)")

    model = _cluster_model(doc)
    small = []
    for s in services:
        bad = [r for r in reps if r["service"] is s and not r["fits"]]
        if not bad:
            continue
        sl, n = bad[0]["slice"], len(bad)
        if sl["problem"]:
            why = sl["problem"]
        elif sl["gib"] is None:
            why = (f"{sl['resource']} is no MIG profile of the cluster's GPUs ({model}), so nothing "
                   "will ever hold this replica")
        else:
            why = f"{_too_small(s, sl)}"
        small.append(f"{_s(n, s.name + ' replica')}: {why}")
    fail = ("a replica's GPU slice cannot hold its model: " + "; ".join(small) if reps
            else "no replica of the services exists yet, so there is no GPU slice to check")
    c.require(bool(reps) and not small, fail,
              "every replica has its own GPU instance with enough memory and compute")
    return {"model": model}


def _usage_text(usage: pd.DataFrame) -> str:
    parts = []
    for r in usage.itertuples():
        bits = []
        if r.mig_enabled:
            bits.append(f"{r.mig_enabled} MIG-enabled ({r.mig_instances_used} of "
                        f"{_s(r.mig_instances, 'instance')} used)")
        if r.whole_gpus_held:
            bits.append(f"{_s(r.whole_gpus_held, 'whole GPU')} held by pods")
        parts.append(f"{r.node}: " + (", ".join(bits) if bits else "none"))
    return "; ".join(parts)


def _first_node(doc: dict) -> str:
    """The first GPU node: ``kubectl describe node`` on it shows its resources and MIG labels."""
    names = [name for name, n in _nodes(doc).items() if _int(_label(n, "nvidia.com/gpu.count", "0"))]
    return names[0] if names else "<node>"


def check_fleet(lab, services, *, min_whole: int | None = None) -> Feedback:
    """The lab's goal: every replica of every service runs in a MIG slice that holds its
    model, no pod pends, and at least ``min_whole`` GPUs stay whole and free for training
    (default: half of the cluster's GPUs, as ``nvidia.com/gpu.count`` counts them)."""
    services = list(services)
    doc = lab.to_dict()
    c = Checklist(f"{TITLE}: the migrated services run, half the GPUs stay whole",
                  look=f"kubectl describe node {_first_node(doc)}")
    _requirements(c, lab, services, doc)
    usage = fleet_usage(lab)
    tied, total = int(usage["tied_up"].sum()), int(usage["gpus"].sum())
    free = int(usage["whole_gpus_free"].sum())
    need = min_whole if min_whole is not None else total // 2
    if not total:
        c.require(False, "no GPU node found: the NodePool is not applied", "")
    else:
        c.require(free >= need,
                  f"only {_s(free, 'GPU')} of {total} stay whole and free for training (advertised as "
                  f"{WHOLE}, MIG off, no pod on it); the goal is at least {need}. The fleet ties up "
                  f"{tied}: " + _usage_text(usage),
                  f"{free} of {total} GPUs stay whole and free for training (goal: at least {need}); "
                  f"the services tie up {tied}")
    return c.done()


def check_cost(lab, services, *, model: str | None = None) -> Feedback:
    """Stretch goal: tie up no more GPUs than ``gpu_lab.gpus.plan_mig`` needs for the services,
    with the monthly bill from the catalog's reference price."""
    services = list(services)
    doc = lab.to_dict()
    c = Checklist(f"{TITLE} stretch: as few GPUs as the planner", look=f"kubectl describe node {_first_node(doc)}")
    measured = _requirements(c, lab, services, doc)
    gpu = get_model(model or measured["model"])
    plan: MigPlan = plan_mig(services, gpu.name)
    usage = fleet_usage(lab)
    tied = int(usage["tied_up"].sum())
    month = tied * gpu.price_per_hour * HOURS_PER_MONTH
    best = plan.cost()["per_month"]
    whole = plan.cost()["whole_gpu_per_month"]
    money = (f"${month:,.0f}/month for {tied} {gpu.name} GPUs at ${gpu.price_per_hour:.2f}/GPU-hour "
             f"({gpu.price_source}); one whole GPU per replica: ${whole:,.0f}/month")
    c.require(tied <= plan.gpu_count,
              f"the fleet ties up {tied} GPUs; plan_mig fits these services on {plan.gpu_count} "
              f"(${best:,.0f}/month): {money}. Per node: " + _usage_text(usage),
              f"{tied} GPUs, as few as the planner's {plan.gpu_count}: {money}, "
              f"saving ${whole - month:,.0f}/month")
    return c.done()
