"""Supervision of a lab's components: start them in order, wait until they are healthy,
repair what died, hung or lost its port, and stop them without leaving anything behind.

``up`` on a lab that is partly running starts only what is missing (a killed component,
a stale pid file, a port someone else took meanwhile); ``down`` stops clients first, then
the API server, then etcd. Every step runs under the lab's lock (one command at a time
per lab, across processes).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from gpu_lab.errors import LocalClusterError

from ... import processes as procs
from ...kubelet import agentprocess
from . import flags, kueue, schedulerconfig
from . import ports as portlib
from .certs import ensure_pki
from .components import (
    APISERVER,
    COMPONENTS,
    CONTROLLER_MANAGER,
    DEPENDS_ON,
    ETCD,
    NODEAGENT,
    PLUGIN_PREFIX,
    PORT_KEYS,
    SCHEDULER,
    dependents,
)

if TYPE_CHECKING:
    from .cluster import LocalCluster

Say = Callable[[str], object]

UP_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 10.0
#: a component restarted because what it connects to moved: kube-apiserver's graceful
#: shutdown waits on an etcd that is already gone, so do not wait long for it
RESTART_STOP_TIMEOUT_S = 3.0
BIND_RETRIES = 3
#: a controller-manager that meets a (re)starting kube-apiserver while it builds its
#: controllers gets 403s (RBAC not loaded yet) and exits: start it again, this often
CRASH_RETRIES = 2
SETTLE_S = 0.5
#: a running component that still fails its health check after this long is restarted by
#: ``up`` (a hung process); one stopped by SIGSTOP is resumed at once
HUNG_GRACE_S = 5.0


def fmt_s(seconds: float) -> str:
    return f"{seconds:.1f} s"


# ---------------------------------------------------------------------- up / restart / down


def up(lab: LocalCluster, say: Say, timeout: float, agents: bool) -> None:
    """See :meth:`LocalCluster.up`."""
    t0 = time.monotonic()
    with lab.state.lock(say):
        state = lab.state.load()
        lab.state.resolve_binaries(state)
        ensure_pki(lab.pki.dir)
        lab._probe.clear()
        lab.logs_dir.mkdir(parents=True, exist_ok=True)

        running = {}
        for c in COMPONENTS:
            running[c] = lab.state.is_running(state, c)
            pid, started = lab.state.record(state, c)
            if not running[c]:
                if pid and started is not None and procs.alive(pid, started):
                    procs.wait_gone(pid, started, STOP_TIMEOUT_S)  # still exiting
                if pid:
                    why = "is gone" if procs.cmdline(pid) is None else "is another process"
                    say(f"  {c}: removing stale pid file (pid {pid} {why})")
                    lab.pid_path(c).unlink(missing_ok=True)
                    state["processes"].pop(c, None)
                strays = procs.find(c, lab._marker)
                if strays:
                    say(f"  {c}: stopping untracked process(es) {strays}")
                    procs.stop(strays, dict.fromkeys(strays, c), lab._marker)
        for c in COMPONENTS:
            if running[c] and procs.resume(lab.state.record(state, c)[0]):
                say(f"  {c}: resumed (it was stopped by a signal)")
        if all(running.values()):
            bad = {c: lab._probe.check(c, state) for c in COMPONENTS}
            if all(ok for ok, _ in bad.values()):
                say(f"lab {lab.name!r} is already up ({lab.kubeconfig()})")
                _repair_addons(lab, say)
                if agents:
                    repair_agents(lab, say)
                return

        todo = {c for c in COMPONENTS if not running[c]}
        for c in _hung(lab, state, running, todo):
            say(f"  {c}: not answering its health check; restarting it")
            todo.add(c)
        if SCHEDULER in todo:
            schedulerconfig.check_saved(lab, say)
        changed = _assign_ports(state, set(todo), say)
        for c in [x for x in COMPONENTS if x in dependents(changed)]:
            if running[c]:
                say(f"  {c}: restarting (a port it connects to changed)")
                todo.add(c)
        write_configs(lab, state)
        lab.state.save(state)
        restart_ = [c for c in COMPONENTS if c in todo and running[c]]
        if restart_:
            stop(lab, restart_, state, RESTART_STOP_TIMEOUT_S)
            for c in restart_:
                running[c] = False

        if todo:
            which = (
                "all components"
                if len(todo) == len(COMPONENTS)
                else ", ".join(c for c in COMPONENTS if c in todo)
            )
            say(f"starting {which} of lab {lab.name!r} in {lab.dir}")
        else:
            say(f"lab {lab.name!r}: waiting for every component to become healthy")
        _bring_up(lab, todo, state, running, say, t0 + timeout)
        say(
            f"control plane ready in {fmt_s(time.monotonic() - t0)}; "
            f"kubeconfig: {lab.kubeconfig()}"
        )
        _repair_addons(lab, say)
        if agents:
            repair_agents(lab, say)


def restart(lab: LocalCluster, c: str, say: Say) -> None:
    """See :meth:`LocalCluster.restart` (``c`` is a canonical component name)."""
    with lab.state.lock(say):
        state = lab.state.load()
        lab.state.resolve_binaries(state)
        stop(lab, [c], state, STOP_TIMEOUT_S)
        running = {x: lab.state.is_running(state, x) for x in COMPONENTS}
        changed = _assign_ports(state, {c}, say)
        todo = {c}
        for d in dependents(changed):
            if running[d]:
                todo.add(d)
        to_stop = [d for d in todo if running.get(d)]
        if to_stop:
            stop(lab, to_stop, state, RESTART_STOP_TIMEOUT_S)
        for d in todo:
            running[d] = False
        write_configs(lab, state)
        lab.state.save(state)
        _bring_up(lab, todo, state, running, say, time.monotonic() + UP_TIMEOUT_S)


def down(lab: LocalCluster, say: Say, timeout: float, purge: bool) -> dict[str, str]:
    """See :meth:`LocalCluster.down`."""
    t0 = time.monotonic()
    if not lab.dir.exists():
        say(f"lab {lab.name!r} does not exist ({lab.dir})")
        return {}
    result: dict[str, str] = {}
    with lab.state.lock(say):
        if agentprocess.stop(lab, forget=purge):
            say("node agent stopped")
        how = kueue.stop(lab, timeout, forget=purge)
        if how:
            say(f"  kueue: {how}")
        state = lab.state.load()
        # without etcd, kube-apiserver's graceful shutdown only waits to be killed
        api_timeout = timeout if lab.state.is_running(state, ETCD) else RESTART_STOP_TIMEOUT_S
        # clients first, then the API server, then its storage
        for group, t in (
            ([SCHEDULER, CONTROLLER_MANAGER], timeout),
            ([APISERVER], min(timeout, api_timeout)),
            ([ETCD], timeout),
        ):
            result.update(stop(lab, group, state, t))
        for c in COMPONENTS:
            if c in result:
                say(f"  {c}: {result[c]}")
    if purge:
        lab._purge()
        say(f"lab {lab.name!r} deleted ({lab.dir})")
    say(
        f"lab {lab.name!r} stopped in {fmt_s(time.monotonic() - t0)}"
        if result
        else f"lab {lab.name!r} was not running"
    )
    return result


# ---------------------------------------------------------------------- processes


def write_configs(lab: LocalCluster, state: dict) -> None:
    """Every file the components read at start: kubeconfigs and kube-scheduler's."""
    flags.write_kubeconfigs(lab, state)
    schedulerconfig.write_running(lab)


