"""Lab 06 checks: yesterday's GPU bill, replayed; cut it without losing any work.

The day (``lessons/scenarios/06_lab_day.yaml``) holds an autoscaled H100 pool, a fixed
CPU pool, the cluster's ``Autoscaler`` settings and the workload: web Deployments, a log
shipper in kube-system and a hundred training Jobs over the day. The learner may change
the scheduler configuration, the ``Autoscaler``'s settings and the annotations (and other
scheduling fields) of the pod templates; the node pools and the work itself (which
workloads, their sizes, requests, durations and submission times) stay as the file has them.

Each check takes the learner's manifests and the day's file, replays both on the
simulated clock for 24 hours (``gpu_lab.simulate`` for the bill, a session for the
autoscaler's events and what runs at midnight; each distinct set of manifests once) and
says in names and numbers what is still wrong: which Job restarted, on which node, when
and why; which GPU node was still up at midnight and which pod held it; where the
node-hours went.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import pandas as pd
import yaml

from ...connection import connect
from ...errors import GpuLabError
from ...gpus.catalog import get_model
from ...model.duration import parse_duration
from ...simulation import simulate
from .feedback import Checklist, Feedback
from .manifests import read_manifests

TITLE = "Lab 06"

HINTS = (
    "Start from the complaints, one command each: which Jobs restarted "
    "(`kubectl get events -A --field-selector reason=Evicted`), which node ran all evening "
    "(`kubectl get nodes` at 23:00, and `kubectl describe node` for what it still holds), and where the "
    "node-hours went (the autoscaler's ScaleDown events: `kubectl get events -n kube-system`).",
    "Spread-out pods keep every node a little busy, so none empties; pack the GPU pods (NodeResourcesFit "
    "MostAllocated over nvidia.com/gpu, no default spreading) and nodes empty as their Jobs finish. "
    "cluster-autoscaler waits the Autoscaler's scaleDownUnneededTime before it removes an empty node: "
    "how long is it in yesterday's file, and what does each hour of waiting cost per emptied node?",
    "A scale-down evicts what it finds on the node; a training Job cannot resume, so mark its pods "
    "cluster-autoscaler.kubernetes.io/safe-to-evict: \"false\". Pods that block a scale-down for no reason "
    "(stateless kube-system Deployments) may say \"true\". `kubectl describe node` and the autoscaler's "
    "NoScaleDown events name the pod that blocks a node.",
    "The answer: SCHEDULER_CONFIG with NodeResourcesFit MostAllocated over nvidia.com/gpu and "
    "PodTopologySpread defaultingType: List; AUTOSCALER_SPEC = {scaleDownUnneededTime: 10m}; pod_annotations "
    "gives Jobs safe-to-evict: \"false\" and kube-system workloads safe-to-evict: \"true\".",
)
GOAL_USD = 4200.0  # the day's bill must end below this
DAY_S = 24 * 3600  # every replay runs the clock this long
SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"
DURATION = "gpulab.dev/duration"
GPU = "nvidia.com/gpu"
SUBMIT_AT = "gpulab.dev/submit-at"
WORKLOAD_KINDS = ("Pod", "Deployment", "ReplicaSet", "Job")
# Objects a learner may add: they decide placement and scale-down, not the work or the hardware.
SETTINGS_KINDS = ("KubeSchedulerConfiguration", "Autoscaler", "PriorityClass", "Namespace")
# cluster-autoscaler's defaults (FAQ parameter table), for feedback when the Autoscaler omits them
DEFAULT_UNNEEDED_S = 600.0
DEFAULT_GPU_THRESHOLD = 0.5


# ------------------------------------------------------------------ reading input
def load(manifests: Any) -> list[dict]:
    """Manifests as a list of dicts: a path to a YAML file, YAML text, a dict or a list of dicts."""
    return read_manifests(manifests, TITLE)


def _meta(doc: dict) -> dict:
    return doc.get("metadata") or {}


def _ref(doc: dict) -> str:
    meta = _meta(doc)
    return f"{doc.get('kind')} {meta.get('namespace') or 'default'}/{meta.get('name')}"


def _template(doc: dict) -> dict:
    return doc if doc.get("kind") == "Pod" else ((doc.get("spec") or {}).get("template") or {})


def _work(doc: dict) -> dict:
    """What a workload asks of the cluster: its size, its containers' resources, how long each
    pod runs and when it is submitted (what a learner may not change)."""
    spec = doc.get("spec") or {}
    template = _template(doc)
    pod_spec = template.get("spec") or {}
    return {
        "size": {k: spec.get(k) for k in ("replicas", "parallelism", "completions") if k in spec},
        "resources": [((c or {}).get("name"), (c or {}).get("resources")) for c in pod_spec.get("containers") or []],
        "duration": (_meta(template).get("annotations") or {}).get(DURATION),
        "submit-at": (_meta(doc).get("annotations") or {}).get(SUBMIT_AT),
    }


def changes(manifests: Any, day_file: str) -> list[str]:
    """How ``manifests`` differ from the day's file where they may not: node pools, which
    workloads exist, and each workload's size, resources, duration and submission time."""
    mine, day = load(manifests), load(day_file)
    out: list[str] = []
    fixed = {_ref(d): d for d in day if d.get("kind") == "NodePool"}
    works = {_ref(d): d for d in day if d.get("kind") in WORKLOAD_KINDS}
    seen: set[str] = set()
    for doc in mine:
        ref, kind = _ref(doc), doc.get("kind")
        if kind in SETTINGS_KINDS:
            continue
        if kind == "NodePool":
            if ref not in fixed:
                out.append(f"{ref} is not in the day's file (the node pools are fixed)")
            elif json.dumps(doc.get("spec"), sort_keys=True) != json.dumps(fixed[ref].get("spec"), sort_keys=True):
                out.append(f"{ref} differs from the day's file (the node pools are fixed)")
        elif ref in works:
            ours, theirs = _work(doc), _work(works[ref])
            diff = [k for k in ours if ours[k] != theirs[k]]
            if diff:
                out.append(f"{ref}: {', '.join(diff)} changed (the day's file has "
                           + "; ".join(f"{k} {theirs[k]}" for k in diff) + ")")
        else:
            out.append(f"{ref} is not in the day's file")
        seen.add(ref)
    out += [f"{ref} is missing" for ref in [*fixed, *works] if ref not in seen]
    return out


