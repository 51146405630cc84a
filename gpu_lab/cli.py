"""The ``gpu-lab`` command: parse arguments, call the package, print.

Exit codes: 0 ran (pending pods are a result, not a failure), 2 bad input
(one line ``error: ...``), 1 for a failed check (used by subcommands that check).
"""

from __future__ import annotations

import argparse
import json
import sys

from .errors import GpuLabError


def _session(args, record: bool | str = True):
    """The scenario applied and scheduled; on the sim ``record`` says which explanations to
    keep (a run shows none, an explain one pod's)."""
    from . import connect

    options: dict = {"record": record} if args.backend == "sim" else {}
    if getattr(args, "name", None) is not None:
        if args.backend not in ("local", "kind"):
            raise GpuLabError(f'--name names a lab of the "local" or "kind" backend, not of "{args.backend}"')
        options["name"] = args.name
    if args.backend == "kind":
        options.setdefault("name", "gpu-lab")
        options["progress"] = lambda m: print(m, file=sys.stderr, flush=True)
    lab = connect(args.backend, seed=args.seed, deterministic=args.deterministic, **options)
    lab.reset()  # a run starts from an empty cluster, whichever backend serves it
    lab.apply(args.scenario)
    lab.schedule()
    return lab


def _finish(lab) -> None:
    if lab.backend != "sim":  # the sim holds nothing outside this process, which ends now
        lab.reset()  # leave nothing behind: on local the node agent lives in this process
    lab.close()


def _table(df, columns) -> str:
    if df.empty:
        return "(none)"
    return df[columns].to_string(index=False)


def cmd_run(args) -> int:
    lab = _session(args, record=False)
    try:
        return _print_run(lab, args)
    finally:
        _finish(lab)


def _print_run(lab, args) -> int:
    if args.json:
        print(json.dumps(lab.to_dict(), indent=2, default=str))
        return 0
    from .terminal import run_text

    print(run_text(lab.pods(), wide=args.wide))
    return 0


def cmd_explain(args) -> int:
    lab = _session(args, record=args.pod)
    try:
        exp = lab.explain(args.pod)
        if args.json:
            print(json.dumps(exp.to_dict(), indent=2, default=str))
        else:
            from .terminal import explain_text

            print(explain_text(exp, wide=args.wide))
    finally:
        _finish(lab)
    return 0


def cmd_simulate(args) -> int:
    from .simulation import simulate

    result = simulate(args.scenario, until=args.until, backend=args.backend, seed=args.seed)
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, default=str))
        return 0
    print(result)
    if not result.jobs.empty:
        jobs = result.jobs.copy()
        for col in ("admitted_at", "started_at", "finished_at"):
            jobs[col] = jobs[col].map(lambda v: "-" if v != v else f"{v:g}")
        print(_table(jobs, ["namespace", "name", "state", "gpus", "admitted_at", "started_at", "finished_at"]))
    return 0


def cmd_bench(args) -> int:
    if args.trace:
        from .benchtrace import format_trace, run_trace

        if args.days < 1:
            print(f"error: --days must be at least 1 (got {args.days})", file=sys.stderr)
            return 2
        r = run_trace(args.nodes or 200, args.jobs, args.seed, args.days)
        print(json.dumps(r, indent=2) if args.json else format_trace(r))
        return 0
    from .bench import main

    scaling = None
    if args.scaling is not None:
        try:
            sizes = [[int(x) for x in size.lower().split("x")] for size in args.scaling.split(",")]
            ok = len(sizes) == 2 and all(len(size) == 2 and min(size) > 0 for size in sizes)
        except ValueError:
            ok = False
        if ok:
            (n1, p1), (n2, p2) = sizes
            scaling = ((n1, p1), (n2, p2))
        else:
            print(f"error: --scaling wants two NODESxPODS sizes, e.g. 1000x2000,1000x20000 (got {args.scaling!r})",
                  file=sys.stderr)
            return 2
    return main(args.nodes or 1000, args.pods, args.seed, args.json, args.compare, args.repeat, scaling)


