"""Simulated GPU nodes for the real control plane: a small KWOK-like kubelet stand-in.

``NodeAgent(client, nodes, work_dir)`` plays the kubelet of every node it is given
(``gpu_lab.model.objects.Node`` records, e.g. what a ``NodePool`` expands to) against
a real API server:

* **Nodes**: registers each v1 Node (labels incl. GPU Feature Discovery's, taints,
  unschedulable) and keeps it Ready: status conditions, addresses (an unused
  127.0.0.x), nodeInfo (kubelet v1.37.2, runtime ``gpu-lab://fake``), capacity and
  allocatable, and a ``coordination.k8s.io/v1`` Lease in ``kube-node-lease`` renewed
  every ``heartbeat`` seconds, so node-lifecycle never taints it unreachable. Node
  status is patched when it changes, and every ``status_report`` seconds otherwise,
  always with the Node's uid: once that Node is deleted (``reset()``) the agent lets the
  node go (its plugin stops, nothing writes that name again), so a node registered again
  under the same name shows only its new agent's figures.
* **Device plugins**: every node with GPUs gets one fake NVIDIA device-plugin
  *process* (``gpu_lab.deviceplugin.plugin``, its own folder
  ``WORK_DIR/<node>/device-plugins``) and, in this process, a kubelet Registration
  server (``KubeletServer``) feeding the node's ``DeviceManager`` over the real gRPC
  API. Capacity/allocatable of device resources are the manager's (real kubelet
  semantics): ``kill_plugin(node)`` and allocatable drops to 0 on the Node within a
  few tenths of a second while capacity stays; new GPU pods pend in kube-scheduler.
  ``restart_plugin(node)`` restores it. Pools whose devices the fake plugin would not
  advertise exactly as the record lists them, and plain Node manifests listing
  ``nvidia.com/*`` capacity, get a device manager with fixed devices instead (``node.py``).
* **MIG manager**: a new ``nvidia.com/mig.config`` label on a node repartitions its GPUs as
  NVIDIA's MIG manager does (``migmanager.py``): ``nvidia.com/mig.config.state`` goes
  ``pending`` then ``success`` (or ``failed``), the device plugin restarts with the new
  layout and re-advertises; ``allow_mig_eviction`` lets it evict the pods holding GPUs.
* **DRA**: the nodes of a NodePool with ``spec.dra`` run NVIDIA's DRA driver instead of a
  device plugin: the agent installs its DeviceClasses and publishes each node's
  ResourceSlices (``dradriver.resourceslices``); a pod with ResourceClaims is "prepared"
  as the kubelet and the driver's kubelet plugin do it (``dradriver.prepare``): its
  devices go in the same
  annotations (keyed ``gpu.nvidia.com``, or the extended resource the scheduler's claim
  serves), plus ``gpulab.dev/cdi-devices``; a claim not ready yet gets a
  ``FailedPrepareDynamicResources`` event and another try a second later.
* **Pods** bound to its nodes: admission as the kubelet does it (device-manager
  ``Allocate`` for every container first, through the plugin's
  ``GetPreferredAllocation`` and ``Allocate``; then the resource-fit predicate), then
  the devices and the plugin's environment go on the pod as annotations
  ``gpulab.dev/devices`` (``{container: {resource: [ids]}}``) and ``gpulab.dev/env``
  (``{container: {NVIDIA_VISIBLE_DEVICES: ...}}``) and the pod turns Running. A
  rejected pod fails with the kubelet's reason (``UnexpectedAdmissionError``,
  ``OutOf<resource>``) and message, plus a Warning event. Pods annotated
  ``gpulab.dev/duration: 30s`` exit 0 after that long (phase Succeeded), so Jobs
  complete. Pods being deleted release their devices and are deleted at once
  (``gracePeriodSeconds=0``); deleted pods release theirs.

In a program::

    agent = NodeAgent(kube, load_scenario("cluster.yaml").nodes, "/tmp/gla").start()
    ...
    agent.kill_plugin("h100-0")        # the production bug: allocatable 0, pods pend
    agent.restart_plugin("h100-0")
    agent.stop()

As a process (until SIGTERM; its plugin processes end with it)::

    python -m gpu_lab.kubelet.agent --kubeconfig K --scenario FILE --work-dir DIR
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import itertools
import json
import logging
import os
import queue
import signal
import sys
import threading
import time
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# gRPC C-core (the kubelet servers below) reads this when it starts: no INFO lines in the
# terminal unless the user asked for them
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from ..dradriver import prepare as dra
from ..dradriver import resourceslices as rs
from ..dradriver.objects import is_dra
from ..errors import (
    DeviceAllocationError,
    GpuLabError,  # noqa: E402
    NodeAgentError,
)
from ..kube import (
    AlreadyExists,
    ApiError,
    CancellableWatch,
    KubeClient,
    NotFound,
    Unreachable,
)
from ..model.documents import load_documents
from ..model.nodepool import MIG_CONFIG_LABEL
from ..model.objects import Node
from ..model.scenario import parse_scenario
from ..names import TERMINAL_PHASES
from ..processes import start_time
from . import migmanager
from . import nodestatus as ns
from . import podlifecycle as pl
from .admission import REJECTED_PREFIX, admit_devices, fit_failure
from .devicemanager import ENDPOINT_STOP_GRACE_PERIOD
from .node import AgentNode, PodState

log = logging.getLogger("gpu_lab.nodeagent")

STATUS_TICK_S = 0.1  # how often device-manager figures are compared with what the Node shows
STATUS_REPORT_S = 60.0  # a node status patch at least this often (the kubelet: 5 min)
WATCH_TIMEOUT_S = 60
START_TIMEOUT_S = 30.0
BOUND_PODS = "spec.nodeName!="
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
NOT_READY_WAIT_S = 10.0
PREPARE_RETRY_S = 1.0  # a pod whose ResourceClaims cannot be prepared yet is tried again
#: each running agent keeps ``WORK_DIR/agents/<pid>-<n>.json`` fresh, so that ``gpu-lab
#: status`` (another process) can show it and its device plugins with their health
AGENTS_DIR = "agents"
STATE_WRITE_S = 1.0
_AGENT_SEQ = itertools.count()
#: the agents started in this process and not stopped yet: a lab's ``reset()`` stops those of
#: its lab whichever session started them (a lesson connects anew for each case)
_RUNNING: set[NodeAgent] = set()
_RUNNING_LOCK = threading.Lock()


def agent_state_files(work_dir: Path | str) -> list[Path]:
    """The state files of the node agents that use ``work_dir`` (live or left behind)."""
    return sorted((Path(work_dir) / AGENTS_DIR).glob("*.json"))


def stop_running(work_dir: Path | str) -> int:
    """Stop every agent of this process that uses ``work_dir``; return how many ran."""
    where = Path(work_dir).absolute()
    with _RUNNING_LOCK:
        agents = [a for a in _RUNNING if a.work_dir == where]
    for a in agents:
        a.stop()
    return len(agents)


def _not_ours(err: ApiError) -> bool:
    """A Node write refused because the Node is gone, or is another object under the same
    name now (the uid the write carries is immutable: 422, or 409 with no object)."""
    return isinstance(err, NotFound) or err.code in (409, 422) and "uid" in str(err).lower()


class NodeAgent:
    """The kubelet of a set of simulated nodes (see the module docstring)."""

    def __init__(
        self,
        client: KubeClient,
        nodes: Iterable[Node],
        work_dir: Path | str,
        lease_seconds: int = 40,
        heartbeat: float = 10.0,
        *,
        status_report: float = STATUS_REPORT_S,
        grace_period: float = ENDPOINT_STOP_GRACE_PERIOD,
    ):
        self.client = client
        self.work_dir = Path(work_dir).absolute()
        self.lease_seconds, self.heartbeat, self.status_report = (
            lease_seconds,
            heartbeat,
            status_report,
        )
        nodes = list(nodes)
        names = [n.name for n in nodes]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup:
            raise NodeAgentError(f'node "{dup}" is listed twice')
        # The kubelet side's clock: real time plus what advance() added, so a lesson can
        # skip the 5-minute device-plugin grace period or a pod's duration on a real
        # control plane (whose own clock keeps real time).
        self._skew = 0.0
        self.nodes: dict[str, AgentNode] = {
            n.name: AgentNode(n, i, self.work_dir, grace_period, clock=self.now)
            for i, n in enumerate(nodes)
        }
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._watch_thread: threading.Thread | None = None
        self._watcher: CancellableWatch | None = None
        self._node_watch_thread: threading.Thread | None = None
        self._node_watcher: CancellableWatch | None = None
        self._clients: list[KubeClient] = []
        self._timers: list[tuple[float, int, str, str, str]] = []
        self._timer_seq = itertools.count()
        self._timer_cond = threading.Condition()
        self._started = False
        self._generation = 0  # a watch thread from before a stop() must not come back
        self._retire_lock = threading.Lock()
        self.started_in: float | None = None
        self.state_path = self.work_dir / AGENTS_DIR / f"{os.getpid()}-{next(_AGENT_SEQ)}.json"
        self._state_written = 0.0

    def now(self) -> float:
        """Seconds on the node side's clock (monotonic, plus every ``advance``)."""
        return time.monotonic() + self._skew

    def advance(self, seconds: float) -> None:
        """Move the node side's clock forward: grace periods run out and timed pods end
        as if ``seconds`` had passed; the next status tick publishes the result."""
        with self._timer_cond:
            self._skew += float(seconds)
            self._timer_cond.notify_all()

    def time_to_last_timer(self) -> float:
        """Seconds until the last queued pod ending (0 when none is queued)."""
        with self._timer_cond:
            return max((t - self.now() for t, *_ in self._timers), default=0.0)

    # ------------------------------------------------------------------ lifecycle
    def _new_client(self) -> KubeClient:
        c = KubeClient(self.client.creds, timeout=self.client.timeout)
        self._clients.append(c)
        return c

    def start(self, timeout: float = START_TIMEOUT_S) -> NodeAgent:
        """Start the plugins, wait until they serve, register the Nodes Ready, then
        follow pods. Raises :class:`NodeAgentError` (after cleaning up) on failure."""
        if self._started:
            return self
        t0 = time.monotonic()
        self._stopping.clear()
        with _RUNNING_LOCK:
            _RUNNING.add(self)
        try:
            self.work_dir.mkdir(parents=True, exist_ok=True)
            for sn in self.nodes.values():
                sn.start_devices()
            self.write_state(ready=False)
            self._wait_plugins(t0 + timeout)
            client = self._new_client()
            self._spawn(self._timer_loop, "nodeagent-timers")
            for sn in self.nodes.values():
                self._spawn(self._worker, f"nodeagent-{sn.name}", sn)
            # pods already bound to these nodes (an agent restarted, a node re-created
            # with pods still terminating on it) are settled before the nodes turn Ready
            lst = client.list("Pod", field_selector=BOUND_PODS)
            for ev in self._resync(lst.get("items") or []):
                ev.wait(max(0.1, t0 + timeout - time.monotonic()))
            for sn in self.nodes.values():
                self._register(client, sn)
            self._publish_dra(client)
            self._wait_schedulable(client, t0 + timeout)
            self._spawn(self._status_loop, "nodeagent-status")
            self._generation += 1
            self._watcher = CancellableWatch(self._new_client())
            self._watch_thread = threading.Thread(
                target=self._watch_pods,
                args=(self._generation, self._watcher, lst["metadata"]["resourceVersion"]),
                name="nodeagent-watch",
                daemon=True,
            )
            self._watch_thread.start()
            self._node_watcher = CancellableWatch(self._new_client())
            self._node_watch_thread = threading.Thread(
                target=self._watch_nodes, args=(self._generation, self._node_watcher),
                name="nodeagent-node-watch", daemon=True,
            )
            self._node_watch_thread.start()
        except BaseException:
            self.stop()
            raise
        self._started = True
        self.started_in = time.monotonic() - t0
        self.write_state()
        log.info("%d node(s) ready in %.1f s", len(self.nodes), self.started_in)
        return self

    def write_state(self, ready: bool = True) -> None:
        """Publish this agent's pid, a heartbeat and each plugin's pid and state (atomic)."""

        nodes = {}
        for sn in self.nodes.values():
            if sn.retired:  # its Node was deleted: no longer this agent's
                continue
            plugin = sn.plugin if sn.has_plugin else None
            nodes[sn.name] = {
                "plugin": plugin is not None,
                "plugin_pid": plugin.pid if plugin is not None and plugin.alive else None,
                "plugin_starts": plugin.starts if plugin is not None else 0,
                "serving": bool(plugin is not None and sn.plugin_serving()),
                "log": str(plugin.log_path) if plugin is not None else None,
                "static": sn.static_reason or None if plugin is None else None,
            }
        doc = {
            "pid": os.getpid(),
            "start_time": start_time(os.getpid()),
            "argv": sys.argv[:3],
            "ready": ready,
            "heartbeat": time.time(),
            "nodes": nodes,
        }
        try:
            self.state_path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.state_path.with_suffix(".tmp")
            tmp.write_text(json.dumps(doc, indent=1) + "\n")
            os.replace(tmp, self.state_path)
            self._state_written = time.monotonic()
        except OSError as err:  # status only: never stop the agent for it
            log.debug("cannot write %s: %s", self.state_path, err)

    def _spawn(self, target, name: str, *args) -> None:
        t = threading.Thread(target=target, args=args, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def _wait_plugins(self, deadline: float) -> None:
        waiting = [sn for sn in self.nodes.values() if sn.has_plugin]
        while waiting:
            for sn in list(waiting):
                plugin = sn.started()[1]  # has_plugin nodes, after start_devices
                if sn.plugin_serving():
                    waiting.remove(sn)
                elif not plugin.alive:
                    assert plugin.proc is not None  # it was started
                    raise NodeAgentError(
                        f"the device plugin of {sn.name} exited with code "
                        f"{plugin.proc.returncode}: {plugin.log_tail()}"
                    )
            if not waiting:
                return
            if time.monotonic() > deadline:
                sn = waiting[0]
                raise NodeAgentError(
                    f"the device plugin of {sn.name} did not register in time: "
                    f"{sn.started()[1].log_tail() or 'no output'}"
                )
            waiting[0].started()[0].wait_for(waiting[0].plugin_serving, timeout=0.1)

    def _wait_schedulable(self, client: KubeClient, deadline: float) -> None:
        """kube-apiserver's TaintNodesByCondition admission gives every new Node the
        ``node.kubernetes.io/not-ready:NoSchedule`` taint; node-lifecycle (in
        kube-controller-manager) lifts it once it sees Ready. Wait for that, so pods
        created right after ``start()`` can land; without a controller-manager, go on."""
        waiting = set(self.nodes)
        deadline = min(deadline, time.monotonic() + NOT_READY_WAIT_S)
        while waiting and time.monotonic() < deadline:
            for name in sorted(waiting):
                taints = client.get("Node", name).get("spec", {}).get("taints") or []
                if not any(t.get("key") == NOT_READY_TAINT for t in taints):
                    waiting.discard(name)
            if waiting:
                time.sleep(0.05)
        if waiting:
            log.warning(
                "%s still tainted %s (is kube-controller-manager running?)",
                ", ".join(sorted(waiting)),
                NOT_READY_TAINT,
            )

    def stop(self, delete_nodes: bool = False) -> None:
        """Stop following pods and nodes, stop every plugin process and kubelet server.

        The Nodes stay (they turn NotReady once their Lease expires, as when a kubelet
        stops) unless ``delete_nodes``."""
        self._stopping.set()
        with _RUNNING_LOCK:
            _RUNNING.discard(self)
        self._generation += 1
        with self._timer_cond:
            self._timer_cond.notify_all()
        for t in self._threads:
            t.join(5)
        self._threads = []
        if self._watcher is not None:
            self._watcher.cancel()  # an open watch would also hold up kube-apiserver's shutdown
            self._watcher = None
        if self._watch_thread is not None:
            self._watch_thread.join(5)
            self._watch_thread = None
        if self._node_watcher is not None:
            self._node_watcher.cancel()
            self._node_watcher = None
        if self._node_watch_thread is not None:
            self._node_watch_thread.join(5)
            self._node_watch_thread = None
        for sn in self.nodes.values():
            try:
                sn.stop_devices()
            except Exception:  # noqa: BLE001 - keep stopping the others
                log.exception("stopping the devices of %s", sn.name)
        if delete_nodes:
            client = self._new_client()
            for sn in self.nodes.values():
                with contextlib.suppress(ApiError, Unreachable):
                    client.delete("Node", sn.name, missing_ok=True)
                if sn.dra_devices:  # else the garbage collector removes them with the Node
                    with contextlib.suppress(ApiError, Unreachable):
                        for o in client.list("ResourceSlice", api_version=rs.API_VERSION,
                                             field_selector=f"spec.nodeName={sn.name}")["items"]:
                            client.delete("ResourceSlice", o["metadata"]["name"],
                                          api_version=rs.API_VERSION, missing_ok=True)
                with contextlib.suppress(ApiError, Unreachable):
                    client.delete(
                        "Lease",
                        sn.name,
                        ns.NODE_LEASE_NAMESPACE,
                        "coordination.k8s.io/v1",
                        missing_ok=True,
                    )
        for c in self._clients:
            c.close()
        self._clients = []
        self._started = False
        self.state_path.unlink(missing_ok=True)

    def __enter__(self) -> NodeAgent:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # ------------------------------------------------------------------ lessons/tests
    def node(self, name: str) -> AgentNode:
        try:
            sn = self.nodes[name]
        except KeyError:
            raise NodeAgentError(
                f'node "{name}" is not simulated by this agent ({", ".join(self.nodes)})'
            ) from None
        if sn.retired:
            raise NodeAgentError(f'node "{name}" was deleted; this agent no longer plays it')
        return sn

    def _retire(self, sn: AgentNode, why: str) -> None:
        """The node's Node was deleted (or is another node's now): stop playing it, as no
        kubelet outlives its machine. Its plugin and Registration server stop at once, so
        that a node registered again under the same name (same plugin folder) meets only
        its own; nothing of this agent writes that Node again."""
        with self._retire_lock:
            if sn.retired:
                return
            sn.retired = True
        log.info("%s: %s; no longer playing it", sn.name, why)
        try:
            sn.stop_devices()
        except Exception:  # noqa: BLE001 - the node is retired all the same
            log.exception("stopping the devices of %s", sn.name)
        if not self._stopping.is_set():
            self.write_state()  # reset() waits until no live agent lists a node

    def _plugin_of(self, name: str) -> AgentNode:
        sn = self.node(name)
        if not sn.has_plugin:
            why = f" ({sn.static_reason})" if sn.static_reason else ""
            raise NodeAgentError(f"node {name} runs no device plugin{why}")
        return sn

    def kill_plugin(self, name: str, sig: int = signal.SIGKILL) -> None:
        """Kill a node's device-plugin process (a crash): the kubelet side sees its
        ListAndWatch stream break, allocatable of its resources drops to 0."""
        self._plugin_of(name).started()[1].kill(sig)

    def restart_plugin(self, name: str, wait: bool = True, timeout: float = 15.0) -> bool:
        """Start a node's plugin again (stopping it first if it runs); with ``wait``,
        return whether it registered and reported healthy devices within ``timeout``."""
        sn = self._plugin_of(name)
        kubelet, plugin = sn.started()
        if plugin.alive:
            plugin.stop()
        t0 = time.monotonic()
        plugin.start()
        if not wait:
            return True
        deadline = t0 + timeout
        while time.monotonic() < deadline:
            if kubelet.wait_for(lambda: sn.plugin_serving(t0), timeout=0.2):
                return True
            if not plugin.alive:
                return False
        return False

    def allow_mig_eviction(self, name: str, config: str | None) -> None:
        """Let the node's MIG manager evict the pods holding its GPUs to apply ``config``
        (None: to apply nothing), as an operator drains a node before relabelling it."""
        self.node(name).mig_evict = config

    def mig_runs(self, name: str) -> tuple[int, migmanager.MigOutcome | None]:
        """How many times the node's MIG manager ran, and how its last run ended."""
        sn = self.node(name)
        return sn.mig_runs, sn.mig_outcome

    def plugin_alive(self, name: str) -> bool:
        sn = self.node(name)
        return sn.plugin is not None and sn.plugin.alive

    # ------------------------------------------------------------------ nodes
    def _register(self, client: KubeClient, sn: AgentNode) -> None:
        cap, alloc = sn.published()
        status = ns.node_status(sn.node, sn.ip, cap, alloc, sn.boot_id)
        body = ns.node_object(sn.node)
        body["status"] = {**status, "conditions": ns.conditions(ns.rfc3339(), sn.ready_since)}
        try:
            obj = client.create(body)
        except ApiError as err:
            if err.reason != "AlreadyExists":
                raise NodeAgentError(f"cannot register node {sn.name}: {err}") from None
            meta = {k: v for k, v in body["metadata"].items() if k in ("labels", "annotations")}
            obj = client.patch("Node", sn.name, {"metadata": meta})
        sn.uid = obj["metadata"]["uid"]
        self._patch_status(client, sn, status)
        self._renew_lease(client, sn)

    def _patch_status(self, client: KubeClient, sn: AgentNode, status: dict) -> None:
        # the uid (immutable) makes the API server refuse the write when the Node is another
        # object by now: a node deleted and registered again by another agent keeps its figures
        body = {"metadata": {"uid": sn.uid},
                "status": {**status, "conditions": ns.conditions(ns.rfc3339(), sn.ready_since)}}
        client.patch("Node", sn.name, body, subresource="status")
        sn.last_status, sn.last_beat = status, time.monotonic()

    def _renew_lease(self, client: KubeClient, sn: AgentNode) -> None:
        renew = ns.micro_time()
        try:
            client.patch(
                "Lease", sn.name, {"spec": {"renewTime": renew, "holderIdentity": sn.name}},
                namespace=ns.NODE_LEASE_NAMESPACE, api_version="coordination.k8s.io/v1",
            )  # fmt: skip
        except NotFound:
            client.create(ns.lease_object(sn.name, sn.uid, self.lease_seconds, renew))
        sn.last_lease = time.monotonic()

    def _status_loop(self) -> None:
        client = self._new_client()
        complained: dict[str, float] = {}
        while not self._stopping.wait(STATUS_TICK_S):
            if time.monotonic() - self._state_written >= STATE_WRITE_S:
                self.write_state()
            for sn in self.nodes.values():
                if self._stopping.is_set():
                    return
                if sn.retired:
                    continue
                try:
                    self._sync_node(client, sn)
                except (ApiError, Unreachable) as err:
                    if isinstance(err, ApiError) and _not_ours(err):
                        self._retire(sn, f"its Node is gone ({err})")
                        continue
                    now = time.monotonic()
                    if now - complained.get(sn.name, -1e9) > 30:
                        log.warning("%s: cannot update node status: %s", sn.name, err)
                        complained[sn.name] = now

    def _sync_node(self, client: KubeClient, sn: AgentNode) -> None:
        now = time.monotonic()
        cap, alloc = sn.published()
        status = ns.node_status(sn.node, sn.ip, cap, alloc, sn.boot_id)
        if status != sn.last_status or now - sn.last_beat >= self.status_report:
            if sn.last_status is not None and status != sn.last_status:
                log.info("%s: allocatable %s", sn.name, status["allocatable"])
            self._patch_status(client, sn, status)
        if now - sn.last_lease >= self.heartbeat:
            self._renew_lease(client, sn)

    # ------------------------------------------------------------------ pod watch
    def _watch_pods(self, generation: int, watcher: CancellableWatch, rv: str | None) -> None:
        client = watcher.client
        while not self._stopping.is_set() and generation == self._generation:
            try:
                if rv is None:
                    lst = client.list("Pod", field_selector=BOUND_PODS)
                    rv = lst["metadata"]["resourceVersion"]
                    self._resync(lst.get("items") or [])
                for ev in watcher.stream(
                    "Pod", resource_version=rv, field_selector=BOUND_PODS,
                    timeout_seconds=WATCH_TIMEOUT_S,
                ):  # fmt: skip
                    if self._stopping.is_set() or generation != self._generation:
                        return
                    rv = (ev.object.get("metadata") or {}).get("resourceVersion") or rv
                    if ev.type in ("ADDED", "MODIFIED", "DELETED"):
                        self._dispatch(ev.type, ev.object)
            except ApiError as err:
                if err.code != 410:
                    log.warning("pod watch: %s", err)
                    self._stopping.wait(1.0)
                rv = None
            except Exception as err:  # noqa: BLE001 - the watch must go on
                if self._stopping.is_set():
                    return
                if isinstance(err, Unreachable):
                    log.warning("pod watch: %s", err)
                else:
                    log.exception("pod watch")
                self._stopping.wait(1.0)
                rv = None

    def _dispatch(self, kind: str, pod: dict) -> None:
        sn = self.nodes.get((pod.get("spec") or {}).get("nodeName") or "")
        if sn is not None and not sn.retired:
            sn.queue.put(("pod", kind, pod))

    def _resync(self, pods: list[dict]) -> list[threading.Event]:
        """Hand a full pod list to the workers; pods they know that the list lacks are
        gone. Returns one event per node, set once its worker has handled the list."""
        seen: dict[str, set[str]] = {name: set() for name in self.nodes}
        for pod in pods:
            node = (pod.get("spec") or {}).get("nodeName")
            if node in seen:
                seen[node].add(pod["metadata"]["uid"])
                self._dispatch("ADDED", pod)
        done = []
        for name, uids in seen.items():
            ev = threading.Event()
            self.nodes[name].queue.put(("sync", uids, ev))
            done.append(ev)
        return done

    # ------------------------------------------------------------------ MIG manager
    def _watch_nodes(self, generation: int, watcher: CancellableWatch) -> None:
        """Follow the Nodes' ``nvidia.com/mig.config`` labels (the MIG manager's trigger)."""
        client = watcher.client
        rv = None
        while not self._stopping.is_set() and generation == self._generation:
            try:
                if rv is None:
                    lst = client.list("Node")
                    rv = lst["metadata"]["resourceVersion"]
                    uids = {n["metadata"]["name"]: n["metadata"].get("uid") for n in lst.get("items") or []}
                    for sn in self.nodes.values():  # deleted while the watch was down
                        if sn.uid is not None and uids.get(sn.name) != sn.uid:
                            self._retire(sn, "its Node was deleted")
                    for node in lst.get("items") or []:
                        self._node_changed(node)
                for ev in watcher.stream("Node", resource_version=rv, timeout_seconds=WATCH_TIMEOUT_S):
                    if self._stopping.is_set() or generation != self._generation:
                        return
                    rv = (ev.object.get("metadata") or {}).get("resourceVersion") or rv
                    if ev.type in ("ADDED", "MODIFIED"):
                        self._node_changed(ev.object)
                    elif ev.type == "DELETED":
                        self._node_deleted(ev.object)
            except ApiError as err:
                if err.code != 410:
                    log.warning("node watch: %s", err)
                    self._stopping.wait(1.0)
                rv = None
            except Exception as err:  # noqa: BLE001 - the watch must go on
                if self._stopping.is_set():
                    return
                log.warning("node watch: %s", err)
                self._stopping.wait(1.0)
                rv = None

    def _node_deleted(self, node: dict) -> None:
        meta = node.get("metadata") or {}
        sn = self.nodes.get(meta.get("name", ""))
        if sn is not None and sn.uid is not None and meta.get("uid") == sn.uid:
            self._retire(sn, "its Node was deleted")

    def _node_changed(self, node: dict) -> None:
        meta = node.get("metadata") or {}
        sn = self.nodes.get(meta.get("name", ""))
        if sn is not None and sn.uid is not None and meta.get("uid") not in (None, sn.uid):
            self._retire(sn, "its Node is another object now (deleted and registered again)")
            return
        wanted = (meta.get("labels") or {}).get(MIG_CONFIG_LABEL)
        if sn is not None and wanted != sn.mig_seen:
            sn.mig_seen = wanted  # each new value taken up once; a removed label asks for nothing
            if wanted is not None:
                sn.queue.put(("mig", wanted, None))

    def _mig(self, client: KubeClient, sn: AgentNode, wanted: str) -> None:
        try:
            outcome = migmanager.run(client, sn, wanted, lambda key, why: self._evict(client, sn, key, why))
        except (GpuLabError, ApiError, Unreachable) as err:
            outcome = migmanager.MigOutcome(wanted, "failed", message=str(err))
        finally:
            plugin = sn.plugin
            if sn.has_plugin and plugin is not None and not plugin.alive:
                plugin.start()  # never leave the node without its plugin
        log.info("%s: MIG manager: %s=%s: %s %s", sn.name, MIG_CONFIG_LABEL, wanted, outcome.state,
                 outcome.message)
        sn.mig_outcome = outcome
        sn.mig_runs += 1  # after the outcome: a reader that sees the count sees the outcome

    def _evict(self, client: KubeClient, sn: AgentNode, key: str, message: str) -> None:
        """The kubelet evicts a pod: a Warning event, phase Failed with reason Evicted, its
        devices released."""
        st = next((st for st in sn.pods.values() if st.key == key and not st.terminal), None)
        if st is None:
            return
        namespace, name = key.split("/", 1)
        pod = {"metadata": {"name": name, "namespace": namespace, "uid": st.uid}}
        self._event(client, sn, pod, "Evicted", message)
        body = {"metadata": {"uid": st.uid}, "status": pl.evicted_status(message)}
        with contextlib.suppress(ApiError):
            client.patch("Pod", name, body, namespace=namespace, patch_type="strategic",
                         subresource="status")
        st.terminal = True
        self._release(sn, st)
        log.info("%s: evicted %s: %s", sn.name, key, message)

    # ------------------------------------------------------------------ pod worker
    def _worker(self, sn: AgentNode) -> None:
        client = self._new_client()
        while not self._stopping.is_set() and not sn.retired:
            try:
                what, a, b = sn.queue.get(timeout=0.2)
            except queue.Empty:
                continue
            try:
                if what == "pod":
                    self._on_pod(client, sn, a, b)
                elif what == "complete":
                    self._complete(client, sn, a, b)
                elif what == "prepare":
                    self._retry_prepare(client, sn, a)
                elif what == "mig":
                    self._mig(client, sn, a)
                elif what == "sync":
                    for uid in [u for u in sn.pods if u not in a]:
                        self._forget(sn, uid)
                    b.set()
            except Unreachable as err:
                log.warning("%s: %s", sn.name, err)
            except Exception:  # noqa: BLE001 - one bad pod must not stop the node
                log.exception("%s: handling a pod", sn.name)

    def _on_pod(self, client: KubeClient, sn: AgentNode, kind: str, pod: dict) -> None:
        meta = pod.get("metadata") or {}
        uid = meta.get("uid", "")
        st = sn.pods.get(uid)
        if kind == "DELETED":
            self._forget(sn, uid)
            return
        phase = (pod.get("status") or {}).get("phase")
        deleting = bool(meta.get("deletionTimestamp"))
        if st is None:
            st = PodState(uid, pl.pod_key(pod))
            sn.pods[uid] = st
            if phase in TERMINAL_PHASES:
                st.terminal = True
            elif phase == "Running":
                self._adopt(sn, st, pod)
            elif not deleting:
                self._admit(client, sn, st, pod)
        elif phase in TERMINAL_PHASES and not st.terminal:
            self._release(sn, st)
            st.terminal = True
        if deleting and not st.deleting:
            st.deleting = True
            self._release(sn, st)
            self._delete_now(client, pod)

    def _forget(self, sn: AgentNode, uid: str) -> None:
        st = sn.pods.pop(uid, None)
        if st is not None:
            self._release(sn, st)

    def _release(self, sn: AgentNode, st: PodState) -> None:
        if st.admitted:
            st.admitted = False
            sn.manager.release(st.uid)
            log.info("%s: released %s", sn.name, st.key)

    def _delete_now(self, client: KubeClient, pod: dict) -> None:
        meta = pod["metadata"]
        path = client.resource("Pod").path(meta["namespace"], meta["name"])
        body = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": meta["uid"]},
        }
        with contextlib.suppress(ApiError):  # gone, or another pod by now (uid precondition)
            client.request("DELETE", path, body=body)

    def _adopt(self, sn: AgentNode, st: PodState, pod: dict) -> None:
        """A pod this node ran before the agent (re)started: hold its devices again."""
        meta = pod.get("metadata") or {}
        st.requests = pl.pod_requests(pod)
        st.admitted = True
        st.started = (pod.get("status") or {}).get("startTime")
        try:
            held = json.loads((meta.get("annotations") or {}).get(pl.DEVICES_ANNOTATION) or "{}")
        except ValueError:
            held = {}
        for container, per in (held or {}).items():
            for r, ids in (per or {}).items():
                try:
                    sn.manager.allocate(st.uid, container, r, len(ids), preferred=ids)
                except (DeviceAllocationError, GpuLabError) as err:
                    log.warning("%s: %s keeps running without its %s: %s", sn.name, st.key, r, err)
        self._schedule_end(sn, st, pod)
        log.info("%s: adopted running pod %s", sn.name, st.key)

    def _admit(self, client: KubeClient, sn: AgentNode, st: PodState, pod: dict) -> None:
        meta = pod["metadata"]
        m = sn.manager
        got = admit_devices(
            m, st.uid, pl.device_requests(pod, set(m.capacity())), sn.config,
            kubelet=sn.kubelet, plugin_resources=sn.plugin_resources,
        )  # fmt: skip
        if got.failure:
            self._reject(client, sn, st, pod, *got.failure)
            return
        devices, envs = got.devices, got.envs
        st.requests = pl.pod_requests(pod)
        used, count = sn.used()
        failure = fit_failure(st.requests, used, count, sn.admission_allocatable())
        if failure:
            m.release(st.uid)
            self._reject(client, sn, st, pod, *failure)
            return
        cdi: dict[str, list[str]] = {}
        if dra.uses_claims(pod):
            prepared = self._prepare_claims(client, sn, st, pod)
            if prepared is None:
                m.release(st.uid)
                return
            for container, per in prepared.devices.items():
                devices.setdefault(container, {}).update(per)
                envs.setdefault(container, {}).update(prepared.env[container])
            cdi = prepared.cdi
        st.admitted = True
        spec = pod.get("spec") or {}
        pod_ip = sn.ip if spec.get("hostNetwork") else sn.next_pod_ip()
        status = pl.running_status(pod, sn.ip, pod_ip)
        st.started = status["startTime"]
        body: dict[str, Any] = {"metadata": {"uid": st.uid}, "status": status}
        if devices:
            body["metadata"]["annotations"] = {
                pl.DEVICES_ANNOTATION: json.dumps(devices, sort_keys=True),
                pl.ENV_ANNOTATION: json.dumps(envs, sort_keys=True),
            }
            if cdi:
                body["metadata"]["annotations"][pl.CDI_ANNOTATION] = json.dumps(cdi, sort_keys=True)
        try:
            client.patch(
                "Pod", meta["name"], body, namespace=meta["namespace"],
                patch_type="strategic", subresource="status",
            )  # fmt: skip
        except ApiError as err:
            log.info("%s: %s went away before it started: %s", sn.name, st.key, err)
            self._release(sn, st)
            st.terminal = True
            return
        log.info("%s: %s running%s", sn.name, st.key, f" with {devices}" if devices else "")
        self._schedule_end(sn, st, pod, fresh=True)

    # ------------------------------------------------------------------ DRA
    def _publish_dra(self, client: KubeClient) -> None:
        """NVIDIA's DRA driver on the DRA nodes: its DeviceClasses (what its Helm chart
        installs; one that exists is left alone) and each node's ResourceSlices."""
        dra_nodes = [sn for sn in self.nodes.values() if sn.dra_devices]
        if not dra_nodes:
            return
        for dc in rs.device_classes():
            with contextlib.suppress(AlreadyExists):
                client.create(dc)
        for sn in dra_nodes:
            old = client.list("ResourceSlice", api_version=rs.API_VERSION,
                              field_selector=f"spec.nodeName={sn.name},spec.driver={rs.DRIVER}")["items"]
            generation = max((o["spec"]["pool"].get("generation", 0) for o in old), default=0)
            for o in old:  # the kubelet's slice controller bumps the pool's generation instead
                client.delete("ResourceSlice", o["metadata"]["name"], api_version=rs.API_VERSION,
                              missing_ok=True)
            for body in rs.resource_slices(sn.node, sn.uid, generation + 1):
                try:
                    client.create(body)
                except ApiError as err:
                    raise NodeAgentError(f"cannot publish the ResourceSlices of {sn.name}: {err}") from None
            log.info("%s: published %d DRA device(s) of driver %s", sn.name, len(sn.dra_devices), rs.DRIVER)

    def _prepare_claims(self, client: KubeClient, sn: AgentNode, st: PodState, pod: dict):
        """The kubelet's PrepareResources: the pod's claims' devices, or None (then a Warning
        event and another try in a second, as the kubelet retries)."""
        namespace = pod["metadata"]["namespace"]

        def get_claim(name: str) -> dict | None:
            try:
                return client.get("ResourceClaim", name, namespace, api_version=rs.API_VERSION)
            except NotFound:
                return None

        try:
            return dra.prepare(pod, sn.name, sn.dra_devices, get_claim)
        except dra.NotPrepared as err:
            message = f"Failed to prepare dynamic resources: prepare dynamic resources: {err}"
            if message != st.prepare_error:
                st.prepare_error = message
                log.info("%s: %s: %s", sn.name, st.key, message)
                self._event(client, sn, pod, "FailedPrepareDynamicResources", message)
            with self._timer_cond:
                heapq.heappush(self._timers, (self.now() + PREPARE_RETRY_S, next(self._timer_seq),
                                              sn.name, st.uid, "prepare"))
                self._timer_cond.notify_all()
            return None

    def _current(self, client: KubeClient, sn: AgentNode, uid: str, admitted: bool):
        """``(state, pod)`` when the pod ``uid`` is still this node's, live, admitted or not
        as asked, and still the same object on the API server; else None (a pod that is gone
        or was recreated under its name is forgotten)."""
        st = sn.pods.get(uid)
        if st is None or st.admitted != admitted or st.terminal or st.deleting:
            return None
        namespace, name = st.key.split("/", 1)
        try:
            pod = client.get("Pod", name, namespace)
        except NotFound:
            pod = None
        if pod is None or pod["metadata"].get("uid") != uid:
            self._forget(sn, uid)
            return None
        return st, pod

    def _retry_prepare(self, client: KubeClient, sn: AgentNode, uid: str) -> None:
        current = self._current(client, sn, uid, admitted=False)
        if current is not None and not current[1]["metadata"].get("deletionTimestamp"):
            self._admit(client, sn, *current)

    def _reject(
        self, client: KubeClient, sn: AgentNode, st: PodState, pod: dict, reason: str, message: str
    ) -> None:
        st.terminal = True
        meta = pod["metadata"]
        log.info("%s: rejected %s: %s: %s", sn.name, st.key, reason, message)
        self._event(client, sn, pod, reason, message.removeprefix(REJECTED_PREFIX))
        body = {"metadata": {"uid": st.uid}, "status": pl.rejected_status(reason, message)}
        with contextlib.suppress(ApiError):
            client.patch(
                "Pod", meta["name"], body, namespace=meta["namespace"],
                patch_type="strategic", subresource="status",
            )  # fmt: skip

    def _event(self, client: KubeClient, sn: AgentNode, pod: dict, reason: str, message: str) -> None:
        meta = pod["metadata"]
        now = ns.rfc3339()
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{meta['name']}.{uuid.uuid4().hex[:16]}",
                "namespace": meta["namespace"],
            },
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": meta["name"],
                "namespace": meta["namespace"],
                "uid": meta["uid"],
                "resourceVersion": meta.get("resourceVersion", ""),
            },
            "reason": reason,
            "message": message,
            "type": "Warning",
            "source": {"component": "kubelet", "host": sn.name},
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
            "reportingComponent": "kubelet",
            "reportingInstance": sn.name,
        }
        with contextlib.suppress(ApiError):
            client.create(event)

    # ------------------------------------------------------------------ durations
    def _schedule_end(self, sn: AgentNode, st: PodState, pod: dict, fresh: bool = False) -> None:
        """Queue the end of a pod annotated with a duration (from now when ``fresh``,
        else from its startTime)."""
        text = ((pod.get("metadata") or {}).get("annotations") or {}).get(pl.DURATION_ANNOTATION)
        if not text:
            return
        try:
            seconds = pl.parse_duration(text)
        except GpuLabError as err:
            log.warning("%s: %s runs until deleted: %s", sn.name, st.key, err)
            return
        started = None if fresh else pl.parse_time(st.started)
        remaining = seconds if started is None else max(0.0, started + seconds - time.time())
        with self._timer_cond:
            heapq.heappush(self._timers, (self.now() + remaining, next(self._timer_seq), sn.name,
                                          st.uid, "complete"))
            self._timer_cond.notify_all()

    def _timer_loop(self) -> None:
        while not self._stopping.is_set():
            with self._timer_cond:
                now = self.now()
                due = []
                while self._timers and self._timers[0][0] <= now:
                    due.append(heapq.heappop(self._timers))
                if not due:
                    wait = self._timers[0][0] - now if self._timers else 1.0
                    self._timer_cond.wait(min(wait, 1.0))
                    continue
            for _, _, node, uid, what in due:
                self.nodes[node].queue.put((what, uid, None))

    def _complete(self, client: KubeClient, sn: AgentNode, uid: str, _unused: Any) -> None:
        current = self._current(client, sn, uid, admitted=True)
        if current is None:
            return
        st, pod = current
        namespace, name = st.key.split("/", 1)
        body = {"metadata": {"uid": uid}, "status": pl.succeeded_status(pod, st.started)}
        with contextlib.suppress(ApiError):
            client.patch(
                "Pod", name, body, namespace=namespace, patch_type="strategic", subresource="status"
            )
        st.terminal = True
        self._release(sn, st)
        log.info("%s: %s completed", sn.name, st.key)


