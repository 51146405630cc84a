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
import itertools
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Iterable
from pathlib import Path

# gRPC C-core (the kubelet servers below) reads this when it starts: no INFO lines in the
# terminal unless the user asked for them
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

from ..dradriver.objects import is_dra
from ..errors import GpuLabError, NodeAgentError
from ..kube import CancellableWatch, KubeClient
from ..kube.reflector import list_and_watch
from ..model.documents import load_documents
from ..model.objects import Node
from ..model.scenario import parse_scenario
from . import dramanager, migmanager
from .agentstate import AGENTS_DIR, STATE_WRITE_S, state_document, write_state
from .devicemanager import ENDPOINT_STOP_GRACE_PERIOD
from .node import AgentNode, wait_plugins
from .nodewatch import NodeWatch
from .podworkers import BOUND_PODS, PodWorkers
from .statusreporter import STATUS_REPORT_S, NodeStatusReporter
from .timers import Timers

log = logging.getLogger("gpu_lab.nodeagent")

START_TIMEOUT_S = 30.0
_AGENT_SEQ = itertools.count()
#: the agents started in this process and not stopped yet: a lab's ``reset()`` stops those of
#: its lab whichever session started them (a lesson connects anew for each case)
_RUNNING: set[NodeAgent] = set()
_RUNNING_LOCK = threading.Lock()


def stop_running(work_dir: Path | str) -> int:
    """Stop every agent of this process that uses ``work_dir``; return how many ran."""
    where = Path(work_dir).absolute()
    with _RUNNING_LOCK:
        agents = [a for a in _RUNNING if a.work_dir == where]
    for a in agents:
        a.stop()
    return len(agents)


