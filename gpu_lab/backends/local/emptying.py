"""``LocalSession.reset``'s work: empty a local lab, one step per kind of object, then wait
(through the session's one wait) until the API server shows it empty and no node agent of
another process still plays a deleted node. The control plane keeps running."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable
from pathlib import Path

from ...dradriver import objects as draobjects
from ...kube import ApiError, KubeClient
from ...kubelet import agentprocess
from ...kubelet.agent import NodeAgent, stop_running
from ...model.podgroup import API_VERSION as POD_GROUP_API
from ...names import SYSTEM_NAMESPACES
from .. import policyobjects
from . import kueueobjects, podsets
from .cluster import LocalCluster
from .settling import user_pods

Wait = Callable[[Callable[[], bool], str], None]
ADDON_NAMESPACES = {"kueue-system"}  # installed by `gpu-lab up --with kueue`: reset keeps them
KUEUE_API = "kueue.x-k8s.io/v1beta2"
_WORKLOADS = ("Deployment", "ReplicaSet", "Job", *podsets.KINDS)


def empty(cluster: LocalCluster, client: KubeClient, agents: Iterable[NodeAgent], wait: Wait) -> None:
    """Stop every node agent of the lab, delete what the user made, wait until it is gone."""
    _stop_agents(cluster, agents)
    ns_names = [n["metadata"]["name"] for n in client.list("Namespace")["items"]]
    for ns in ns_names:
        if ns not in SYSTEM_NAMESPACES - {"default"}:
            _empty_namespace(client, ns)
    for pc in client.list("PriorityClass")["items"]:
        if not pc["metadata"]["name"].startswith("system-"):
            client.delete("PriorityClass", pc["metadata"]["name"], missing_ok=True)
    _delete_kueue_objects(client)
    draobjects.delete_all(client)
    policyobjects.delete_all(client)
    for ns in ns_names:
        if ns not in SYSTEM_NAMESPACES | ADDON_NAMESPACES:
            client.delete("Namespace", ns, missing_ok=True)
    for n in client.list("Node")["items"]:
        client.delete("Node", n["metadata"]["name"], missing_ok=True)
    # A namespace being deleted still exists: the next apply of the same one would fail.
    wait(lambda: not _remake_gone(client) and not client.list("Node")["items"]
         and not _pod_groups_left(client) and not _user_namespaces(client)
         and not draobjects.left(client) and not kueueobjects.left(client)
         and not policyobjects.left(client),
         "the lab to empty")
    # Agents of other processes let go of a node once its Node is deleted (agent.py);
    # until they have, their plugins share the folder a node of the same name will use.
    wait(lambda: not _agents_left(cluster),
         "the node agents of other processes to let go of the deleted nodes")


def _stop_agents(cluster: LocalCluster, agents: Iterable[NodeAgent]) -> None:
    for agent in agents:
        agent.stop()
    # and those of this lab's other sessions in this process (a lesson connects anew per
    # case): an agent left running would fight the next one over the same node names
    stop_running(agentprocess.work_dir(cluster))
    agentprocess.stop(cluster, forget=True)  # the agent of `gpu-lab up --scenario`
    for doc in agentprocess.agent_states(cluster):  # agents of sessions that ended
        if agentprocess.assess(doc)[0] == "stopped":
            Path(doc["path"]).unlink(missing_ok=True)


def _empty_namespace(client: KubeClient, ns: str) -> None:
    for kind in _WORKLOADS:
        for obj in client.list(kind, namespace=ns)["items"]:
            client.delete(kind, obj["metadata"]["name"], namespace=ns, missing_ok=True,
                          propagation_policy="Background")
    for p in client.list("Pod", namespace=ns)["items"]:
        client.delete("Pod", p["metadata"]["name"], namespace=ns, missing_ok=True, grace_period_seconds=0)
    if ns not in ADDON_NAMESPACES:  # Kueue's webhook Service lives there
        podsets.delete_services(client, ns)
    for kind in ("PodGroup", "Workload"):  # the native Workload API (cluster.FEATURE_GATES)
        with contextlib.suppress(ApiError):  # a lab started before it was served
            for obj in client.list(kind, namespace=ns, api_version=POD_GROUP_API)["items"]:
                client.delete(kind, obj["metadata"]["name"], namespace=ns, missing_ok=True,
                              api_version=POD_GROUP_API)


def _delete_kueue_objects(client: KubeClient) -> None:
    """Kueue's own objects, where Kueue runs (``up --with kueue``); its namespace stays."""
    for kind in ("LocalQueue", "Workload"):
        with contextlib.suppress(ApiError):
            for obj in client.list(kind, api_version=KUEUE_API)["items"]:
                client.delete(kind, obj["metadata"]["name"], namespace=obj["metadata"]["namespace"],
                              missing_ok=True, api_version=KUEUE_API)
    for kind in ("ClusterQueue", "ResourceFlavor", "Cohort", "WorkloadPriorityClass"):
        with contextlib.suppress(ApiError):
            for obj in client.list(kind, api_version=KUEUE_API)["items"]:
                client.delete(kind, obj["metadata"]["name"], missing_ok=True, api_version=KUEUE_API)


def _remake_gone(client: KubeClient) -> list[dict]:
    """The user pods still there, deleted again at once. A DaemonSet's controller may
    remake a pod reset just deleted before it sees its DaemonSet gone (Background
    propagation); the garbage collector's later delete of that pod is graceful, and with
    its node agent stopped nothing would end it."""
    pods = user_pods(client)
    for p in pods:
        client.delete("Pod", p["metadata"]["name"], namespace=p["metadata"]["namespace"],
                      missing_ok=True, grace_period_seconds=0)
    return pods


def _pod_groups_left(client: KubeClient) -> bool:
    """PodGroups still there (the controller-manager lifts their protection finalizer
    once no pod names them): a scenario may create one of the same name next."""
    with contextlib.suppress(ApiError):
        return bool(client.list("PodGroup", api_version=POD_GROUP_API)["items"])
    return False


def _user_namespaces(client: KubeClient) -> list[str]:
    return [n["metadata"]["name"] for n in client.list("Namespace")["items"]
            if n["metadata"]["name"] not in SYSTEM_NAMESPACES | ADDON_NAMESPACES]


def _agents_left(cluster: LocalCluster) -> list[str]:
    """Nodes a live node agent of this lab still plays (one stopped by a signal aside:
    it cannot answer, and a write of its would be refused, see ``statusreporter.not_ours``)."""
    return [n for doc in agentprocess.agent_states(cluster)
            if agentprocess.assess(doc)[0] not in ("stopped", "hung") for n in doc.get("nodes") or {}]
