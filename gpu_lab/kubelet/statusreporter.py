"""Node registration and status, as the kubelet's ``kubelet_node_status.go`` and its node
lease controller do them: each Node created (or its labels taken over when it exists), its
status patched when the device manager's figures change and every ``status_report`` seconds
otherwise, its ``kube-node-lease`` Lease renewed every ``heartbeat`` seconds.

Every status write carries the Node's uid: once that Node is deleted, or is another object
under the same name, the API server refuses the write and the node is retired."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable

from ..dradriver import resourceslices as rs
from ..errors import NodeAgentError
from ..kube import ApiError, KubeClient, NotFound, Unreachable
from . import nodestatus as ns
from .node import AgentNode

log = logging.getLogger("gpu_lab.nodeagent")

STATUS_TICK_S = 0.1  # how often device-manager figures are compared with what the Node shows
STATUS_REPORT_S = 60.0  # a node status patch at least this often (the kubelet: 5 min)
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
NOT_READY_WAIT_S = 10.0
LEASE_API = "coordination.k8s.io/v1"
COMPLAIN_EVERY_S = 30.0


def not_ours(err: ApiError) -> bool:
    """A Node write refused because the Node is gone, or is another object under the same
    name now (the uid the write carries is immutable: 422, or 409 with no object)."""
    return isinstance(err, NotFound) or err.code in (409, 422) and "uid" in str(err).lower()


class NodeStatusReporter:
    """Registers the nodes and keeps them Ready (see the module docstring)."""

    def __init__(self, nodes: dict[str, AgentNode], *, lease_seconds: int, heartbeat: float,
                 status_report: float = STATUS_REPORT_S):
        self.nodes = nodes
        self.lease_seconds, self.heartbeat, self.status_report = lease_seconds, heartbeat, status_report

    def register(self, client: KubeClient, sn: AgentNode) -> None:
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
                namespace=ns.NODE_LEASE_NAMESPACE, api_version=LEASE_API,
            )  # fmt: skip
        except NotFound:
            client.create(ns.lease_object(sn.name, sn.uid, self.lease_seconds, renew))
        sn.last_lease = time.monotonic()

    def sync(self, client: KubeClient, sn: AgentNode) -> None:
        """One tick for one node: its status if it changed or is due, its Lease if due."""
        now = time.monotonic()
        cap, alloc = sn.published()
        status = ns.node_status(sn.node, sn.ip, cap, alloc, sn.boot_id)
        if status != sn.last_status or now - sn.last_beat >= self.status_report:
            if sn.last_status is not None and status != sn.last_status:
                log.info("%s: allocatable %s", sn.name, status["allocatable"])
            self._patch_status(client, sn, status)
        if now - sn.last_lease >= self.heartbeat:
            self._renew_lease(client, sn)

    def run(self, client: KubeClient, stopping: threading.Event, on_tick: Callable[[], object],
            retire: Callable[[AgentNode, str], object]) -> None:
        """Every tick until ``stopping``: ``on_tick()``, then each live node synced; a node
        whose Node is gone is retired, other errors are logged (once per 30 s a node)."""
        complained: dict[str, float] = {}
        while not stopping.wait(STATUS_TICK_S):
            on_tick()
            for sn in self.nodes.values():
                if stopping.is_set():
                    return
                if sn.retired:
                    continue
                try:
                    self.sync(client, sn)
                except (ApiError, Unreachable) as err:
                    if isinstance(err, ApiError) and not_ours(err):
                        retire(sn, f"its Node is gone ({err})")
                        continue
                    now = time.monotonic()
                    if now - complained.get(sn.name, -1e9) > COMPLAIN_EVERY_S:
                        log.warning("%s: cannot update node status: %s", sn.name, err)
                        complained[sn.name] = now

    def wait_schedulable(self, client: KubeClient, deadline: float) -> None:
        """kube-apiserver's TaintNodesByCondition admission gives every new Node the
        ``node.kubernetes.io/not-ready:NoSchedule`` taint; node-lifecycle (in
        kube-controller-manager) lifts it once it sees Ready. Wait for that, so pods
        created right after the agent starts can land; without a controller-manager, go on."""
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
            log.warning("%s still tainted %s (is kube-controller-manager running?)",
                        ", ".join(sorted(waiting)), NOT_READY_TAINT)

    def deregister(self, client: KubeClient, sn: AgentNode) -> None:
        """Delete the node's Node, its Lease and (DRA) its ResourceSlices; best effort."""
        with contextlib.suppress(ApiError, Unreachable):
            client.delete("Node", sn.name, missing_ok=True)
        if sn.dra_devices:  # else the garbage collector removes them with the Node
            with contextlib.suppress(ApiError, Unreachable):
                for o in client.list("ResourceSlice", api_version=rs.API_VERSION,
                                     field_selector=f"spec.nodeName={sn.name}")["items"]:
                    client.delete("ResourceSlice", o["metadata"]["name"],
                                  api_version=rs.API_VERSION, missing_ok=True)
        with contextlib.suppress(ApiError, Unreachable):
            client.delete("Lease", sn.name, ns.NODE_LEASE_NAMESPACE, LEASE_API, missing_ok=True)
