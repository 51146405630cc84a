"""Lab 08 checks: sixteen light inference pods on sixteen A100s; measure the waste, then right-size.

The task (``solutions/08_right_size.ipynb``): a team serves four inference services,
16 replicas (``SERVICES``), each holding a whole A100-80GB on its own single-GPU node
(``lessons/scenarios/08_lab_today.yaml``). dcgm-exporter says they keep their GPUs busy
10 % to 35 % of the time. The learner

1. reads the waste per namespace off the exporter's Prometheus text
   (``check_today``: GPU-hours a day held but not used);
2. reshapes the fleet (NodePools with time-slicing, MPS or MIG in the device-plugin
   config, and the Deployments' GPU requests) so that every replica still runs, no
   replica's declared memory exceeds what its device gives it, no device is asked for
   more work than it can do (``check_fleet``), the team pays for at most ``MAX_GPUS``
   GPUs and wastes less than ``MAX_WASTE_PERCENT`` of the GPU-hours it pays for
   (``check_bill``).

The work is fixed: each replica keeps its declared use (``gpulab.dev/gpu-utilization``,
measured on a whole A100, and ``gpulab.dev/gpu-memory``). What that work means on the
device a replica lands on is the sizing model of ``gpu_lab.metrics`` (``sizing.py``): the
same busy time on a whole or time-sliced GPU (time-sliced pods take turns, so their busy
times add up, within what ``gpu_lab.gpus.timeslice_throughput`` says the GPU delivers);
7/s as long on a MIG instance with s of 7 compute slices; under MPS a replica may use
``100 // replicas`` % of the SMs and ``floor(memory / replicas)`` MiB. A model, not a
benchmark (latency under sharing is lesson 03's subject).

The checks run the learner's manifests on a fresh simulator session themselves, so they
grade the same thing whatever backend the notebook uses. ``uses``, ``devices`` and
``exporter_text`` read any session through its public API (``pods()``,
``describe_node``), with the declarations taken from ``SERVICES``.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from ... import connect
from ...errors import GpuLabError
from ...gpus import (
    get_model,
    mig_profiles,
    mps_share,
    smallest_mig_profile,
    timeslice_memory,
    timeslice_throughput,
)
from ...gpus.mig import COMPUTE_SLICES
from ...metrics import GpuUse, dcgm_text, gpu_nodes, gpu_uses
from ...metrics.annotations import (
    MEMORY_ANNOTATION,
    UTILIZATION_ANNOTATION,
    memory_mib,
    utilization,
)
from .feedback import Checklist, Feedback
from .manifests import read_manifests

TITLE = "Lab 08"

HINTS = (
    "Start from what is idle: `kubectl top`-style GPU numbers come from dcgm-exporter; "
    "`kubectl exec -n gpu-operator <dcgm-exporter pod> -- curl -s localhost:9400/metrics | grep "
    "DCGM_FI_DEV_GPU_UTIL` is the text you parse. Waste per GPU is hours times (1 - util/100), counted for "
    "GPUs a pod holds.",
    "Each replica needs its memory and its share of one GPU's time. Compare the three ways of sharing an "
    "A100 (time-slicing, MPS, MIG) with gpu_lab.metrics.right_size: which one keeps every replica's memory "
    "isolated and its work inside what the device delivers? `kubectl describe node <node>` shows what a pool "
    "advertises.",
    "The planner (gpu_lab.gpus.plan_mig, through right_size's mig_plans) lays out MIG profiles per GPU; "
    "one NodePool per distinct layout, migStrategy: mixed, and each Deployment asking for one instance of its "
    "profile. Fewer GPUs on the bill means fewer nodes in the NodePools' count.",
    "The answer: waste_by_namespace = sum over DCGM_FI_DEV_GPU_UTIL series with a pod label of "
    "24 * (1 - util/100), by namespace; the fleet: the right-size plan's MIG layouts, one single-GPU A100-80GB "
    "NodePool per layout (count = GPUs with that layout, migStrategy: mixed, mig.migParted config), and each "
    "Deployment's limit nvidia.com/mig-<its profile>: 1.",
)
MODEL = "A100-80GB"
PRODUCT = "NVIDIA-A100-SXM4-80GB"  # GFD's nvidia.com/gpu.product (plus -SHARED / -MIG-... when shared)
HOURS = 24  # the day every figure covers: the services run around the clock
TODAY = "../lessons/scenarios/08_lab_today.yaml"  # from solutions/ and labs/
TODAY_GPUS = 16
MAX_GPUS = 5
MAX_WASTE_PERCENT = 40.0


@dataclass(frozen=True)
class Service:
    """One Deployment of the team and what each replica does with a whole A100."""

    namespace: str
    name: str
    replicas: int
    utilization: float  # percent of time a kernel runs on a whole A100 (DCGM_FI_DEV_GPU_UTIL)
    memory: str  # framebuffer each replica allocates (DCGM_FI_DEV_FB_USED), a quantity

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def memory_mib(self) -> float:
        return memory_mib(self.memory, pod=self.name, namespace=self.namespace)

    @property
    def busy(self) -> float:
        """The fraction of a whole GPU's time this replica keeps a kernel running."""
        return self.utilization / 100


