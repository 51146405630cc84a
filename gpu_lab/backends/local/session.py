"""``connect("local")``: the same Session API, answered by a real control plane.

Objects are validated by the same code as the simulator (so bad input fails
the same way, before anything reaches the API server), then created through
the API server. The real kube-scheduler and controllers do the rest; the node
agent plays the kubelet for simulated GPU nodes, with real device plugins.
Reading back turns API objects into the shared table rows.
"""

from __future__ import annotations

import time
from pathlib import Path

import pandas as pd

from ...errors import GpuLabError
from ...kube import ApiError, KubeClient
from ...kubelet import gpuhealth
from ...kubelet.agent import NodeAgent
from ...kubelet.gpuhealth import DEFAULT_REASON
from ...model import arguments as args
from ...model.documents import load_documents
from ...model.nodepool import MIG_CONFIG_LABEL
from ...names import SYSTEM_NAMESPACES
from ...sim.explain import Explanation
from ..account import scheduler_account
from ..apiobjects import device_allocatable, node_rows, pod_row
from ..base import Session, Source
from ..events import EventRow, event_row
from ..kubectl.real import Target
from ..tables import NodeRow, PodRow
from ..waiting import wait_settled
from . import emptying, jobtable, kueueobjects, miglabel, podsets, schedulerlog
from .applying import Apply
from .cluster import LocalCluster
from .components import SCHEDULER
from .emptying import ADDON_NAMESPACES
from .kueue import enabled as kueue_enabled
from .liveness import Liveness
from .settling import Settling, user_pods


