"""``gpu-lab up|down|status|logs|kubeconfig``: the local control plane from a shell.

    gpu-lab up [--name N]                 start (or repair) the lab; prints progress
    gpu-lab down [--name N] [--purge]     stop every process (--purge: delete the lab too)
    gpu-lab status [--name N] [--json]    per component: state, pid, port
    gpu-lab logs COMPONENT [--name N] [--tail N]
    gpu-lab kubeconfig [--name N]         the admin kubeconfig's path

Exit codes: 0 done (``status``: every component healthy), 1 failed (``status``: something
is not healthy), 2 bad usage.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from gpu_lab.errors import GpuLabError

from .cluster import ALIASES, COMPONENTS, LocalCluster

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


AGENT = "nodeagent"


def _agent_pid(lab: LocalCluster) -> int | None:
    """The node agent's pid if it is alive and really ours (cmdline names this lab)."""
    path = lab.pids_dir / f"{AGENT}.pid"
    try:
        pid = int(path.read_text())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except (OSError, ValueError):
        return None
    return pid if "nodeagent" in cmdline and str(lab.dir) in cmdline else None


def stop_agent(lab: LocalCluster) -> bool:
    """SIGTERM the lab's node agent (its plugin processes exit with it); True if one ran."""
    pid = _agent_pid(lab)
    if pid is None:
        return False
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and _agent_pid(lab) == pid:
        time.sleep(0.1)
    if _agent_pid(lab) == pid:
        os.kill(pid, signal.SIGKILL)
    (lab.pids_dir / f"{AGENT}.pid").unlink(missing_ok=True)
    return True


def start_agent(lab: LocalCluster, scenario: str, progress=_progress, timeout: float = 60) -> None:
    """Run the node agent for a scenario's nodes as a process that outlives this command,
    then create the scenario's other objects through the API server."""
    from ...model.scenario import load_documents

    stop_agent(lab)
    log = lab.logs_dir / f"{AGENT}.log"
    lab.pids_dir.mkdir(parents=True, exist_ok=True)
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "gpu_lab.backends.local.nodeagent", "--kubeconfig", str(lab.kubeconfig()),
             "--scenario", str(Path(scenario).absolute()), "--work-dir", str(lab.dir / "nodes")],
            stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    (lab.pids_dir / f"{AGENT}.pid").write_text(str(proc.pid))
    deadline = time.monotonic() + timeout
    while "node(s) ready" not in log.read_text():
        if proc.poll() is not None or time.monotonic() > deadline:
            tail = log.read_text().strip().splitlines()[-1:] or ["no output"]
            raise GpuLabError(f"node agent did not start: {tail[0]} (log: {log})")
        time.sleep(0.2)
    progress(log.read_text().strip().splitlines()[-1])
    others = [d for d in load_documents(scenario) if d.get("kind") not in ("Node", "NodePool")]
    if others:
        from .session import LocalSession

        LocalSession(lab.name, lab.dir.parent.parent).apply(others)
        progress(f"applied {len(others)} object(s) from {scenario}")


def cmd_up(args) -> int:
    if getattr(args, "backend", "local") == "kind":
        if not args.scenario:
            raise GpuLabError("gpu-lab up --backend kind needs --scenario FILE (the nodes to create)")
        _kind(args).up(args.scenario, progress=None if args.quiet else _progress)
        return 0
    lab = _lab(args)
    try:
        lab.up(progress=None if args.quiet else _progress, timeout=args.timeout)
        if args.scenario:
            start_agent(lab, args.scenario, progress=(lambda _m: None) if args.quiet else _progress)
    except KeyboardInterrupt:
        print(
            f"interrupted; what already started keeps running (`gpu-lab down --name {lab.name}`)",
            file=sys.stderr,
        )
        return 130
    return 0


def cmd_down(args) -> int:
    if getattr(args, "backend", "local") == "kind":
        _kind(args).down(progress=_progress, purge=args.purge)
        return 0
    lab = _lab(args)
    if stop_agent(lab):
        _progress("node agent stopped")
    lab.down(progress=_progress, purge=args.purge)
    return 0


def cmd_status(args) -> int:
    lab = _lab(args)
    st = lab.status()
    healthy = all(s.state == "healthy" for s in st.values())
    if args.json:
        doc = {
            "name": lab.name,
            "dir": str(lab.dir),
            "kubeconfig": str(lab.kubeconfig()),
            "healthy": healthy,
            "components": {c: s.to_dict() for c, s in st.items()},
        }
        print(json.dumps(doc, indent=2))
        return 0 if healthy else 1
    print(f"lab {lab.name!r} ({lab.dir})")
    print(f"{'COMPONENT':<25} {'STATE':<10} {'PID':>8} {'PORT':>6}")
    for c, s in st.items():
        pid = str(s.pid) if s.pid else "-"
        port = str(s.port) if s.port else "-"
        print(f"{c:<25} {s.state:<10} {pid:>8} {port:>6}")
    for c, s in st.items():
        if s.detail:
            print(f"{c}: {s.detail}")
    if any(s.state != "stopped" for s in st.values()):
        print(f"kubeconfig: {lab.kubeconfig()}")
    return 0 if healthy else 1


def cmd_logs(args) -> int:
    lab = _lab(args)
    text = lab.logs(args.component, tail=None if args.tail < 0 else args.tail)
    if not text:
        print(f"no log for {args.component} in {lab.logs_dir}", file=sys.stderr)
        return 1
    print(text)
    return 0


def cmd_kubeconfig(args) -> int:
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
        choices=[*COMPONENTS, *ALIASES],
        metavar="COMPONENT",
        help=", ".join(COMPONENTS),
    )
    logs.add_argument("--tail", type=int, default=50, help="lines (default 50; -1: all)")
    logs.set_defaults(func=cmd_logs)

    kcfg = named(sub.add_parser("kubeconfig", help="print the path of the admin kubeconfig"))
    kcfg.set_defaults(func=cmd_kubeconfig)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except GpuLabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
