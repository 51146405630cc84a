"""NodePorts: hostPort conflicts per node, protocol and address."""

from __future__ import annotations

import pytest

from gpu_lab.model.objects import ContainerResources, HostPort, Node, Pod, compute_pod_requests
from gpu_lab.sim.framework import SKIP, UNSCHEDULABLE, CycleContext
from gpu_lab.sim.plugins.nodeports import ERR_REASON, NodePorts, used_ports
from gpu_lab.sim.profile import load_scheduler_config
from gpu_lab.sim.scheduler import Scheduler
from gpu_lab.sim.snapshot import Snapshot

_created = iter(range(1, 10**6))


def node(name: str) -> Node:
    alloc = {"cpu": 8000, "memory": 32 * 2**30, "pods": 110}
    return Node(name=name, allocatable=alloc, capacity=dict(alloc))


def pod(name: str, *ports: HostPort, priority: int = 0, cpu: int = 0) -> Pod:
    req = {"cpu": cpu} if cpu else {}
    p = Pod(namespace="default", name=name, priority=priority, created=next(_created),
            host_ports=list(ports), containers=[ContainerResources("main", dict(req), dict(req))])
    compute_pod_requests(p)
    return p


def cluster(layout: dict[str, list[Pod]]) -> Snapshot:
    snap = Snapshot()
    snap.set_nodes([node(n) for n in layout])
    for n, pods in layout.items():
        for p in pods:
            snap.add_pod(p, snap.index[n])
    return snap


def run(snap: Snapshot, p: Pod, nominated=None):
    pl = NodePorts()
    ctx = CycleContext(pod=p, snapshot=snap, profile=None, nominated=nominated or {})
    st = pl.pre_filter(ctx)
    return pl, ctx, st


def test_pod_without_host_ports_skips_filter():
    snap = cluster({"n1": [pod("web", HostPort(80))]})
    # containerPort without hostPort is stored as hostPort 0 at most: not a host port.
    _, _, st = run(snap, pod("p", HostPort(0)))
    assert st is not None and st.code == SKIP
    _, _, st = run(snap, pod("q"))
    assert st.code == SKIP


@pytest.mark.parametrize(
    "held, wanted, conflict",
    [
        (HostPort(80), HostPort(80), True),
        (HostPort(80), HostPort(81), False),
        (HostPort(80, "TCP"), HostPort(80, "UDP"), False),
        (HostPort(80, "UDP"), HostPort(80, "UDP"), True),
        (HostPort(80, "TCP", "0.0.0.0"), HostPort(80, "TCP", "127.0.0.1"), True),
        (HostPort(80, "TCP", "10.0.0.1"), HostPort(80, "TCP", "0.0.0.0"), True),
        (HostPort(80, "TCP", "10.0.0.1"), HostPort(80, "TCP", "10.0.0.2"), False),
        (HostPort(80, "TCP", "10.0.0.1"), HostPort(80, "TCP", "10.0.0.1"), True),
        (HostPort(80, "", ""), HostPort(80, "TCP", "10.0.0.9"), True),  # empty = TCP on 0.0.0.0
        (HostPort(80, "SCTP"), HostPort(80, "TCP"), False),
    ],
)
def test_conflict_rules(held, wanted, conflict):
    snap = cluster({"n1": [pod("holder", held)], "n2": []})
    pl, ctx, st = run(snap, pod("p", wanted))
    assert st is None
    assert list(pl.filter(ctx)) == [not conflict, True]
    if conflict:
        s = pl.filter_status(ctx, 0)
        assert s.code == UNSCHEDULABLE and s.reasons == (ERR_REASON,)


def test_ports_free_on_delete_and_come_back_on_add():
    holder = pod("holder", HostPort(8080))
    snap = cluster({"n1": [holder]})
    pl, ctx, _ = run(snap, pod("p", HostPort(8080)))
    assert not pl.filter(ctx)[0]
    snap.remove_pod(holder)
    assert pl.filter(ctx)[0]
    snap.add_pod(holder, 0)
    assert not pl.filter(ctx)[0]


def test_index_rebuilds_when_nodes_change():
    holder = pod("holder", HostPort(8080))
    snap = cluster({"n1": [holder], "n2": []})
    assert used_ports(snap).by_port == {("TCP", 8080): {0: {"0.0.0.0"}}}
    snap.set_nodes([node("n0"), node("n1"), node("n2")])  # n1 keeps its pod, at a new index
    assert used_ports(snap).by_port == {("TCP", 8080): {snap.index["n1"]: {"0.0.0.0"}}}


def test_nominated_pods_hold_their_ports():
    snap = cluster({"n1": [], "n2": []})
    nominee = pod("nominee", HostPort(9000), priority=10)
    pl, ctx, _ = run(snap, pod("p", HostPort(9000)), nominated={1: [nominee]})
    assert list(pl.filter(ctx)) == [True, False]


def test_full_cycle_spreads_host_port_pods_then_fails_with_the_reason():
    snap = cluster({"n1": [], "n2": []})
    sched = Scheduler(load_scheduler_config(None), snap, deterministic=True)
    placed = []
    for k in range(2):
        p = pod(f"ds-{k}", HostPort(8080))
        att = sched.schedule_one(p)
        assert att.node is not None
        snap.add_pod(p, snap.index[att.node])
        placed.append(att.node)
    assert sorted(placed) == ["n1", "n2"]
    att = sched.schedule_one(pod("third", HostPort(8080)))
    assert att.node is None
    assert att.message == (
        "0/2 nodes are available: 2 node(s) didn't have free ports for the requested pod ports. "
        "preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
    )
    # A different port, or the same port on UDP, fits.
    assert sched.schedule_one(pod("other", HostPort(8081))).node is not None
    assert sched.schedule_one(pod("udp", HostPort(8080, "UDP"))).node is not None


def test_preemption_evicts_only_the_port_holder():
    holder = pod("holder", HostPort(443), priority=1)
    bystander = pod("bystander", priority=1, cpu=100)
    snap = cluster({"n1": [holder, bystander]})
    sched = Scheduler(load_scheduler_config(None), snap, deterministic=True)
    att = sched.schedule_one(pod("ingress", HostPort(443), priority=100))
    assert att.node is None
    assert [v.name for v in att.post_filter.victims] == ["holder"]
    assert att.message == (
        "0/1 nodes are available: 1 node(s) didn't have free ports for the requested pod ports. "
        "preemption: found a potential placement for pod on node n1, preempting 1 victims"
    )
    assert used_ports(snap).by_port == {("TCP", 443): {0: {"0.0.0.0"}}}  # restored after the dry run