SERVICES = (
    Service("search", "embed", 6, 10, "6Gi"),  # bge-large-en-v1.5 on text-embeddings-inference
    Service("search", "rerank", 4, 15, "10Gi"),  # bge-reranker-v2-m3
    Service("assistant", "chat", 4, 30, "30Gi"),  # Llama 3.1 8B Instruct on vLLM, capped cache
    Service("assistant", "summarize", 2, 35, "36Gi"),  # Qwen2.5 14B Instruct on vLLM, capped cache
)
NAMESPACES = tuple(dict.fromkeys(s.namespace for s in SERVICES))
PODS = sum(s.replicas for s in SERVICES)

__all__ = [
    "HINTS",
    "HOURS",
    "MAX_GPUS",
    "MAX_WASTE_PERCENT",
    "MODEL",
    "NAMESPACES",
    "PODS",
    "SERVICES",
    "TODAY",
    "TODAY_GPUS",
    "Service",
    "check_bill",
    "check_fleet",
    "check_today",
    "devices",
    "documents",
    "exporter_text",
    "run",
    "uses",
]


# ------------------------------------------------------------------ reading input
def documents(submission: Any) -> list[dict]:
    """Manifests from YAML text, a path to a YAML file, a dict, or a list of any of these."""
    return read_manifests(submission, TITLE)


def _namespace_docs() -> list[dict]:
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in NAMESPACES]


def run(pools: Any, deployments: Any):
    """A fresh simulator session with the team's namespaces, ``pools`` and ``deployments``, scheduled."""

    lab = connect("sim", seed=0)
    lab.apply(_namespace_docs() + documents(pools) + documents(deployments))
    lab.schedule()
    return lab


def _service_of(namespace: str, pod: str) -> Service | None:
    """A Deployment's pods are named <deployment>-<pod-template-hash>-<suffix>."""
    for s in SERVICES:
        if namespace == s.namespace and pod.startswith(s.name + "-") and pod.count("-") == s.name.count("-") + 2:
            return s
    return None


# ------------------------------------------------------------------ the model
def _profile(model: str, name: str | None):
    return next(p for p in mig_profiles(model) if p.name == name)


def _busy_on(use: GpuUse, service: Service) -> float:
    """The fraction of its device's time the replica keeps busy (may exceed 1: it cannot keep up)."""
    if use.sharing == "mig":
        return service.busy * COMPUTE_SLICES / _profile(use.model, use.mig_profile).compute_slices
    return service.busy


def _uses(lab) -> list[tuple[GpuUse, Service]]:
    # The declarations that count are SERVICES'; the session's own manifests only name the
    # containers (on backends that keep them), and a bad annotation there must not stop a check.
    try:
        held = gpu_uses(lab)
    except GpuLabError:
        held = gpu_uses(lab, {})
    out = []
    for u in held:
        s = _service_of(u.namespace, u.pod)
        if s is not None:
            out.append((u, s))
    return out


def uses(lab) -> list[GpuUse]:
    """``GpuUse`` records of the team's running replicas, as dcgm-exporter would measure them on
    the device each holds, over ``HOURS``: feed them to ``gpu_lab.metrics.waste``,
    ``utilisation``, ``dcgm_text`` or ``gpu_lab.charts.utilisation``."""
    return [dataclasses.replace(u, utilization=round(min(100.0, 100 * _busy_on(u, s)), 6),
                                memory_mib=s.memory_mib, hours=float(HOURS))
            for u, s in _uses(lab)]


