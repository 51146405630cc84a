"""``gpu-lab up|down|status|logs|kubeconfig``: the local control plane from a shell.

    gpu-lab up [--name N]                 start (or repair) the lab; prints progress
    gpu-lab up --with kueue [--kueue-pods-ready-timeout 5m]
                                          also run real Kueue (built first if missing)
    gpu-lab down [--name N] [--purge]     stop every process (--purge: delete the lab too)
    gpu-lab status [--name N] [--json]    per component: state, pid, port
    gpu-lab logs COMPONENT [--name N] [--tail N]
    gpu-lab kubeconfig [--name N]         the admin kubeconfig's path

Exit codes: 0 done (``status``: every component healthy), 1 failed (``status``: something
is not healthy), 2 bad usage.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
from pathlib import Path

from gpu_lab.errors import GpuLabError

from ...errors import LocalClusterError
from ...kube import Unreachable
from ...kubelet import agentprocess
from .cluster import LocalCluster
from .components import ALIASES, COMPONENTS, PLUGIN_PREFIX

BACKENDS = ("local", "kind")


def _progress(msg: str) -> None:
    print(msg, flush=True)


def _lab(args) -> LocalCluster:
    if getattr(args, "backend", "local") not in BACKENDS:
        raise GpuLabError(f"backend {args.backend!r} cannot be started by gpu-lab up: use local or kind")
    return LocalCluster(args.name)


def _kind(args):
    from ..kind import KindCluster

    return KindCluster(name=args.name if args.name != "default" else "gpu-lab")


AGENT = agentprocess.AGENT
#: ``gpu-lab up --with kueue`` (see :mod:`.kueue`)
KUEUE = "kueue"
ADDONS = (KUEUE,)


def _name_flag(lab: LocalCluster) -> str:
    return "" if lab.name == "default" else f" --name {lab.name}"


def stop_agent(lab: LocalCluster) -> bool:
    """Stop the lab's node agent (its plugin processes exit with it); True if one ran."""
    return agentprocess.stop(lab)


def start_agent(lab: LocalCluster, scenario: str, progress=_progress, timeout: float = 60) -> None:
    """Run the node agent for a scenario's nodes as a process that outlives this command,
    then create the scenario's other objects through the API server."""
    from ...kube import AlreadyExists
    from ...model.documents import load_documents

    agentprocess.start(lab, scenario, timeout=timeout, progress=progress)
    others = [d for d in load_documents(scenario) if d.get("kind") not in ("Node", "NodePool")]
    if others:
        from .session import LocalSession

        try:
            LocalSession(lab.name, lab.dir.parent.parent).apply(others)
        except AlreadyExists as err:
            raise GpuLabError(
                f"{err}: the lab keeps its objects across `gpu-lab down`; "
                f"`gpu-lab down{_name_flag(lab)} --purge` deletes them, then "
                f"`gpu-lab up{_name_flag(lab)} --scenario {scenario}` starts afresh"
            ) from None
        progress(f"applied {len(others)} object(s) from {scenario}")


def cmd_up(args) -> int:
    if args.scenario:  # bad input is one line (exit 2) before anything starts
        from ...kubelet.agent import nodes_of

        if not nodes_of(args.scenario):
            raise GpuLabError(f"{args.scenario}: no Nodes or NodePools for the node agent to run")
    addons = list(dict.fromkeys(getattr(args, "addons", None) or []))
    kueue_settings = None
    if getattr(args, "kueue_pods_ready_timeout", None) and "kueue" not in addons:
        raise GpuLabError("gpu-lab up --kueue-pods-ready-timeout needs --with kueue")
    if "kueue" in addons:  # bad settings are one line (exit 2) before anything starts
        from .kueue import KueueSettings

        timeout = args.kueue_pods_ready_timeout
        kueue_settings = KueueSettings(pods_ready_timeout=timeout) if timeout else KueueSettings()
    if getattr(args, "backend", "local") == "kind":
        if addons:
            raise GpuLabError("gpu-lab up --with: only on the local backend")
        if not args.scenario:
            raise GpuLabError("gpu-lab up --backend kind needs --scenario FILE (the nodes to create)")
        _kind(args).up(args.scenario, progress=None if args.quiet else _progress)
        return 0
    lab = _lab(args)
    try:
        # with --scenario, the agent is started below (not the one recorded before)
        lab.up(progress=None if args.quiet else _progress, timeout=args.timeout,
               agents=not args.scenario)
        if kueue_settings is not None:
            from . import kueue

            if args.kueue_pods_ready_timeout is None:  # keep what the lab runs Kueue with
                kueue_settings = kueue.settings(lab) or kueue_settings
            kueue.enable(lab, kueue_settings, progress=None if args.quiet else _progress)
        if args.scenario:
            start_agent(lab, args.scenario, progress=(lambda _m: None) if args.quiet else _progress)
    except KeyboardInterrupt:
        print(
            f"interrupted; what already started keeps running (`gpu-lab down{_name_flag(lab)}`)",
            file=sys.stderr,
        )
        return 130
    return 0


