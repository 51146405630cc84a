"""A real Kubernetes control plane on this machine, as four plain processes.

``LocalCluster("default").up()`` starts etcd, kube-apiserver, kube-controller-manager and
kube-scheduler (built from source by :mod:`gpu_lab.backends.local.build`), all on
127.0.0.1, all TLS with a private CA and client-certificate authentication, and waits
until each answers its health check. Everything the lab owns lives in one directory
(:mod:`.labdir`).

The processes run in their own sessions, so they outlive the Python process that started
them: after a notebook kernel restart ``LocalCluster(name).connect()`` finds them again.
``up`` on a lab that is partly running starts only what is missing, ``down`` stops
everything and leaves no process or listening port behind (:mod:`.supervisor`).

This class is the lab's public face; the work is done by one module per job:
:mod:`.labdir` (directory and state), :mod:`.components` (names, order, ports),
:mod:`.flags` (each component's command line), :mod:`.schedulerconfig` (the
KubeSchedulerConfiguration a user sets), :mod:`.health` (health checks) and
:mod:`.supervisor` (start, repair, stop).
"""

from __future__ import annotations

import functools
import os
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gpu_lab.errors import LocalClusterError

from ... import processes as procs
from ...kube import KubeClient
from ...kubelet import agentprocess
from . import flags, kueue, schedulerconfig, supervisor
from .certs import KUBERNETES_SERVICE_IP
from .components import (
    APISERVER,
    COMPONENTS,
    NODEAGENT,
    PLUGIN_PREFIX,
    SCHEDULER,
    ComponentStatus,
    canonical,
)
from .health import HealthProbe, health_url, listening
from .labdir import LabDir, default_home
from .labstate import _quiet
from .supervisor import STOP_TIMEOUT_S, UP_TIMEOUT_S

Progress = Callable[[str], object] | None


