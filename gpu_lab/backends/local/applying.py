"""``LocalSession.apply``, one step per kind of object: the batch is checked by the same code
as the simulator first (so bad input fails in the same words, before anything reaches the
API server), then created in the simulator's order, each kind by its step, each step waiting
(through the session's one wait) for what the next objects depend on:

* the scheduler configuration: kube-scheduler restarted with it;
* nodes: a node agent started for them, the Nodes Ready;
* Namespaces and PriorityClasses first, then DRA and Kueue objects (Kueue's queues seen by
  Kueue before any Job), then everything else in creation order;
* a pod maker (Job, Deployment, ...): its controller's pods created, and a refused pod's
  ``FailedCreate`` reported; a Job Kueue queues is created suspended;
* at the end, DRA evictions a NoExecute device taint asked for.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ...dradriver import objects as draobjects
from ...kube import ApiError, KubeClient
from ...kubelet import agentprocess
from ...kubelet.agent import NodeAgent
from ...model import creationorder as batch
from ...model.scenario import parse_scenario
from ...sim.profile import load_scheduler_config
from .. import policyobjects
from . import kueueobjects, podsets
from .cluster import LocalCluster
from .kueue import enabled as kueue_enabled

Wait = Callable[[Callable[[], bool], str], None]
_CLUSTER_SCOPED = {"Namespace", "PriorityClass", "Node"}
#: created first, in this order: what every other object of the batch may name
_FIRST = {"Namespace": 0, "PriorityClass": 1}
#: the kinds created as they are (after the model's checks) by the plain step
_PLAIN = {"Namespace", "PriorityClass", "Workload", "PodGroup", "Service", *policyobjects.KINDS}


@dataclass
class Applied:
    """What one apply made: the references it returns, the objects, and node agents."""

    refs: list[str] = field(default_factory=list)
    created: list[tuple[str, str, str | None]] = field(default_factory=list)  # kind, name, namespace
    agents: list[NodeAgent] = field(default_factory=list)
    scheduler_config: bool = False

    def add(self, kind: str, name: str, ns: str | None) -> None:
        self.created.append((kind, name, ns))
        self.refs.append(f"{kind.lower()}/{name if ns is None else ns + '/' + name}")


class Apply:
    """One ``apply`` of a batch to a local lab."""

    def __init__(self, cluster: LocalCluster, client: KubeClient, wait: Wait, timeout: float,
                 kueue_jobs: kueueobjects.KueueJobs, pod_sets: podsets.PodSets):
        self.cluster, self.client, self.wait, self.timeout = cluster, client, wait, timeout
        self.kueue_jobs, self.pod_sets = kueue_jobs, pod_sets
        self.out = Applied()

    def run(self, docs: list[dict]) -> Applied:
        """Create ``docs`` (read already); ``out`` holds what was made, also after an error."""
        # resource.k8s.io objects (DRA) are the API server's to judge: created as they are
        dra_docs = sorted((d for d in docs if draobjects.is_dra(d)), key=draobjects.order)
        docs = [d for d in docs if not draobjects.is_dra(d)]
        self.sc = sc = parse_scenario(docs, known_priority_classes=self._priority_classes())  # same checks as sim
        all_pods = list(sc.pods)
        # LimitRanger and ResourceQuota judged by the shared model first (policyobjects.py)
        self.refused = policyobjects.admit(self.client, sc, [d for d in docs if not kueueobjects.is_kueue(d)],
                                           self.wait)
        # kueue.x-k8s.io objects: created as they are where Kueue runs, refused where it does not
        self.kueue_docs = kueueobjects.check(self.cluster, sc.kueue)
        docs = [d for d in docs if not kueueobjects.is_kueue(d)]
        self.held = {((d.get("metadata") or {}).get("namespace", "default"), d["metadata"]["name"])
                     for d in docs if kueueobjects.queued(d)} if kueue_enabled(self.cluster) else set()
        if sc.scheduler_config is not None:
            self._scheduler_config(sc.scheduler_config)
        if sc.nodes:
            self._nodes(sc.nodes)
        # The batch reaches the running scheduler in the simulator's queue order (batch.py).
        # A scheduler started afresh with the batch queued would pop equal-priority pods in
        # whatever order its initial list delivered them, which differs from run to run.
        first = sorted((d for d in docs if d.get("kind") in _FIRST), key=lambda d: _FIRST[d["kind"]])
        self.made, self.made_all = batch.PodIndex(sc.pods), batch.PodIndex(all_pods)
        rest = batch.creation_order([d for d in docs if d.get("kind") not in _FIRST], self.made)
        policies_synced = False
        # DRA and Kueue objects after their namespaces, before the pods and Jobs that use them
        for doc in first + dra_docs + self.kueue_docs + rest:
            if doc.get("kind") in batch.POD_MAKERS and not policies_synced:
                policies_synced = True
                self._policies_synced()
            step = self._step_for(doc)
            if step is not None:
                step(doc)
        self.pod_sets.add(sc.workloads)
        evicting = [d["metadata"]["name"] for d in dra_docs if draobjects.evicts(d)]
        if evicting:  # a NoExecute device taint evicts the pods using the devices
            self.wait(lambda: draobjects.evictions_done(self.client, evicting),
                      "the device-taint-eviction controller")
        return self.out

    def _step_for(self, doc: dict) -> Callable[[dict], None] | None:
        if draobjects.is_dra(doc):
            return self._dra
        if kueueobjects.is_kueue(doc):
            return self._kueue
        kind = doc.get("kind")
        if kind in batch.POD_MAKERS:
            return self._pod_maker
        if kind in _PLAIN:
            return self._plain
        return None  # NodePools, Nodes and the scheduler's configuration had their steps

    # ------------------------------------------------------------------ steps
    def _scheduler_config(self, config: dict) -> None:
        # The simulator's checks first, so both backends refuse a config in the same words;
        # set_scheduler_config then has the real kube-scheduler check it too.
        load_scheduler_config(config)
        self.cluster.set_scheduler_config(config, progress=lambda _m: None)
        self.out.scheduler_config = True
        self.out.refs.append("kubeschedulerconfiguration")

    def _nodes(self, nodes) -> None:
        agent = NodeAgent(self.client, nodes, agentprocess.work_dir(self.cluster))
        agent.start()
        self.out.agents.append(agent)
        self.wait(lambda: _ready_nodes(self.client) >= {n.name for n in nodes}, "nodes to become Ready")
        self.out.refs += [f"node/{n.name}" for n in nodes]

    def _policies_synced(self) -> None:
        """Quota, PDB and LimitRange status caught up before the first pod maker
        (policyobjects.py)."""
        self.wait(lambda: policyobjects.synced(self.client), "the quota and disruption controllers")
        namespaces = {r.namespace for r in self.sc.limit_ranges}
        self.wait(lambda: policyobjects.limit_ranges_applied(self.client, namespaces), "LimitRanger")

    def _dra(self, doc: dict) -> None:
        ns = draobjects.namespace_of(doc)
        self.out.add(doc["kind"], self._create(doc, ns)["metadata"]["name"], ns)

    def _kueue(self, doc: dict) -> None:
        ns = kueueobjects.namespace_of(doc)
        self.out.add(doc["kind"], self._create(doc, ns)["metadata"]["name"], ns)
        if doc is self.kueue_docs[-1]:  # Kueue's cache has the queues before any Job
            self.wait(lambda: kueueobjects.seen(self.client, self.kueue_docs), "Kueue's queues")

    def _plain(self, doc: dict) -> None:
        kind = doc["kind"]
        ns = None if kind in _CLUSTER_SCOPED else (doc.get("metadata") or {}).get("namespace", "default")
        self.out.add(kind, self._create(doc, ns)["metadata"]["name"], ns)  # the server's, for generateName

    def _pod_maker(self, doc: dict) -> None:
        kind = doc["kind"]
        ns = (doc.get("metadata") or {}).get("namespace", "default")
        if kind == "Job" and (ns, (doc.get("metadata") or {}).get("name")) in self.held:
            # suspended: its pods come once Kueue admits it (schedule waits)
            created = self.kueue_jobs.create(lambda d: self._create(d, ns), doc)
        else:
            created = self._create(doc, ns)
            if kind != "Pod":
                self._wait_for_pods(doc, created, ns)
        self.out.add(kind, created["metadata"]["name"], ns)

    def _wait_for_pods(self, doc: dict, created: dict, ns: str) -> None:
        kind, ref = doc["kind"], f"{doc['kind'].lower()}/{ns}/{created['metadata']['name']}"
        want = len(self.made.of(doc))
        self.wait(lambda: _pods_made_by(self.client, created, ns) >= want,
                  f"the {kind} controller to create the pods of {ref}")
        if any(p.key in self.refused for p in self.made_all.of(doc)):
            # and its refused create reported, so events() shows it at once
            self.wait(lambda: _failed_create_reported(self.client, created, ns),
                      f"the {kind} controller to report FailedCreate for {ref}")

    # ------------------------------------------------------------------ helpers
    def _priority_classes(self) -> dict[str, dict]:
        return {pc["metadata"]["name"]: pc for pc in self.client.list("PriorityClass")["items"]}

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


def _ready_nodes(client: KubeClient) -> set[str]:
    out = set()
    for n in client.list("Node")["items"]:
        conditions = (n.get("status") or {}).get("conditions") or []
        if any(c["type"] == "Ready" and c.get("status") == "True" for c in conditions):
            out.add(n["metadata"]["name"])
    return out


def _owners(client: KubeClient, created: dict, ns: str) -> set[str]:
    """The uids of what makes ``created``'s pods: itself, or a Deployment's ReplicaSets."""
    owners = {created["metadata"]["uid"]}
    if created.get("kind") == "Deployment":
        owners = {rs["metadata"]["uid"] for rs in client.list("ReplicaSet", namespace=ns)["items"]
                  if any(o.get("uid") in owners for o in rs["metadata"].get("ownerReferences") or [])}
    return owners


def _pods_made_by(client: KubeClient, created: dict, ns: str) -> int:
    """How many pods the controller object ``created`` has now (a Deployment's through its
    ReplicaSets). Counting by owner, not lab-wide, so a pod preempted for good elsewhere
    (a bare pod) cannot keep the wait from ending."""
    owners = _owners(client, created, ns)
    return sum(1 for p in client.list("Pod", namespace=ns)["items"]
               if any(o.get("uid") in owners for o in p["metadata"].get("ownerReferences") or []))


def _failed_create_reported(client: KubeClient, created: dict, ns: str) -> bool:
    """Whether the controller of ``created`` has a ``FailedCreate`` event on record."""
    return bool(owners := _owners(client, created, ns)) and podsets.failed_create_reported(client, ns, owners)