def exporter_text(lab) -> str:
    """What dcgm-exporter serves for ``lab``'s GPUs: ``gpu_lab.metrics.dcgm_text`` of ``uses(lab)``."""
    return dcgm_text(uses(lab), gpu_nodes(lab))


DEVICE_COLUMNS = ["node", "gpu", "device", "sharing", "pods", "memory_used_mib", "memory_mib",
                  "offered", "capacity", "problem", "problem_kind"]


def _fail(n: int) -> str:
    return f"{n} of them {'fails' if n == 1 else 'fail'}"


def _gib(mib: float) -> str:
    return f"{mib / 1024:.1f} GiB"


def _pct(x: float) -> str:
    return f"{100 * x:.0f} %"


def _device_rows(lab) -> list[dict[str, Any]]:
    held: dict[tuple, list[tuple[GpuUse, Service]]] = {}
    for u, s in _uses(lab):
        key = (u.node, u.gpu, u.device_id.split("::", 1)[0] if u.sharing == "mig" else "")
        held.setdefault(key, []).append((u, s))
    rows = []
    for (node, gpu, _), group in sorted(held.items()):
        u0 = group[0][0]
        pods = [u.pod for u, _ in group]
        mems = [s.memory_mib for _, s in group]
        gpu_mib = get_model(u0.model).memory_mib
        problem, kind = "", ""
        if u0.sharing == "mig":
            s = group[0][1]
            profile = _profile(u0.model, u0.mig_profile)
            device, cap, offered, capacity = (f"MIG {profile.name}", profile.memory_mib,
                                              _busy_on(u0, s), 1.0)
            if s.memory_mib > cap:
                problem, kind = (f"{u0.pod} declares {_gib(s.memory_mib)} of GPU memory but a {profile.name} "
                                 f"instance has {_gib(cap)}: it fails with CUDA out of memory"), "memory"
            elif offered > 1 + 1e-9:
                kind = "work"
                problem = (f"{u0.pod} keeps a whole A100 busy {s.utilization:g} % of the time; on "
                           f"{profile.compute_slices} of {COMPUTE_SLICES} compute slices that is "
                           f"{_pct(offered)} of the instance: it cannot keep up")
            if problem:
                need = smallest_mig_profile(MODEL, s.memory_mib / 1024,
                                            max(1, math.ceil(COMPUTE_SLICES * s.busy - 1e-9)))
                problem += f" (the smallest profile that holds it: {need.name if need else 'none'})"
        elif u0.sharing == "mps":
            share = mps_share(gpu_mib, u0.replicas)
            device, cap = f"MPS replicas: {u0.replicas}", gpu_mib
            offered, capacity = sum(s.busy for _, s in group), 1.0
            over_mem = [f"{u.pod} ({_gib(s.memory_mib)})" for u, s in group if s.memory_mib > share.memory_limit_mib]
            over_sm = [f"{u.pod} ({s.utilization:g} %)" for u, s in group
                       if s.busy > share.active_thread_percentage / 100 + 1e-9]
            if over_mem:
                kind = "memory"
                problem = (f"MPS limits each pod to {_gib(share.memory_limit_mib)} (floor(memory / "
                           f"{u0.replicas})): {', '.join(over_mem)} {'fails' if len(over_mem) == 1 else 'fail'} with CUDA out of memory")
            elif over_sm:
                kind = "work"
                problem = (f"MPS caps each pod at {share.active_thread_percentage} % of the SMs "
                           f"(100 // {u0.replicas}): {', '.join(over_sm)} of a whole A100's time cannot fit")
        else:
            device, cap = ("time-sliced" if u0.sharing == "time-slicing" else "whole GPU"), gpu_mib
            memory = timeslice_memory(mems, gpu_mib)
            duties = [s.busy for _, s in group]
            r = timeslice_throughput(len(duties), duties)
            offered, capacity = r.offered, r.capacity
            if not memory.fits:
                kind = "memory"
                problem = (f"{len(group)} pods take turns and declare {_gib(sum(mems))} in all on one "
                           f"{_gib(gpu_mib)} GPU: time-slicing does not split memory, so "
                           f"{_fail(len(memory.oom))} with CUDA out of memory")
            elif r.saturated:
                kind = "work"
                problem = (f"{len(group)} pods offer {offered:.2f} GPUs of work to a time-sliced GPU that "
                           f"delivers at most {capacity:.3f} (2 ms turns, 0.1 ms per switch): saturated, "
                           "queues grow without bound")
        rows.append({"node": node, "gpu": gpu, "device": device, "sharing": u0.sharing, "pods": pods,
                     "memory_used_mib": sum(mems), "memory_mib": cap, "offered": offered,
                     "capacity": capacity, "problem": problem, "problem_kind": kind})
    return rows


