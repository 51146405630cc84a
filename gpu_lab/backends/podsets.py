"""When the StatefulSet and DaemonSet controllers of a real cluster are done for now.

Their pods come from kube-controller-manager, not from ``apply``, so a backend on a real
API server (local, kubeconfig, kind) must know when to stop waiting without reading the
cluster between two of their steps: a DaemonSet has a pod for every node it should run on
(``model.daemonset.should_run``, the controller's rule, over the API server's own Nodes,
so the count follows the cluster's real nodes, a kind control plane's taints included); a
StatefulSet has its pods up to the first that is not Running and Ready (OrderedReady) or
all of them (Parallel). A controller whose create the API server refused (a ResourceQuota,
a LimitRange) has reported ``FailedCreate`` on its object: it is done until something
changes, as the sim's controller is, so the wait ends instead of running out.
"""

from __future__ import annotations

from ..errors import NotFound
from ..kube import KubeClient
from ..model.daemonset import should_run
from ..model.objects import Taint
from ..model.statefulset import PARALLEL
from .apiobjects import condition

#: kinds whose controllers (not the API server) make their pods
KINDS = ("StatefulSet", "DaemonSet")


class PodSets:
    """The StatefulSets and DaemonSets applied in this session (their parsed records)."""

    def __init__(self, client: KubeClient) -> None:
        self.client = client
        self.records: list[dict] = []

    def add(self, workloads: list[dict]) -> None:
        self.records += [r for r in workloads if r["kind"] in KINDS]

    def reset(self) -> None:
        self.records = []

    def settled(self) -> bool:
        """Every controller has made the pods it makes before something else changes."""
        if not self.records:
            return True
        by_ns: dict[str, list[dict]] = {}
        for r in self.records:
            by_ns.setdefault(r["namespace"], [])
        for ns in by_ns:
            by_ns[ns] = self.client.list("Pod", namespace=ns)["items"]
        nodes = self.client.list("Node")["items"] if any(r["kind"] == "DaemonSet" for r in self.records) else []
        for r in self.records:
            pods = [p for p in by_ns[r["namespace"]] if _owned(p, r)]
            done = _daemonset_done(r, pods, nodes) if r["kind"] == "DaemonSet" else _statefulset_done(r, pods)
            if not done and not self._create_refused(r):
                return False
        return True

    def _create_refused(self, record: dict) -> bool:
        """The controller's last create for this object (this one: its uid) was refused."""
        try:
            uid = self.client.get(record["kind"], record["name"], namespace=record["namespace"])["metadata"]["uid"]
        except NotFound:
            return False
        return failed_create_reported(self.client, record["namespace"], {uid})


def failed_create_reported(client: KubeClient, namespace: str, uids: set[str]) -> bool:
    """Whether a controller reported ``FailedCreate`` on one of the objects ``uids`` (its
    create was refused: a quota, a LimitRange)."""
    selector = f"involvedObject.uid={next(iter(uids))}" if len(uids) == 1 else None
    return any(e.get("reason") == "FailedCreate" and (e.get("involvedObject") or {}).get("uid") in uids
               for e in client.list("Event", namespace=namespace, field_selector=selector)["items"])


def owned_by_podset(pod: dict) -> bool:
    """Whether a StatefulSet or DaemonSet controls ``pod`` (its count is :class:`PodSets`' to judge)."""
    return any(o.get("controller") and o.get("kind") in KINDS
               for o in (pod.get("metadata") or {}).get("ownerReferences") or [])


def _owned(pod: dict, record: dict) -> bool:
    return any(o.get("controller") and o.get("kind") == record["kind"] and o.get("name") == record["name"]
               for o in pod["metadata"].get("ownerReferences") or [])


def _target(pod: dict) -> str | None:
    """The node a daemon pod is for (``GetTargetNodeName``): spec.nodeName, else its affinity's
    metadata.name."""
    spec = pod.get("spec") or {}
    if spec.get("nodeName"):
        return spec["nodeName"]
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution") or {}
    for term in required.get("nodeSelectorTerms") or []:
        for f in term.get("matchFields") or []:
            if f.get("key") == "metadata.name" and f.get("values"):
                return f["values"][0]
    return None


def _daemonset_done(record: dict, pods: list[dict], nodes: list[dict]) -> bool:
    have = {_target(p) for p in pods if not p["metadata"].get("deletionTimestamp")}
    for n in nodes:
        name = n["metadata"]["name"]
        taints = [Taint(t.get("key", ""), t.get("value", ""), t.get("effect", ""))
                  for t in (n.get("spec") or {}).get("taints") or []]
        if should_run(record, name, n["metadata"].get("labels") or {}, taints)[0] and name not in have:
            return False
    return True


def _statefulset_done(record: dict, pods: list[dict]) -> bool:
    by_name = {p["metadata"]["name"]: p for p in pods}
    for ordinal in range(record["start"], record["start"] + record["replicas"]):
        pod = by_name.get(f"{record['name']}-{ordinal}")
        if pod is None:
            return False
        ready = (pod.get("status") or {}).get("phase") == "Running" and condition(pod, "Ready").get("status") == "True"
        if record["pod_management_policy"] != PARALLEL and not ready:
            return True  # the controller waits for this one before the next
    return True