def spawn(lab: LocalCluster, component: str, state: dict, say: Say) -> int:
    argv = flags.argv(lab, component, state)
    if component == ETCD:
        lab.etcd_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        os.chmod(lab.etcd_dir, 0o700)
    try:
        pid, started = procs.spawn(argv, lab.log_path(component), env=flags.env(), cwd=lab.dir)
    except OSError as exc:
        raise LocalClusterError(f"cannot start {component} ({argv[0]}): {exc.strerror}") from exc
    lab.pids_dir.mkdir(parents=True, exist_ok=True)
    lab.pid_path(component).write_text(f"{pid}\n")
    state["processes"][component] = {"pid": pid, "start_time": started, "argv": argv}
    lab.state.save(state)
    port = state["ports"][component]
    say(f"  {component}: started (pid {pid}, port {port})")
    return pid


def stop(lab: LocalCluster, components: list[str], state: dict, timeout: float) -> dict[str, str]:
    """Stop ``components`` (and any stray process of theirs); clear their pid files."""
    pids: dict[int, str] = {}
    started: dict[int, int | None] = {}
    for c in components:
        pid, st = lab.state.record(state, c)
        if pid:
            pids[pid] = c
            started[pid] = st
        for stray in procs.find(c, lab._marker):
            pids.setdefault(stray, c)
    result = procs.stop(list(pids), pids, lab._marker, timeout=timeout, started=started)
    for c in components:
        lab.pid_path(c).unlink(missing_ok=True)
        state["processes"].pop(c, None)
    lab.state.save(state)
    return {pids[pid]: how for pid, how in result.items() if how != "gone"}


