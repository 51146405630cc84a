"""What a kubelet writes about its node: the v1 Node, its status and its Lease.

Pure functions that build API objects from a ``gpu_lab.model.objects.Node`` record
(what a NodePool or a Node manifest expands to) and the node's device manager
figures; :mod:`gpu_lab.kubelet.agent` sends them. The wording follows the
kubelet of Kubernetes v1.37 (``pkg/kubelet/nodestatus/setters.go``): condition
reasons and messages, ``nodeInfo``, ``daemonEndpoints``.

Device-plugin resources (``nvidia.com/gpu``...) come from the device manager, as
the kubelet's ``GetCapacity`` gives them: capacity counts every device the plugin
reported, allocatable only the healthy ones (0 while the plugin is gone). Everything
else (cpu, memory, pods, ephemeral-storage, extended resources written by hand on a
Node manifest) comes from the record.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
from collections.abc import Iterable, Mapping
from typing import Any

from ..model.objects import Node
from ..model.quantity import format_quantity
from ..names import stable_uid

KUBELET_VERSION = "v1.37.2"
CONTAINER_RUNTIME_VERSION = "gpu-lab://fake"
KERNEL_VERSION = "6.8.0-gpu-lab"
OS_IMAGE = "gpu-lab simulated node"
KUBELET_PORT = 10250
NODE_LEASE_NAMESPACE = "kube-node-lease"
#: the first simulated node's InternalIP; never contacted (nothing listens there)
FIRST_NODE_IP = ipaddress.ip_address("127.0.0.2")

#: (type, reason, message) of the kubelet's conditions on a healthy node
CONDITIONS = (
    (
        "MemoryPressure",
        "False",
        "KubeletHasSufficientMemory",
        "kubelet has sufficient memory available",
    ),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
)


def rfc3339(t: dt.datetime | None = None) -> str:
    """``metav1.Time`` as the API server writes it (seconds, UTC)."""
    t = t or dt.datetime.now(dt.timezone.utc)
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def micro_time(t: dt.datetime | None = None) -> str:
    """``metav1.MicroTime`` (what a Lease's renewTime is)."""
    t = t or dt.datetime.now(dt.timezone.utc)
    return t.astimezone(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def node_ip(index: int) -> str:
    """The InternalIP of the ``index``-th simulated node: 127.0.0.2, 127.0.0.3, ..."""
    return str(FIRST_NODE_IP + index)


def device_resources(node: Node, managed: Iterable[str] = ()) -> set[str]:
    """Resources a device plugin (not the record) answers for on this node."""
    return set(node.devices) | set(managed)


def node_object(node: Node) -> dict[str, Any]:
    """The Node as the kubelet registers it: labels, annotations, taints, unschedulable."""
    meta: dict[str, Any] = {"name": node.name, "labels": dict(node.labels)}
    if node.annotations:
        meta["annotations"] = dict(node.annotations)
    spec: dict[str, Any] = {}
    if node.taints:
        spec["taints"] = [
            {"key": t.key, **({"value": t.value} if t.value else {}), "effect": t.effect}
            for t in node.taints
        ]
    if node.unschedulable:
        spec["unschedulable"] = True
    return {"apiVersion": "v1", "kind": "Node", "metadata": meta, "spec": spec}


def resources(
    node: Node, device_capacity: Mapping[str, int], device_allocatable: Mapping[str, int]
) -> tuple[dict[str, int], dict[str, int]]:
    """(capacity, allocatable) in internal units: the record's own resources plus the
    device manager's figures for device-plugin resources."""
    devices = device_resources(node, device_capacity)
    capacity = {r: v for r, v in node.capacity.items() if r not in devices}
    allocatable = {r: v for r, v in node.allocatable.items() if r not in devices}
    capacity.update(device_capacity)
    allocatable.update({r: device_allocatable.get(r, 0) for r in device_capacity})
    return capacity, allocatable


def quantities(amounts: Mapping[str, int]) -> dict[str, str]:
    return {r: format_quantity(r, v) for r, v in sorted(amounts.items())}


def node_info(node: Node, boot_id: str) -> dict[str, str]:
    machine = hashlib.sha1(f"machine/{node.name}".encode()).hexdigest()[:32]
    return {
        "machineID": machine,
        "systemUUID": stable_uid("system", node.name),
        "bootID": boot_id,
        "kernelVersion": KERNEL_VERSION,
        "osImage": OS_IMAGE,
        "containerRuntimeVersion": CONTAINER_RUNTIME_VERSION,
        "kubeletVersion": KUBELET_VERSION,
        "operatingSystem": node.labels.get("kubernetes.io/os", "linux"),
        "architecture": node.labels.get("kubernetes.io/arch", "amd64"),
    }


def node_status(
    node: Node,
    ip: str,
    capacity: Mapping[str, int],
    allocatable: Mapping[str, int],
    boot_id: str,
) -> dict[str, Any]:
    """Everything in ``status`` except the conditions (whose times change every beat)."""
    return {
        "capacity": quantities(capacity),
        "allocatable": quantities(allocatable),
        "addresses": [
            {"type": "InternalIP", "address": ip},
            {"type": "Hostname", "address": node.name},
        ],
        "daemonEndpoints": {"kubeletEndpoint": {"Port": KUBELET_PORT}},
        "nodeInfo": node_info(node, boot_id),
    }


def conditions(heartbeat: str, ready_since: str) -> list[dict[str, str]]:
    """The kubelet's four conditions on a healthy node, beating at ``heartbeat``."""
    return [
        {
            "type": kind,
            "status": status,
            "lastHeartbeatTime": heartbeat,
            "lastTransitionTime": ready_since,
            "reason": reason,
            "message": message,
        }
        for kind, status, reason, message in CONDITIONS
    ]


def lease_object(node_name: str, node_uid: str | None, duration: int, renew: str) -> dict:
    """The node's Lease in kube-node-lease, owned by its Node (as the kubelet makes it)."""
    meta: dict[str, Any] = {"name": node_name, "namespace": NODE_LEASE_NAMESPACE}
    if node_uid:
        meta["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Node", "name": node_name, "uid": node_uid}
        ]
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": meta,
        "spec": {
            "holderIdentity": node_name,
            "leaseDurationSeconds": int(duration),
            "renewTime": renew,
        },
    }
