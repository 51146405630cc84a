"""Lab 05 checks: cut the GPU nodes a fleet keeps busy by choosing scheduler profiles.

The lab's fleet file (``lessons/scenarios/05_lab_fleet.yaml``) holds node pools and
the workload: inference Deployments pinned to the L4 pool, web Deployments, training
Jobs. The learner keeps the workload and changes only the scheduler's configuration
(profiles and each workload's ``schedulerName``). Each check takes the learner's
session and the fleet file; the baseline is the same file scheduled by the default
profile on the simulator, computed here so that nobody has to trust a number typed
into the notebook.

Only the public API is used: ``gpu_lab.connect``, ``Session.pods()/nodes()`` and
``gpu_lab.charts.fleet_cost`` (GPU nodes holding a running pod, and their price).
"""

from __future__ import annotations

import math
import os
from functools import lru_cache
from typing import Any

import yaml

from ...connection import connect
from ...viz.cost import fleet_cost
from .feedback import Checklist, Feedback

TITLE = "Lab 05"

HINTS = (
    "Start with what pends and where the GPUs went: `kubectl get pods -A --field-selector=status.phase=Pending`, "
    "then `kubectl get pods -A -o wide` grouped by node: how many GPU nodes hold only a pod or two?",
    "The default profile prefers the emptiest node (LeastAllocated over cpu and memory), so every team's pods "
    "spread over every node. Training wants packing; inference wants its replicas apart but different "
    "services on the same nodes. One profile cannot do both: a KubeSchedulerConfiguration may hold several "
    "profiles, picked by each pod's schedulerName.",
    "Spreading of one Deployment's replicas comes from PodTopologySpread's system-default constraints "
    "(defaultingType: System); packing from NodeResourcesFit's MostAllocated over nvidia.com/gpu. Keep the "
    "first where replicas must stay apart, drop it where you pack. `kubectl get pods -n inference -o wide` "
    "shows whether two replicas share a node.",
    "The answer: profile default-scheduler with NodeResourcesFit MostAllocated over nvidia.com/gpu (weight 1), "
    "system-default spreading kept, for inference and web; profile gpu-packing with the same scoring and "
    "PodTopologySpread defaultingType: List, for training (SCHEDULER_FOR = {training: gpu-packing, "
    "inference: default-scheduler, web: default-scheduler}).",
)
GOAL_CUT = 0.25  # at least this share of the baseline's busy GPU nodes must go
INFERENCE_POOL = "l4"
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


def check_inference(lab: Any, fleet: str) -> Feedback:
    """Inference stays on the L4 pool, no node holds two replicas of one inference Deployment,
    and inference services share L4 nodes (fewer L4 nodes in use than the default profile)."""
    c = Checklist(f"{TITLE}: inference on L4, one replica per node, fewer L4 nodes",
                  look="kubectl get pods -n inference -o wide")
    asked = workloads(fleet)
    serving = {w for w, i in asked.items() if i["team"] == INFERENCE_TEAM}
    pods = lab.pods()
    nodes = lab.nodes()
    pool = dict(zip(nodes["name"], nodes["pool"])) if not nodes.empty else {}
    rows = [(owner(n, serving), n, node) for n, node in zip(pods["name"], pods["node"])]
    rows = [(w, n, node) for w, n, node in rows if w is not None and isinstance(node, str)]
    c.require(bool(rows), "no inference pod is running: apply the fleet file and call lab.schedule()",
              f"{len(rows)} inference pods running")
    elsewhere = [(n, node) for _, n, node in rows if pool.get(node) != INFERENCE_POOL]
    c.require(not elsewhere,
              f"inference pods must stay on the {INFERENCE_POOL} pool: {len(elsewhere)} run elsewhere, "
              + (f"e.g. {elsewhere[0][0]} on {elsewhere[0][1]} (pool {pool.get(elsewhere[0][1])})"
                 if elsewhere else ""),
              f"every inference pod runs on the {INFERENCE_POOL} pool")
    per_node: dict[tuple[str | None, str], int] = {}
    for w, _, node in rows:
        per_node[(w, node)] = per_node.get((w, node), 0) + 1
    doubled = sorted(((k, v) for k, v in per_node.items() if v > 1), key=lambda kv: -kv[1])
    if doubled:
        (w, node), v = doubled[0]
        fail = (f"a node failure may take down only one replica of a Deployment: {node} holds {v} "
                f"replicas of {w}" + (f" ({len(doubled) - 1} more node/Deployment pairs hold 2 or more)"
                                      if len(doubled) > 1 else ""))
    else:
        fail = ""
    c.require(not doubled, fail, "no node holds two replicas of one inference Deployment")
    before = baseline(fleet)["pools"].get(INFERENCE_POOL, 0)
    now = busy_gpu_nodes(lab).get(INFERENCE_POOL, 0)
    c.require(
        now < before,
        f"inference services must share {INFERENCE_POOL} nodes: {now} {INFERENCE_POOL} nodes hold pods, "
        f"today {before}; even with every training node packed, the GPU-node goal cannot be met "
        f"while inference keeps that many {INFERENCE_POOL} nodes busy",
        f"{INFERENCE_POOL} nodes in use: {before} -> {now}")
    return c.done()


def check_savings(lab: Any, fleet: str, *, cut: float = GOAL_CUT) -> Feedback:
    """At least ``cut`` fewer GPU nodes holding pods than the default profile, and what it saves."""

    c = Checklist(f"{TITLE}: fewer GPU nodes in use", look="kubectl get pods -A -o wide")
    base = baseline(fleet)
    row = fleet_cost({"yours": lab}).iloc[0]
    nodes, dollars = int(row["nodes"]), float(row["dollars_per_month"])
    limit = math.floor(base["nodes"] * (1 - cut))
    achieved = 1 - nodes / base["nodes"] if base["nodes"] else 0.0
    pending = int(lab.pods()["node"].isna().sum())
    c.require(pending == 0,
              f"{pending} pod(s) pending: a fleet that leaves work waiting saves nothing "
              "(see the first check)", "no pod pending")
    c.require(nodes <= limit,
              f"GPU nodes in use: {base['nodes']} -> {nodes}, a {achieved:.0%} cut; the goal is "
              f">= {cut:.0%} (<= {limit} nodes)",
              f"GPU nodes in use: {base['nodes']} -> {nodes}, a {achieved:.0%} cut (goal >= {cut:.0%})")
    saved = base["dollars_per_month"] - dollars
    c.require(saved > 0,
              f"$ per month: ${base['dollars_per_month']:,.0f} -> ${dollars:,.0f}: nothing saved",
              f"$ per month for GPU nodes in use: ${base['dollars_per_month']:,.0f} -> ${dollars:,.0f} "
              f"(saves ${saved:,.0f}, {saved / base['dollars_per_month']:.0%})")
    return c.done()