def cmd_controlplane(args) -> int:
    from .backends.local.buildcli import main

    rest = list(args.rest)
    if not rest or rest[0] != "build":
        print("usage: gpu-lab controlplane build [--components NAMES] [--force] ...", file=sys.stderr)
        return 2
    return main(rest[1:])


def cmd_device_plugin(args) -> int:
    from .deviceplugin.plugin import main

    return main(args.rest)


def cmd_mig(args) -> int:
    from .gpus.mig_cli import main

    return main(args.rest)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpu-lab", description="Kubernetes GPU scheduling, for real.")
    sub = p.add_subparsers(dest="command", required=True)

    def common(sp):
        sp.add_argument("scenario", help="multi-document YAML of Kubernetes objects and NodePools")
        sp.add_argument("--backend", default="sim", help="sim (default), local, kind, kubeconfig")
        sp.add_argument("--seed", type=int, default=0, help="seed for the random tie-break (default 0)")
        sp.add_argument("--deterministic", action="store_true", help="break ties by lowest node name")
        sp.add_argument("--json", action="store_true", help="machine-readable output")
        sp.add_argument("--wide", action="store_true",
                        help="every column and whole device IDs (default: fit 100 columns)")
        sp.add_argument("--name", help="--backend local or kind: the lab to use (default: default; kind: gpu-lab)")

    run = sub.add_parser("run", help="schedule a scenario and print where every pod landed")
    common(run)
    run.set_defaults(func=cmd_run)

    ex = sub.add_parser("explain", help="why a pod landed where it did, or why it is pending")
    common(ex)
    ex.add_argument("pod", help="NAMESPACE/POD")
    ex.set_defaults(func=cmd_explain)

    sim = sub.add_parser("simulate", help="run a scenario on the simulated clock: jobs, GPU-hours, cost")
    sim.add_argument("scenario", help="multi-document YAML (gpulab.dev/submit-at, gpulab.dev/duration)")
    sim.add_argument("--until", default="24h", help="how long to run the clock (Go duration, default 24h)")
    sim.add_argument("--backend", default="sim", help="sim (the only backend with a simulated clock)")
    sim.add_argument("--seed", type=int, default=0, help="seed for the random tie-break (default 0)")
    sim.add_argument("--json", action="store_true", help="jobs, metrics and the series as JSON")
    sim.set_defaults(func=cmd_simulate)

    b = sub.add_parser("bench", help="the embedded scheduler from scenario file to table, step by step")
    b.add_argument("--nodes", type=int, default=None, help="nodes (default 1000; with --trace: at most, autoscaled, default 200)")
    b.add_argument("--pods", type=int, default=10000)
    b.add_argument("--seed", type=int, default=0)
    b.add_argument("--json", action="store_true")
    b.add_argument("--repeat", type=int, default=3, help="runs on fresh labs; the median is reported")
    b.add_argument("--compare", choices=["local"], help="also run it on the real kube-scheduler")
    b.add_argument("--scaling", nargs="?", const="1000x10000,5000x100000", metavar="SMALL,LARGE",
                   help="the same shape at two NODESxPODS sizes (default 1000x10000,5000x100000): each "
                        "step's growth; fails when one grows more than 1.5x the pods' factor")
    b.add_argument("--trace", action="store_true",
                   help="a day of Jobs on autoscaled GPU pools through gpu_lab.simulate, timed")
    b.add_argument("--jobs", type=int, default=2000, help="--trace: Jobs over the days (default 2000)")
    b.add_argument("--days", type=int, default=1, help="--trace: days the Jobs are submitted over (default 1; "
                   "a week: --days 7 --jobs 10000 --nodes 500)")
    b.set_defaults(func=cmd_bench)

    dp = sub.add_parser("device-plugin", help="run the fake NVIDIA device plugin (kubelet gRPC API v1beta1)",
                        add_help=False)
    dp.add_argument("rest", nargs=argparse.REMAINDER,
                    help="--model H100-80GB --gpus 8 --plugin-dir DIR [--config FILE] [--node-name N]")
    dp.set_defaults(func=cmd_device_plugin)

    mig = sub.add_parser("mig", help="MIG layouts: validate, layouts, plan, configs", add_help=False)
    mig.add_argument("rest", nargs=argparse.REMAINDER,
                     help="validate --gpu MODEL PROFILE... | layouts --gpu MODEL | plan SERVICES.csv --gpu MODEL")
    mig.set_defaults(func=cmd_mig)

    for name, text in (("up", "start (or repair) the local control plane"), ("down", "stop it"),
                       ("status", "health of each component"), ("logs", "a component's log"),
                       ("kubeconfig", "path of the lab's admin kubeconfig")):
        sub.add_parser(name, help=text, add_help=False)

    sub.add_parser("probe", help="read-only NVML discovery of this machine's GPUs", add_help=False)
    sub.add_parser("inventory", help="read-only GPU inventory of an existing cluster (kubeconfig)",
                   add_help=False)
    sub.add_parser("labs", help="generate labs/ from solutions/, or check that they agree", add_help=False)
    sub.add_parser("drill", help="the interview question bank (export --json)", add_help=False)
    sub.add_parser("doctor", help="what this machine has, what is missing, and the fix", add_help=False)
    sub.add_parser("edition", help="render the lessons to static HTML (--out DIR)", add_help=False)
    sub.add_parser("workshop", help="participant namespaces, GPU quotas, RBAC, kubeconfigs",
                   add_help=False)
    sub.add_parser("fuzz", help="random scenarios on the sim and the real scheduler, compared",
                   add_help=False)

    cp = sub.add_parser("controlplane", help="build the real Kubernetes components from source")
    cp.add_argument("rest", nargs=argparse.REMAINDER, help="build [--components ...] [--force]")
    cp.set_defaults(func=cmd_controlplane)
    return p