class NodeAgent:
    """The kubelet of a set of simulated nodes (see the module docstring). It composes the
    parts a kubelet has: the node status reporter (``statusreporter.py``), the pod workers
    (``podworkers.py``), each node's device manager and plugin (``node.py``), the DRA
    manager (``dramanager.py``), the Node watch that feeds the MIG manager
    (``nodewatch.py``) and the node side's clock (``timers.py``)."""

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
        nodes = list(nodes)
        names = [n.name for n in nodes]
        dup = next((n for n in names if names.count(n) > 1), None)
        if dup:
            raise NodeAgentError(f'node "{dup}" is listed twice')
        self.timers = Timers()
        self.nodes: dict[str, AgentNode] = {
            n.name: AgentNode(n, i, self.work_dir, grace_period, clock=self.timers.now)
            for i, n in enumerate(nodes)
        }
        self._stopping = threading.Event()
        self.status = NodeStatusReporter(self.nodes, lease_seconds=lease_seconds,
                                         heartbeat=heartbeat, status_report=status_report)
        self.pods = PodWorkers(self.nodes, self.timers, self._stopping)
        self.node_watch = NodeWatch(self.nodes, self._retire)
        self._threads: list[threading.Thread] = []
        self._watches: list[tuple[CancellableWatch, threading.Thread]] = []
        self._clients: list[KubeClient] = []
        self._started = False
        self._generation = 0  # a watch thread from before a stop() must not come back
        self._retire_lock = threading.Lock()
        self.started_in: float | None = None
        self.state_path = self.work_dir / AGENTS_DIR / f"{os.getpid()}-{next(_AGENT_SEQ)}.json"
        self._state_written = 0.0

    # ------------------------------------------------------------------ the node side's clock
    def now(self) -> float:
        """Seconds on the node side's clock (monotonic, plus every ``advance``)."""
        return self.timers.now()

    def advance(self, seconds: float) -> None:
        """Move the node side's clock forward: grace periods run out and timed pods end
        as if ``seconds`` had passed; the next status tick publishes the result."""
        self.timers.advance(seconds)

    def time_to_last_timer(self) -> float:
        """Seconds until the last queued pod ending (0 when none is queued)."""
        return self.timers.time_to_last()

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
            wait_plugins(self.nodes.values(), t0 + timeout)
            client = self._new_client()
            self._spawn(self.timers.run, "nodeagent-timers", self._stopping, self.pods.deliver)
            for sn in self.nodes.values():
                self._spawn(self.pods.run, f"nodeagent-{sn.name}", self._new_client(), sn)
            # pods already bound to these nodes (an agent restarted, a node re-created
            # with pods still terminating on it) are settled before the nodes turn Ready
            lst = client.list("Pod", field_selector=BOUND_PODS)
            for ev in self.pods.resync(lst.get("items") or []):
                ev.wait(max(0.1, t0 + timeout - time.monotonic()))
            for sn in self.nodes.values():
                self.status.register(client, sn)
            dramanager.publish(client, self.nodes.values())
            self.status.wait_schedulable(client, t0 + timeout)
            self._spawn(self.status.run, "nodeagent-status", self._new_client(), self._stopping,
                        self._tick, self._retire)
            self._generation += 1
            self._follow("Pod", self.pods.resync, self.pods.dispatch, field_selector=BOUND_PODS,
                         resource_version=lst["metadata"]["resourceVersion"])
            self._follow("Node", self.node_watch.listed, self.node_watch.event)
        except BaseException:
            self.stop()
            raise
        self._started = True
        self.started_in = time.monotonic() - t0
        self.write_state()
        log.info("%d node(s) ready in %.1f s", len(self.nodes), self.started_in)
        return self

    def _follow(self, kind: str, on_list, on_event, **kw) -> None:
        """A list-and-watch of ``kind`` on a thread of its own, until the next ``stop``."""
        generation, watcher = self._generation, CancellableWatch(self._new_client())

        def running() -> bool:
            return not self._stopping.is_set() and generation == self._generation

        thread = threading.Thread(
            target=list_and_watch, args=(watcher, kind),
            kwargs=dict(on_list=on_list, on_event=on_event, running=running,
                        pause=self._stopping.wait, **kw),
            name=f"nodeagent-{kind.lower()}-watch", daemon=True,
        )
        thread.start()
        self._watches.append((watcher, thread))

    def _tick(self) -> None:
        if time.monotonic() - self._state_written >= STATE_WRITE_S:
            self.write_state()

    def write_state(self, ready: bool = True) -> None:
        """Publish this agent's pid, a heartbeat and each plugin's pid and state (atomic;
        ``agentstate.py``)."""
        if write_state(self.state_path, state_document(self.nodes.values(), ready)):
            self._state_written = time.monotonic()

    def _spawn(self, target, name: str, *args) -> None:
        t = threading.Thread(target=target, args=args, name=name, daemon=True)
        t.start()
        self._threads.append(t)

    def stop(self, delete_nodes: bool = False) -> None:
        """Stop following pods and nodes, stop every plugin process and kubelet server.

        The Nodes stay (they turn NotReady once their Lease expires, as when a kubelet
        stops) unless ``delete_nodes``."""
        self._stopping.set()
        with _RUNNING_LOCK:
            _RUNNING.discard(self)
        self._generation += 1
        self.timers.wake()
        for t in self._threads:
            t.join(5)
        self._threads = []
        for watcher, _ in self._watches:
            watcher.cancel()  # an open watch would also hold up kube-apiserver's shutdown
        for _, thread in self._watches:
            thread.join(5)
        self._watches = []
        for sn in self.nodes.values():
            try:
                sn.stop_devices()
            except Exception:  # noqa: BLE001 - keep stopping the others
                log.exception("stopping the devices of %s", sn.name)
        if delete_nodes:
            client = self._new_client()
            for sn in self.nodes.values():
                self.status.deregister(client, sn)
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
        return self._plugin_of(name).restart_plugin(wait, timeout)

    def set_gpu_health(self, name: str, index: int, reason: str | None, timeout: float = 15.0) -> bool:
        """GPU ``index`` of node ``name`` fails (``reason``) or heals (None), through its plugin."""
        return self._plugin_of(name).set_gpu_health(index, reason, timeout)

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
