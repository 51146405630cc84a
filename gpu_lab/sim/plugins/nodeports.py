"""NodePorts: a hostPort can be taken only once per node, protocol and address.

PreFilter returns Skip for a pod without host ports (``util.GetHostPorts``
keeps only ``hostPort > 0``), so Filter does not run for it. Filter
(``fitsPorts`` / ``HostPortInfo.CheckConflict``): an empty hostIP means
0.0.0.0 and an empty protocol TCP; a wanted 0.0.0.0:port/proto conflicts with
that port/proto on any address, a specific address only with the same address
or 0.0.0.0. A conflict is Unschedulable (evicting the holder can help) with
"node(s) didn't have free ports for the requested pod ports". Pods nominated
to the node with at least the pod's priority count as holding their ports.

The ports in use are kept per node like ``NodeInfo.UsedPorts`` -- a set per
address, updated on every bind and delete through ``Snapshot.listeners`` (so
two pods forced onto the same port with ``nodeName`` free it when either
leaves, as in kube-scheduler) -- and indexed by (protocol, port), so Filter
only looks at the nodes holding one of the wanted ports.
"""

from __future__ import annotations

import weakref

import numpy as np

from ...model.objects import HostPort, Pod
from ..cachehints import CacheHints
from ..framework import UNSCHEDULABLE, CycleContext, Plugin, Status
from ..snapshot import Snapshot

ERR_REASON = "node(s) didn't have free ports for the requested pod ports"
DEFAULT_BIND_ALL_HOST_IP = "0.0.0.0"


def host_ports(pod: Pod) -> list[tuple[str, str, int]]:
    """(ip, protocol, port) of the pod's host ports, sanitised like ``HostPortInfo``."""
    return [_sanitize(hp) for hp in pod.host_ports if hp.port > 0]


def _sanitize(hp: HostPort) -> tuple[str, str, int]:
    return (hp.ip or DEFAULT_BIND_ALL_HOST_IP, hp.protocol or "TCP", int(hp.port))


class UsedPorts:
    """Every node's ``UsedPorts``, indexed as (protocol, port) -> node -> addresses."""

    def __init__(self) -> None:
        self.by_port: dict[tuple[str, int], dict[int, set[str]]] = {}
        self.node_version = -1
        self.num_nodes = -1

    def rebuild(self, snap: Snapshot) -> None:
        self.by_port = {}
        for i, pods in enumerate(snap.pods_on):
            for p in pods:
                if p.host_ports:
                    self.update(p, i, +1)
        self.node_version, self.num_nodes = snap.node_version, len(snap)

    def update(self, pod: Pod, i: int, delta: int) -> None:
        """Snapshot listener: ``HostPortInfo.Add`` / ``Remove`` for each of the pod's ports."""
        if not pod.host_ports:
            return
        for ip, proto, port in host_ports(pod):
            nodes = self.by_port.setdefault((proto, port), {})
            if delta > 0:
                nodes.setdefault(i, set()).add(ip)
            else:
                ips = nodes.get(i)
                if ips is not None:
                    ips.discard(ip)
                    if not ips:
                        del nodes[i]
                if not nodes:
                    del self.by_port[(proto, port)]


# One index per snapshot, shared by every NodePorts instance (all profiles).
_INDEXES: weakref.WeakKeyDictionary[Snapshot, UsedPorts] = weakref.WeakKeyDictionary()


def used_ports(snap: Snapshot) -> UsedPorts:
    idx = _INDEXES.get(snap)
    if idx is None:
        idx = UsedPorts()
        _INDEXES[snap] = idx
        snap.listeners.append(idx.update)
    if idx.node_version != snap.node_version or idx.num_nodes != len(snap):
        idx.rebuild(snap)
    return idx


def conflicts(ips: set[str], ip: str) -> bool:
    """``CheckConflict`` for one (protocol, port) on one node holding it on ``ips``."""
    if ip == DEFAULT_BIND_ALL_HOST_IP:
        return bool(ips)
    return DEFAULT_BIND_ALL_HOST_IP in ips or ip in ips


class NodePorts(CacheHints, Plugin):
    name = "NodePorts"

    def skips_pre_filter(self, pod: Pod) -> bool:
        return not host_ports(pod)

    def pre_filter(self, ctx: CycleContext) -> Status | None:
        want = host_ports(ctx.pod)
        if not want:
            return self.skip
        ctx.data[self.name] = want
        return None

    def filter(self, ctx: CycleContext) -> np.ndarray:
        want = ctx.data.get(self.name)
        if want is None:
            want = host_ports(ctx.pod)
        ok = np.ones(len(ctx.snapshot), dtype=bool)
        if not want:
            return ok
        idx = used_ports(ctx.snapshot)
        extra = self._nominated_ports(ctx)
        for ip, proto, port in want:
            for i, ips in idx.by_port.get((proto, port), {}).items():
                if ok[i] and conflicts(ips, ip):
                    ok[i] = False
            for i, held in extra.items():
                nominated = held.get((proto, port))
                if nominated and ok[i] and conflicts(nominated, ip):
                    ok[i] = False
        return ok

    @staticmethod
    def _nominated_ports(ctx: CycleContext) -> dict[int, dict[tuple[str, int], set[str]]]:
        """Ports of pods nominated to each node (they are added to its NodeInfo for Filter)."""
        out: dict[int, dict[tuple[str, int], set[str]]] = {}
        for i, pods in ctx.nominated.items():
            for p in pods:
                for ip, proto, port in host_ports(p):
                    out.setdefault(i, {}).setdefault((proto, port), set()).add(ip)
        return out

    def filter_status(self, ctx: CycleContext, i: int) -> Status:
        return Status(UNSCHEDULABLE, (ERR_REASON,), self.name)
