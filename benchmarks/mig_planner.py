"""Benchmark: the MIG planner on 50 services (the issue's target: under 1 s on H100s).

    python benchmarks/mig_planner.py [--gpu H100-80GB] [--services 50] [--trials 20] [--seed 0] [--json]

Each trial draws 50 inference services with memory footprints from 3 GB to 70
GB (scaled to the GPU's size), an optional compute need and 1-4 replicas,
then times ``plan`` (the first trial includes the one-off per-model set-up:
layout enumeration and the dual vertices used for lower bounds). It reports
the worst and median time, how often the plan was proven optimal, and the
GPUs saved against one whole GPU per replica. Not a test: timings depend on
the machine.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpu_lab.gpus.mig import geometry  # noqa: E402
from gpu_lab.gpus.planner import Service, plan  # noqa: E402

FOOTPRINTS_80GB = (3, 5, 8, 9, 12, 15, 18, 19, 25, 30, 35, 38, 45, 60, 70)


def services(rng: random.Random, n: int, model: str) -> list[Service]:
    scale = geometry(model).profiles[0].memory_gib / 79.25  # relative to an 80GB part's 7g
    return [Service(f"svc-{i}", round(rng.choice(FOOTPRINTS_80GB) * scale, 1),
                    rng.choice([None, None, None, 1, 2, 3, 4]), rng.randint(1, 4)) for i in range(n)]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpu", default="H100-80GB")
    ap.add_argument("--services", type=int, default=50)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    times, proven, gpus, whole, replicas = [], 0, [], [], []
    for _ in range(args.trials):
        svcs = services(rng, args.services, args.gpu)
        t0 = time.perf_counter()
        result = plan(svcs, args.gpu)
        times.append(time.perf_counter() - t0)
        proven += result.optimal
        gpus.append(result.gpu_count)
        whole.append(result.whole_gpu_count)
        replicas.append(result.replica_count)
    report = {
        "gpu": args.gpu,
        "services": args.services,
        "trials": args.trials,
        "seconds_worst": round(max(times), 4),
        "seconds_first": round(times[0], 4),
        "seconds_median": round(statistics.median(times), 4),
        "proven_optimal": proven,
        "replicas_mean": round(statistics.mean(replicas), 1),
        "gpus_mean": round(statistics.mean(gpus), 1),
        "whole_gpus_mean": round(statistics.mean(whole), 1),
        "target_seconds": 1.0,
    }
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print(f"{args.trials} plans of {args.services} services on {args.gpu}: worst {report['seconds_worst']:.3f} s "
              f"(first, with set-up: {report['seconds_first']:.3f} s), median {report['seconds_median']:.4f} s; "
              f"{proven}/{args.trials} proven optimal; {report['gpus_mean']} GPUs with MIG vs "
              f"{report['whole_gpus_mean']} whole GPUs for {report['replicas_mean']} replicas on average")
    return 0 if max(times) < 1.0 and proven == args.trials else 1


if __name__ == "__main__":
    sys.exit(main())