def _bind_conflict(lab: LocalCluster, component: str) -> bool:
    text = lab.logs(component, tail=40)
    since = text.rsplit("=== gpu-lab", 1)[-1]
    return "address already in use" in since


def _assign_ports(state: dict, components: set[str], say: Say, force: bool = False) -> set[str]:
    """Give each of ``components`` (stopped ones) its recorded port while that is free,
    else another (``force``: always another); return the components whose port changed."""
    ports = state["ports"]
    changed: set[str] = set()
    for key, owner in PORT_KEYS.items():
        if owner not in components:
            continue
        old = ports.get(key)
        avoid = {v for k, v in ports.items() if k != key and v}
        if force and old:
            avoid.add(old)
        new = portlib.pick_port(None if force else old, avoid=avoid)
        if old and new != old:
            say(f"  {owner}: port {old} is in use, using {new}")
            changed.add(owner)
        ports[key] = new
    return changed


# ---------------------------------------------------------------------- waiting and repair


def _hung(lab: LocalCluster, state: dict, running: dict[str, bool], todo: set[str]) -> list[str]:
    """Running components that fail their health check for ``HUNG_GRACE_S`` although
    what they connect to runs (those whose dependency restarts recover with it)."""
    candidates = [
        c for c in COMPONENTS
        if running[c] and not set(DEPENDS_ON.get(c, ())) & todo
    ]
    deadline = time.monotonic() + HUNG_GRACE_S
    while True:
        candidates = [c for c in candidates if not lab._probe.check(c, state)[0]]
        if not candidates or time.monotonic() > deadline:
            return candidates
        time.sleep(0.2)


def _ready_to_start(component: str, spawned: set[str], healthy: set[str]) -> bool:
    if component == ETCD:
        return True
    if component == APISERVER:  # it retries etcd itself; starting both at once saves time
        return ETCD in spawned or ETCD in healthy
    return APISERVER in healthy  # RBAC roles exist once /readyz passes


def _bring_up(
    lab: LocalCluster,
    todo: set[str],
    state: dict,
    running: dict[str, bool],
    say: Say,
    deadline: float,
) -> None:
    t0 = time.monotonic()
    pending = set(todo)  # still to spawn
    spawned: set[str] = {c for c in COMPONENTS if running[c]}
    healthy: set[str] = set()
    started: set[str] = set()  # spawned by this call
    retries = {(c, why): 0 for c in COMPONENTS for why in ("bind", "crash")}
    last_why: dict[str, str] = {}
    settled = False
    while True:
        for c in COMPONENTS:
            if c in pending and _ready_to_start(c, spawned, healthy):
                spawn(lab, c, state, say)
                pending.discard(c)
                spawned.add(c)
                started.add(c)
        for c in COMPONENTS:
            if c not in spawned:
                continue
            if not lab.state.is_running(state, c):  # also a healthy one may die meanwhile
                healthy.discard(c)
                if _on_exit(lab, c, state, retries, say):
                    # a new port: restart what connects to it
                    for d in dependents({c}):
                        if d in spawned:
                            stop(lab, [d], state, RESTART_STOP_TIMEOUT_S)
                            spawned.discard(d)
                            healthy.discard(d)
                            pending.add(d)
                spawned.discard(c)
                pending.add(c)
                write_configs(lab, state)
                lab.state.save(state)
                continue
            if c in healthy:
                continue
            ok, why = lab._probe.check(c, state)
            if ok:
                healthy.add(c)
                if c in started:
                    say(f"  {c}: healthy after {fmt_s(time.monotonic() - t0)}")
            else:
                last_why[c] = why
        if not pending and healthy >= set(COMPONENTS):
            if APISERVER not in started or settled:
                return
            # a restarted kube-apiserver answers 403 until RBAC is loaded; a
            # controller-manager still building its controllers exits on that: look again
            settled = True
            time.sleep(SETTLE_S)
            continue
        if time.monotonic() > deadline:
            waiting = [c for c in COMPONENTS if c not in healthy]
            parts = [f"{c} ({last_why.get(c) or 'not started'})" for c in waiting]
            tail = lab._log_tail(waiting[0]) if waiting else ""
            raise LocalClusterError(
                f"lab {lab.name!r}: timed out waiting for {', '.join(parts)}; "
                f"last log lines of {waiting[0]}: {tail}"
            )
        time.sleep(0.1)


