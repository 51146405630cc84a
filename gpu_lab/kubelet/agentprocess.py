"""The node agent as a process of its own (``gpu-lab up --scenario FILE``), and what any
node agent of a lab publishes about itself.

``gpu-lab up --scenario FILE`` runs ``python -m gpu_lab.kubelet.agent`` in its
own session, so it outlives the command; its pid is ``<lab>/pids/nodeagent.pid``, its log
``<lab>/logs/nodeagent.log`` and the scenario it plays ``<lab>/nodeagent.json``, so that a
later ``gpu-lab up`` can start it again (after ``down``, a crash or a hang) and ``reset()``
or ``down --purge`` can forget it. A node agent running inside a notebook kernel (a
``connect("local")`` session) has no pid file, but every agent keeps a state file in
``<lab>/nodes/agents/`` fresh (see :mod:`gpu_lab.kubelet.agentstate`), which ``status`` reads.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .. import processes as procs
from ..errors import GpuLabError, LocalClusterError
from .agentstate import agent_state_files

AGENT = "nodeagent"
AGENT_MODULE = "gpu_lab.kubelet.agent"
#: how the agent's command line reads: this module, or the one an older gpu-lab started
#: (a lab left running across an upgrade is still found, stopped and restarted)
AGENT_MODULES = (AGENT_MODULE, "gpu_lab.backends.local.nodeagent")
STOP_TIMEOUT_S = 10.0
#: a state file older than this (seconds) means its agent stopped answering
STALE_S = 5.0


def quiet_grpc_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """``env`` (default: ours) with gRPC C-core's INFO chatter off, unless the user chose a
    verbosity: ``GRPC_VERBOSITY`` set by the user wins, ``GRPC_TRACE`` is left as given."""
    env = dict(os.environ if env is None else env)
    env.setdefault("GRPC_VERBOSITY", "ERROR")
    return env


def pid_path(lab) -> Path:
    return lab.pids_dir / f"{AGENT}.pid"


def record_path(lab) -> Path:
    return lab.dir / f"{AGENT}.json"


def log_path(lab) -> Path:
    return lab.logs_dir / f"{AGENT}.log"


def work_dir(lab) -> Path:
    return lab.dir / "nodes"


def recorded_scenario(lab) -> str | None:
    """The scenario ``gpu-lab up --scenario`` last started the agent with, if any."""
    try:
        doc = json.loads(record_path(lab).read_text())
    except (OSError, ValueError):
        return None
    return doc.get("scenario") if isinstance(doc, dict) else None


def recorded_pid(lab) -> int | None:
    """The pid in ``<lab>/pids/nodeagent.pid`` (alive or not)."""
    try:
        return int(pid_path(lab).read_text())
    except (OSError, ValueError):
        return None


def agent_pid(lab) -> int | None:
    """The pid of the lab's node-agent process if it is alive and really ours."""
    pid = recorded_pid(lab)
    if pid is None:
        return None
    argv = procs.cmdline(pid)
    if not argv:
        return None
    text = " ".join(argv)
    ours = any(m in text for m in AGENT_MODULES) and str(lab.dir) in text
    return pid if ours else None


def stop(lab, forget: bool = False) -> bool:
    """Stop the lab's node-agent process (its plugin processes exit with it); True if one
    ran. ``forget``: a later ``up`` does not start it again."""
    pid = agent_pid(lab)
    if forget:
        record_path(lab).unlink(missing_ok=True)
    if pid is None:
        pid_path(lab).unlink(missing_ok=True)
        return False
    procs.resume(pid)  # a stopped (SIGSTOP) agent acts on SIGTERM only once resumed
    os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while time.monotonic() < deadline and agent_pid(lab) == pid and procs.alive(pid):
        time.sleep(0.05)
    if agent_pid(lab) == pid and procs.alive(pid):
        os.kill(pid, signal.SIGKILL)
        procs.wait_gone(pid, None, 5.0)
    procs.reap()
    pid_path(lab).unlink(missing_ok=True)
    for f in agent_states(lab):  # its state file, if SIGKILL left it
        if f.get("pid") == pid:
            Path(f["path"]).unlink(missing_ok=True)
    return True


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    if not lines:
        return "no output"
    errors = [ln for ln in lines if ln.startswith("error: ")]
    line = errors[-1] if errors else lines[-1]
    return line.removeprefix("error: ")


