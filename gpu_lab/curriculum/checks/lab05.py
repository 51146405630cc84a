"""Lab 05 checks: make room for a new service, keep every service zone-safe, cut the bill.

The lab's fleet file (``lessons/scenarios/05_lab_fleet.yaml``) holds node pools spread over
three zones and the workload: inference Deployments pinned to the L40S pool (among them the
new ``llama-70b-api``, 4 GPUs per replica), batch embedding Jobs on L40S, fine-tuning Jobs on
H200 and web Deployments. The learner keeps the workload and changes only the scheduler's
configuration (profiles and each team's ``schedulerName``). Each check takes the learner's
session and the fleet file; the baseline is the same file scheduled by the default profile
on the simulator, computed here so that nobody has to trust a number typed into the notebook.

Only the public API is used: ``gpu_lab.connect``, ``Session.pods()/nodes()/describe_node()``
and ``gpu_lab.charts.fleet_cost`` (GPU nodes holding a running pod, and their price).
"""

from __future__ import annotations

import os
from functools import lru_cache
from typing import Any

import yaml

from ...connection import connect
from ...viz.cost import fleet_cost
from .feedback import Checklist, Feedback

TITLE = "Lab 05"

HINTS = (
    "Start with what pends: `kubectl get pods -A --field-selector=status.phase=Pending`, then "
    "`kubectl describe pod <a llama-70b-api pod>`: it wants 4 L40S GPUs on one node. How many L40S nodes "
    "have 4 free? `kubectl describe nodes -l nvidia.com/gpu.product=NVIDIA-L40S` (Allocated resources) "
    "shows each node's GPUs in use.",
    "The default profile prefers the emptiest node (LeastAllocated over cpu and memory), so the 1-GPU "
    "replicas land one or two per L40S node and no node keeps 4 GPUs free: the L40S pool must pack as well "
    "as the training pool. But packing also moves replicas between zones: the system-default spreading "
    "(maxSkew 5 per zone, ScheduleAnyway) is only a score, and `kubectl get pods -o wide` with "
    "`kubectl get nodes -L topology.kubernetes.io/zone` shows where each replica went.",
    "A rule over every Deployment that nobody writes into the Deployments is a cluster-level default: "
    "PodTopologySpread's args in a profile take defaultingType: List and defaultConstraints, applied to "
    "every pod without constraints of its own, over the pods of the same ReplicaSet or Service. "
    "whenUnsatisfiable: DoNotSchedule makes a constraint a filter, not a score. Jobs get no default "
    "spreading, so a training profile need not change them.",
    "The answer: profile default-scheduler with NodeResourcesFit MostAllocated over nvidia.com/gpu (weight 1) "
    "and PodTopologySpread {defaultingType: List, defaultConstraints: [{maxSkew: 1, topologyKey: "
    "topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}]}, for inference and web; profile "
    "gpu-packing with the same scoring and PodTopologySpread defaultingType: List, for training and batch "
    "(SCHEDULER_FOR = {training: gpu-packing, batch: gpu-packing, inference: default-scheduler, "
    "web: default-scheduler}).",
)
GOAL_CUT = 0.20  # at least this share of the baseline's monthly bill for GPU nodes in use must go
INFERENCE_POOL = "l40s"
ZONE_LABEL = "topology.kubernetes.io/zone"
INFERENCE_TEAM = "inference"
WORKLOAD_KINDS = ("Deployment", "Job", "ReplicaSet", "Pod")


def _docs(fleet: str) -> list[dict[str, Any]]:
    with open(fleet, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if isinstance(d, dict)]


def _pods_asked(doc: dict[str, Any]) -> int:
    spec = doc.get("spec") or {}
    if doc["kind"] == "Pod":
        return 1
    if doc["kind"] == "Job":
        return int(spec.get("parallelism", 1))
    return int(spec.get("replicas", 1))


def workloads(fleet: str) -> dict[str, dict[str, Any]]:
    """``{name: {"kind", "team", "pods"}}`` for every workload the fleet file creates."""
    out = {}
    for d in _docs(fleet):
        if d.get("kind") in WORKLOAD_KINDS:
            meta = d.get("metadata") or {}
            labels = meta.get("labels") or {}
            out[meta["name"]] = {"kind": d["kind"], "team": labels.get("team"), "pods": _pods_asked(d)}
    return out


def owner(pod_name: str, names: Any) -> str | None:
    """The workload a pod belongs to: the longest workload name that prefixes ``pod-``."""
    best = None
    for name in names:
        if (pod_name == name or pod_name.startswith(name + "-")) and (best is None or len(name) > len(best)):
            best = name
    return best