def devices(lab) -> pd.DataFrame:
    """One row per device holding the team's replicas (a whole or shared GPU, or a MIG
    instance): its pods, memory declared and available, work offered and deliverable (in
    fractions of the device's time), and what is wrong with it, if anything."""
    return pd.DataFrame(_device_rows(lab), columns=DEVICE_COLUMNS)


# ------------------------------------------------------------------ checks: today
def _expected_waste() -> dict[str, float]:
    out: dict[str, float] = {}
    for s in SERVICES:
        out[s.namespace] = out.get(s.namespace, 0.0) + s.replicas * (1 - s.busy) * HOURS
    return out


def _held(namespace: str) -> tuple[float, float]:
    """(GPU-hours held a day, GPU-hours used) by a namespace today."""
    mine = [s for s in SERVICES if s.namespace == namespace]
    return (sum(s.replicas for s in mine) * HOURS, sum(s.replicas * s.busy for s in mine) * HOURS)


def _close(a: float, b: float) -> bool:
    return abs(a - b) <= max(0.05, 1e-3 * abs(b))


def _why(namespace: str, got: float, want: float) -> str:
    held, used = _held(namespace)
    gpus = int(held / HOURS)
    if _close(got, want / HOURS):
        return f"{got:g} is per hour; the question is per day ({HOURS} hours)"
    if _close(got, used):
        return f"{got:g} GPU-hours is what its pods use; the waste is what they hold minus what they use"
    if _close(got, held):
        return f"{got:g} GPU-hours is what its {gpus} GPUs are held for in a day, used or not"
    if _close(got, 100 * want) or _close(got, want * 100 / HOURS):
        return f"{got:g}: DCGM_FI_DEV_GPU_UTIL is a percent; divide it by 100 to get a fraction of the time"
    return (f"got {got:g} GPU-hours; its pods hold {gpus} whole GPUs for {HOURS} h ({held:g} GPU-hours) "
            f"and keep them busy {100 * used / held:.1f} % of the time on average")


def check_today(waste_by_namespace: Any) -> Feedback:
    """GPU-hours a day each namespace holds but does not use (a ``pd.Series`` or dict)."""
    c = Checklist(f"{TITLE}: today's waste",
                  look="kubectl exec -n gpu-operator <dcgm-exporter pod> -- curl -s localhost:9400/metrics")
    if isinstance(waste_by_namespace, pd.DataFrame) and waste_by_namespace.shape[1] == 1:
        waste_by_namespace = waste_by_namespace.iloc[:, 0]
    if not isinstance(waste_by_namespace, (pd.Series, Mapping)):
        c.require(False, "waste_by_namespace should be a pandas Series (or a dict) from namespace to "
                         f"GPU-hours wasted per day, got {type(waste_by_namespace).__name__}")
        return c.done()
    got = {str(k): v for k, v in dict(waste_by_namespace).items()}
    want = _expected_waste()
    extra = sorted(set(got) - set(want))
    missing = sorted(set(want) - set(got))
    c.require(not extra and not missing,
              "namespaces: " + "; ".join(
                  ([f"missing {', '.join(missing)}"] if missing else [])
                  + ([f"{', '.join(repr(k) for k in extra)} hold(s) none of the team's GPUs (series "
                      "without a pod label are GPUs nobody holds)"] if extra else [])),
              f"one figure per namespace: {', '.join(want)}")
    for ns, expected in want.items():
        if ns not in got:
            continue
        value = got[ns]
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value)):
            c.require(False, f"{ns}: {value!r} is not a number of GPU-hours")
            continue
        price = get_model(MODEL).price_per_hour
        c.require(_close(float(value), expected), f"{ns}: {_why(ns, float(value), expected)}",
                  f"{ns} wastes {expected:.1f} GPU-hours a day (${expected * price:,.2f} at "
                  f"${price:g} per A100-hour)")
    return c.done()


