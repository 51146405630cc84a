"""``gpu-lab bench --trace``: days of GPU jobs on an autoscaled fleet, on the simulated clock.

The trace: ``jobs`` Jobs submitted at random over ``days`` days (one by default; a busier daytime),
sizes 1-8 GPUs per Job (one GPU per pod, a few multi-pod rendezvous training
Jobs), durations 10 min to 4 h, on H100 and A100 pools that autoscale between
a quarter of ``nodes`` and ``nodes`` in all, with cluster-autoscaler's defaults.
We time ``gpu_lab.simulate`` (apply + the clock) and report what it measured.
"""

from __future__ import annotations

import random
import time
from typing import Any

from .bench import peak_rss_mb, reference_seconds
from .simulation import simulate


def trace(nodes: int = 200, jobs: int = 2000, seed: int = 0, days: int = 1) -> list[dict[str, Any]]:
    rng = random.Random(seed)
    half = nodes // 2
    docs: list[dict[str, Any]] = []
    for name, model in (("h100", "H100-80GB"), ("a100", "A100-80GB")):
        docs.append({"apiVersion": "gpulab.dev/v1alpha1", "kind": "NodePool", "metadata": {"name": name},
                     "spec": {"gpu": {"model": model, "count": 8},
                              "autoscaling": {"minCount": max(1, half // 4), "maxCount": half,
                                              "provisioningDelay": "5m"}}})
    for i in range(jobs):
        hour = rng.choices(range(24), weights=[1] * 8 + [3] * 10 + [1] * 6)[0]
        at = hour * 3600 + rng.randrange(3600) + (86400 * rng.randrange(days) if days > 1 else 0)
        pods = rng.choice([1, 1, 1, 1, 2, 2, 4, 8])
        minutes = rng.randrange(10, 241)
        meta: dict[str, Any] = {"name": f"job-{i:05d}", "annotations": {"gpulab.dev/submit-at": f"{at}s"}}
        if pods > 2:
            meta["annotations"]["gpulab.dev/rendezvous"] = "true"
        template_spec: dict[str, Any] = {
            "restartPolicy": "Never",
            "containers": [{"name": "w", "image": "trainer",
                            "resources": {"limits": {"nvidia.com/gpu": 1}}}]}
        if rng.random() < 0.5:
            template_spec["nodeSelector"] = {"nvidia.com/gpu.product": rng.choice(
                ["NVIDIA-H100-80GB-HBM3", "NVIDIA-A100-SXM4-80GB"])}
        docs.append({"apiVersion": "batch/v1", "kind": "Job", "metadata": meta,
                     "spec": {"parallelism": pods, "completions": pods, "backoffLimit": 100,
                              "template": {"metadata": {"annotations": {
                                  "gpulab.dev/duration": f"{minutes}m",
                                  "cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}},
                                  "spec": template_spec}}})
    return docs


def run_trace(nodes: int = 200, jobs: int = 2000, seed: int = 0, days: int = 1) -> dict[str, Any]:

    docs = trace(nodes, jobs, seed, days)
    start = time.perf_counter()
    result = simulate(docs, until=f"{24 * days}h", seed=seed)
    seconds = time.perf_counter() - start
    m = result.metrics
    return {"benchmark": "trace", "jobs": jobs, "days": days, "max_nodes": nodes, "seed": seed,
            "simulate_seconds": round(seconds, 2), "jobs_complete": m["jobs_complete"],
            "jobs_unfinished": m["jobs_pending"], "gpu_hours_allocated": m["gpu_hours_allocated"],
            "gpu_hours_stranded": m["gpu_hours_stranded"], "node_hours": m["node_hours"],
            "cost_usd": m["cost_usd"], "peak_nodes": int(result.series["nodes"].max()),
            "reference_loop_seconds": reference_seconds(), "peak_rss_mb": peak_rss_mb()}


def format_trace(r: dict[str, Any]) -> str:
    span = f"{24 * r['days']} h"
    return (f"{r['jobs']} jobs over {span} on up to {r['max_nodes']} autoscaled GPU nodes\n"
            f"  simulate: {r['simulate_seconds']} s\n"
            f"  jobs complete: {r['jobs_complete']}, unfinished at {span}: {r['jobs_unfinished']}\n"
            f"  GPU-hours allocated {r['gpu_hours_allocated']}, stranded {r['gpu_hours_stranded']}; "
            f"node-hours {r['node_hours']} (peak {r['peak_nodes']} nodes); ${r['cost_usd']:,.0f}\n"
            f"  machine reference (1M-step Python loop): {r['reference_loop_seconds']} s\n"
            f"  peak RSS: {r['peak_rss_mb']} MB")