def busy_gpu_nodes(lab: Any) -> dict[str, int]:
    """``{pool: GPU nodes holding at least one pod}``."""
    nodes = lab.nodes()
    if nodes.empty:  # an empty session's table has no columns
        return {}
    gpu = sum((nodes[c] for c in nodes.columns
               if isinstance(c, str) and c.startswith("nvidia.com/") and c.endswith(" capacity")),
              start=0 * nodes["pods"])
    busy = nodes[(nodes["pods"] > 0) & (gpu > 0)]
    return {str(k): int(v) for k, v in busy.groupby("pool").size().items()}


@lru_cache(maxsize=4)
def _baseline(path: str, mtime: float) -> tuple[int, float, int, tuple[tuple[str, int], ...]]:
    """The fleet under the default profile: busy GPU nodes, $ per month, pending pods, per pool."""

    lab = connect("sim", record=False)
    try:
        lab.apply(path)
        pods = lab.schedule()
        row = fleet_cost({"default": lab}).iloc[0]
        return (int(row["nodes"]), float(row["dollars_per_month"]), int(pods["node"].isna().sum()),
                tuple(sorted(busy_gpu_nodes(lab).items())))
    finally:
        lab.close()


def baseline(fleet: str) -> dict[str, Any]:
    """The default profile's result on ``fleet``: busy GPU nodes (in all and per pool),
    $ per month, pending pods."""
    path = os.path.abspath(fleet)
    nodes, dollars, pending, pools = _baseline(path, os.path.getmtime(path))
    return {"nodes": nodes, "dollars_per_month": dollars, "pending": pending, "pools": dict(pools)}


def _first_line(text: Any, limit: int = 240) -> str:
    """The scheduler's message up to its preemption clause (which rarely adds anything here)."""
    text = " ".join(str(text or "").split()).split(" preemption:")[0]
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_scheduled(lab: Any, fleet: str) -> Feedback:
    """The whole workload of ``fleet`` is there, unchanged, and no pod is pending."""
    c = Checklist(f"{TITLE}: the same workload, nothing pending",
                  look="kubectl get pods -A --field-selector=status.phase=Pending")
    asked = workloads(fleet)
    pods = lab.pods()
    counts: dict[str, int] = {}
    strangers = []
    for name in pods["name"]:
        w = owner(name, asked)
        if w is None:
            strangers.append(name)
        else:
            counts[w] = counts.get(w, 0) + 1
    changed = [f"{w} has {counts.get(w, 0)} pod(s), the fleet file asks for {info['pods']}"
               for w, info in asked.items() if counts.get(w, 0) != info["pods"]]
    total = sum(i["pods"] for i in asked.values())
    c.require(not changed and not strangers,
              "the workload must stay as the fleet file has it: "
              + "; ".join((changed + [f"{len(strangers)} pod(s) not in the file, e.g. {strangers[0]}"]
                           if strangers else changed)[:4])
              + (f" (and {len(changed) - 4} more)" if len(changed) > 4 else ""),
              f"all {total} pods of the {len(asked)} workloads are there")
    pending = pods[pods["node"].isna()]
    if len(pending):
        first = pending.iloc[0]
        names = ", ".join(pending["name"].head(3)) + (", ..." if len(pending) > 3 else "")
        fail = (f"no pod may pend: {len(pending)} pending ({names}); {first['name']}: "
                f"{_first_line(first['message']) or 'not scheduled yet: did you call lab.schedule()?'}")
    else:
        fail = ""
    c.require(len(pods) > 0 and len(pending) == 0,
              fail or "the session has no pods: apply the fleet file and call lab.schedule()",
              f"no pod pending ({len(pods)} running)")
    return c.done()


def zones(lab: Any) -> dict[str, str]:
    """``{node: zone}`` from each node's ``topology.kubernetes.io/zone`` label (nodes without one left out)."""
    nodes = lab.nodes()
    out = {}
    for name in ([] if nodes.empty else nodes["name"]):
        zone = lab.describe_node(name).labels.get(ZONE_LABEL)
        if zone:
            out[str(name)] = zone
    return out


def _spread(counts: dict[str, int], domains: list[str]) -> str:
    return ", ".join(f"{counts.get(z, 0)} in {z}" for z in domains)