class LocalCluster(LabDir):
    """A named local control plane; cheap to construct (nothing starts until :meth:`up`).

    ``root`` replaces the gpu-lab home (``$GPU_LAB_HOME``); the lab lives in
    ``<root>/clusters/<name>/``.
    """

    @functools.cached_property
    def _probe(self) -> HealthProbe:
        return HealthProbe(self.pki)

    # ------------------------------------------------------------------ status

    def status(self, check_health: bool = True) -> dict[str, ComponentStatus]:
        """Per component: state (healthy/unhealthy/running/stopped), pid, port, health URL."""
        state = self.state.load()
        out = {}
        for c in COMPONENTS:
            port = state["ports"].get(c)
            url = health_url(c, port)
            pid, _ = self.state.record(state, c)
            if not self.state.is_running(state, c):
                detail = f"stale pid file (pid {pid})" if pid else ""
                out[c] = ComponentStatus(c, "stopped", None, port, url, detail)
                continue
            if not check_health:
                out[c] = ComponentStatus(c, "running", pid, port, url)
                continue
            ok, why = self._check(c, state)
            if not ok and procs.is_frozen(pid):
                why += f"; pid {pid} is stopped by a signal (hung): `gpu-lab up{self._name_flag}`"
                why += " resumes it"
            out[c] = ComponentStatus(c, "healthy" if ok else "unhealthy", pid, port, url, why)
        return out

    def healthy(self) -> bool:
        return all(s.state == "healthy" for s in self.status().values())

    def node_status(self) -> dict[str, ComponentStatus]:
        """The node agent(s) and each device plugin: ``nodeagent`` (``nodeagent-<pid>`` when
        several run) and ``device-plugin/<node>``, state ``healthy``, ``starting``,
        ``unhealthy`` (no heartbeat, plugin not registered), ``hung`` (stopped by a
        signal) or ``stopped``. Empty when no agent has run since the lab started."""
        docs = agentprocess.agent_states(self)
        cli_pid = agentprocess.recorded_pid(self)
        out: dict[str, ComponentStatus] = {}
        if not docs and agentprocess.recorded_scenario(self):
            out[NODEAGENT] = ComponentStatus(
                NODEAGENT, "stopped", None, None, None,
                f"`gpu-lab up{self._name_flag}` starts it again",
            )
        for doc in docs:
            pid = doc["pid"]
            key = NODEAGENT if len(docs) == 1 else f"{NODEAGENT}-{pid}"
            state, why = agentprocess.assess(doc)
            if pid != cli_pid and state == "stopped":
                why += " (it ran in a Python session that has ended)"
            out[key] = ComponentStatus(key, state, pid if state != "stopped" else None, None,
                                       None, why)
            for node, info in sorted((doc.get("nodes") or {}).items()):
                if not info.get("plugin"):
                    continue
                pstate, pwhy = agentprocess.assess_plugin(info, state)
                name = PLUGIN_PREFIX + node
                ppid = info.get("plugin_pid") if pstate != "stopped" else None
                out[name] = ComponentStatus(name, pstate, ppid, None, None, pwhy)
        return out

    def full_status(self, check_health: bool = True) -> dict[str, ComponentStatus]:
        """:meth:`status` of the control plane, then :meth:`node_status`, then Kueue's."""
        return {**self.status(check_health), **self.node_status(),
                **kueue.status(self, check_health)}

    def check_ready(
        self, health: bool = True, agents: bool = True, paused: tuple[str, ...] = ()
    ) -> None:
        """Raise :class:`LocalClusterError` at once, in one line that names the component
        and the command that repairs it, when a component a command needs is stopped,
        stopped by a signal (hung) or (``health``) fails its health check; likewise a node
        agent of another process (``gpu-lab up --scenario``) that is gone or hung.
        ``paused``: components the caller stopped on purpose (SIGSTOP) meanwhile."""
        up = f"`gpu-lab up{self._name_flag}`"
        if not self.exists():
            raise LocalClusterError(f"no lab {self.name!r} in {self.dir}: run {up}")
        state = self.state.load()

        def hung(c: str, pid: int | None) -> LocalClusterError:
            return LocalClusterError(f"lab {self.name!r}: {c} (pid {pid}) is stopped by a signal (hung); "
                                     f"{up} resumes it")

        for c in COMPONENTS:
            pid, _ = self.state.record(state, c)
            if not self.state.is_running(state, c):
                raise LocalClusterError(f"lab {self.name!r}: {c} is not running; {up} starts it")
            if c not in paused and procs.is_frozen(pid):
                raise hung(c, pid)
        if health:
            for c in (x for x in COMPONENTS if x not in paused):
                ok, why = self._check(c, state)
                if not ok:
                    pid, _ = self.state.record(state, c)
                    if procs.is_frozen(pid):  # a SIGSTOP lands asynchronously: it may have come meanwhile
                        raise hung(c, pid)
                    raise LocalClusterError(
                        f"lab {self.name!r}: {c} is not healthy ({why}); {up} repairs it"
                    )
        kueue.check(self)
        if agents:
            me = os.getpid()
            for doc in agentprocess.agent_states(self):
                if doc["pid"] == me:
                    continue
                st, why = agentprocess.assess(doc)
                if st in ("stopped", "hung", "unhealthy"):
                    fix = (f"{up} restarts it" if agentprocess.recorded_scenario(self)
                           else f"{up} cleans it up; apply the nodes again")
                    if st == "hung":
                        fix = f"{up} resumes it"
                    raise LocalClusterError(
                        f"lab {self.name!r}: the node agent (pid {doc['pid']}) is {st}"
                        f" ({why}); {fix}"
                    )

    def connect(self) -> LocalCluster:
        """Attach to a lab that is already up (e.g. after a notebook kernel restart).

        Raises :class:`LocalClusterError` when its API server does not answer."""
        state = self.state.load()
        if not self.state_file.exists():
            raise LocalClusterError(f"no lab {self.name!r} in {self.dir}: run `gpu-lab up`")
        if not self.state.is_running(state, APISERVER):
            raise LocalClusterError(f"lab {self.name!r} is not running: run `gpu-lab up`")
        ok, why = self._check(APISERVER, state)
        if not ok:
            raise LocalClusterError(f"lab {self.name!r}: kube-apiserver is not ready ({why})")
        return self

    def client(self):
        """A :class:`~gpu_lab.kube.KubeClient` with the admin credentials."""
        return KubeClient.from_kubeconfig(self.kubeconfig())

    def peak_rss_kib(self) -> dict[str, int | None]:
        """Peak resident memory (VmHWM, KiB) of each running component (Linux)."""
        state = self.state.load()
        out = {}
        for c in COMPONENTS:
            pid, _ = self.state.record(state, c)
            out[c] = procs.peak_rss_kib(pid) if pid is not None and self.state.is_running(state, c) else None
        return out

    # ------------------------------------------------------------------ scheduler configuration

    def validate_scheduler_config(self, config: dict[str, Any]) -> dict[str, Any]:
        """Check ``config`` as kube-scheduler itself does when it starts; returns the
        completed configuration (see :func:`.schedulerconfig.validate`)."""
        return schedulerconfig.validate(self, config)

    def effective_scheduler_config(self) -> dict[str, Any]:
        """The running configuration as kube-scheduler completes it (every profile's
        plugins with their weights), computed once per configuration."""
        return schedulerconfig.effective(self)

    def set_scheduler_config(self, config: dict | None, progress: Progress = print) -> None:
        """Run kube-scheduler with ``config`` (a KubeSchedulerConfiguration; ``None`` restores
        the defaults). ``clientConnection.kubeconfig`` and leader election are gpu-lab's.
        The configuration is checked by the kube-scheduler binary first (see
        :meth:`validate_scheduler_config`) and saved only if it passes, so no saved
        configuration keeps the lab from starting. A running scheduler is restarted with it."""
        schedulerconfig.save(self, config)
        if self.state.is_running(self.state.load(), SCHEDULER):
            self.restart(SCHEDULER, progress=progress)

    @property
    def _custom_scheduler_config(self) -> Path:
        return schedulerconfig.custom_path(self)

    def _saved_scheduler_config(self) -> dict[str, Any] | None:
        return schedulerconfig.saved(self)

    # ------------------------------------------------------------------ up / down

    def up(
        self, progress: Progress = print, timeout: float = UP_TIMEOUT_S, agents: bool = True
    ) -> LocalCluster:
        """Start whatever is not running and wait until every component is healthy.

        Idempotent: on a healthy lab it only checks; a killed component is restarted alone
        (plus, if its port had to change, the components that connect to it); one stopped
        by a signal (SIGSTOP) is resumed, one that stays unhealthy is restarted. With
        ``agents``, node agents and device plugins are repaired too (see
        :func:`.supervisor.repair_agents`)."""
        supervisor.up(self, progress or _quiet, timeout, agents)
        return self

    def restart(self, component: str, progress: Progress = print) -> None:
        """Stop one component and start it again (same port while it stays free)."""
        supervisor.restart(self, canonical(component), progress or _quiet)

    def down(
        self, progress: Progress = print, timeout: float = STOP_TIMEOUT_S, purge: bool = False
    ) -> dict[str, str]:
        """Stop every component (SIGTERM to its process group, SIGKILL after ``timeout``).

        Returns ``{component: "terminated" | "killed"}`` for what was running. The lab's
        data stays (a later ``up`` finds its objects again) unless ``purge``."""
        return supervisor.down(self, progress or _quiet, timeout, purge)

    # ------------------------------------------------------------------ the parts

    def _argv(self, component: str, state: dict) -> list[str]:
        return flags.argv(self, component, state)

    def _check(self, component: str, state: dict) -> tuple[bool, str]:
        return self._probe.check(component, state)

    def _context(self, client: str | None) -> ssl.SSLContext:
        return self._probe.context(client)


__all__ = [
    "COMPONENTS",
    "ComponentStatus",
    "KUBERNETES_SERVICE_IP",
    "LocalCluster",
    "LocalClusterError",
    "canonical",
    "default_home",
    "listening",
]
