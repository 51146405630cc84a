"""``gpu-lab mig ...``: check MIG layouts, list them, plan services onto MIG instances.

    gpu-lab mig validate --gpu A100-40GB 3g.20gb 2g.10gb 1g.5gb 1g.5gb
    gpu-lab mig layouts --gpu H100-80GB [--maximal] [--json]
    gpu-lab mig plan services.csv --gpu H100-80GB [--json]
    gpu-lab mig configs --gpu H200-141GB          # NVIDIA's predefined mig-parted configs

Exit codes: 0 done (``validate``: the layout is possible), 1 ``validate`` found
the layout impossible (the reason is printed), 2 bad input: unknown GPU or
profile, a GPU without MIG, a bad CSV (one line ``error: ...`` on stderr).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import sys

from ..errors import GpuLabError, ImpossibleLayout
from .mig import all_layouts, geometry, maximal_layouts, validate_layout
from .migparted import predefined
from .planner import plan, read_services_csv


def _summary(names) -> str:
    counts: dict[str, int] = {}
    for n in names:
        counts[n] = counts.get(n, 0) + 1
    return " + ".join(n if c == 1 else f"{n} x{c}" for n, c in counts.items()) or "nothing"


def cmd_validate(args) -> int:
    geom = geometry(args.gpu)
    for p in args.profiles:
        geom.profile(p)  # unknown profile: exit 2 before any verdict
    try:
        placement = validate_layout(geom.model, args.profiles)
    except ImpossibleLayout as err:
        if args.json:
            print(json.dumps({"valid": False, "model": geom.model, "profiles": list(err.profiles),
                              "reason": err.reason}, indent=2))
        else:
            print(f"impossible: {err.reason}")
        return 1
    if args.json:
        print(json.dumps({"valid": True, **placement.to_dict()}, indent=2))
        return 0
    print(f"valid: {_summary(placement.profiles)} on an {geom.model}")
    print(f"placement: {placement}")
    print(f"memory slices: {placement.diagram()}")
    print(f"uses {placement.compute_slices_used}/7 compute slices, {placement.memory_slices_used}/8 memory slices")
    return 0


def cmd_layouts(args) -> int:
    geom = geometry(args.gpu)
    every = all_layouts(geom.model)
    maximal = {names for names, _ in maximal_layouts(geom.model)}
    rows = [(names, p) for names, p in every if not args.maximal or names in maximal]
    if args.json:
        print(json.dumps([{"profiles": list(names), "maximal": names in maximal, **p.to_dict()}
                          for names, p in rows], indent=2))
        return 0
    print(f"{len(every)} valid MIG layouts on an {geom.model} ({len(maximal)} maximal: nothing more fits)"
          + ("; showing the maximal ones" if args.maximal else ""))
    width = max(len(_summary(names)) for names, _ in rows)
    print(f"{'compute':>7} {'memory':>6}  {'layout':<{width}}  placement")
    for names, p in rows:
        mark = "*" if names in maximal and not args.maximal else " "
        print(f"{p.compute_slices_used:>5}/7 {p.memory_slices_used:>4}/8 {mark}{_summary(names):<{width}}  {p}")
    if not args.maximal:
        print("* maximal")
    return 0


def cmd_plan(args) -> int:
    services = read_services_csv(args.services)
    result = plan(services, args.gpu)
    if args.json:
        out = result.to_dict()
        out["migParted"] = result.mig_configs()
        print(json.dumps(out, indent=2))
    else:
        print(result)
    return 0


def cmd_configs(args) -> int:
    cfg = predefined(args.gpu)
    if args.json:
        print(json.dumps(cfg.to_dict(), indent=2))
    else:
        print(cfg.to_yaml(), end="")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpu-lab mig", description="MIG layouts, their geometry, and a MIG planner")
    sub = p.add_subparsers(dest="command", required=True)

    v = sub.add_parser("validate", help="is this set of MIG instances possible on one GPU? where do they go?")
    v.add_argument("--gpu", required=True, help="GPU model, e.g. A100-40GB, H100-80GB, H200-141GB")
    v.add_argument("profiles", nargs="+", metavar="PROFILE", help="MIG profiles, repeated for several instances")
    v.add_argument("--json", action="store_true")
    v.set_defaults(func=cmd_validate)

    lay = sub.add_parser("layouts", help="every distinct valid multiset of MIG profiles, with a placement each")
    lay.add_argument("--gpu", required=True)
    lay.add_argument("--maximal", action="store_true", help="only layouts to which nothing more can be added")
    lay.add_argument("--json", action="store_true")
    lay.set_defaults(func=cmd_layouts)

    pl = sub.add_parser("plan", help="fewest GPUs whose MIG instances hold every replica of SERVICES.csv")
    pl.add_argument("services", metavar="SERVICES.csv", help="CSV: name,memory_gb,compute_slices,replicas")
    pl.add_argument("--gpu", required=True)
    pl.add_argument("--json", action="store_true")
    pl.set_defaults(func=cmd_plan)

    c = sub.add_parser("configs", help="NVIDIA's predefined mig-parted configs for a GPU model")
    c.add_argument("--gpu", required=True)
    c.add_argument("--json", action="store_true")
    c.set_defaults(func=cmd_configs)
    return p


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    err = io.StringIO()
    try:
        with contextlib.redirect_stderr(err):
            args = parser.parse_args(argv)
    except SystemExit as exit_:
        sys.stderr.write(err.getvalue())
        return int(exit_.code or 0)
    try:
        return args.func(args)
    except GpuLabError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