# ------------------------------------------------------------------ replaying a day
@dataclass(frozen=True)
class Day:
    """One replay of 24 hours: the bill, the Jobs, every pod, the autoscaler's events, and
    what ran at midnight. ``error`` is set (and the rest empty) when the manifests did not apply."""

    cost_usd: float
    node_hours: float
    gpu_hours_allocated: float
    jobs: pd.DataFrame
    timeline: pd.DataFrame
    events: pd.DataFrame
    nodes_at_end: pd.DataFrame
    pods_at_end: pd.DataFrame
    docs: tuple
    error: str = ""


def replay(manifests: Any) -> Day:
    """The manifests on the simulated clock for 24 hours (cached per distinct manifests)."""
    return _replay(json.dumps(load(manifests), sort_keys=True, default=str))


@lru_cache(maxsize=8)
def _replay(key: str) -> Day:
    docs = json.loads(key)
    try:
        sim = simulate(json.loads(key), until=DAY_S)
        lab = connect("sim", seed=0)
        try:
            lab.apply(json.loads(key))
            lab.advance(DAY_S)
            events, nodes, pods = lab.autoscaler_events(), lab.nodes(), lab.pods()
        finally:
            lab.close()
    except GpuLabError as err:
        empty = pd.DataFrame()
        return Day(0.0, 0.0, 0.0, empty, empty, empty, empty, empty, tuple(), str(err))
    m = sim.metrics
    return Day(float(m["cost_usd"]), float(m["node_hours"]), float(m["gpu_hours_allocated"]), sim.jobs,
               sim.timeline, events, nodes, pods, tuple(docs))


