"""``connect("kubeconfig")``: the Session API on an existing cluster, touching only what
gpu-lab owns.

The cluster is someone else's (a team's GPU cluster, a cloud cluster, a real GPU node),
so the rules are strict and each one lives in one place:

* Reading is free: ``pods()`` (gpu-lab's namespace), ``nodes()``, ``inventory()``,
  ``explain()``; constructing a session sends nothing but reads.
* Workloads (Pod, Deployment, ReplicaSet, Job, StatefulSet, DaemonSet) and the objects
  that shape them (Service, PodDisruptionBudget, ResourceQuota, LimitRange) go ONLY into
  gpu-lab's namespace
  (``gpu-lab`` unless ``namespace=`` says otherwise), which ``apply`` creates and labels
  ``gpulab.dev/managed=true``. A manifest naming another namespace, a Namespace other than
  ours, a Node or NodePool, a PriorityClass or a KubeSchedulerConfiguration is refused
  with one line, before anything is created. A namespace of that name that gpu-lab did
  not create (no label) is refused too.
* ``reset`` deletes gpu-lab's namespace and nothing else.
* Changing a node (labels, taints, cordon, status) is refused unless the node carries
  ``gpulab.dev/owned=true`` or the session was opened with ``allow_node_changes=True``;
  :func:`rules.check_node_change` is that rule (``rules.py``).

Objects are validated by the simulator's own admission code first (bad input fails the
same way on every backend), then dry-run on the API server, then created. The real
kube-scheduler does the rest; ``schedule`` waits until it has placed or given up on
every pod of the namespace, and ``explain`` reports its own words (the PodScheduled
condition and FailedScheduling events). StatefulSets' and DaemonSets' pods are waited for
by the rule every real-cluster backend shares (``backends.podsets``: a DaemonSet's count
comes from the cluster's own nodes). ResourceQuota and LimitRange are the API server's
admission, judged by the shared model first as on the local backend (a bare pod over quota
refuses the apply with nothing created, in the API server's words).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from ...errors import NamespaceRefused
from ...kube import ApiError, KubeClient
from ...model import creationorder as batch
from ...model.documents import load_documents
from ...model.scenario import parse_scenario
from ...model.validation import is_dns1123_label
from ...names import SYSTEM_NAMESPACES, TERMINAL_PHASES
from ...sim.explain import Explanation
from .. import podsets, policyobjects
from ..account import scheduler_account
from ..apiobjects import condition, node_rows, pod_row
from ..base import Session, Source
from ..events import EventRow, event_row
from ..kubectl.real import Target
from ..tables import NodeRow, PodRow
from ..waiting import wait_settled, wait_until
from . import rules
from .connect import default_kubeconfig, open_client
from .inventory import Inventory, read_inventory
from .namespace import OwnNamespace

_SETTLED_REASONS = ("Unschedulable", "SchedulingGated")


class KubeconfigSession(Session):
    backend = "kubeconfig"

    def __init__(
        self,
        kubeconfig: Path | str | None = None,
        context: str | None = None,
        namespace: str = "gpu-lab",
        allow_node_changes: bool = False,
        timeout: float = 60.0,
        settle: float = 1.0,
        client: KubeClient | None = None,
    ):
        if not isinstance(namespace, str) or is_dns1123_label(namespace):
            raise NamespaceRefused(f'invalid namespace "{namespace}": must be a DNS-1123 label')
        if namespace in SYSTEM_NAMESPACES:
            raise NamespaceRefused(
                f'refusing namespace "{namespace}": gpu-lab uses a namespace of its own '
                '(default "gpu-lab"), never a system or shared one'
            )
        self.client = client or open_client(kubeconfig, context)
        # what kubectl gets (None: a client was given, not a kubeconfig)
        self._kubeconfig_path = None if client else (Path(kubeconfig).expanduser() if kubeconfig
                                                     else default_kubeconfig())
        self._context = context
        self.namespace = namespace
        self.allow_node_changes = bool(allow_node_changes)
        self.timeout, self.settle = timeout, settle
        self._expected_pods = 0  # pods of Pods, Deployments, ReplicaSets and Jobs still expected
        self._podsets = podsets.PodSets(self.client)  # StatefulSets and DaemonSets: their own rule
        self._ns = OwnNamespace(self.client, namespace, self._wait)

    def __repr__(self) -> str:
        return f"KubeconfigSession({self.client.server!r}, namespace={self.namespace!r})"

    def close(self) -> None:
        self.client.close()

    def _kubectl_target(self) -> Target:
        """The session's kubeconfig and context; gpu-lab's namespace unless the command names one."""
        if self._kubeconfig_path is None:
            raise self._unsupported("kubectl", "this session was given a client, not a kubeconfig")
        return Target(self._kubeconfig_path, self._context, self.namespace)

    # ----------------------------------------------------------- waiting
    def _wait(self, done, what: str, timeout: float | None = None) -> None:
        wait_until(done, self.timeout if timeout is None else timeout, what)

    # ------------------------------------------------------------- apply
    def apply(self, src: Source) -> list[str]:
        """Create the workloads of a manifest in gpu-lab's namespace (created on first use).

        Every document is checked first (namespace rule, simulator admission, then an API
        server dry run), so a refused manifest creates nothing."""
        docs = [rules.admit(d, self.namespace) for d in load_documents(src)]
        sc = parse_scenario(docs, known_priority_classes=rules.known_priority_classes(self.client))
        ns_labels = next(
            (
                dict((d["metadata"].get("labels") or {}))
                for d in docs
                if d.get("kind") == "Namespace"
            ),
            None,
        )
        workloads = [d for d in docs if d.get("kind") != "Namespace"]
        self._ns.ensure(ns_labels)
        ours = rules.in_namespace(self.client, self.namespace)
        # LimitRanger and ResourceQuota judged by the shared model first, as on local: a bare
        # pod over quota refuses the apply here; a controller's refused pods leave sc.pods
        policyobjects.admit(ours, sc, workloads, self._wait)
        for doc in workloads:
            self.client.create(doc, namespace=self.namespace, dry_run=True)
        refs = [f"namespace/{self.namespace}"] if ns_labels is not None else []
        policies_synced = False
        # in the order the simulator queues them, each controller's pods before the next (batch.py)
        made = batch.PodIndex(sc.pods)
        for doc in batch.creation_order(workloads, made):
            kind = doc.get("kind")
            if kind in batch.POD_MAKERS and not policies_synced:
                # quota and PDB status caught up, a new LimitRange applied: admission and
                # preemption must not read a status on its way (policyobjects.py)
                policies_synced = True
                self._wait(lambda: policyobjects.synced(ours), "the quota and disruption controllers")
                if sc.limit_ranges:
                    self._wait(lambda: policyobjects.limit_ranges_applied(ours, {self.namespace}),
                               "LimitRanger")
            created = self.client.create(doc, namespace=self.namespace)
            name = created["metadata"]["name"]
            refs.append(f"{str(kind).lower()}/{self.namespace}/{name}")
            if kind in podsets.KINDS:
                # their controllers' pods by the shared rule (a DaemonSet's: one per real node)
                record = next(r for r in sc.workloads if r["kind"] == kind and r["name"] == name)
                one = podsets.PodSets(self.client)
                one.add([record])
                self._wait(one.settled, f"the {kind} controller to create the pods of "
                                        f"{str(kind).lower()}/{self.namespace}/{name}")
                self._podsets.add([record])
            elif kind in batch.POD_MAKERS:
                self._expected_pods += len(made.of(doc))
                if kind != "Pod":
                    self._wait(lambda: len(self._counted_pods()) >= self._expected_pods,
                               "controllers to create pods")
        return refs

    # ---------------------------------------------------------- schedule
    def _our_pods(self) -> list[dict]:
        return self._ns.pods()

    @staticmethod
    def scheduler_done(pod: dict) -> bool:
        """Whether the scheduler has finished with a pod: bound, finished, or marked
        unschedulable (or gated) with no preemption under way for it."""
        status = pod.get("status") or {}
        if status.get("phase") in TERMINAL_PHASES or (pod.get("spec") or {}).get("nodeName"):
            return True
        cond = condition(pod, "PodScheduled")
        return cond.get("reason") in _SETTLED_REASONS and not status.get("nominatedNodeName")

    def _counted_pods(self) -> list[dict]:
        """Our pods but StatefulSets' and DaemonSets' (their controllers' rule counts those)."""
        return [p for p in self._our_pods() if not podsets.owned_by_podset(p)]

    def _settled(self) -> bool:
        pods = self._our_pods()
        counted = sum(1 for p in pods if not podsets.owned_by_podset(p))
        return (counted >= self._expected_pods and all(self.scheduler_done(p) for p in pods)
                and self._podsets.settled())

    def schedule(self) -> pd.DataFrame:
        """Wait until the real scheduler has placed (or given up on) every pod of gpu-lab's
        namespace and the answer held for ``settle`` seconds; then ``pods()``."""
        wait_settled(self._settled, self.timeout, self.settle, f'the scheduler to settle the pods of namespace "{self.namespace}"')
        return self.pods()

    # ----------------------------------------------------------- reading
    def _pod_rows(self) -> list[PodRow]:
        # gpu-lab's pods only: its namespace.
        return [pod_row(p) for p in self._our_pods()]

    def _node_rows(self) -> list[NodeRow]:
        # Every node of the cluster, with what all pods bound there request.
        try:
            pods = self.client.list(
                "Pod", field_selector="status.phase!=Succeeded,status.phase!=Failed"
            )["items"]
        except ApiError as exc:
            if exc.code != 403:
                raise
            pods = self._our_pods()  # RBAC: only what we may see
        nodes = sorted(self.client.list("Node")["items"], key=lambda n: n["metadata"]["name"])
        return node_rows(nodes, pods)

    def inventory(self, all_nodes: bool = False) -> Inventory:
        """The cluster's GPU nodes: GFD labels, allocatable, MIG state (read-only)."""
        return read_inventory(self.client, all_nodes=all_nodes)

    def explain(self, pod: str) -> Explanation:
        """The real scheduler's account of a pod: its PodScheduled condition and the
        Scheduled/FailedScheduling/Preempt* events. ``name`` means gpu-lab's namespace;
        ``namespace/name`` reads any pod (reading changes nothing)."""
        ns, name = pod.split("/", 1) if "/" in pod else (self.namespace, pod)
        return scheduler_account(self.client, ns, name)

    def _event_rows(self) -> list[EventRow]:
        """The Events of gpu-lab's namespace (reset deletes them with it)."""
        return [event_row(e) for e in self.client.list("Event", namespace=self.namespace)["items"]]

    # ------------------------------------------------------------- nodes
    def _change_node(self, node: str, what: str, patch: dict, subresource: str | None = None) -> dict:
        return rules.change_node(self.client, node, what, patch, self.allow_node_changes, subresource)

    def label_node(self, node: str, labels: dict[str, str | None], *, evict: bool = False) -> list[str]:
        """``kubectl label node``: set labels (None removes one). On a real GPU node,
        changing ``nvidia.com/mig.config`` makes NVIDIA's MIG manager repartition it; the
        MIG manager, not gpu-lab, decides about the pods on it, so nothing is evicted here
        (``evict`` is refused rather than ignored)."""
        if evict:
            raise self._unsupported("label_node(evict=True)",
                                    "the cluster's MIG manager drains the node, not gpu-lab")
        self._change_node(node, "labels", {"metadata": {"labels": dict(labels)}})
        return []

    def cordon(self, node: str, unschedulable: bool = True) -> None:
        """``kubectl cordon`` (``uncordon`` with False)."""
        self._change_node(
            node, "spec.unschedulable", {"spec": {"unschedulable": bool(unschedulable)}}
        )

    def delete(self, pod: str) -> None:
        """Delete one of gpu-lab's pods (``name``, in gpu-lab's namespace)."""
        ns, name = pod.split("/", 1) if "/" in pod else (self.namespace, pod)
        if ns != self.namespace:
            raise NamespaceRefused(
                f'pods "{name}" is in namespace "{ns}": gpu-lab only deletes in "{self.namespace}"')
        # the API server answers a pod's DELETE with the pod itself (owner references included)
        deleted = self.client.delete("Pod", name, namespace=ns) or {}
        if not (deleted.get("metadata") or {}).get("ownerReferences"):
            # a bare pod is gone for good (a controller's is replaced): schedule() must not
            # wait for it
            self._expected_pods = max(0, self._expected_pods - 1)

    def taint_node(
        self, node: str, key: str, value: str = "", effect: str = "NoSchedule", remove: bool = False
    ) -> dict:
        """``kubectl taint node``: add (or replace) ``key=value:effect``, or remove it."""
        obj = self.client.get("Node", node)
        taints = [
            t
            for t in (obj.get("spec") or {}).get("taints") or []
            if not (t.get("key") == key and t.get("effect") == effect)
        ]
        if not remove:
            taints.append(
                {"key": key, "value": value, "effect": effect}
                if value
                else {"key": key, "effect": effect}
            )
        return rules.change_node(self.client, node, "taints", {"spec": {"taints": taints}},
                                 self.allow_node_changes, obj=obj)

    def patch_node_status(self, node: str, status: dict) -> dict:
        """Merge-patch a node's status (capacity, conditions): the kubelet's part, so on a
        real node the kubelet will overwrite it; meant for nodes gpu-lab owns."""
        return self._change_node(node, "status", {"status": status}, subresource="status")

    # ------------------------------------------------------------- reset
    def reset(self, force: bool = False, wait: bool = True) -> None:
        """Delete gpu-lab's namespace (and with it everything ``apply`` created); nothing
        else on the cluster is touched. ``force=True`` also deletes its pods at once
        (``kubectl delete --grace-period=0 --force``): for pods on nodes without a
        kubelet, which would otherwise never finish terminating. ``wait`` waits until the
        namespace is gone."""
        self._expected_pods = 0
        self._podsets.reset()
        self._ns.delete(force, wait, self._our_pods)