def cmd_down(args) -> int:
    if getattr(args, "backend", "local") == "kind":
        _kind(args).down(progress=_progress, purge=args.purge)
        return 0
    _lab(args).down(progress=_progress, purge=args.purge)
    return 0


OK_STATES = ("healthy", "starting")


def cmd_status(args) -> int:
    lab = _lab(args)
    if not lab.exists():
        if args.json:
            print(json.dumps({"name": lab.name, "dir": str(lab.dir), "exists": False,
                              "healthy": False, "components": {}}, indent=2))
        else:
            print(f"lab {lab.name!r} does not exist ({lab.dir}): `gpu-lab up{_name_flag(lab)}` "
                  "creates it")
        return 1
    st = lab.full_status()
    healthy = all(s.state in OK_STATES for s in st.values())
    if args.json:
        doc = {
            "name": lab.name,
            "dir": str(lab.dir),
            "exists": True,
            "kubeconfig": str(lab.kubeconfig()),
            "healthy": healthy,
            "components": {c: s.to_dict() for c, s in st.items()},
        }
        print(json.dumps(doc, indent=2))
        return 0 if healthy else 1
    width = max(25, *(len(c) + 1 for c in st))
    print(f"lab {lab.name!r} ({lab.dir})")
    print(f"{'COMPONENT':<{width}} {'STATE':<10} {'PID':>8} {'PORT':>6}")
    for c, s in st.items():
        pid = str(s.pid) if s.pid else "-"
        port = str(s.port) if s.port else "-"
        print(f"{c:<{width}} {s.state:<10} {pid:>8} {port:>6}")
    if not lab.node_status():
        print(f"{AGENT:<{width}} {'none':<10} {'-':>8} {'-':>6}")
    for c, s in st.items():
        if s.detail:
            print(f"{c}: {s.detail}")
    if any(s.state != "stopped" for s in st.values()):
        print(f"kubeconfig: {lab.kubeconfig()}")
    if not healthy:
        print(f"`gpu-lab up{_name_flag(lab)}` repairs what is stopped or hung")
    return 0 if healthy else 1


def _log_file(lab: LocalCluster, component: str) -> Path:
    if component == KUEUE:
        from . import kueue

        return kueue.log_path(lab)
    if component == AGENT:
        return agentprocess.log_path(lab)
    if component.startswith(PLUGIN_PREFIX):
        node = component[len(PLUGIN_PREFIX):]
        if not node or "/" in node or node.startswith("."):
            raise GpuLabError(f"invalid node name {node!r}")
        return agentprocess.work_dir(lab) / node / "device-plugin.log"
    return lab.log_path(component)  # raises on an unknown name


def cmd_logs(args) -> int:
    lab = _lab(args)
    path = _log_file(lab, args.component)
    if args.component in (AGENT, KUEUE) or args.component.startswith(PLUGIN_PREFIX):
        try:
            lines = path.read_bytes().decode(errors="replace").splitlines()
        except OSError:
            lines = []
        if args.tail >= 0:
            lines = lines[-args.tail:] if args.tail else []
        text = "\n".join(lines)
    else:
        text = lab.logs(args.component, tail=None if args.tail < 0 else args.tail)
    if not text:
        print(f"no log for {args.component} in {path.parent}", file=sys.stderr)
        return 1
    print(text)
    return 0


