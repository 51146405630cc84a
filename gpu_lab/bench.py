"""``gpu-lab bench``: how long the embedded scheduler takes from a scenario file to the table.

The workload: GPU node pools of several models (the H100 pool tainted for GPU
work only, as clusters usually do) plus CPU nodes, and a pod mix of whole-GPU
training/inference pods (with tolerations), CPU-only pods, pods pinned to a
GPU product by nodeSelector, and pods with a preferred node affinity. It is
written to a YAML file, then timed as ``gpu-lab run FILE`` spends it: read the
file, apply (parse, validate, create), schedule (the loop, with the default
profile and explanations recorded, as every user runs), build the pods table.
The headline is their sum; the loop's pods/s and the peak resident memory of
the process are reported beside it.

``--scaling`` runs the same shape at two sizes in one process and prints each
step's growth: a step that grows more than 1.5 times the pods' factor (15x for
10x the pods) fails the run (the total always; a step where it is at least a tenth
of the large run's total, below which its growth is noise). A ratio taken within one run is what a shared
machine's drift can neither hide nor fake.
"""

from __future__ import annotations

import gc
import json
import platform
import random
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from . import connect
from .backends.local.session import LocalSession
from .backends.sim import SimSession
from .model.documents import load_documents

GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def node_pools(nodes: int) -> list[dict[str, Any]]:
    """Split ``nodes`` over five pools in fixed proportions."""
    shares = [("h100", "H100-80GB", 8, "192", "2048Gi", 0.2, True),
              ("a100", "A100-80GB", 8, "128", "1024Gi", 0.2, False),
              ("l4", "L4", 4, "48", "192Gi", 0.25, False),
              ("t4", "T4", 1, "16", "64Gi", 0.15, False),
              ("cpu", None, 0, "64", "256Gi", 0.2, False)]
    out, left = [], nodes
    for k, (name, model, gpus, cpu, mem, share, tainted) in enumerate(shares):
        count = left if k == len(shares) - 1 else int(round(nodes * share))
        left -= count
        spec: dict[str, Any] = {"count": count, "cpu": cpu, "memory": mem}
        if model:
            spec["gpu"] = {"model": model, "count": gpus}
        if tainted:
            spec["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
        out.append({"apiVersion": "gpulab.dev/v1alpha1", "kind": "NodePool",
                    "metadata": {"name": name}, "spec": spec})
    return out


def _pod(name: str, cpu: str, mem: str, gpus: int = 0, **spec: Any) -> dict[str, Any]:
    res: dict[str, Any] = {"requests": {"cpu": cpu, "memory": mem}}
    if gpus:
        res["limits"] = {"nvidia.com/gpu": gpus}
    body = {"containers": [{"name": "main", "image": "registry.example/app:1", "resources": res}]}
    body.update(spec)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name.rsplit("-", 1)[0]}},
            "spec": body}


def workload(pods: int, seed: int = 0) -> list[dict[str, Any]]:
    """About 88% of the pool's GPUs are asked for, so most pods fit and some wait."""
    rng = random.Random(seed)
    out = []
    for i in range(pods):
        kind = rng.random()
        if kind < 0.08:  # whole-GPU training, tolerating the GPU taint
            g = rng.choice([1, 1, 2, 4, 8])
            out.append(_pod(f"train-{i}", "8", "64Gi", g, tolerations=[GPU_TOLERATION]))
        elif kind < 0.13:  # inference pinned to a GPU product
            product = rng.choice(["NVIDIA-L4", "Tesla-T4"])
            out.append(_pod(f"infer-{i}", "4", "16Gi", 1, nodeSelector={"nvidia.com/gpu.product": product}))
        elif kind < 0.18:  # fine-tuning that prefers Ampere
            aff = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
                {"weight": 50, "preference": {"matchExpressions": [
                    {"key": "nvidia.com/gpu.family", "operator": "In", "values": ["ampere"]}]}}]}}
            out.append(_pod(f"ft-{i}", "4", "32Gi", rng.choice([1, 2]), affinity=aff))
        elif kind < 0.60:
            out.append(_pod(f"web-{i}", rng.choice(["250m", "500m", "1"]), rng.choice(["256Mi", "1Gi"])))
        else:  # batch pods that tolerate the GPU taint but need no GPU
            out.append(_pod(f"batch-{i}", "2", "4Gi", tolerations=[GPU_TOLERATION]))
    return out


def peak_rss_mb() -> float:
    kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return kb / 1024 if sys.platform != "darwin" else kb / 2**20