def start(lab, scenario: str | Path, timeout: float = 60.0,
          progress: Callable[[str], object] | None = None) -> str:
    """(Re)start the node agent for ``scenario``'s nodes; return its "ready" line."""
    from .agent import nodes_of  # start-up: the lab's CLI loads the agent's model only to start one

    scenario = str(Path(scenario).absolute())
    stop(lab)
    log = log_path(lab)
    lab.pids_dir.mkdir(parents=True, exist_ok=True)
    log.parent.mkdir(parents=True, exist_ok=True)
    if not nodes_of(scenario):  # one clear line, before any process starts
        raise GpuLabError(f"{scenario}: no Nodes or NodePools for the node agent to run")
    env = quiet_grpc_env()
    root = str(Path(__file__).resolve().parents[2])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    with open(log, "w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", AGENT_MODULE,
             "--kubeconfig", str(lab.kubeconfig()), "--scenario", scenario,
             "--work-dir", str(work_dir(lab))],
            stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True, env=env)
    procs._CHILDREN[proc.pid] = proc  # reaped by procs.reap(): no zombie
    pid_path(lab).write_text(f"{proc.pid}\n")
    record_path(lab).write_text(json.dumps({"scenario": scenario}) + "\n")
    deadline = time.monotonic() + timeout
    while True:
        text = log.read_text(errors="replace")
        ready = [ln for ln in text.splitlines() if "node(s) ready" in ln]
        if ready:
            line = ready[-1].strip()
            if progress:
                progress(line)
            return line
        if proc.poll() is not None or time.monotonic() > deadline:
            if proc.poll() is None:
                stop(lab)
            else:
                pid_path(lab).unlink(missing_ok=True)
            why = "did not become ready in time" if proc.returncode is None else "stopped"
            raise LocalClusterError(
                f"the node agent {why}: {_last_line(text)} (see `gpu-lab logs nodeagent"
                f"{'' if lab.name == 'default' else ' --name ' + lab.name}`)"
            )
        time.sleep(0.1)


def agent_states(lab) -> list[dict[str, Any]]:
    """The state files of the lab's node agents: each one's document plus ``path``."""
    out = []
    for f in agent_state_files(work_dir(lab)):
        try:
            doc = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict) and isinstance(doc.get("pid"), int):
            doc["path"] = str(f)
            out.append(doc)
    return out


def after_resume(doc: dict[str, Any], since: float, timeout: float = STALE_S) -> dict[str, Any]:
    """``doc`` read again once its agent has written after ``since`` (wall time of a
    SIGCONT): the heartbeat read before it is from before the agent was stopped, and would
    call a resumed agent unhealthy. The last document read when ``timeout`` passes."""
    deadline = time.monotonic() + timeout
    while float(doc.get("heartbeat") or 0) < since and time.monotonic() < deadline:
        time.sleep(0.1)
        try:
            new = json.loads(Path(doc["path"]).read_text())
        except (OSError, ValueError):
            continue
        if isinstance(new, dict) and new.get("pid") == doc["pid"]:
            doc = {**new, "path": doc["path"]}
    return doc


def assess(doc: dict[str, Any], now: float | None = None) -> tuple[str, str]:
    """(state, detail) of one agent from its state file: ``healthy``, ``starting``,
    ``hung`` (stopped by a signal), ``unhealthy`` (no heartbeat) or ``stopped``."""
    pid = doc["pid"]
    if not procs.alive(pid, doc.get("start_time")):
        return "stopped", f"pid {pid} is gone"
    if procs.is_frozen(pid):
        return "hung", f"pid {pid} is stopped (SIGSTOP)"
    age = (time.time() if now is None else now) - float(doc.get("heartbeat") or 0)
    if not doc.get("ready"):
        return "starting", ""
    if age > STALE_S:
        return "unhealthy", f"no heartbeat for {age:.0f} s"
    return "healthy", ""


def assess_plugin(node: dict[str, Any], agent_state: str) -> tuple[str, str]:
    """(state, detail) of one device plugin from its agent's state file."""
    pid = node.get("plugin_pid")
    if agent_state in ("stopped",) or not pid or not procs.alive(pid):
        return "stopped", "the plugin process is not running"
    if procs.is_frozen(pid):
        return "hung", f"pid {pid} is stopped (SIGSTOP)"
    if not node.get("serving"):
        return "unhealthy", "not registered with the kubelet, or no healthy device"
    return "healthy", ""
