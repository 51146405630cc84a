"""A real Kubernetes control plane on this machine, as four plain processes.

``LocalCluster("default").up()`` starts etcd, kube-apiserver, kube-controller-manager and
kube-scheduler (built from source by :mod:`gpu_lab.backends.local.build`), all on
127.0.0.1, all TLS with a private CA and client-certificate authentication, and waits
until each answers its health check. Everything the lab owns lives in one directory::

    $GPU_LAB_HOME/clusters/<name>/         (default ~/.local/share/gpu-lab/clusters/<name>/)
        kubeconfig        admin (O=system:masters); ~/.kube/config is never touched
        state.json        ports, binaries, process start times
        pki/              CA, certificates, service-account keys (0600)
        config/           component kubeconfigs, kube-scheduler.yaml
        etcd/             etcd's data (survives down/up; ``down(purge=True)`` deletes the lab)
        logs/<component>.log
        pids/<component>.pid

The processes run in their own sessions, so they outlive the Python process that started
them: after a notebook kernel restart ``LocalCluster(name).connect()`` finds them again.
``up`` on a lab that is partly running starts only what is missing (a killed component,
a stale pid file, a port someone else took meanwhile), ``down`` stops everything and
leaves no process or listening port behind.
"""

from __future__ import annotations

import contextlib
import fcntl
import http.client
import json
import os
import re
import shutil
import socket
import ssl
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import yaml

from gpu_lab.errors import GpuLabError

from ...kube import kubeconfig as kc
from ...kubelet import agentprocess
from . import ports as portlib
from . import processes as procs
from .build import DEFAULT_VERSION, find_binaries
from .certs import KUBERNETES_SERVICE_IP, SERVICE_CIDR, Pki, ensure_pki

ETCD = "etcd"
APISERVER = "kube-apiserver"
CONTROLLER_MANAGER = "kube-controller-manager"
SCHEDULER = "kube-scheduler"
#: start order; ``down`` stops in reverse
COMPONENTS = (ETCD, APISERVER, CONTROLLER_MANAGER, SCHEDULER)
ALIASES = {
    "apiserver": APISERVER,
    "controller-manager": CONTROLLER_MANAGER,
    "kcm": CONTROLLER_MANAGER,
    "scheduler": SCHEDULER,
}
#: a component is restarted when a port it connects to changes
DEPENDS_ON = {
    APISERVER: (ETCD,),
    CONTROLLER_MANAGER: (APISERVER,),
    SCHEDULER: (APISERVER,),
}
#: listening ports, by the component that owns them
PORT_KEYS = {
    "etcd": ETCD,
    "etcd-peer": ETCD,
    APISERVER: APISERVER,
    CONTROLLER_MANAGER: CONTROLLER_MANAGER,
    SCHEDULER: SCHEDULER,
}
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
HOST = "127.0.0.1"
UP_TIMEOUT_S = 120.0
STOP_TIMEOUT_S = 10.0
#: a component restarted because what it connects to moved: kube-apiserver's graceful
#: shutdown waits on an etcd that is already gone, so do not wait long for it
RESTART_STOP_TIMEOUT_S = 3.0
HEALTH_TIMEOUT_S = 2.0
BIND_RETRIES = 3
#: a controller-manager that meets a (re)starting kube-apiserver while it builds its
#: controllers gets 403s (RBAC not loaded yet) and exits: start it again, this often
CRASH_RETRIES = 2
SETTLE_S = 0.5
STATE_VERSION = 1
#: a running component that still fails its health check after this long is restarted by
#: ``up`` (a hung process); one stopped by SIGSTOP is resumed at once
HUNG_GRACE_S = 5.0
#: the time kube-scheduler may take to check a configuration (it needs about 0.1 s)
VALIDATE_TIMEOUT_S = 30.0
#: the node agent and device plugins, in ``full_status()``
NODEAGENT = agentprocess.AGENT
PLUGIN_PREFIX = "device-plugin/"
#: The native Workload API and gang scheduling (KEP-4671), beta and off by default in
#: v1.37: the GenericWorkload gate serves Workload and PodGroup (scheduling.k8s.io/v1beta1,
#: a beta group the API server only serves when asked), admits pod spec.schedulingGroup,
#: adds GangScheduling to kube-scheduler's default profile and lets the controller-manager
#: remove PodGroups' protection finalizer. It changes nothing for pods without a
#: spec.schedulingGroup, so every lab has it.
FEATURE_GATES = "GenericWorkload=true"
#: raise klog's verbosity for two files alone, not the whole scheduler: schedule_one.go's
#: score lines and batch.go's opportunistic-batching node hints
SCORE_LOG_VMODULE = "--vmodule=schedule_one=10,batch=3"
RUNTIME_CONFIG = "scheduling.k8s.io/v1beta1=true"

Progress = Callable[[str], object] | None
_NAME = re.compile(r"^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$")


class LocalClusterError(GpuLabError):
    """The local control plane could not be started, reached or stopped (one line)."""


@dataclass(frozen=True)
class ComponentStatus:
    """One component: ``state`` is ``healthy``, ``unhealthy``, ``running`` (alive, health
    not checked) or ``stopped``."""

    name: str
    state: str
    pid: int | None
    port: int | None
    url: str | None
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def default_home() -> Path:
    """``$GPU_LAB_HOME``, else ``$XDG_DATA_HOME/gpu-lab``, else ``~/.local/share/gpu-lab``."""
    env = os.environ.get("GPU_LAB_HOME")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share") / "gpu-lab"