def _on_exit(lab: LocalCluster, component: str, state: dict, retries: dict, say: Say) -> bool:
    """A component died before it became healthy. If it lost a race for its port, move
    it to another (returns True: what connects to it must restart too); if it crashed,
    start it again a couple of times; else fail with its last log lines."""
    pid, _ = lab.state.record(state, component)
    code = procs.exited(pid) if pid else None
    lab.pid_path(component).unlink(missing_ok=True)
    state["processes"].pop(component, None)
    if _bind_conflict(lab, component) and retries[component, "bind"] < BIND_RETRIES:
        retries[component, "bind"] += 1
        _assign_ports(state, {component}, say, force=True)
        return True
    if component == SCHEDULER and schedulerconfig.saved(lab) is not None:
        # never leave a lab unable to start: run it with the default configuration
        schedulerconfig.set_aside(lab, lab._log_tail(component, 1)[:300], say)
        return False
    detail = f" with code {code}" if code is not None else ""
    tail = lab._log_tail(component, 1)
    if retries[component, "crash"] < CRASH_RETRIES:
        retries[component, "crash"] += 1
        say(f"  {component}: exited{detail} while starting ({tail[:200]}); starting it again")
        return False
    raise LocalClusterError(
        f"{component} exited{detail} while starting; see `gpu-lab logs {component}`: "
        f"{lab._log_tail(component)}"
    )


def _repair_addons(lab: LocalCluster, say: Say) -> None:
    """Kueue, when this lab runs it (``gpu-lab up --with kueue``): started again."""
    kueue.repair(lab, say)


def repair_agents(lab: LocalCluster, say: Say) -> None:
    """Node agents and device plugins: resume hung ones, forget the state of agents
    whose process ended, and start the ``gpu-lab up --scenario`` agent again when it is
    gone, hung beyond resuming, or lost a device plugin."""
    cli_pid = agentprocess.recorded_pid(lab)
    again = False
    for doc in agentprocess.agent_states(lab):
        pid, resumed_at = doc["pid"], time.time()
        resumed = procs.resume(pid)
        if resumed:
            say(f"  {NODEAGENT}: resumed pid {pid} (it was stopped by a signal)")
        for node, info in (doc.get("nodes") or {}).items():
            if procs.resume(info.get("plugin_pid")):
                say(f"  {PLUGIN_PREFIX}{node}: resumed (it was stopped by a signal)")
                resumed = True
        if resumed:  # judge it by a heartbeat written since, not the one from before the stop
            doc = agentprocess.after_resume(doc, resumed_at)
        st, why = agentprocess.assess(doc)
        if st == "stopped":
            Path(doc["path"]).unlink(missing_ok=True)
            if pid != cli_pid:
                say(f"  {NODEAGENT}: pid {pid} has ended; its nodes stay NotReady until "
                    "they are applied again")
        elif pid == cli_pid and (st == "unhealthy" or any(
                info.get("plugin") and agentprocess.assess_plugin(info, st)[0] == "stopped"
                for info in (doc.get("nodes") or {}).values())):
            say(f"  {NODEAGENT}: {why or 'a device plugin stopped'}; restarting it")
            again = True
    scenario = agentprocess.recorded_scenario(lab)
    if scenario and (agentprocess.agent_pid(lab) is None or again):
        if not Path(scenario).exists():
            say(f"  {NODEAGENT}: not restarted: its scenario {scenario} is gone")
            agentprocess.record_path(lab).unlink(missing_ok=True)
            return
        say(f"  {NODEAGENT}: starting it for {scenario}")
        agentprocess.start(lab, scenario, progress=lambda m: say(f"  {m}"))


__all__ = [
    "CRASH_RETRIES",
    "HUNG_GRACE_S",
    "RESTART_STOP_TIMEOUT_S",
    "STOP_TIMEOUT_S",
    "UP_TIMEOUT_S",
    "down",
    "repair_agents",
    "restart",
    "spawn",
    "stop",
    "up",
    "write_configs",
]