# ------------------------------------------------------------------ reading a day
def clock(seconds: float) -> str:
    """Seconds after midnight as HH:MM (24:00 at the end of the day)."""
    minutes = int(round(seconds / 60))
    return f"{minutes // 60:02d}:{minutes % 60:02d}"


def span(seconds: float) -> str:
    """A duration as 1h41m, 45m or 30s."""
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds}s"
    h, m = divmod(seconds // 60, 60)
    return (f"{h}h" if h else "") + (f"{m}m" if m or not h else "")


def _seconds(value: Any, default: float) -> float:
    try:
        return parse_duration(str(value)) if value is not None else default
    except Exception:  # an invalid value never got this far: the replay would have failed
        return default


def autoscaler_spec(docs: Any) -> dict:
    """The ``Autoscaler``'s spec in the manifests ({} when there is none: the defaults)."""
    for d in load(docs):
        if d.get("kind") == "Autoscaler":
            return dict(d.get("spec") or {})
    return {}


def removal(events: pd.DataFrame, node: str) -> tuple[float, str] | None:
    """When the autoscaler removed ``node`` and its message (cluster-autoscaler's status
    ConfigMap event names the node, its utilisation and the pods it moves), or None."""
    if events.empty:
        return None
    on_node = events[events["object"] == f"Node {node}"]
    if on_node.empty:
        return None
    at = float(on_node["time"].min())
    same = events[(events["time"] == at) & events["object"].str.startswith("ConfigMap")]
    named = same[same["message"].str.contains(f"node {node},", regex=False)
                 | same["message"].str.contains(f'node "{node}"', regex=False)]
    message = named["message"].iloc[0] if not named.empty else on_node["message"].iloc[0]
    return at, str(message)


def _gpu_pools(docs: list[dict]) -> dict[Any, dict]:  # keyed by metadata.name as written
    return {_meta(d).get("name"): d for d in docs if d.get("kind") == "NodePool" and (d.get("spec") or {}).get("gpu")}


def _price(pool: dict) -> float:
    spec = pool.get("spec") or {}
    if isinstance(spec.get("pricePerHour"), (int, float)):
        return float(spec["pricePerHour"])
    gpu = spec.get("gpu") or {}
    return get_model(str(gpu.get("model", ""))).price_per_hour * int(gpu.get("count", 0))


def _workload_of(pod_owner_kind: Any, owner: Any, pod: str, namespace: str, docs: list[dict]) -> dict | None:
    """The manifest that made a pod: its Job, the Deployment behind its ReplicaSet, or itself."""
    candidates = [d for d in docs if d.get("kind") in WORKLOAD_KINDS
                  and (_meta(d).get("namespace") or "default") == namespace]
    if pod_owner_kind == "Job":
        return next((d for d in candidates if d["kind"] == "Job" and _meta(d).get("name") == owner), None)
    if pod_owner_kind == "ReplicaSet" and isinstance(owner, str):
        best = None
        for d in candidates:
            name = _meta(d).get("name") or ""
            if d["kind"] in ("Deployment", "ReplicaSet") and (owner == name or owner.startswith(name + "-")) \
                    and (best is None or len(name) > len(_meta(best).get("name") or "")):
                best = d
        return best
    return next((d for d in candidates if d["kind"] == "Pod" and _meta(d).get("name") == pod), None)


def _why_it_stays(pod: pd.Series, docs: list[dict]) -> str:
    """Why the autoscaler cannot move this pod off its node, or "": cluster-autoscaler's rules in
    its FAQ's terms, or under ``mode: Consolidation`` Karpenter's one pod-level control."""
    ns = pod["namespace"]
    workload = _workload_of(pod.get("owner_kind"), pod.get("owner"), pod["pod"], ns, docs)
    annotations = (_meta(_template(workload)).get("annotations") or {}) if workload else {}
    if autoscaler_spec(docs).get("mode") == "Consolidation":
        return f'a pod annotated {DO_NOT_DISRUPT}: "true"' if annotations.get(DO_NOT_DISRUPT) == "true" else ""
    if annotations.get(SAFE_TO_EVICT) == "true":
        return ""
    if pd.isna(pod.get("owner_kind")):
        return "a pod no controller would recreate (not replicated)"
    if ns == "kube-system":
        return ("a kube-system pod, which cluster-autoscaler does not evict unless a PodDisruptionBudget "
                "or an annotation allows it")
    if annotations.get(SAFE_TO_EVICT) == "false":
        return f'a pod annotated {SAFE_TO_EVICT}: "false"'
    return ""


# ------------------------------------------------------------------ the checks
def _unchanged(c: Checklist, manifests: Any, day_file: str) -> Day | None:
    """The requirement every check shares: the manifests apply and keep the day's work."""
    try:
        diffs = changes(manifests, day_file)
    except (GpuLabError, yaml.YAMLError) as err:
        c.require(False, f"the manifests cannot be read: {err}")
        return None
    jobs = sum(1 for d in load(day_file) if d.get("kind") == "Job")
    c.require(not diffs,
              "keep the day's node pools and work as they are: " + "; ".join(diffs[:4])
              + (f" (and {len(diffs) - 4} more)" if len(diffs) > 4 else ""),
              f"the day's node pools and work are unchanged ({jobs} Jobs)")
    day = replay(manifests)
    if day.error:
        c.require(False, f"the manifests do not apply: {day.error}")
        return None
    return day


def check_jobs(manifests: Any, day_file: str) -> Feedback:
    """Every Job is Complete by midnight and none restarted (no pod of a Job failed or was evicted)."""
    c = Checklist(f"{TITLE}: every Job done, none restarted",
                  look="kubectl get jobs -A; kubectl get events -A --field-selector reason=Evicted")
    day = _unchanged(c, manifests, day_file)
    if day is None:
        return c.done()
    jobs = day.jobs
    unfinished = jobs[jobs["state"] != "Complete"]
    names = ", ".join(f"{r['name']} ({r['state']})" for _, r in unfinished.head(3).iterrows())
    done = f"all {len(jobs)} Jobs Complete by 24:00" + (
        f" (the last at {clock(jobs['finished_at'].max())})" if unfinished.empty and len(jobs) else "")
    c.require(unfinished.empty,
              f"every Job must be Complete by 24:00: {len(unfinished)} of {len(jobs)} are not: {names}"
              + (", ..." if len(unfinished) > 3 else ""), done)
    t = day.timeline
    lost = t[(t["owner_kind"] == "Job") & (t["phase"] == "Failed")].sort_values("finished_at", kind="stable")
    if lost.empty:
        c.require(True, "", "no Job restarted: every training pod ran once, to the end")
        return c.done()
    durations = {(_meta(d).get("namespace") or "default", _meta(d).get("name")):
                 _seconds((_meta(_template(d)).get("annotations") or {}).get(DURATION), math.nan)
                 for d in day.docs if d.get("kind") == "Job"}
    first = lost.iloc[0]
    ran = first["finished_at"] - first["started_at"]
    of = durations.get((first["namespace"], first["owner"]), math.nan)
    cause = f"({first['reason']})"
    if first["reason"] == "Evicted":
        removed = removal(day.events, first["node"])
        if removed is not None and abs(removed[0] - first["finished_at"]) < 1:
            cause = f"when the autoscaler removed the node ({removed[1]})"
    redone = float(((lost["finished_at"] - lost["started_at"]) * lost["gpus"]).sum() / 3600)
    others = [o for o in dict.fromkeys(lost["owner"]) if o != first["owner"]]
    c.require(False,
              f"no Job may restart: {lost['owner'].nunique()} Jobs lost work. {first['owner']}'s pod {first['pod']} "
              f"stopped at {clock(first['finished_at'])} on {first['node']} after {span(ran)}"
              + (f" of its {span(of)}" if not math.isnan(of) else "") + f", {cause}, and began again from zero"
              + (f"; also {', '.join(others[:5])}" + (", ..." if len(others) > 5 else "") if others else "")
              + f" ({redone:.1f} GPU-hours of work done twice)")
    return c.done()


def check_scale_down(manifests: Any, day_file: str) -> Feedback:
    """No GPU node is still up at midnight, hours after the last Job finished."""
    c = Checklist(f"{TITLE}: no GPU node left running",
                  look="kubectl get nodes -l nvidia.com/gpu.count")
    day = _unchanged(c, manifests, day_file)
    if day is None:
        return c.done()
    docs = list(day.docs)
    pools = _gpu_pools(docs)
    nodes = day.nodes_at_end
    left = nodes[nodes["pool"].isin(list(pools))] if not nodes.empty else nodes
    last_job = day.jobs["finished_at"].max() if len(day.jobs) else 0.0
    last_job = 0.0 if pd.isna(last_job) else float(last_job)
    if left.empty:
        c.require(True, "", f"no GPU node at 24:00: the last one went after the last Job finished "
                            f"({clock(last_job)})")
        return c.done()
    t = day.timeline
    reasons = []
    for _, node in left.iterrows():
        name = node["name"]
        here = t[(t["node"] == name) & t["phase"].eq("Running")]
        gpu_done = t[(t["node"] == name) & (t["gpus"] > 0)]["finished_at"].max()
        idle = DAY_S - (gpu_done if not (isinstance(gpu_done, float) and math.isnan(gpu_done)) else 0.0)
        blockers = [(p, why) for p, why in ((p, _why_it_stays(p, docs)) for _, p in here.iterrows()) if why]
        spec = autoscaler_spec(docs)
        threshold = spec.get("scaleDownGpuUtilizationThreshold", DEFAULT_GPU_THRESHOLD)
        gpus = int(node.get(f"{GPU} allocatable", 0))
        used = node.get(f"{GPU} requested", 0) / gpus if gpus else 0.0
        if spec.get("mode") != "Consolidation" and here["gpus"].sum() and used >= threshold:
            held = (f"{node[f'{GPU} requested']} of its {gpus} GPUs are requested, at or above "
                    f"scaleDownGpuUtilizationThreshold ({threshold:g}), by {', '.join(here['pod'].head(3))}")
        elif blockers:
            p, why = blockers[0]
            held = f"it holds {p['namespace']}/{p['pod']}, {why}"
        elif here.empty:
            held = (f"it is empty, unneeded for less than scaleDownUnneededTime "
                    f"({span(_seconds(spec.get('scaleDownUnneededTime'), DEFAULT_UNNEEDED_S))})")
        else:
            held = f"it runs {', '.join(here['pod'].head(3))}"
        price = _price(pools[node["pool"]])
        reasons.append(f"{name} was still up at 24:00, {span(idle)} after its last GPU pod finished "
                       f"(${idle / 3600 * price:,.2f} at ${price:,.2f} per node-hour): {held}")
    c.require(False,
              f"once the work is done no GPU node should stay: the last Job finished at {clock(last_job)}, but "
              + "; ".join(reasons))
    return c.done()


def check_bill(manifests: Any, day_file: str, *, goal: float = GOAL_USD) -> Feedback:
    """The day's bill is below ``goal`` dollars, with every Job done; where the node-hours went."""
    c = Checklist(f"{TITLE}: the day's bill", look="kubectl get events -n kube-system --field-selector reason=ScaleDown")
    day = _unchanged(c, manifests, day_file)
    if day is None:
        return c.done()
    base = replay(day_file)
    undone = int((day.jobs["state"] != "Complete").sum()) if len(day.jobs) else 0
    c.require(undone == 0, f"{undone} Job(s) not Complete by 24:00: a bill for work not done saves nothing "
                           "(see the first check)", "every Job Complete")
    where = _where_the_money_went(day, day_file)
    c.require(day.cost_usd < goal,
              f"the day cost ${day.cost_usd:,.2f} (yesterday ${base.cost_usd:,.2f}); the goal is under "
              f"${goal:,.0f}. {where}",
              f"the day cost ${day.cost_usd:,.2f}, ${base.cost_usd - day.cost_usd:,.2f} less than yesterday's "
              f"${base.cost_usd:,.2f} (goal: under ${goal:,.0f}). {where}")
    return c.done()


def work_gpu_hours(day_file: str) -> float:
    """The GPU-hours the day's Jobs need: pods to complete x GPUs per pod x each pod's duration."""
    total = 0.0
    for d in load(day_file):
        if d.get("kind") != "Job":
            continue
        spec = d.get("spec") or {}
        pods = spec.get("completions") or spec.get("parallelism") or 1
        template = _template(d)
        gpus = sum(int(((c or {}).get("resources") or {}).get("limits", {}).get(GPU, 0))
                   for c in (template.get("spec") or {}).get("containers") or [])
        total += pods * gpus * _seconds((_meta(template).get("annotations") or {}).get(DURATION), 0.0) / 3600
    return total


def _where_the_money_went(day: Day, day_file: str) -> str:
    """The bill split into the Jobs' work, work done twice and idle GPUs paid for, plus the node-hours
    of empty GPU nodes waiting to be removed."""
    pools = _gpu_pools(list(day.docs))
    t = day.timeline
    # Empty GPU nodes waiting to go: from a node's last pod to its removal (or midnight). The
    # timeline names no pool for nodes already removed; their names do (<pool>-<i>).
    waiting, emptied = 0.0, 0
    pool_of = [n.rsplit("-", 1)[0] if isinstance(n, str) else None for n in t["node"]]
    on_gpu = t[[p in pools for p in pool_of]]
    for name, pods in on_gpu.groupby("node"):
        if pods["phase"].eq("Running").any():
            continue
        gone = removal(day.events, name)
        end = gone[0] if gone is not None else DAY_S
        waiting += max(end - float(pods["finished_at"].max()), 0.0)
        emptied += 1
    tail = (f"Empty GPU nodes waiting to be removed: {waiting / 3600:.1f} node-hours on {emptied} nodes "
            "(from their last pod to their removal or midnight).")
    if len(pools) != 1:
        return f"{day.gpu_hours_allocated:.1f} GPU-hours allocated. {tail}"
    # The bill is GPU nodes only (CPU nodes have no catalog price), so with one GPU pool
    # dollars / its price is the node-hours paid for, booting included.
    (pool, doc), = pools.items()
    per_node = int(((doc.get("spec") or {}).get("gpu") or {}).get("count", 0)) or 1
    per_gpu = _price(doc) / per_node
    paid = day.cost_usd / per_gpu
    work = work_gpu_hours(day_file)
    twice = max(day.gpu_hours_allocated - work, 0.0)
    idle = max(paid - day.gpu_hours_allocated, 0.0)
    return (f"The Jobs' work is {work:.1f} GPU-hours (${work * per_gpu:,.2f} at ${per_gpu:.2f} per GPU-hour); "
            f"you paid for {paid:.1f} GPU-hours ({paid / per_node:.1f} {pool} node-hours): "
            f"{day.gpu_hours_allocated:.1f} allocated"
            + (f" ({twice:.1f} of them work done twice)" if twice >= 0.05 else "")
            + f" and {idle:.1f} idle (${idle * per_gpu:,.2f}). {tail}")