def cmd_kubeconfig(args) -> int:
    if getattr(args, "backend", "local") == "kind":
        kind = _kind(args)
        path = kind.kubeconfig()
        if not path.exists():
            print(f"error: no kind cluster {kind.name!r} yet: run `gpu-lab up --backend kind "
                  f"--name {kind.name} --scenario FILE`", file=sys.stderr)
            return 1
        print(path)
        return 0
    lab = _lab(args)
    path = lab.kubeconfig()
    if not path.exists():
        print(f"error: lab {lab.name!r} has no kubeconfig yet: run `gpu-lab up`", file=sys.stderr)
        return 1
    print(path)
    return 0


def build_parser(prog: str = "gpu-lab") -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=prog, description="Run a real Kubernetes control plane locally."
    )
    sub = p.add_subparsers(dest="command", required=True)

    def named(sp):
        sp.add_argument("--name", default="default", help="lab name (default: %(default)s)")
        return sp

    up = named(sub.add_parser("up", help="start the local control plane (or repair it)"))
    up.add_argument("--backend", default="local", choices=BACKENDS, help="local (default) or kind (needs Docker)")
    up.add_argument("--scenario", help="nodes (NodePools) to simulate and objects to create")
    up.add_argument("--timeout", type=float, default=120.0, help="seconds to wait (default 120)")
    up.add_argument("-q", "--quiet", action="store_true", help="no progress lines")
    up.add_argument("--with", dest="addons", action="append", choices=ADDONS, default=[],
                    help="also run kueue (sigs.k8s.io/kueue's manager and webhooks); the lab "
                    "keeps running it on later `up`s")
    up.add_argument("--kueue-pods-ready-timeout", metavar="DURATION",
                    help="Kueue's waitForPodsReady.timeout (default: what the lab runs it "
                    "with, else 5m)")
    up.set_defaults(func=cmd_up)

    down = named(sub.add_parser("down", help="stop every process of the lab"))
    down.add_argument("--purge", action="store_true", help="also delete the lab's data and certs")
    down.add_argument("--backend", default="local", choices=BACKENDS, help="local (default) or kind")
    down.set_defaults(func=cmd_down)

    status = named(sub.add_parser("status", help="state, pid and port of each component"))
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.set_defaults(func=cmd_status)

    logs = named(sub.add_parser("logs", help="the last lines of a component's log"))
    logs.add_argument(
        "component",
        metavar="COMPONENT",
        help=", ".join([*COMPONENTS, AGENT, KUEUE, PLUGIN_PREFIX + "NODE"]),
    )
    logs.add_argument("--tail", type=int, default=50, help="lines (default 50; -1: all)")
    logs.set_defaults(func=cmd_logs)

    kcfg = named(sub.add_parser("kubeconfig", help="print the path of the admin kubeconfig"))
    kcfg.add_argument("--backend", default="local", choices=BACKENDS, help="local (default) or kind")
    kcfg.set_defaults(func=cmd_kubeconfig)
    return p


def _known(component: str) -> bool:
    return component in (*COMPONENTS, *ALIASES, AGENT, KUEUE) or component.startswith(PLUGIN_PREFIX)


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "logs" and not _known(args.component):
        parser.error(f"argument COMPONENT: invalid choice: {args.component!r} (choose from "
                     f"{', '.join([*COMPONENTS, *ALIASES, AGENT, KUEUE, PLUGIN_PREFIX + 'NODE'])})")
    try:
        return args.func(args)
    except (LocalClusterError, Unreachable) as exc:  # the lab failed: 1
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except GpuLabError as exc:  # bad input: 2, as `gpu-lab run` answers it
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except FileNotFoundError as exc:
        print(f"error: {exc.filename or exc}: no such file", file=sys.stderr)
        return 2
    except BrokenPipeError:  # `gpu-lab logs ... | head`: the reader has all it wanted
        with contextlib.suppress(OSError):
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        return 0
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
