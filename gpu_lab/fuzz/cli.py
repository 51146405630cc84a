"""``gpu-lab fuzz``: random scenarios on the sim and on a private local lab, compared.

    gpu-lab fuzz --seeds 200 [--start 0] [--json]   # agree/disagree per seed, then the rate
    gpu-lab fuzz --seed 123                          # replay one seed
    gpu-lab fuzz --seed 123 --show                   # print its scenario (no control plane)
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

LAB = "fuzz"


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpu-lab fuzz", description=__doc__.split("\n\n")[0])
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--seeds", type=int, help="how many seeds to run")
    which.add_argument("--seed", type=int, help="run (or --show) this one seed")
    p.add_argument("--start", type=int, default=0, help="first seed of --seeds (default 0)")
    p.add_argument("--json", action="store_true", help="one JSON document: per seed, then the rate")
    p.add_argument("--show", action="store_true", help="print the scenario of --seed and stop")
    p.add_argument("--lab", default=LAB, help=f"name of the private local lab (default {LAB})")
    p.add_argument("--root", type=Path, help="where that lab lives (default: gpu-lab's labs folder)")
    p.add_argument("--timeout", type=float, default=45,
                   help="seconds to wait for the real cluster at each step (default 45)")
    p.add_argument("--keep", action="store_true", help="leave the lab running afterwards")
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    from .compare import known_differences, run_seed, scenario_text

    if args.show:
        if args.seed is None:
            print("error: --show needs --seed", file=sys.stderr)
            return 2
        print(scenario_text(args.seed), end="")
        return 0
    import gpu_lab

    seeds = [args.seed] if args.seed is not None else list(range(args.start, args.start + args.seeds))
    known = known_differences()
    from ..backends.local.session import LocalSession

    lab = gpu_lab.connect("local", name=args.lab, root=args.root, timeout=args.timeout)
    assert isinstance(lab, LocalSession)  # what connect("local") makes; its cluster is torn down below
    results = []
    try:
        for seed in seeds:
            r = run_seed(seed, lab, known)
            results.append(r)
            if not args.json:
                _print(r)
    finally:
        lab.close()
        if not args.keep:
            lab.cluster.down(progress=None, purge=True)
    agreeing = sum(r.agrees for r in results)
    rate = agreeing / len(results)
    if args.json:
        print(json.dumps({"seeds": [r.to_dict() for r in results], "agree": agreeing,
                          "total": len(results), "rate": round(rate, 4)}, indent=1))
    else:
        print(f"{agreeing}/{len(results)} seeds agree ({rate:.1%}); "
              f"replay one with: gpu-lab fuzz --seed SEED")
    return 0 if agreeing == len(results) else 1


def _print(r) -> None:
    verdict = "agree" if r.agrees else ("error" if r.error else "DISAGREE")
    excused = f" ({len(r.excused)} known: {', '.join(sorted({k for _, k in r.excused}))})" if r.excused else ""
    print(f"seed {r.seed}: {verdict}{excused} [{r.seconds:.0f} s]", flush=True)
    for d in ([r.error] if r.error else []) + r.differences:
        print("  " + d.replace("\n", "\n  "), flush=True)