# ------------------------------------------------------------------ checks: the new fleet
def _deployments(docs: list[dict]) -> dict[str, dict]:
    out = {}
    for d in docs:
        if d.get("kind") == "Deployment":
            meta = d.get("metadata") or {}
            out[f"{meta.get('namespace') or 'default'}/{meta.get('name')}"] = d
    return out


def _work_problems(docs: list[dict]) -> list[str]:
    """How the submitted Deployments changed the team's work (empty: the same work)."""
    problems = []
    found = _deployments(docs)
    for s in SERVICES:
        d = found.get(s.key)
        if d is None:
            problems.append(f"Deployment {s.key} is missing: keep every service, with its name and namespace")
            continue
        spec = d.get("spec") or {}
        if spec.get("replicas", 1) != s.replicas:
            problems.append(f"{s.key} has replicas: {spec.get('replicas', 1)}, the service needs {s.replicas}")
        template = spec.get("template") or {}
        notes = (template.get("metadata") or {}).get("annotations") or {}
        util: float | None
        mem: float | None
        try:
            util = utilization(notes.get(UTILIZATION_ANNOTATION), pod=s.name, namespace=s.namespace)
            mem = memory_mib(notes.get(MEMORY_ANNOTATION), pod=s.name, namespace=s.namespace)
        except GpuLabError:
            util = mem = None
        if util != s.utilization or mem != s.memory_mib:
            problems.append(f"{s.key}'s pod template must keep {UTILIZATION_ANNOTATION}: \"{s.utilization:g}\" "
                            f"and {MEMORY_ANNOTATION}: {s.memory} (what a replica does on a whole A100; the "
                            "checks work out what that means on the device it lands on)")
        per_pod = 0
        for container in (template.get("spec") or {}).get("containers") or []:
            limits = ((container or {}).get("resources") or {}).get("limits") or {}
            for resource, n in limits.items():
                if str(resource).startswith("nvidia.com/"):
                    try:
                        per_pod += int(n)
                    except (TypeError, ValueError):
                        per_pod += 0  # the API server refuses it; apply says why
        if per_pod != 1:
            problems.append(f"{s.key}'s replicas ask for {per_pod} GPU devices each: one replica serves from "
                            "one device (a whole GPU, a time-slicing or MPS replica, or a MIG instance)")
    return problems


def _session(c: Checklist, pools: Any, deployments: Any):
    """Run the submission; on a refusal, one failed requirement with the API server's line."""
    try:
        docs = documents(pools) + documents(deployments)
        lab = run(pools, deployments)
    except GpuLabError as err:
        c.require(False, f"the manifests do not apply: {err}")
        return None, []
    return lab, docs


def _not_running(lab) -> list[str]:
    pods = lab.pods()
    out = []
    for s in SERVICES:
        mine = pods[(pods["namespace"] == s.namespace) & pods["name"].map(
            lambda n, s=s: _service_of(s.namespace, n) is s)]
        for r in mine[mine["phase"] != "Running"].itertuples():
            out.append(f"{s.namespace}/{r.name} is {r.phase}: {r.message or r.reason}")
        if len(mine) < s.replicas:
            out.append(f"{s.key} has {len(mine)} of {s.replicas} pods")
    return out


def _gpu_nodes(lab) -> list[dict]:
    out = []
    for n in lab.to_dict()["nodes"]:
        labels = n.get("labels") or {}
        try:
            count = int(labels.get("nvidia.com/gpu.count", "0") or 0)
        except ValueError:
            count = 0
        if count:
            out.append({"name": n["name"], "gpus": count, "product": labels.get("nvidia.com/gpu.product", "")})
    return out