# ---------------------------------------------------------------------- the program


def nodes_of(scenario: str | Path) -> list[Node]:
    """The Nodes a scenario file describes (NodePools expanded, Node manifests); its
    resource.k8s.io objects are the API server's to check (see ``dradriver.objects``)."""

    return list(parse_scenario([d for d in load_documents(scenario) if not is_dra(d)]).nodes)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m gpu_lab.kubelet.agent",
        description="Play the kubelet of a scenario's simulated GPU nodes against a real API "
        "server: Nodes kept Ready, one fake NVIDIA device plugin per GPU node, bound pods "
        "admitted, given devices and run. Runs until SIGTERM.",
    )
    p.add_argument("--kubeconfig", required=True, help="admin kubeconfig of the cluster")
    p.add_argument("--scenario", required=True, help="scenario YAML with NodePools and/or Nodes")
    p.add_argument("--work-dir", required=True, help="plugin sockets, configs and logs go here")
    p.add_argument("--lease-seconds", type=int, default=40, help="Lease duration (default 40)")
    p.add_argument(
        "--heartbeat", type=float, default=10.0, help="Lease renewal period (default 10 s)"
    )
    p.add_argument("-q", "--quiet", action="store_true", help="log warnings only")
    return p


def main(argv: Iterable[str] | None = None) -> int:
    args = build_parser().parse_args(None if argv is None else list(argv))
    logging.basicConfig(
        level=logging.WARNING if args.quiet else logging.INFO,
        stream=sys.stderr,
        format="%(asctime)s nodeagent: %(message)s",
    )
    stop = threading.Event()
    previous = {
        sig: signal.signal(sig, lambda *_: stop.set()) for sig in (signal.SIGTERM, signal.SIGINT)
    }
    agent = None
    try:
        nodes = nodes_of(args.scenario)
        if not nodes:
            print(f"error: {args.scenario}: no Nodes or NodePools", file=sys.stderr)
            return 1
        client = KubeClient.from_kubeconfig(args.kubeconfig)
        agent = NodeAgent(client, nodes, args.work_dir, args.lease_seconds, args.heartbeat)
        agent.start()
        print(
            f"node agent: {len(nodes)} node(s) ready in {agent.started_in:.1f} s: "
            + ", ".join(agent.nodes),
            flush=True,
        )
        stop.wait()
    except GpuLabError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    finally:
        if agent is not None:
            agent.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


__all__ = ["NodeAgent", "NodeAgentError", "AgentNode", "main", "nodes_of"]


if __name__ == "__main__":
    sys.exit(main())