def cmd_local(args) -> int:
    from .backends.local.cli import main

    return main(args.rest)


def cmd_probe(args) -> int:
    from .probe import main

    return main(args.rest)


def cmd_inventory(args) -> int:
    from .backends.kubeconfig.inventory import main

    return main(args.rest)


def cmd_labs(args) -> int:
    from .curriculum.labs import main

    return main(args.rest)


def cmd_drill(args) -> int:
    from .curriculum.drill.cli import main

    return main(args.rest)


def cmd_doctor(args) -> int:
    from .doctor import main

    return main(args.rest)


def cmd_edition(args) -> int:
    from .edition import main

    return main(args.rest)


def cmd_workshop(args) -> int:
    from .workshop import main

    return main(args.rest)


def cmd_kind(args) -> int:
    from .backends.kind.cli import main

    return main(args.rest)


def cmd_fuzz(args) -> int:
    from .fuzz.cli import main

    return main(args.rest)


# Subcommands whose own parser takes every argument after the name (``--help`` included).
_PASSTHROUGH = {"device-plugin": cmd_device_plugin, "controlplane": cmd_controlplane, "mig": cmd_mig,
                "doctor": cmd_doctor, "edition": cmd_edition, "workshop": cmd_workshop,
                "probe": cmd_probe, "inventory": cmd_inventory,
                "labs": cmd_labs, "drill": cmd_drill, "fuzz": cmd_fuzz, "kind": cmd_kind}
_LOCAL = ("up", "down", "status", "logs", "kubeconfig")


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in _PASSTHROUGH:
        args = argparse.Namespace(rest=argv[1:], func=_PASSTHROUGH[argv[0]])
    elif argv and argv[0] in _LOCAL:
        args = argparse.Namespace(rest=argv, func=cmd_local)
    else:
        args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except BrokenPipeError:  # `gpu-lab run ... | head`: the reader has gone, end quietly
        _quiet_stdout()
        return 141  # as a Unix tool killed by SIGPIPE
    except GpuLabError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except FileNotFoundError as e:
        print(f"error: {e.filename or e}: no such file", file=sys.stderr)
        return 2


def _quiet_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush raises nothing."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # a stdout without a descriptor (a test's capture)
        pass


if __name__ == "__main__":
    sys.exit(main())