def check_fleet(pools: Any, deployments: Any) -> Feedback:
    """Every replica runs on A100-80GB hardware with its memory and its work fitting its device."""
    c = Checklist(f"{TITLE}: the fleet", look="kubectl get pods -A -o wide")
    lab, docs = _session(c, pools, deployments)
    if lab is None:
        return c.done()
    foreign = sorted(f"{n['name']} ({n['product']})" for n in _gpu_nodes(lab)
                     if not n["product"].startswith(PRODUCT))
    c.require(not foreign, f"GPU nodes of another model: {', '.join(foreign[:4])}"
              + (" ..." if len(foreign) > 4 else "") + f": the team runs on {MODEL} GPUs",
              f"every GPU is an {MODEL}")
    work = _work_problems(docs)
    c.require(not work, "; ".join(work), f"the same work: {PODS} replicas of {len(SERVICES)} services, "
                                         "declarations unchanged")
    stuck = _not_running(lab)
    c.require(not stuck, f"{len(stuck)} replica(s) not running: " + "; ".join(stuck[:3])
              + (" ..." if len(stuck) > 3 else ""), f"all {PODS} replicas running")
    rows = _device_rows(lab)
    if not rows:
        return c.done()
    memory = [r for r in rows if r["problem_kind"] == "memory"]
    c.require(not memory, "memory: " + "; ".join(f"{r['node']} GPU {r['gpu']}: {r['problem']}" for r in memory[:3])
              + (" ..." if len(memory) > 3 else "")
              + (". The scheduler counts replicas, not memory: decide which pods may share a GPU "
                 "(a pool and a nodeSelector per kind of pod)" if any(r["sharing"] == "time-slicing"
                                                                       for r in memory) else ""),
              _tightest(rows))
    busy = [r for r in rows if r["problem_kind"] == "work"]
    c.require(not busy, "work: " + "; ".join(f"{r['node']} GPU {r['gpu']}: {r['problem']}" for r in busy[:3])
              + (" ..." if len(busy) > 3 else ""), _busiest(rows))
    return c.done()


def _tightest(rows: list[dict]) -> str:
    r = max(rows, key=lambda r: r["memory_used_mib"] / r["memory_mib"])
    return (f"every replica's memory fits its device (tightest: {_gib(r['memory_used_mib'])} of "
            f"{_gib(r['memory_mib'])} on {r['node']} GPU {r['gpu']}, {r['device']})")


def _busiest(rows: list[dict]) -> str:
    r = max(rows, key=lambda r: r["offered"] / r["capacity"])
    return (f"every device keeps up with its work (busiest: {r['node']} GPU {r['gpu']}, {r['device']}, "
            f"{_pct(r['offered'])} of its time)")


def _usd(x: float) -> str:
    return f"${x:,.2f}"


def check_bill(pools: Any, deployments: Any) -> Feedback:
    """At most ``MAX_GPUS`` GPUs paid for, and under ``MAX_WASTE_PERCENT`` of their GPU-hours wasted."""
    c = Checklist(f"{TITLE}: the bill", look="kubectl get nodes -L nvidia.com/gpu.count")
    lab, _ = _session(c, pools, deployments)
    if lab is None:
        return c.done()
    stuck = _not_running(lab)
    if stuck:
        c.require(False, f"{len(stuck)} of {PODS} replicas are not running (check_fleet says why): a bill "
                         "for work that is not served means nothing")
        return c.done()
    nodes = _gpu_nodes(lab)
    paid = sum(n["gpus"] for n in nodes)
    price = get_model(MODEL).price_per_hour
    held = {(u.node, u.gpu) for u, _ in _uses(lab)}
    idle = paid - len(held)
    c.require(paid <= MAX_GPUS,
              f"the team pays for {paid} GPUs on {len(nodes)} node(s), at most {MAX_GPUS} allowed"
              + (f"; {idle} of them {'holds' if idle == 1 else 'hold'} no replica: a node costs the same "
                 "whether anything runs on it, so lower the NodePools' count" if idle else
                 "; every one of them holds a replica: the same replicas must fit on fewer GPUs (share them "
                 "or partition them, then lower the NodePools' count: the default scheduler spreads "
                 "replicas over the emptiest nodes, so spare GPUs never look idle)")
              + f" (today: {TODAY_GPUS})",
              f"{paid} GPUs paid for (today: {TODAY_GPUS}): {_usd(paid * HOURS * price)} a day instead of "
              f"{_usd(TODAY_GPUS * HOURS * price)}")
    used = sum(s.replicas * s.busy for s in SERVICES) * HOURS
    hours = paid * HOURS
    wasted = max(hours - used, 0.0)
    share = 100 * wasted / hours if hours else 100.0
    today = TODAY_GPUS * HOURS
    line = (f"{hours:g} GPU-hours a day paid for, {used:.1f} used: {wasted:.1f} wasted ({share:.1f} %, "
            f"{_usd(wasted * price)} a day; today {today - used:.1f}, {100 * (today - used) / today:.1f} %, "
            f"{_usd((today - used) * price)})")
    c.require(share < MAX_WASTE_PERCENT, line + f": the goal is under {MAX_WASTE_PERCENT:g} %", line)
    return c.done()
