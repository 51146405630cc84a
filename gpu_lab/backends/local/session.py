"""``connect("local")``: the same Session API, answered by a real control plane.

Objects are validated by the same code as the simulator (so bad input fails
the same way, before anything reaches the API server), then created through
the API server. The real kube-scheduler and controllers do the rest; the node
agent plays the kubelet for simulated GPU nodes, with real device plugins.
Reading back turns API objects into the shared table rows.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pandas as pd

from ...dradriver import objects as draobjects
from ...errors import GpuLabError
from ...kube import ApiError
from ...kubelet import agentprocess
from ...kubelet.agent import NodeAgent, stop_running
from ...kubelet.reconfigure import failure as reconfigure_failure
from ...kubelet.reconfigure import reconfigure
from ...model import arguments as args
from ...model import creationorder as batch
from ...model.documents import load_documents
from ...model.nodepool import MIG_CONFIG_LABEL, MIG_STATE_LABEL
from ...model.podgroup import API_VERSION as POD_GROUP_API
from ...model.scenario import parse_scenario
from ...names import SYSTEM_NAMESPACES
from ...names import TERMINAL_PHASES as _TERMINAL
from ...sim.explain import Explanation
from ...sim.profile import load_scheduler_config
from .. import policyobjects
from ..account import scheduler_account
from ..apiobjects import condition, node_rows, pod_row
from ..base import Session, Source
from ..events import EventRow, event_row
from ..tables import NodeRow, PodRow
from ..waiting import wait_settled
from . import jobtable, kueueobjects, podsets, schedulerlog
from .cluster import LocalCluster
from .components import SCHEDULER
from .kueue import enabled as kueue_enabled

ADDON_NAMESPACES = {"kueue-system"}  # installed by `gpu-lab up --with kueue`: reset keeps them
KUEUE_API = "kueue.x-k8s.io/v1beta2"
_CLUSTER_SCOPED = {"Namespace", "PriorityClass", "Node"}
#: while waiting, how often to look whether every process the wait needs still runs
LIVENESS_EVERY_S = 1.0
#: kube-scheduler's longest pod backoff (podMaxBackoffSeconds): after a change, a pod it gave
#: up on is retried within this, or the change did not help it
RETRY_WAIT_S = 10.0


def _event_seconds(event: dict) -> float:
    """When the scheduler last reported the event (a series' last observation first)."""
    text = ((event.get("series") or {}).get("lastObservedTime") or event.get("lastTimestamp")
            or event.get("eventTime") or "")
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp() if text else 0.0
    except ValueError:
        return 0.0


class LocalSession(Session):
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
        self.agents: list[Any] = []
        self._created: list[tuple[str, str, str | None]] = []  # (kind, name, namespace)
        self._custom_scheduler = False
        self._started, self._advanced = time.monotonic(), 0.0
        self._log_mark = (0, 0)  # where this session's part of the scheduler log begins (reset)
        self._events_before: set[str] = set()  # uids of the Events the last reset left (default's)
        self._changed_at: float | None = None  # wall time of the last node or pod change
        self._alive_checked = 0.0

    def _ready(self, health: bool = True) -> None:
        """Fail at once, naming the component and the command that repairs it, when a
        process this call needs is stopped or hung (rather than time out much later)."""
        self.cluster.check_ready(health=health)
        self._alive_checked = time.monotonic()

    def _still_alive(self) -> None:
        """:meth:`_ready` without health checks, at most every ``LIVENESS_EVERY_S``."""
        if time.monotonic() - self._alive_checked >= LIVENESS_EVERY_S:
            self._ready(health=False)

    # ------------------------------------------------------------- apply
    def _priority_classes(self) -> dict[str, dict]:
        items = self.client.list("PriorityClass")["items"]
        return {pc["metadata"]["name"]: pc for pc in items}

    def apply(self, src: Source) -> list[str]:
        docs = load_documents(src)
        self._ready()
        # resource.k8s.io objects (DRA) are the API server's to judge: created as they are
        dra_docs = sorted((d for d in docs if draobjects.is_dra(d)), key=draobjects.order)
        docs = [d for d in docs if not draobjects.is_dra(d)]
        sc = parse_scenario(docs, known_priority_classes=self._priority_classes())  # same checks as sim
        # LimitRanger and ResourceQuota judged by the shared model first (policyobjects.py)
        all_pods = list(sc.pods)
        refused = policyobjects.admit(self.client, sc, [d for d in docs if not kueueobjects.is_kueue(d)], self._wait)
        # kueue.x-k8s.io objects: created as they are where Kueue runs, refused where it does not
        kueue_docs = kueueobjects.check(self.cluster, sc.kueue)
        docs = [d for d in docs if not kueueobjects.is_kueue(d)]
        held = {((d.get("metadata") or {}).get("namespace", "default"), d["metadata"]["name"])
                for d in docs if kueueobjects.queued(d)} if kueue_enabled(self.cluster) else set()
        refs: list[str] = []
        if sc.scheduler_config is not None:
            # The simulator's checks first, so both backends refuse a config in the same words;
            # set_scheduler_config then has the real kube-scheduler check it too.
            load_scheduler_config(sc.scheduler_config)
            self.cluster.set_scheduler_config(sc.scheduler_config, progress=lambda _m: None)
            self._custom_scheduler = True
            refs.append("kubeschedulerconfiguration")
        if sc.nodes:
            refs += self._start_nodes(sc.nodes)
        # The batch reaches the running scheduler in the simulator's queue order (batch.py).
        # A scheduler started afresh with the batch queued would pop equal-priority pods in
        # whatever order its initial list delivered them, which differs from run to run.
        evicting = [d["metadata"]["name"] for d in dra_docs if draobjects.evicts(d)]
        order = {"Namespace": 0, "PriorityClass": 1}
        first = sorted((d for d in docs if d.get("kind") in order), key=lambda d: order[d["kind"]])
        made, made_all = batch.PodIndex(sc.pods), batch.PodIndex(all_pods)
        rest = batch.creation_order([d for d in docs if d.get("kind") not in order], made)
        # DRA and Kueue objects after their namespaces, before the pods and Jobs that use them
        policies_synced = False
        for doc in first + dra_docs + kueue_docs + rest:
            if doc.get("kind") in batch.POD_MAKERS and not policies_synced:
                policies_synced = True  # quota, PDB and LimitRange status caught up (policyobjects.py)
                self._wait(lambda: policyobjects.synced(self.client), "the quota and disruption controllers")
                self._wait(lambda ns={r.namespace for r in sc.limit_ranges}:
                           policyobjects.limit_ranges_applied(self.client, ns), "LimitRanger")
            if draobjects.is_dra(doc):
                ns = draobjects.namespace_of(doc)
                created = self._create(doc, ns)
                name = created["metadata"]["name"]
                self._created.append((doc["kind"], name, ns))
                refs.append(f"{doc['kind'].lower()}/{name if ns is None else ns + '/' + name}")
                continue
            if kueueobjects.is_kueue(doc):
                ns = kueueobjects.namespace_of(doc)
                name = self._create(doc, ns)["metadata"]["name"]
                self._created.append((doc["kind"], name, ns))
                refs.append(f"{doc['kind'].lower()}/{name if ns is None else ns + '/' + name}")
                if doc is kueue_docs[-1]:  # Kueue's cache has the queues before any Job
                    self._wait(lambda: kueueobjects.seen(self.client, kueue_docs), "Kueue's queues")
                continue
            kind = doc.get("kind")
            if kind in ("Namespace", "PriorityClass", "Workload", "PodGroup", "Service", *policyobjects.KINDS) \
                    or kind in batch.POD_MAKERS:
                ns = None if kind in _CLUSTER_SCOPED else (doc.get("metadata") or {}).get("namespace", "default")
                if kind == "Job" and (ns, (doc.get("metadata") or {}).get("name")) in held:
                    # suspended: its pods come once Kueue admits it (schedule waits)
                    created = self._kueue_jobs.create(lambda d, ns=ns: self._create(d, ns), doc)
                else:
                    created = self._create(doc, ns)
                    if kind in batch.POD_MAKERS and kind != "Pod":
                        want = len(made.of(doc))
                        self._wait(lambda c=created, ns=ns, want=want: self._pods_made_by(c, ns) >= want,
                                   f"the {kind} controller to create the pods of {kind.lower()}/{ns}/"
                                   f"{created['metadata']['name']}")
                        if any(p.key in refused for p in made_all.of(doc)):
                            # and its refused create reported, so events() shows it at once
                            self._wait(lambda c=created, ns=ns: self._failed_create_reported(c, ns),
                                       f"the {kind} controller to report FailedCreate for "
                                       f"{kind.lower()}/{ns}/{created['metadata']['name']}")
                name = created["metadata"]["name"]  # the API server's, for generateName
                self._created.append((kind, name, ns))
                refs.append(f"{kind.lower()}/{name if ns is None else ns + '/' + name}")
        self._podsets.add(sc.workloads)
        if evicting:  # a NoExecute device taint evicts the pods using the devices
            self._wait(lambda: draobjects.evictions_done(self.client, evicting),
                       "the device-taint-eviction controller")
        return refs

    def _owners(self, created: dict, ns: str) -> set[str]:
        """The uids of what makes ``created``'s pods: itself, or a Deployment's ReplicaSets."""
        owners = {created["metadata"]["uid"]}
        if created.get("kind") == "Deployment":
            owners = {rs["metadata"]["uid"] for rs in self.client.list("ReplicaSet", namespace=ns)["items"]
                      if any(o.get("uid") in owners for o in rs["metadata"].get("ownerReferences") or [])}
        return owners

    def _pods_made_by(self, created: dict, ns: str) -> int:
        """How many pods the controller object ``created`` has now (a Deployment's through its
        ReplicaSets). Counting by owner, not lab-wide, so a pod preempted for good elsewhere
        (a bare pod) cannot keep the wait from ending."""
        owners = self._owners(created, ns)
        return sum(1 for p in self.client.list("Pod", namespace=ns)["items"]
                   if any(o.get("uid") in owners for o in p["metadata"].get("ownerReferences") or []))

    def _failed_create_reported(self, created: dict, ns: str) -> bool:
        """Whether the controller of ``created`` has a ``FailedCreate`` event on record."""
        return bool(owners := self._owners(created, ns)) and podsets.failed_create_reported(self.client, ns, owners)

    def _create(self, doc: dict, ns: str | None) -> dict:
        """Create, retrying while what the same batch just created is not yet in the API
        server's admission caches: a new namespace's default ServiceAccount, a new
        PriorityClass (the Priority admission plugin reads it through an informer)."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                return self.client.create(doc, namespace=ns)
            except ApiError as err:
                text = str(err).lower()
                if ("serviceaccount" not in text and "no priorityclass with name" not in text
                        or time.monotonic() > deadline):
                    raise
                time.sleep(0.2)

    def _start_nodes(self, nodes) -> list[str]:

        work = self.cluster.dir / "nodes"
        agent = NodeAgent(self.client, nodes, work)
        agent.start()
        self.agents.append(agent)
        self._wait(lambda: self._ready_nodes() >= {n.name for n in nodes}, "nodes to become Ready")
        return [f"node/{n.name}" for n in nodes]

    def _ready_nodes(self) -> set[str]:
        out = set()
        for n in self.client.list("Node")["items"]:
            ready: dict = next(
                (
                    c
                    for c in (n.get("status") or {}).get("conditions") or []
                    if c["type"] == "Ready"
                ),
                {},
            )
            if ready.get("status") == "True":
                out.add(n["metadata"]["name"])
        return out

    def _wait(self, done, what: str) -> None:
        deadline = time.monotonic() + self.timeout
        while not done():
            self._still_alive()
            if time.monotonic() > deadline:
                raise GpuLabError(f"timed out after {self.timeout:.0f} s waiting for {what}")
            time.sleep(0.2)

    # ---------------------------------------------------------- schedule
    def _remake_gone(self) -> list[dict]:
        """The user pods still there, deleted again at once. A DaemonSet's controller may
        remake a pod reset just deleted before it sees its DaemonSet gone (Background
        propagation); the garbage collector's later delete of that pod is graceful, and with
        its node agent stopped nothing would end it."""
        pods = self._user_pods()
        for p in pods:
            self.client.delete("Pod", p["metadata"]["name"], namespace=p["metadata"]["namespace"],
                               missing_ok=True, grace_period_seconds=0)
        return pods

    def _user_pods(self) -> list[dict]:
        return [
            p
            for p in self.client.list("Pod")["items"]
            if p["metadata"].get("namespace") not in SYSTEM_NAMESPACES - {"default"}
        ]

    def _changed(self) -> None:
        """A node or pod changed: pods the scheduler had given up on may fit now."""
        self._changed_at = time.time()

    def _settled(self) -> bool:
        # apply() already waited for the controllers' first pods; preempted or finished
        # pods may be gone since, and replacements show up here as pending pods.
        gave_up = []
        pods = self._user_pods()
        gated = self._gang_gated(pods) | draobjects.claim_gated(self.client, pods)
        for p in pods:
            phase = (p.get("status") or {}).get("phase")
            if phase in _TERMINAL or p["spec"].get("nodeName") and phase == "Running":
                continue
            if (p["metadata"].get("namespace", "default"), p["metadata"]["name"]) in gated:
                continue
            # SchedulerError: a plugin failed (a CEL selector that fails at runtime) and will again
            if condition(p, "PodScheduled").get("reason") in ("Unschedulable", "SchedulerError") and not (
                p.get("status") or {}
            ).get("nominatedNodeName"):
                gave_up.append(p)
                continue
            return False
        return self._retried_since_change(gave_up) and self._podsets.settled() and (
            not kueue_enabled(self.cluster) or self._kueue_jobs.settled())  # Kueue's verdicts too

    def _pod_groups_left(self) -> bool:
        """PodGroups still there (the controller-manager lifts their protection finalizer
        once no pod names them): a scenario may create one of the same name next."""
        with contextlib.suppress(ApiError):
            return bool(self.client.list("PodGroup", api_version=POD_GROUP_API)["items"])
        return False

    def _gang_gated(self, pods: list[dict]) -> set[tuple[str, str]]:
        """Pods that GangScheduling keeps out of kube-scheduler's queue (PreEnqueue): their
        PodGroup does not exist, or its gang has fewer than minCount members. The scheduler
        says nothing about them (no condition, no event), so no wait would end for them."""
        members: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for p in pods:
            group = (p["spec"].get("schedulingGroup") or {}).get("podGroupName")
            if group and (p.get("status") or {}).get("phase") not in _TERMINAL:
                ns = p["metadata"].get("namespace", "default")
                members.setdefault((ns, group), []).append((ns, p["metadata"]["name"]))
        if not members:
            return set()
        groups = {}
        for g in self.client.list("PodGroup", api_version=POD_GROUP_API)["items"]:
            gang = (g.get("spec") or {}).get("schedulingPolicy", {}).get("gang")
            groups[(g["metadata"]["namespace"], g["metadata"]["name"])] = (gang or {}).get("minCount", 0)
        return {pod for key, pods_of in members.items()
                if key not in groups or len(pods_of) < groups[key] for pod in pods_of}

    def _retried_since_change(self, pods: list[dict]) -> bool:
        """After a node or pod change, an Unschedulable verdict counts only once the scheduler
        has tried the pod again (a newer FailedScheduling event), or once its longest backoff
        has passed without a retry (the change did not help that pod)."""
        if not pods or self._changed_at is None or time.time() - self._changed_at > RETRY_WAIT_S:
            return True
        since = self._changed_at
        last: dict[tuple[str, str], float] = {}
        for e in self.client.list("Event")["items"]:
            obj = e.get("involvedObject") or {}
            if e.get("reason") != "FailedScheduling" or obj.get("kind") != "Pod":
                continue
            key = (obj.get("namespace", ""), obj.get("name", ""))
            last[key] = max(last.get(key, 0.0), _event_seconds(e))
        return all(last.get((p["metadata"].get("namespace", "default"), p["metadata"]["name"]), 0.0)
                   >= since for p in pods)

    def schedule(self) -> pd.DataFrame:
        """Wait until the real scheduler has placed (or given up on) every pod, then read back."""
        self._ready()

        def settled() -> bool:
            self._still_alive()
            return self._settled()

        wait_settled(settled, self.timeout, self.settle, "the scheduler to settle")
        return self.pods()

    # ----------------------------------------------------------- reading
    def _pod_rows(self) -> list[PodRow]:
        return [pod_row(p) for p in self._user_pods()]

    def _node_rows(self) -> list[NodeRow]:
        return node_rows(self.client.list("Node")["items"], self._user_pods())


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

    def _gpu_allocatable(self, node: str) -> int:
        alloc = self.client.get("Node", node)["status"].get("allocatable") or {}
        return sum(int(v) for k, v in alloc.items() if k.startswith("nvidia.com/"))

    # --------------------------------------------------------------- nodes
    def _node(self, node: str) -> dict:
        try:
            return self.client.get("Node", node)
        except ApiError as err:
            if err.code == 404:
                raise GpuLabError(f'nodes "{node}" not found') from None
            raise

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
        current = (self._node(node).get("metadata") or {}).get("labels") or {}
        wanted = labels.get(MIG_CONFIG_LABEL)
        if wanted is None or wanted == current.get(MIG_CONFIG_LABEL):
            self.client.patch("Node", node, {"metadata": {"labels": dict(labels)}})
            self._changed()
            return []
        agent = self._agent_for(node)
        sn = agent.node(node)
        # What the MIG manager will find, judged first by the shared model: a refusal or an
        # invalid config is the same one line as on the sim, and nothing is labelled.
        dry = reconfigure(replace(sn.node, labels=dict(current)), wanted,
                          pods_holding=self._gpu_holders(node), evict=evict)
        if dry.state == "failed":
            raise GpuLabError(reconfigure_failure(node, wanted, dry.message))
        if not sn.has_plugin:
            raise self._unsupported("label_node", f"{node} runs no device plugin for a MIG manager "
                                    f"to restart ({sn.static_reason})")
        runs, _ = agent.mig_runs(node)
        agent.allow_mig_eviction(node, wanted if evict else None)
        try:
            self.client.patch("Node", node, {"metadata": {"labels": dict(labels)}})
            # the manager labels the state before it counts the run
            self._wait(lambda: agent.mig_runs(node)[0] > runs,
                       f"the MIG manager of {node} to set {MIG_STATE_LABEL}=success")
        finally:
            agent.allow_mig_eviction(node, None)
        outcome = agent.mig_runs(node)[1]
        assert outcome is not None  # a run ended
        if outcome.state != "success":
            raise GpuLabError(reconfigure_failure(node, wanted, outcome.message))
        self._changed()
        return list(outcome.evicted)

    def _gpu_holders(self, node: str) -> list[str]:
        """namespace/name of the running pods that hold devices of ``node`` (sorted)."""
        return sorted(f"{p['metadata'].get('namespace', 'default')}/{p['metadata']['name']}"
                      for p in self.client.list("Pod", field_selector=f"spec.nodeName={node}")["items"]
                      if (p.get("status") or {}).get("phase") == "Running"
                      and pod_row(p).devices)

    def cordon(self, node: str, unschedulable: bool = True) -> None:
        """``kubectl cordon`` (``uncordon`` with False): the real scheduler stops placing pods there."""
        args.check_name(node, "cordon")
        args.check_bool(unschedulable, "cordon", "unschedulable")
        self._node(node)
        self.client.patch("Node", node, {"spec": {"unschedulable": bool(unschedulable)}})
        self._changed()

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
                               for p in self._user_pods()), f'pod "{ns}/{name}" to go')
        self._changed()

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
                   for p in self._user_pods() if not p["spec"].get("nodeName")}
        wait = schedulerlog.backoff_ends(self._scheduling_history(), pending) - time.time()
        if wait > 0:
            time.sleep(min(wait, step))
        for agent in self.agents:
            agent.advance(step)
        self._advanced += step
        time.sleep(0.3)  # two status ticks: the agents publish what the new time changed
        self._changed()
        return self.schedule()

    @property
    def now(self) -> float:
        """Seconds since this session connected, plus what ``advance`` added."""
        return time.monotonic() - self._started + self._advanced

    def kill_plugin(self, node: str) -> None:
        """Kill the node's device-plugin process: the kubelet side zeroes allocatable."""
        args.check_name(node, "kill_plugin")
        self._agent_for(node).kill_plugin(node)
        self._wait(lambda: self._gpu_allocatable(node) == 0, f"{node}'s GPUs to leave allocatable")
        self._changed()

    def restart_plugin(self, node: str) -> None:
        """Start the plugin again; it re-registers and the GPUs come back."""
        args.check_name(node, "restart_plugin")
        self._agent_for(node).restart_plugin(node)
        self._wait(lambda: self._gpu_allocatable(node) > 0, f"{node}'s GPUs to return")
        self._changed()

    # ------------------------------------------------------------- reset
    def reset(self) -> None:
        """Empty the lab: workloads, pods, nodes, user PriorityClasses and namespaces.

        The control plane keeps running and the scheduler gets its default profile back.
        No node agent of the lab plays a node afterwards (this process's are stopped, other
        processes' let go once the Nodes are deleted): a scenario may reuse the names.
        """

        for agent in self.agents:
            agent.stop()
        # and those of this lab's other sessions in this process (a lesson connects anew per
        # case): an agent left running would fight the next one over the same node names
        stop_running(agentprocess.work_dir(self.cluster))
        agentprocess.stop(self.cluster, forget=True)  # the agent of `gpu-lab up --scenario`
        for doc in agentprocess.agent_states(self.cluster):  # agents of sessions that ended
            if agentprocess.assess(doc)[0] == "stopped":
                Path(doc["path"]).unlink(missing_ok=True)
        ns_names = [n["metadata"]["name"] for n in self.client.list("Namespace")["items"]]
        for ns in ns_names:
            if ns in SYSTEM_NAMESPACES - {"default"}:
                continue
            for kind in ("Deployment", "ReplicaSet", "Job", *podsets.KINDS):
                for obj in self.client.list(kind, namespace=ns)["items"]:
                    self.client.delete(kind, obj["metadata"]["name"], namespace=ns, missing_ok=True,
                                       propagation_policy="Background")
            for p in self.client.list("Pod", namespace=ns)["items"]:
                self.client.delete("Pod", p["metadata"]["name"], namespace=ns, missing_ok=True,
                                   grace_period_seconds=0)
            if ns not in ADDON_NAMESPACES:  # Kueue's webhook Service lives there
                podsets.delete_services(self.client, ns)
            for kind in ("PodGroup", "Workload"):  # the native Workload API (cluster.FEATURE_GATES)
                with contextlib.suppress(ApiError):  # a lab started before it was served
                    for obj in self.client.list(kind, namespace=ns, api_version=POD_GROUP_API)["items"]:
                        self.client.delete(kind, obj["metadata"]["name"], namespace=ns, missing_ok=True,
                                           api_version=POD_GROUP_API)
        for pc in self.client.list("PriorityClass")["items"]:
            if not pc["metadata"]["name"].startswith("system-"):
                self.client.delete("PriorityClass", pc["metadata"]["name"], missing_ok=True)
        self._delete_kueue_objects()
        draobjects.delete_all(self.client)
        policyobjects.delete_all(self.client)
        for ns in ns_names:
            if ns not in SYSTEM_NAMESPACES | ADDON_NAMESPACES:
                self.client.delete("Namespace", ns, missing_ok=True)
        for n in self.client.list("Node")["items"]:
            self.client.delete("Node", n["metadata"]["name"], missing_ok=True)
        # A namespace being deleted still exists: the next apply of the same one would fail.
        self._wait(lambda: not self._remake_gone() and not self.client.list("Node")["items"]
                   and not self._pod_groups_left() and not self._user_namespaces()
                   and not draobjects.left(self.client) and not kueueobjects.left(self.client)
                   and not policyobjects.left(self.client),
                   "the lab to empty")
        # Agents of other processes let go of a node once its Node is deleted (agent.py);
        # until they have, their plugins share the folder a node of the same name will use.
        self._wait(lambda: not self._agents_left(), "the node agents of other processes to "
                   "let go of the deleted nodes")
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

    def _agents_left(self) -> list[str]:
        """Nodes a live node agent of this lab still plays (one stopped by a signal aside:
        it cannot answer, and a write of its would be refused, see ``NodeAgent._retire``)."""
        return [n for doc in agentprocess.agent_states(self.cluster)
                if agentprocess.assess(doc)[0] not in ("stopped", "hung") for n in doc.get("nodes") or {}]

    def _user_namespaces(self) -> list[str]:
        return [n["metadata"]["name"] for n in self.client.list("Namespace")["items"]
                if n["metadata"]["name"] not in SYSTEM_NAMESPACES | ADDON_NAMESPACES]

    def _delete_kueue_objects(self) -> None:
        """Kueue's own objects, where Kueue runs (``up --with kueue``); its namespace stays."""
        for kind in ("LocalQueue", "Workload"):
            with contextlib.suppress(ApiError):
                for obj in self.client.list(kind, api_version=KUEUE_API)["items"]:
                    self.client.delete(kind, obj["metadata"]["name"], namespace=obj["metadata"]["namespace"],
                                       missing_ok=True, api_version=KUEUE_API)
        for kind in ("ClusterQueue", "ResourceFlavor", "Cohort", "WorkloadPriorityClass"):
            with contextlib.suppress(ApiError):
                for obj in self.client.list(kind, api_version=KUEUE_API)["items"]:
                    self.client.delete(kind, obj["metadata"]["name"], missing_ok=True, api_version=KUEUE_API)

    def _event_rows(self) -> list[EventRow]:
        """The Events of the lab's namespaces (default and the user's; a node's are in
        default, as the node lifecycle controller's RegisteredNode), since the last reset."""
        return [event_row(e) for e in self.client.list("Event")["items"]
                if e["metadata"].get("namespace") not in SYSTEM_NAMESPACES - {"default"}
                and e["metadata"].get("uid") not in self._events_before]

    def _pod_manifests(self) -> dict[str, dict]:
        return {f"{p['metadata'].get('namespace', 'default')}/{p['metadata']['name']}": p
                for p in self._user_pods()}

    def close(self) -> None:
        """Stop this session's node agents (the control plane keeps running)."""
        for agent in self.agents:
            agent.stop()
        self.agents = []