def reference_seconds() -> float:
    """How fast this machine runs plain Python right now: the best of three runs of a
    fixed one-million-step loop. A shared machine's speed drifts (by a third on the
    project's machine within an hour); this says in which state a figure was taken."""
    best = float("inf")
    for _ in range(3):
        t, x = time.perf_counter(), 0
        for i in range(1_000_000):
            x += i
        best = min(best, time.perf_counter() - t)
    return round(best, 4)


STEPS = ("read", "apply", "schedule", "table")


def run_bench(nodes: int = 1000, pods: int = 10000, seed: int = 0, repeat: int = 3) -> dict[str, Any]:
    """``repeat`` runs on fresh labs; the figures are the median run's by end-to-end time (a
    shared machine's speed drifts by several percent from one second to the next)."""
    reference = reference_seconds()
    runs = []
    with tempfile.TemporaryDirectory(prefix="gpu-lab-bench-") as d:
        path = write_scenario(Path(d) / "bench.yaml", nodes, pods, seed)
        for _ in range(max(1, repeat)):
            runs.append(_one_run(path, nodes, pods, seed))
            gc.collect()  # the last lab's objects, before the next one is timed
    if len({(r["bound"], r["placements"]) for r in runs}) != 1:
        raise RuntimeError("bench: runs with the same seed placed pods differently")
    out = sorted(runs, key=lambda r: r["total_seconds"])[len(runs) // 2]
    del out["placements"]
    out["repeat"] = len(runs)
    out["runs_total_seconds"] = [r["total_seconds"] for r in runs]
    out["reference_loop_seconds"] = reference
    out["peak_rss_mb"] = round(peak_rss_mb(), 1)
    return out


def write_scenario(path: Path, nodes: int, pods: int, seed: int) -> Path:
    """The bench's workload as the multi-document YAML file a user would apply."""
    import yaml

    with open(path, "w") as f:
        yaml.dump_all(node_pools(nodes) + workload(pods, seed), f, Dumper=getattr(yaml, "CSafeDumper", yaml.SafeDumper),
                      sort_keys=False)
    return path


def _one_run(path: Path, nodes: int, pods: int, seed: int) -> dict[str, Any]:

    lab = connect("sim", seed=seed)
    assert isinstance(lab, SimSession)  # timed below through its scheduling loop
    t0 = time.perf_counter()
    docs = load_documents(path)
    t1 = time.perf_counter()
    lab.apply(docs)
    del docs  # as `gpu-lab run` lets go of them: the sim keeps what it parsed
    t2 = time.perf_counter()
    # The scheduling loop alone; schedule() would also build the pods table, timed next.
    lab._sim.run_queue()
    t3 = time.perf_counter()
    df = lab.pods()
    t4 = time.perf_counter()
    bound = int(df["node"].notna().sum())
    steps = dict(zip(STEPS, (t1 - t0, t2 - t1, t3 - t2, t4 - t3)))
    return {
        "nodes": nodes, "pods": pods, "seed": seed, "profile": "default", "record": True,
        "bound": bound, "pending": pods - bound,
        **{f"{k}_seconds": round(v, 3) for k, v in steps.items()},
        "total_seconds": round(t4 - t0, 3),
        "pods_per_second": round(pods / (t3 - t2), 1) if t3 > t2 else None,
        "python": platform.python_version(), "machine": platform.machine(),
        "placements": hash(tuple(df["node"].fillna(""))),
    }


#: a step may grow this many times the pods' factor (15x for 10x the pods) before --scaling fails
GROWTH_LIMIT = 1.5
#: a step is judged where it is at least this share of the large run's total (the total always
#: is): a step of hundredths of a second grows by noise, a garbage-collector pass landing in it
#: say, and one that grows too fast without mattering at this size shows in the total at the next
MATERIAL_SHARE = 0.1


def run_scaling(small: tuple[int, int], large: tuple[int, int], seed: int = 0) -> dict[str, Any]:
    """The same workload shape at (nodes, pods) ``small`` (median of three runs) and ``large``
    (one run) in this process: every step's figures and growth factor, and the steps that grew too much."""
    reference = reference_seconds()
    # the small run is the divisor of every ratio, and its steps last tenths of a second: its
    # median of three, so one slow moment in it cannot fake a growth (the large run: one)
    a, b = run_bench(*small, seed, repeat=3), run_bench(*large, seed, repeat=1)
    pods_factor = b["pods"] / a["pods"]
    growth = {k: round(b[f"{k}_seconds"] / max(a[f"{k}_seconds"], 1e-3), 1) for k in (*STEPS, "total")}
    limit = GROWTH_LIMIT * pods_factor
    return {"small": a, "large": b, "pods_factor": round(pods_factor, 2),
            "nodes_factor": round(b["nodes"] / a["nodes"], 2), "growth": growth, "limit": round(limit, 1),
            "too_fast_growing": [k for k, g in growth.items() if g > limit and (
                k == "total" or b[f"{k}_seconds"] >= MATERIAL_SHARE * b["total_seconds"])],
            "reference_loop_seconds": reference}


def format_scaling(r: dict[str, Any]) -> str:
    a, b = r["small"], r["large"]
    lines = [f"{a['pods']} -> {b['pods']} pods ({r['pods_factor']}x), {a['nodes']} -> {b['nodes']} nodes "
             f"({r['nodes_factor']}x); a step fails above {r['limit']}x (the total, and each step of at "
             f"least {MATERIAL_SHARE:.0%} of it)",
             f"  {'step':<9}{'small (s)':>11}{'large (s)':>11}{'growth':>9}"]
    for k in (*STEPS, "total"):
        flag = "  FAIL" if k in r["too_fast_growing"] else ""
        lines.append(f"  {k:<9}{a[f'{k}_seconds']:>11.3f}{b[f'{k}_seconds']:>11.3f}{r['growth'][k]:>8.1f}x{flag}")
    lines.append(f"  peak RSS: {b['peak_rss_mb']} MB; machine reference (1M-step Python loop): "
                 f"{r['reference_loop_seconds']} s")
    return "\n".join(lines)


def run_compare_local(nodes: int, pods: int, seed: int = 0) -> dict[str, Any]:
    """The same workload on the simulator and on the real kube-scheduler (local backend).

    The real side is timed from the moment the scheduler starts with the whole batch
    queued until every pod is bound or declared unschedulable. Its client rate limits are
    raised (qps 1000, burst 2000) so the API client does not cap binding at 50 pods/s.
    """

    sim = run_bench(nodes, pods, seed, repeat=1)
    lab = LocalSession(name="bench", timeout=600, settle=0.5)
    try:
        lab.reset()
        lab.cluster.set_scheduler_config({
            "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "clientConnection": {"qps": 1000, "burst": 2000}}, progress=None)
        lab._custom_scheduler = True
        lab.apply(node_pools(nodes))
        t0 = time.perf_counter()
        lab.apply(workload(pods, seed))  # the scheduler starts afresh with the batch queued
        df = lab.schedule()
        elapsed = time.perf_counter() - t0 - lab.settle
        bound = int(df["node"].notna().sum())
        lab.reset()
    finally:
        lab.close()
        lab.cluster.down(progress=None)  # the bench's own lab: leave nothing running
    real = {"bound": bound, "pending": pods - bound, "schedule_seconds": round(elapsed, 2),
            "pods_per_second": round(pods / elapsed, 1)}
    return {"nodes": nodes, "pods": pods, "seed": seed, "sim": sim, "local": real,
            "speedup": round(sim["pods_per_second"] / real["pods_per_second"], 1)}


def format_result(r: dict[str, Any]) -> str:
    return (f"{r['pods']} pods on {r['nodes']} nodes: {r['bound']} bound, {r['pending']} pending\n"
            f"  file to table: {r['total_seconds']} s  (median of {r['repeat']}: "
            f"{', '.join(str(x) for x in r['runs_total_seconds'])})\n"
            f"    read the file (YAML): {r['read_seconds']} s\n"
            f"    apply (parse, validate, create): {r['apply_seconds']} s\n"
            f"    schedule (explain kept or replayable): {r['schedule_seconds']} s  ({r['pods_per_second']} pods/s)\n"
            f"    pods table (DataFrame): {r['table_seconds']} s\n"
            f"  machine reference (1M-step Python loop): {r['reference_loop_seconds']} s\n"
            f"  peak RSS: {r['peak_rss_mb']} MB")


def main(nodes: int, pods: int, seed: int, as_json: bool, compare: str | None = None, repeat: int = 3,
         scaling: tuple[tuple[int, int], tuple[int, int]] | None = None) -> int:
    if scaling is not None:
        sc = run_scaling(*scaling, seed=seed)
        print(json.dumps(sc, indent=2) if as_json else format_scaling(sc))
        return 1 if sc["too_fast_growing"] else 0
    if compare == "local":
        r = run_compare_local(nodes, pods, seed)
        if as_json:
            print(json.dumps(r, indent=2))
        else:
            print(f"{pods} pods on {nodes} nodes\n"
                  f"  sim:   {r['sim']['pods_per_second']} pods/s ({r['sim']['bound']} bound)\n"
                  f"  local: {r['local']['pods_per_second']} pods/s ({r['local']['bound']} bound, real kube-scheduler)\n"
                  f"  the simulator is {r['speedup']}x faster")
        return 0
    r = run_bench(nodes, pods, seed, repeat)
    print(json.dumps(r, indent=2) if as_json else format_result(r))
    return 0