def canonical(component: str) -> str:
    """``scheduler`` -> ``kube-scheduler`` etc.; raises on an unknown name."""
    c = ALIASES.get(component, component)
    if c not in COMPONENTS:
        raise LocalClusterError(
            f"unknown component {component!r}; choose from {', '.join(COMPONENTS)}"
        )
    return c


def _quiet(_msg: str) -> None:
    return None


def _fmt_s(seconds: float) -> str:
    return f"{seconds:.1f} s"


class LocalCluster:
    """A named local control plane; cheap to construct (nothing starts until :meth:`up`).

    ``root`` replaces the gpu-lab home (``$GPU_LAB_HOME``); the lab lives in
    ``<root>/clusters/<name>/``.
    """

    def __init__(
        self,
        name: str = "default",
        root: Path | str | None = None,
        version: str = DEFAULT_VERSION,
        binaries: dict[str, Path] | None = None,
    ):
        if not _NAME.match(name):
            raise LocalClusterError(
                f"invalid lab name {name!r}: use lower-case letters, digits, '-', '.', '_'"
            )
        self.name = name
        self.version = version
        home = Path(root).expanduser() if root is not None else default_home()
        self.dir = (home / "clusters" / name).absolute()
        self._binaries = {k: Path(v) for k, v in (binaries or {}).items()}
        self._ssl: dict[tuple[str | None, int], ssl.SSLContext] = {}

    # ------------------------------------------------------------------ paths

    @property
    def pki(self) -> Pki:
        return Pki(self.dir / "pki")

    @property
    def config_dir(self) -> Path:
        return self.dir / "config"

    @property
    def logs_dir(self) -> Path:
        return self.dir / "logs"

    @property
    def pids_dir(self) -> Path:
        return self.dir / "pids"

    @property
    def etcd_dir(self) -> Path:
        return self.dir / "etcd"

    @property
    def state_file(self) -> Path:
        return self.dir / "state.json"

    def kubeconfig(self) -> Path:
        """The admin kubeconfig of this lab (``<lab>/kubeconfig``)."""
        return self.dir / "kubeconfig"

    def log_path(self, component: str) -> Path:
        return self.logs_dir / f"{canonical(component)}.log"

    def pid_path(self, component: str) -> Path:
        return self.pids_dir / f"{canonical(component)}.pid"

    @property
    def _marker(self) -> str:
        """A string every component's argv contains: the lab directory."""
        return str(self.dir) + os.sep

    def __repr__(self) -> str:
        return f"LocalCluster(name={self.name!r}, dir={str(self.dir)!r})"

    # ------------------------------------------------------------------ state

    def _load_state(self) -> dict[str, Any]:
        try:
            state = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            state = {}
        if not isinstance(state, dict):
            state = {}
        state.setdefault("ports", {})
        state.setdefault("processes", {})
        state.setdefault("binaries", {})
        return state

    def _save_state(self, state: dict[str, Any]) -> None:
        state["name"] = self.name
        state["version"] = self.version
        state["state_version"] = STATE_VERSION
        self.dir.mkdir(parents=True, exist_ok=True)
        tmp = self.state_file.with_name(f".state.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, self.state_file)

    @contextlib.contextmanager
    def _lock(self, say: Callable[[str], object] = _quiet) -> Iterator[None]:
        """One ``up``/``down``/``restart`` at a time per lab (across processes)."""
        self.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(self.dir / ".lock", "a") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                say(f"waiting for another gpu-lab command on lab {self.name!r} to finish")
                fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def _read_pid(self, component: str) -> int | None:
        try:
            text = self.pid_path(component).read_text().strip()
            return int(text) if text else None
        except (OSError, ValueError):
            return None

    def _record(self, state: dict, component: str) -> tuple[int | None, int | None]:
        """(pid, start time) from the pid file; the start time only if state.json agrees."""
        pid = self._read_pid(component)
        entry = state["processes"].get(component) or {}
        started = entry.get("start_time") if entry.get("pid") == pid else None
        return pid, started

    def _is_running(self, state: dict, component: str) -> bool:
        pid, started = self._record(state, component)
        return procs.is_ours(pid, component, self._marker, started)

    # ------------------------------------------------------------------ health

    def _context(self, client: str | None) -> ssl.SSLContext:
        # keyed by the CA file's mtime: another process may have remade the lab meanwhile
        key = (client, self.pki.ca_crt.stat().st_mtime_ns)
        ctx = self._ssl.get(key)
        if ctx is None:
            ctx = ssl.create_default_context(cafile=str(self.pki.ca_crt))
            if client:
                ctx.load_cert_chain(str(self.pki.crt(client)), str(self.pki.key(client)))
            self._ssl[key] = ctx
        return ctx

    def _https_get(
        self, port: int, path: str, client: str | None, timeout: float = HEALTH_TIMEOUT_S
    ) -> tuple[int, str]:
        conn = http.client.HTTPSConnection(
            HOST, port, context=self._context(client), timeout=timeout
        )
        try:
            conn.request("GET", path)
            resp = conn.getresponse()
            return resp.status, resp.read(4096).decode(errors="replace")
        finally:
            conn.close()

    def _health_url(self, component: str, port: int | None) -> str | None:
        if not port:
            return None
        path = {ETCD: "/health", APISERVER: "/readyz"}.get(component, "/healthz")
        return f"https://{HOST}:{port}{path}"

    def _check(self, component: str, state: dict) -> tuple[bool, str]:
        """Whether ``component`` answers its health endpoint; the reason when not."""
        port = state["ports"].get(component)
        if not port:
            return False, "no port recorded"
        client = {ETCD: "apiserver-etcd-client", APISERVER: "admin"}.get(component)
        path = {ETCD: "/health", APISERVER: "/readyz"}.get(component, "/healthz")
        try:
            code, body = self._https_get(port, path, client)
        except (OSError, ssl.SSLError, http.client.HTTPException) as exc:
            return False, f"{path}: {exc.__class__.__name__}: {exc}"
        if component == ETCD:
            try:
                ok = code == 200 and json.loads(body).get("health") == "true"
            except ValueError:
                ok = False
        else:
            ok = code == 200 and body.strip() == "ok"
        return ok, "" if ok else f"{path}: HTTP {code}: {body.strip()[:200]}"

    # ------------------------------------------------------------------ status

    def status(self, check_health: bool = True) -> dict[str, ComponentStatus]:
        """Per component: state (healthy/unhealthy/running/stopped), pid, port, health URL."""
        state = self._load_state()
        out = {}
        for c in COMPONENTS:
            port = state["ports"].get(c)
            url = self._health_url(c, port)
            pid, _ = self._record(state, c)
            if not self._is_running(state, c):
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

    def exists(self) -> bool:
        """Whether this lab was ever started (``up``) and not deleted (``down --purge``)."""
        return self.state_file.exists()

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
        from . import kueue

        return {**self.status(check_health), **self.node_status(),
                **kueue.status(self, check_health)}

    @property
    def _name_flag(self) -> str:
        return "" if self.name == "default" else f" --name {self.name}"

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
        state = self._load_state()

        def hung(c: str, pid: int) -> LocalClusterError:
            return LocalClusterError(f"lab {self.name!r}: {c} (pid {pid}) is stopped by a signal (hung); "
                                     f"{up} resumes it")

        for c in COMPONENTS:
            pid, _ = self._record(state, c)
            if not self._is_running(state, c):
                raise LocalClusterError(f"lab {self.name!r}: {c} is not running; {up} starts it")
            if c not in paused and procs.is_frozen(pid):
                raise hung(c, pid)
        if health:
            for c in (x for x in COMPONENTS if x not in paused):
                ok, why = self._check(c, state)
                if not ok:
                    pid, _ = self._record(state, c)
                    if procs.is_frozen(pid):  # a SIGSTOP lands asynchronously: it may have come meanwhile
                        raise hung(c, pid)
                    raise LocalClusterError(
                        f"lab {self.name!r}: {c} is not healthy ({why}); {up} repairs it"
                    )
        from . import kueue

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
        state = self._load_state()
        if not self.state_file.exists():
            raise LocalClusterError(f"no lab {self.name!r} in {self.dir}: run `gpu-lab up`")
        if not self._is_running(state, APISERVER):
            raise LocalClusterError(f"lab {self.name!r} is not running: run `gpu-lab up`")
        ok, why = self._check(APISERVER, state)
        if not ok:
            raise LocalClusterError(f"lab {self.name!r}: kube-apiserver is not ready ({why})")
        return self

    def client(self):
        """A :class:`~gpu_lab.kube.KubeClient` with the admin credentials."""
        from ...kube import KubeClient

        return KubeClient.from_kubeconfig(self.kubeconfig())

    def logs(self, component: str, tail: int | None = 50) -> str:
        """The last ``tail`` lines of a component's log (all of it when ``tail`` is None)."""
        path = self.log_path(component)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return ""
        lines = data.decode(errors="replace").splitlines()
        if tail is not None:
            lines = lines[-tail:] if tail > 0 else []
        return "\n".join(lines)

    def peak_rss_kib(self) -> dict[str, int | None]:
        """Peak resident memory (VmHWM, KiB) of each running component (Linux)."""
        state = self._load_state()
        out = {}
        for c in COMPONENTS:
            pid, _ = self._record(state, c)
            out[c] = procs.peak_rss_kib(pid) if self._is_running(state, c) else None
        return out

    # ------------------------------------------------------------------ configuration

    def _resolve_binaries(self, state: dict) -> dict[str, Path]:
        """Binaries to run: those given to the constructor, else what the build cache (or
        PATH) has for this version; recorded in state.json."""
        if not all(c in self._binaries for c in COMPONENTS):
            found = find_binaries(self.version)
            if found is None:
                raise LocalClusterError(
                    f"control plane binaries for Kubernetes {self.version} not found: "
                    "run `gpu-lab controlplane build` (needs Go), see controlplane/README.md"
                )
            self._binaries = {**found, **self._binaries}
        state["binaries"] = {c: str(p) for c, p in self._binaries.items()}
        return dict(self._binaries)

    def _write_configs(self, state: dict) -> None:
        pki = self.pki
        ports = state["ports"]
        server = f"https://{HOST}:{ports[APISERVER]}"
        cluster = f"gpu-lab-{self.name}"
        self.config_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        kc.write(
            self.kubeconfig(),
            kc.render(
                server,
                pki.ca_crt,
                pki.crt("admin"),
                pki.key("admin"),
                user=f"admin@{cluster}",
                cluster=cluster,
                context=cluster,
            ),
        )
        for c in (SCHEDULER, CONTROLLER_MANAGER):
            kc.write(
                self.config_dir / f"{c}.kubeconfig",
                kc.render(
                    server, pki.ca_crt, pki.crt(c), pki.key(c), user=f"system:{c}", cluster=cluster
                ),
            )
        kc.write(self.config_dir / "kube-scheduler.yaml", self._scheduler_config_text())

    @property
    def _custom_scheduler_config(self) -> Path:
        return self.config_dir / "kube-scheduler.custom.yaml"

    def _saved_scheduler_config(self) -> dict[str, Any] | None:
        with contextlib.suppress(OSError, yaml.YAMLError):
            loaded = yaml.safe_load(self._custom_scheduler_config.read_text())
            if isinstance(loaded, dict):
                return loaded
        return None

    def _scheduler_config_text(
        self, custom: dict[str, Any] | None = None, kubeconfig: Path | None = None
    ) -> str:
        doc: dict[str, Any] = dict(
            self._saved_scheduler_config() or {} if custom is None else custom
        )
        doc.setdefault("apiVersion", "kubescheduler.config.k8s.io/v1")
        doc.setdefault("kind", "KubeSchedulerConfiguration")
        conn = doc.get("clientConnection")
        doc["clientConnection"] = {
            **(conn if isinstance(conn, dict) else {}),
            "kubeconfig": str(kubeconfig or self.config_dir / f"{SCHEDULER}.kubeconfig"),
        }
        doc["leaderElection"] = {"leaderElect": False}
        return yaml.safe_dump(doc, sort_keys=False)

    def validate_scheduler_config(self, config: dict[str, Any]) -> dict[str, Any]:
        """Check ``config`` as kube-scheduler itself does when it starts (strict decoding,
        validation, every profile's plugins and their args built), without an API server:
        the real binary with ``--write-config-to``, which exits once the configuration is
        complete. Returns that completed configuration (defaults and weights filled in by
        kube-scheduler); raises :class:`LocalClusterError` with kube-scheduler's own words."""
        if not isinstance(config, dict):
            raise LocalClusterError(
                f"KubeSchedulerConfiguration: expected a mapping, not {type(config).__name__}"
            )
        binary = self._resolve_binaries(self._load_state())[SCHEDULER]
        with tempfile.TemporaryDirectory(prefix="gpu-lab-ksc-") as tmp:
            t = Path(tmp)
            kcfg = t / "kubeconfig"  # never contacted: kube-scheduler exits before it connects
            kcfg.write_text(
                "apiVersion: v1\nkind: Config\ncurrent-context: x\n"
                "clusters: [{name: x, cluster: {server: 'https://127.0.0.1:1'}}]\n"
                "users: [{name: x, user: {}}]\n"
                "contexts: [{name: x, context: {cluster: x, user: x}}]\n"
            )
            (t / "config.yaml").write_text(self._scheduler_config_text(config, kcfg))
            argv = [str(binary), f"--config={t / 'config.yaml'}",
                    f"--write-config-to={t / 'out.yaml'}", "--secure-port=0",
                    f"--feature-gates={FEATURE_GATES}"]
            try:
                res = subprocess.run(argv, capture_output=True, text=True,
                                     timeout=VALIDATE_TIMEOUT_S, stdin=subprocess.DEVNULL,
                                     env=self._env(), cwd=tmp)
            except subprocess.TimeoutExpired:
                raise LocalClusterError(
                    "KubeSchedulerConfiguration: kube-scheduler did not finish checking it "
                    f"in {VALIDATE_TIMEOUT_S:.0f} s"
                ) from None
            except OSError as exc:
                raise LocalClusterError(f"cannot run {binary}: {exc.strerror}") from None
            if res.returncode != 0:
                raise LocalClusterError(
                    f"KubeSchedulerConfiguration: kube-scheduler refuses it: {_go_error(res.stderr)}"
                )
            return yaml.safe_load((t / "out.yaml").read_text()) or {}

    @property
    def _effective_scheduler_config_path(self) -> Path:
        return self.config_dir / "kube-scheduler.effective.yaml"

    def effective_scheduler_config(self) -> dict[str, Any]:
        """The running configuration as kube-scheduler completes it (every profile's
        plugins with their weights), computed once per configuration."""
        path = self._effective_scheduler_config_path
        try:
            return yaml.safe_load(path.read_text()) or {}
        except FileNotFoundError:
            pass
        done = self.validate_scheduler_config(self._saved_scheduler_config() or {})
        self.config_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        kc.write(path, yaml.safe_dump(done, sort_keys=False))
        return done

    def set_scheduler_config(self, config: dict | None, progress: Progress = print) -> None:
        """Run kube-scheduler with ``config`` (a KubeSchedulerConfiguration; ``None`` restores
        the defaults). ``clientConnection.kubeconfig`` and leader election are gpu-lab's.
        The configuration is checked by the kube-scheduler binary first (see
        :meth:`validate_scheduler_config`) and saved only if it passes, so no saved
        configuration keeps the lab from starting. A running scheduler is restarted with it."""
        self.config_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        custom = self._custom_scheduler_config
        effective = self._effective_scheduler_config_path
        if config is None:
            custom.unlink(missing_ok=True)
            effective.unlink(missing_ok=True)
        else:
            done = self.validate_scheduler_config(config)
            kc.write(custom, yaml.safe_dump(config, sort_keys=False))
            kc.write(effective, yaml.safe_dump(done, sort_keys=False))
        state = self._load_state()
        if state["ports"].get(APISERVER):
            kc.write(self.config_dir / "kube-scheduler.yaml", self._scheduler_config_text())
        if self._is_running(state, SCHEDULER):
            self.restart(SCHEDULER, progress=progress)

    def _argv(self, component: str, state: dict) -> list[str]:
        b = str(state["binaries"][component])
        p = state["ports"]
        pki = self.pki
        cfg = self.config_dir
        if component == ETCD:
            client = f"https://{HOST}:{p['etcd']}"
            peer = f"https://{HOST}:{p['etcd-peer']}"
            return [
                b,
                "--name=gpu-lab",
                f"--data-dir={self.etcd_dir}",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=gpu-lab={peer}",
                f"--cert-file={pki.crt('etcd-server')}",
                f"--key-file={pki.key('etcd-server')}",
                f"--trusted-ca-file={pki.ca_crt}",
                "--client-cert-auth=true",
                f"--peer-cert-file={pki.crt('etcd-server')}",
                f"--peer-key-file={pki.key('etcd-server')}",
                f"--peer-trusted-ca-file={pki.ca_crt}",
                "--peer-client-cert-auth=true",
                "--unsafe-no-fsync=true",
                "--snapshot-count=10000",
                "--log-level=warn",
            ]
        if component == APISERVER:
            return [
                b,
                f"--etcd-servers=https://{HOST}:{p['etcd']}",
                f"--etcd-cafile={pki.ca_crt}",
                f"--etcd-certfile={pki.crt('apiserver-etcd-client')}",
                f"--etcd-keyfile={pki.key('apiserver-etcd-client')}",
                f"--bind-address={HOST}",
                f"--advertise-address={HOST}",
                f"--secure-port={p[APISERVER]}",
                f"--tls-cert-file={pki.crt('apiserver')}",
                f"--tls-private-key-file={pki.key('apiserver')}",
                f"--client-ca-file={pki.ca_crt}",
                "--authorization-mode=Node,RBAC",
                f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
                f"--service-account-key-file={pki.sa_pub}",
                f"--service-account-signing-key-file={pki.sa_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--allow-privileged=true",
                # request-header authentication (what aggregated API servers and the
                # scheduler's and controller-manager's delegated authn read from the
                # extension-apiserver-authentication ConfigMap); a CA of its own
                f"--requestheader-client-ca-file={pki.front_proxy_ca_crt}",
                "--requestheader-allowed-names=front-proxy-client",
                "--requestheader-username-headers=X-Remote-User",
                "--requestheader-group-headers=X-Remote-Group",
                "--requestheader-extra-headers-prefix=X-Remote-Extra-",
                f"--proxy-client-cert-file={pki.crt('front-proxy-client')}",
                f"--proxy-client-key-file={pki.key('front-proxy-client')}",
                # the kubernetes Service's endpoint would be 127.0.0.1, which Endpoints
                # validation forbids: nothing in-cluster dials it (no pods run)
                "--endpoint-reconciler-type=none",
                f"--feature-gates={FEATURE_GATES}",
                f"--runtime-config={RUNTIME_CONFIG}",
            ]
        common = [
            f"--bind-address={HOST}",
            f"--secure-port={p[component]}",
            f"--tls-cert-file={pki.crt(component + '-serving')}",
            f"--tls-private-key-file={pki.key(component + '-serving')}",
            f"--authentication-kubeconfig={cfg / (component + '.kubeconfig')}",
            f"--authorization-kubeconfig={cfg / (component + '.kubeconfig')}",
            f"--feature-gates={FEATURE_GATES}",
        ]
        if component == CONTROLLER_MANAGER:
            return [
                b,
                f"--kubeconfig={cfg / (component + '.kubeconfig')}",
                *common,
                "--leader-elect=false",
                "--controllers=*",
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={pki.sa_key}",
                f"--root-ca-file={pki.ca_crt}",
                f"--cluster-signing-cert-file={pki.ca_crt}",
                f"--cluster-signing-key-file={pki.ca_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                f"--cluster-name=gpu-lab-{self.name}",
                # else it creates /usr/libexec/kubernetes/kubelet-plugins/... (as root)
                f"--flex-volume-plugin-dir={self.dir / 'volume-plugins'}",
            ]
        if component == SCHEDULER:
            # schedule_one.go logs each score plugin's weighted score per node at V(10):
            # explain reads the real scheduler's own arithmetic from there (schedulerlog.py)
            return [b, f"--config={cfg / 'kube-scheduler.yaml'}", *common, SCORE_LOG_VMODULE]
        raise LocalClusterError(f"unknown component {component!r}")

    @staticmethod
    def _env() -> dict[str, str]:
        env = dict(os.environ)
        for k in ("KUBECONFIG", "ETCDCTL_API", "ETCDCTL_ENDPOINTS", "ETCD_DATA_DIR"):
            env.pop(k, None)
        # etcd reads every ETCD_* variable as a flag
        return {k: v for k, v in env.items() if not k.startswith("ETCD_")}

    # ------------------------------------------------------------------ processes

    def _spawn(self, component: str, state: dict, progress: Callable[[str], object]) -> int:
        argv = self._argv(component, state)
        if component == ETCD:
            self.etcd_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
            os.chmod(self.etcd_dir, 0o700)
        try:
            pid, started = procs.spawn(
                argv, self.log_path(component), env=self._env(), cwd=self.dir
            )
        except OSError as exc:
            raise LocalClusterError(
                f"cannot start {component} ({argv[0]}): {exc.strerror}"
            ) from exc
        self.pids_dir.mkdir(parents=True, exist_ok=True)
        self.pid_path(component).write_text(f"{pid}\n")
        state["processes"][component] = {"pid": pid, "start_time": started, "argv": argv}
        self._save_state(state)
        port = state["ports"][component]
        progress(f"  {component}: started (pid {pid}, port {port})")
        return pid

    def _stop(self, components: list[str], state: dict, timeout: float) -> dict[str, str]:
        """Stop ``components`` (and any stray process of theirs); clear their pid files."""
        pids: dict[int, str] = {}
        started: dict[int, int | None] = {}
        for c in components:
            pid, st = self._record(state, c)
            if pid:
                pids[pid] = c
                started[pid] = st
            for stray in procs.find(c, self._marker):
                pids.setdefault(stray, c)
        result = procs.stop(list(pids), pids, self._marker, timeout=timeout, started=started)
        for c in components:
            self.pid_path(c).unlink(missing_ok=True)
            state["processes"].pop(c, None)
        self._save_state(state)
        return {pids[pid]: how for pid, how in result.items() if how != "gone"}

    def _log_tail(self, component: str, n: int = 5) -> str:
        lines = [ln for ln in self.logs(component, tail=200).splitlines() if ln.strip()]
        lines = [ln for ln in lines if not ln.startswith("=== gpu-lab")]
        return " | ".join(ln.strip() for ln in lines[-n:])

    def _bind_conflict(self, component: str) -> bool:
        text = self.logs(component, tail=40)
        since = text.rsplit("=== gpu-lab", 1)[-1]
        return "address already in use" in since

    def _assign_ports(
        self, state: dict, components: set[str], say, force: bool = False
    ) -> set[str]:
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

    # ------------------------------------------------------------------ up / down

    def up(
        self, progress: Progress = print, timeout: float = UP_TIMEOUT_S, agents: bool = True
    ) -> LocalCluster:
        """Start whatever is not running and wait until every component is healthy.

        Idempotent: on a healthy lab it only checks; a killed component is restarted alone
        (plus, if its port had to change, the components that connect to it); one stopped
        by a signal (SIGSTOP) is resumed, one that stays unhealthy is restarted. With
        ``agents``, node agents and device plugins are repaired too (see
        :meth:`_repair_agents`)."""
        say = progress or _quiet
        t0 = time.monotonic()
        with self._lock(say):
            state = self._load_state()
            self._resolve_binaries(state)
            ensure_pki(self.pki.dir)
            self._ssl.clear()
            self.logs_dir.mkdir(parents=True, exist_ok=True)

            running = {}
            for c in COMPONENTS:
                running[c] = self._is_running(state, c)
                pid, started = self._record(state, c)
                if not running[c]:
                    if pid and started is not None and procs.alive(pid, started):
                        procs.wait_gone(pid, started, STOP_TIMEOUT_S)  # still exiting
                    if pid:
                        why = "is gone" if procs.cmdline(pid) is None else "is another process"
                        say(f"  {c}: removing stale pid file (pid {pid} {why})")
                        self.pid_path(c).unlink(missing_ok=True)
                        state["processes"].pop(c, None)
                    strays = procs.find(c, self._marker)
                    if strays:
                        say(f"  {c}: stopping untracked process(es) {strays}")
                        procs.stop(strays, dict.fromkeys(strays, c), self._marker)
            for c in COMPONENTS:
                if running[c] and procs.resume(self._record(state, c)[0]):
                    say(f"  {c}: resumed (it was stopped by a signal)")
            if all(running.values()):
                bad = {c: self._check(c, state) for c in COMPONENTS}
                if all(ok for ok, _ in bad.values()):
                    say(f"lab {self.name!r} is already up ({self.kubeconfig()})")
                    self._repair_addons(say)
                    if agents:
                        self._repair_agents(say)
                    return self

            todo = {c for c in COMPONENTS if not running[c]}
            for c in self._hung(state, running, todo):
                say(f"  {c}: not answering its health check; restarting it")
                todo.add(c)
            if SCHEDULER in todo:
                self._check_saved_scheduler_config(say)
            changed = self._assign_ports(state, set(todo), say)
            for c in [x for x in COMPONENTS if x in self._dependents(changed)]:
                if running[c]:
                    say(f"  {c}: restarting (a port it connects to changed)")
                    todo.add(c)
            self._write_configs(state)
            self._save_state(state)
            restart = [c for c in COMPONENTS if c in todo and running[c]]
            if restart:
                self._stop(restart, state, RESTART_STOP_TIMEOUT_S)
                for c in restart:
                    running[c] = False

            if todo:
                which = (
                    "all components"
                    if len(todo) == len(COMPONENTS)
                    else ", ".join(c for c in COMPONENTS if c in todo)
                )
                say(f"starting {which} of lab {self.name!r} in {self.dir}")
            else:
                say(f"lab {self.name!r}: waiting for every component to become healthy")
            self._bring_up(todo, state, running, say, t0 + timeout)
            say(
                f"control plane ready in {_fmt_s(time.monotonic() - t0)}; "
                f"kubeconfig: {self.kubeconfig()}"
            )
            self._repair_addons(say)
            if agents:
                self._repair_agents(say)
        return self

    def _repair_addons(self, say) -> None:
        """Kueue, when this lab runs it (``gpu-lab up --with kueue``): started again."""
        from . import kueue

        kueue.repair(self, say)

    def _hung(self, state: dict, running: dict[str, bool], todo: set[str]) -> list[str]:
        """Running components that fail their health check for ``HUNG_GRACE_S`` although
        what they connect to runs (those whose dependency restarts recover with it)."""
        candidates = [
            c for c in COMPONENTS
            if running[c] and not set(DEPENDS_ON.get(c, ())) & todo
        ]
        deadline = time.monotonic() + HUNG_GRACE_S
        while True:
            candidates = [c for c in candidates if not self._check(c, state)[0]]
            if not candidates or time.monotonic() > deadline:
                return candidates
            time.sleep(0.2)

    def _check_saved_scheduler_config(self, say) -> None:
        """Before kube-scheduler starts: a saved configuration it would refuse (saved by an
        older gpu-lab, or checked by another build) is set aside, so the lab starts."""
        saved = self._saved_scheduler_config()
        if saved is None:
            return
        try:
            self.validate_scheduler_config(saved)
        except LocalClusterError as err:
            self._set_aside_scheduler_config(str(err), say)

    def _set_aside_scheduler_config(self, why: str, say) -> None:
        custom = self._custom_scheduler_config
        aside = custom.with_name("kube-scheduler.rejected.yaml")
        with contextlib.suppress(OSError):
            os.replace(custom, aside)
        self._effective_scheduler_config_path.unlink(missing_ok=True)
        if self._load_state()["ports"].get(APISERVER):
            kc.write(self.config_dir / "kube-scheduler.yaml", self._scheduler_config_text())
        say(f"  {SCHEDULER}: the saved configuration was refused ({why[:300]}); "
            f"starting it with the default one (the refused one is kept in {aside})")

    def _repair_agents(self, say) -> None:
        """Node agents and device plugins: resume hung ones, forget the state of agents
        whose process ended, and start the ``gpu-lab up --scenario`` agent again when it is
        gone, hung beyond resuming, or lost a device plugin."""
        cli_pid = agentprocess.recorded_pid(self)
        restart = False
        for doc in agentprocess.agent_states(self):
            pid = doc["pid"]
            if procs.resume(pid):
                say(f"  {NODEAGENT}: resumed pid {pid} (it was stopped by a signal)")
            for node, info in (doc.get("nodes") or {}).items():
                if procs.resume(info.get("plugin_pid")):
                    say(f"  {PLUGIN_PREFIX}{node}: resumed (it was stopped by a signal)")
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
                restart = True
        scenario = agentprocess.recorded_scenario(self)
        if scenario and (agentprocess.agent_pid(self) is None or restart):
            if not Path(scenario).exists():
                say(f"  {NODEAGENT}: not restarted: its scenario {scenario} is gone")
                agentprocess.record_path(self).unlink(missing_ok=True)
                return
            say(f"  {NODEAGENT}: starting it for {scenario}")
            agentprocess.start(self, scenario, progress=lambda m: say(f"  {m}"))

    @staticmethod
    def _dependents(components: set[str]) -> set[str]:
        """Components that connect to one of ``components`` (and so must restart when its
        port changes); a restarted component keeps its own port, so this does not cascade."""
        return {d for d, deps in DEPENDS_ON.items() if set(deps) & components}

    def _ready_to_start(self, component: str, spawned: set[str], healthy: set[str]) -> bool:
        if component == ETCD:
            return True
        if component == APISERVER:  # it retries etcd itself; starting both at once saves time
            return ETCD in spawned or ETCD in healthy
        return APISERVER in healthy  # RBAC roles exist once /readyz passes

    def _bring_up(
        self,
        todo: set[str],
        state: dict,
        running: dict[str, bool],
        say: Callable[[str], object],
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
                if c in pending and self._ready_to_start(c, spawned, healthy):
                    self._spawn(c, state, say)
                    pending.discard(c)
                    spawned.add(c)
                    started.add(c)
            for c in COMPONENTS:
                if c not in spawned:
                    continue
                if not self._is_running(state, c):  # also a healthy one may die meanwhile
                    healthy.discard(c)
                    if self._on_exit(c, state, retries, say):
                        # a new port: restart what connects to it
                        for d in self._dependents({c}):
                            if d in spawned:
                                self._stop([d], state, RESTART_STOP_TIMEOUT_S)
                                spawned.discard(d)
                                healthy.discard(d)
                                pending.add(d)
                    spawned.discard(c)
                    pending.add(c)
                    self._write_configs(state)
                    self._save_state(state)
                    continue
                if c in healthy:
                    continue
                ok, why = self._check(c, state)
                if ok:
                    healthy.add(c)
                    if c in started:
                        say(f"  {c}: healthy after {_fmt_s(time.monotonic() - t0)}")
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
                tail = self._log_tail(waiting[0]) if waiting else ""
                raise LocalClusterError(
                    f"lab {self.name!r}: timed out waiting for {', '.join(parts)}; "
                    f"last log lines of {waiting[0]}: {tail}"
                )
            time.sleep(0.1)

    def _on_exit(self, component: str, state: dict, retries: dict, say) -> bool:
        """A component died before it became healthy. If it lost a race for its port, move
        it to another (returns True: what connects to it must restart too); if it crashed,
        start it again a couple of times; else fail with its last log lines."""
        pid, _ = self._record(state, component)
        code = procs.exited(pid) if pid else None
        self.pid_path(component).unlink(missing_ok=True)
        state["processes"].pop(component, None)
        if self._bind_conflict(component) and retries[component, "bind"] < BIND_RETRIES:
            retries[component, "bind"] += 1
            self._assign_ports(state, {component}, say, force=True)
            return True
        if component == SCHEDULER and self._saved_scheduler_config() is not None:
            # never leave a lab unable to start: run it with the default configuration
            self._set_aside_scheduler_config(self._log_tail(component, 1)[:300], say)
            return False
        detail = f" with code {code}" if code is not None else ""
        tail = self._log_tail(component, 1)
        if retries[component, "crash"] < CRASH_RETRIES:
            retries[component, "crash"] += 1
            say(f"  {component}: exited{detail} while starting ({tail[:200]}); starting it again")
            return False
        raise LocalClusterError(
            f"{component} exited{detail} while starting; see `gpu-lab logs {component}`: "
            f"{self._log_tail(component)}"
        )

    def restart(self, component: str, progress: Progress = print) -> None:
        """Stop one component and start it again (same port while it stays free)."""
        c = canonical(component)
        say = progress or _quiet
        with self._lock(say):
            state = self._load_state()
            self._resolve_binaries(state)
            self._stop([c], state, STOP_TIMEOUT_S)
            running = {x: self._is_running(state, x) for x in COMPONENTS}
            changed = self._assign_ports(state, {c}, say)
            todo = {c}
            for d in self._dependents(changed):
                if running[d]:
                    todo.add(d)
            stop = [d for d in todo if running.get(d)]
            if stop:
                self._stop(stop, state, RESTART_STOP_TIMEOUT_S)
            for d in todo:
                running[d] = False
            self._write_configs(state)
            self._save_state(state)
            self._bring_up(todo, state, running, say, time.monotonic() + UP_TIMEOUT_S)

    def down(
        self, progress: Progress = print, timeout: float = STOP_TIMEOUT_S, purge: bool = False
    ) -> dict[str, str]:
        """Stop every component (SIGTERM to its process group, SIGKILL after ``timeout``).

        Returns ``{component: "terminated" | "killed"}`` for what was running. The lab's
        data stays (a later ``up`` finds its objects again) unless ``purge``."""
        say = progress or _quiet
        t0 = time.monotonic()
        if not self.dir.exists():
            say(f"lab {self.name!r} does not exist ({self.dir})")
            return {}
        result: dict[str, str] = {}
        with self._lock(say):
            if agentprocess.stop(self, forget=purge):
                say("node agent stopped")
            from . import kueue

            how = kueue.stop(self, timeout, forget=purge)
            if how:
                say(f"  kueue: {how}")
            state = self._load_state()
            # without etcd, kube-apiserver's graceful shutdown only waits to be killed
            api_timeout = timeout if self._is_running(state, ETCD) else RESTART_STOP_TIMEOUT_S
            # clients first, then the API server, then its storage
            for group, t in (
                ([SCHEDULER, CONTROLLER_MANAGER], timeout),
                ([APISERVER], min(timeout, api_timeout)),
                ([ETCD], timeout),
            ):
                result.update(self._stop(group, state, t))
            for c in COMPONENTS:
                if c in result:
                    say(f"  {c}: {result[c]}")
        if purge:
            self._purge()
            say(f"lab {self.name!r} deleted ({self.dir})")
        say(
            f"lab {self.name!r} stopped in {_fmt_s(time.monotonic() - t0)}"
            if result
            else f"lab {self.name!r} was not running"
        )
        return result

    def _purge(self) -> None:
        # refuse to delete anything that does not look like a lab directory
        if not (self.dir / ".lock").exists() or self.dir.parent.name != "clusters":
            raise LocalClusterError(f"refusing to delete {self.dir}: not a gpu-lab lab directory")
        shutil.rmtree(self.dir)

    # ------------------------------------------------------------------ misc

    def ports(self) -> dict[str, int]:
        return dict(self._load_state()["ports"])

    def server(self) -> str | None:
        port = self._load_state()["ports"].get(APISERVER)
        return f"https://{HOST}:{port}" if port else None


def _go_error(stderr: str) -> str:
    """The message of a Go component's last ``"command failed" err="..."`` log line."""
    lines = [ln for ln in stderr.strip().splitlines() if ln.strip()]
    for ln in reversed(lines):
        m = re.search(r'err="((?:[^"\\]|\\.)*)"', ln)
        if m:
            try:
                return json.loads(f'"{m.group(1)}"')
            except ValueError:
                return m.group(1)
    return lines[-1].strip() if lines else "no output"


def listening(port: int, host: str = HOST) -> bool:
    """Whether something accepts TCP connections on ``host:port``."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        return s.connect_ex((host, port)) == 0


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