class LocalSession(Session):
    """A local lab (``gpu-lab up``) behind the Session API. Its parts: ``applying.py``
    (apply, one step per kind), ``settling.py`` (when schedule() may read back),
    ``emptying.py`` (reset); every wait goes through ``_wait`` (``liveness.py``)."""

    backend = "local"

    def __init__(
        self,
        name: str = "default",
        root: Path | str | None = None,
        progress=None,
        timeout: float = 60.0,
        settle: float = 1.0,
    ):
        self.cluster = LocalCluster(name, root)
        self.cluster.up(
            progress=progress or (lambda _m: None)
        )  # idempotent: reconnects to a running lab
        self.client = self.cluster.client()
        self.timeout, self.settle = timeout, settle
        self._kueue_jobs = kueueobjects.KueueJobs(self.client, timeout)  # Jobs Kueue queues
        self._podsets = podsets.PodSets(self.client)  # StatefulSets and DaemonSets: schedule waits for their pods
        self._settling = Settling(self.cluster, self.client, self._podsets, self._kueue_jobs)
        self.agents: list[NodeAgent] = []
        self._created: list[tuple[str, str, str | None]] = []  # (kind, name, namespace)
        self._custom_scheduler = False
        self._started, self._advanced = time.monotonic(), 0.0
        self._log_mark = (0, 0)  # where this session's part of the scheduler log begins (reset)
        self._events_before: set[str] = set()  # uids of the Events the last reset left (default's)
        self._live = Liveness(self.cluster, lambda: self.timeout)
        self._wait = self._live.wait  # the session's one wait: every step gets this

    # ------------------------------------------------------------- apply
    def apply(self, src: Source) -> list[str]:
        docs = load_documents(src)
        self._live.ready()
        step = Apply(self.cluster, self.client, self._wait, self.timeout, self._kueue_jobs, self._podsets)
        try:
            return step.run(docs).refs
        finally:  # what was made before an error is the session's to reset
            self.agents += step.out.agents
            self._created += step.out.created
            self._custom_scheduler |= step.out.scheduler_config

    # ---------------------------------------------------------- schedule
    def schedule(self) -> pd.DataFrame:
        """Wait until the real scheduler has placed (or given up on) every pod, then read back."""
        self._live.ready()

        def settled() -> bool:
            self._live.still_alive()
            return self._settling.settled()

        wait_settled(settled, self.timeout, self.settle, "the scheduler to settle")
        return self.pods()

    # ----------------------------------------------------------- reading
    def _pod_rows(self) -> list[PodRow]:
        return [pod_row(p) for p in user_pods(self.client)]

    def _node_rows(self) -> list[NodeRow]:
        return node_rows(self.client.list("Node")["items"], user_pods(self.client))


    def jobs(self) -> pd.DataFrame:
        """One row per Job, as the sim's: state, Kueue queue and message, GPUs, and when it was
        admitted, started and finished (real seconds since this session started)."""
        t0 = time.time() - (time.monotonic() - self._started)
        return jobtable.job_rows(self.client, t0, SYSTEM_NAMESPACES - {"default"} | ADDON_NAMESPACES,
                                 kueue_enabled(self.cluster))

    def explain(self, pod: str) -> Explanation:
        """The real scheduler's own account: its PodScheduled condition and events, and the
        per-plugin scores of its latest attempt as kube-scheduler logged them."""
        args.check_name(pod, "explain", "pod")
        ns, name = pod.split("/", 1) if "/" in pod else ("default", pod)
        return schedulerlog.explain(
            scheduler_account(self.client, ns, name), schedulerlog.read(self.cluster.log_path(SCHEDULER)),
            self.cluster.effective_scheduler_config,
            lambda: [n["metadata"]["name"] for n in self.client.list("Node")["items"]])

    # ------------------------------------------------------- device plugins
    def _agent_for(self, node: str):
        for agent in self.agents:
            if node in agent.nodes:
                return agent
        raise GpuLabError(f'nodes "{node}" not found (or not simulated by this session)')

    # --------------------------------------------------------------- nodes
    def label_node(self, node: str, labels: dict[str, str | None], *, evict: bool = False) -> list[str]:
        """``kubectl label node`` through the API server (None removes a label); returns the
        pods evicted for it.

        A new ``nvidia.com/mig.config`` is taken up by the node agent's MIG manager, as on
        a GPU Operator node: the GPUs are repartitioned, the device plugin restarts and
        re-advertises, and this waits until ``nvidia.com/mig.config.state`` says success.
        Refused while pods hold the node's GPUs unless ``evict`` (in the sim's words, from
        the same model, ``kubelet.reconfigure``)."""
        args.check_name(node, "label_node")
        labels = args.check_labels(node, labels)
        args.check_bool(evict, "label_node", "evict")
        current = (_get_node(self.client, node).get("metadata") or {}).get("labels") or {}
        wanted = labels.get(MIG_CONFIG_LABEL)
        if wanted is None or wanted == current.get(MIG_CONFIG_LABEL):
            self.client.patch("Node", node, {"metadata": {"labels": dict(labels)}})
            self._settling.changed()
            return []
        evicted = miglabel.relabel(self.client, self._agent_for(node), node, labels, current, wanted,
                                   evict, self._wait, self._unsupported)
        self._settling.changed()
        return evicted

    def cordon(self, node: str, unschedulable: bool = True) -> None:
        """``kubectl cordon`` (``uncordon`` with False): the real scheduler stops placing pods there."""
        args.check_name(node, "cordon")
        args.check_bool(unschedulable, "cordon", "unschedulable")
        _get_node(self.client, node)
        self.client.patch("Node", node, {"spec": {"unschedulable": bool(unschedulable)}})
        self._settling.changed()

    def delete(self, pod: str) -> None:
        """Delete a pod at once (grace period 0); a controller's pod is replaced, as on any cluster."""
        args.check_name(pod, "delete", "pod")
        ns, name = pod.split("/", 1) if "/" in pod else ("default", pod)
        try:
            self.client.get("Pod", name, ns)
        except ApiError as err:
            if err.code == 404:
                raise GpuLabError(f'pods "{name}" not found (namespace {ns})') from None
            raise
        self.client.delete("Pod", name, namespace=ns, grace_period_seconds=0)
        self._wait(lambda: all(p["metadata"]["name"] != name or p["metadata"].get("namespace") != ns
                               for p in user_pods(self.client)), f'pod "{ns}/{name}" to go')
        self._settling.changed()

    def advance(self, seconds: float | None = None) -> pd.DataFrame:
        """Move the node agents' clock: device-plugin grace periods and pod durations run as if
        ``seconds`` had passed (None: until the last timed pod ends). The control plane keeps
        real time; so that the time said to pass has passed for the scheduler's queue too, the
        pending pods' backoff (1 s doubling to 10 s per pod, in real time) is waited out first,
        up to ``seconds``: otherwise pods tried a moment ago would still sit in backoffQ when
        the event comes, and pods tried earlier would jump ahead of them."""
        seconds = args.check_seconds(seconds)
        step = seconds if seconds is not None else max(
            [a.time_to_last_timer() for a in self.agents], default=0.0)
        pending = {f"{p['metadata'].get('namespace', 'default')}/{p['metadata']['name']}"
                   for p in user_pods(self.client) if not p["spec"].get("nodeName")}
        wait = schedulerlog.backoff_ends(self._scheduling_history(), pending) - time.time()
        if wait > 0:
            time.sleep(min(wait, step))
        for agent in self.agents:
            agent.advance(step)
        self._advanced += step
        time.sleep(0.3)  # two status ticks: the agents publish what the new time changed
        self._settling.changed()
        return self.schedule()

    @property
    def now(self) -> float:
        """Seconds since this session connected, plus what ``advance`` added."""
        return time.monotonic() - self._started + self._advanced

    def kill_plugin(self, node: str) -> None:
        """Kill the node's device-plugin process: the kubelet side zeroes allocatable."""
        args.check_name(node, "kill_plugin")
        self._agent_for(node).kill_plugin(node)
        self._wait(lambda: _gpus(self.client, node) == 0, f"{node}'s GPUs to leave allocatable")
        self._settling.changed()

    def restart_plugin(self, node: str) -> None:
        """Start the plugin again; it re-registers and the GPUs come back."""
        args.check_name(node, "restart_plugin")
        self._agent_for(node).restart_plugin(node)
        self._wait(lambda: _gpus(self.client, node) > 0, f"{node}'s GPUs to return")
        self._settling.changed()

    def fail_device(self, node: str, index: int, reason: str = DEFAULT_REASON) -> None:
        """GPU ``index`` fails: the node's fake plugin reads the GPU's UUID in its control file
        and reports that GPU's devices Unhealthy in ListAndWatch; returns once the Node's
        allocatable shows it (capacity stays, the pod holding it keeps running). The reason
        goes to the plugin's log."""
        self._set_gpu_health("fail_device", node, index, reason)

    def heal_device(self, node: str, index: int) -> None:
        """GPU ``index`` reports Healthy again; returns once allocatable has it back."""
        self._set_gpu_health("heal_device", node, index, None)

    def _set_gpu_health(self, call: str, node: str, index: int, reason: str | None) -> None:
        args.check_name(node, call)
        agent = self._agent_for(node)
        record = agent.node(node).node
        index = gpuhealth.check_index(node, gpuhealth.gpu_count(record), index, call)
        if reason is not None:
            reason = gpuhealth.check_reason(reason, call)
        if not agent.set_gpu_health(node, index, reason):
            raise GpuLabError(f"{call}: {node}'s device plugin did not report GPU {index}'s health "
                              "within 15 s (see its device-plugin.log)")
        manager = agent.node(node).manager
        self._wait(lambda: device_allocatable(self.client.get("Node", node)) == {
            r: n for r, n in manager.allocatable().items() if r.startswith("nvidia.com/")},
            f"{node}'s allocatable to show GPU {index} {'healthy' if reason is None else 'failed'}")
        self._settling.changed()

    # ------------------------------------------------------------- reset
    def reset(self) -> None:
        """Empty the lab: workloads, pods, nodes, user PriorityClasses and namespaces.

        The control plane keeps running and the scheduler gets its default profile back.
        No node agent of the lab plays a node afterwards (this process's are stopped, other
        processes' let go once the Nodes are deleted): a scenario may reuse the names.
        """
        emptying.empty(self.cluster, self.client, self.agents, self._wait)
        self.agents, self._created = [], []
        self._kueue_jobs.reset()
        self._podsets.reset()
        # also a configuration an earlier session or `gpu-lab up --scenario` left
        if self._custom_scheduler or self.cluster._saved_scheduler_config() is not None:
            self.cluster.set_scheduler_config(None, progress=lambda _m: None)
            self._custom_scheduler = False
        self._log_mark = schedulerlog.log_mark(self.cluster.log_path(SCHEDULER))
        # the API server keeps Events an hour; those of the namespaces reset deleted went with them
        self._events_before = {e["metadata"].get("uid", "") for e in self.client.list("Event")["items"]}

    def _scheduling_history(self) -> list[schedulerlog.Attempt]:
        """The real scheduler's attempts since the last reset, in order (fidelity.py replays
        its choices among equal totals on the sim)."""
        return schedulerlog.history_since(self.cluster.log_path(SCHEDULER), self._log_mark)

    def _event_rows(self) -> list[EventRow]:
        """The Events of the lab's namespaces (default and the user's; a node's are in
        default, as the node lifecycle controller's RegisteredNode), since the last reset."""
        return [event_row(e) for e in self.client.list("Event")["items"]
                if e["metadata"].get("namespace") not in SYSTEM_NAMESPACES - {"default"}
                and e["metadata"].get("uid") not in self._events_before]

    def _kubectl_target(self) -> Target:
        """The lab's admin kubeconfig; the lab's pods are in default, kubectl's default."""
        return Target(self.cluster.kubeconfig())

    def _pod_manifests(self) -> dict[str, dict]:
        return {f"{p['metadata'].get('namespace', 'default')}/{p['metadata']['name']}": p
                for p in user_pods(self.client)}

    def close(self) -> None:
        """Stop this session's node agents (the control plane keeps running)."""
        for agent in self.agents:
            agent.stop()
        self.agents = []


def _get_node(client: KubeClient, node: str) -> dict:
    try:
        return client.get("Node", node)
    except ApiError as err:
        if err.code == 404:
            raise GpuLabError(f'nodes "{node}" not found') from None
        raise


def _gpus(client: KubeClient, node: str) -> int:
    """The node's allocatable NVIDIA devices, all resources together."""
    return sum(device_allocatable(client.get("Node", node)).values())