def check_zones(lab: Any, fleet: str) -> Feedback:
    """Every inference replica runs, on the L40S pool, and each inference Deployment's replicas
    differ by at most one between the pool's zones: one zone's outage takes at most its share."""
    c = Checklist(f"{TITLE}: inference on L40S, each service spread evenly over the zones",
                  look="kubectl get pods -A -o wide -l team=inference")
    asked = workloads(fleet)
    serving = {w for w, i in asked.items() if i["team"] == INFERENCE_TEAM and i["kind"] == "Deployment"}
    pods = lab.pods()
    nodes = lab.nodes()
    pool = dict(zip(nodes["name"], nodes["pool"])) if not nodes.empty else {}
    owned = [(owner(n, serving), n, node) for n, node in zip(pods["name"], pods["node"])]
    rows: list[tuple[str, str, str]] = [(w, n, node) for w, n, node in owned
                                        if w is not None and isinstance(node, str)]
    running: dict[str, int] = {}
    for w, _, _ in rows:
        running[w] = running.get(w, 0) + 1
    short = [(w, running.get(w, 0), asked[w]["pods"]) for w in sorted(serving)
             if running.get(w, 0) < asked[w]["pods"]]
    c.require(bool(rows) and not short,
              "no inference pod is running: apply the fleet file and call lab.schedule()" if not rows else
              "a service is zone-safe only when all its replicas run: "
              + "; ".join(f"{w} runs {n} of its {want} replicas" for w, n, want in short[:3])
              + (f" (and {len(short) - 3} more)" if len(short) > 3 else ""),
              f"all {len(rows)} replicas of the {len(serving)} inference services running")
    elsewhere = [(n, node) for _, n, node in rows if pool.get(node) != INFERENCE_POOL]
    c.require(not elsewhere,
              f"inference pods must stay on the {INFERENCE_POOL} pool: {len(elsewhere)} run elsewhere, "
              + (f"e.g. {elsewhere[0][0]} on {elsewhere[0][1]} (pool {pool.get(elsewhere[0][1])})"
                 if elsewhere else ""),
              f"every inference pod runs on the {INFERENCE_POOL} pool")
    zone_of = zones(lab)
    domains = sorted({z for node, z in zone_of.items() if pool.get(node) == INFERENCE_POOL})
    per: dict[str, dict[str, int]] = {}
    for w, _, node in rows:
        if node in zone_of:
            per.setdefault(w, {}).setdefault(zone_of[node], 0)
            per[w][zone_of[node]] += 1
    uneven = []
    for w in sorted(per):
        counts = [per[w].get(z, 0) for z in domains]
        if counts and max(counts) - min(counts) > 1:
            worst = domains[counts.index(max(counts))]
            uneven.append((max(counts) - min(counts), w, counts, worst))
    uneven.sort(key=lambda u: (-u[0], u[1]))
    if uneven:
        _, w, counts, worst = uneven[0]
        total = sum(counts)
        fail = (f"a zone outage may take only its share of a service (zones differ by at most one replica): "
                f"{w} has {_spread(per[w], domains)}; losing {worst} takes {max(counts)} of its {total} "
                f"replicas" + (f" ({len(uneven) - 1} more service(s) uneven: "
                               + ", ".join(u[1] for u in uneven[1:4]) + ("..." if len(uneven) > 4 else "") + ")"
                               if len(uneven) > 1 else "")
                + f" (`kubectl get pods -o wide -l app={w}` and `kubectl get nodes -L {ZONE_LABEL}` show it)")
    else:
        fail = ""
    c.require(bool(per) and not uneven, fail or "no inference pod runs on a node with a zone label",
              f"each of the {len(per)} inference services differs by at most one replica between "
              f"{', '.join(domains)}")
    return c.done()


def check_savings(lab: Any, fleet: str, *, cut: float = GOAL_CUT) -> Feedback:
    """The monthly bill for GPU nodes holding a pod at least ``cut`` below the default profile's."""

    c = Checklist(f"{TITLE}: a smaller GPU bill", look="kubectl get pods -A -o wide")
    base = baseline(fleet)
    row = fleet_cost({"yours": lab}).iloc[0]
    dollars = float(row["dollars_per_month"])
    limit = base["dollars_per_month"] * (1 - cut)
    achieved = 1 - dollars / base["dollars_per_month"] if base["dollars_per_month"] else 0.0
    pending = int(lab.pods()["node"].isna().sum())
    c.require(pending == 0,
              f"{pending} pod(s) pending: a fleet that leaves work waiting saves nothing "
              "(see the first check)", "no pod pending")
    now = busy_gpu_nodes(lab)
    pools = ", ".join(f"{p} {n} -> {now.get(p, 0)}" for p, n in sorted(base["pools"].items()))
    c.require(dollars <= limit,
              f"$ per month for GPU nodes in use: ${base['dollars_per_month']:,.0f} -> ${dollars:,.0f}, "
              f"a {achieved:.0%} cut; the goal is >= {cut:.0%} (<= ${limit:,.0f}). GPU nodes in use per "
              f"pool: {pools}",
              f"$ per month for GPU nodes in use: ${base['dollars_per_month']:,.0f} -> ${dollars:,.0f}, "
              f"a {achieved:.0%} cut (goal >= {cut:.0%}); GPU nodes in use per pool: {pools}")
    return c.done()
