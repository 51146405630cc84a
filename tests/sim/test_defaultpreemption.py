"""DefaultPreemption: eligibility, the dry run, picking a node, and kube-scheduler's messages."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from gpu_lab.errors import GpuLabError
from gpu_lab.model.objects import ContainerResources, Node, Pod, Taint, compute_pod_requests
from gpu_lab.sim.framework import (
    SUCCESS,
    UNRESOLVABLE,
    UNSCHEDULABLE,
    CycleContext,
    Diagnosis,
    Status,
)
from gpu_lab.sim.plugins.defaultpreemption import DefaultPreemption, lower_priority_nominated
from gpu_lab.sim.profile import load_scheduler_config
from gpu_lab.sim.scheduler import Scheduler
from gpu_lab.sim.snapshot import Snapshot

GPU = "nvidia.com/gpu"
INSUFFICIENT_GPU = "Insufficient nvidia.com/gpu"


def node(name: str, gpus: int = 8, taints: list[Taint] | None = None) -> Node:
    alloc = {"cpu": 64000, "memory": 256 * 2**30, "pods": 110, GPU: gpus}
    return Node(name=name, allocatable=alloc, capacity=dict(alloc), taints=taints or [])


_created = iter(range(1, 10**6))


def pod(name: str, gpus: int = 0, priority: int = 0, **kw) -> Pod:
    req = {GPU: gpus} if gpus else {}
    p = Pod(namespace="default", name=name, priority=priority, created=next(_created),
            containers=[ContainerResources("main", dict(req), dict(req))], **kw)
    compute_pod_requests(p)
    return p


def cluster(layout: dict[str, list[Pod]], gpus: dict[str, int] | None = None,
            taints: dict[str, list[Taint]] | None = None) -> Snapshot:
    gpus, taints = gpus or {}, taints or {}
    snap = Snapshot()
    snap.resource_column(GPU)  # before set_nodes: it cannot add a column while growing the node list
    snap.set_nodes([node(n, gpus.get(n, 8), taints.get(n)) for n in layout])
    for n, pods in layout.items():
        for p in pods:
            snap.add_pod(p, snap.index[n])
    return snap


def state(snap: Snapshot):
    return (snap.requested.copy(), [[p.key for p in pods] for pods in snap.pods_on], dict(snap.pod_node))


def assert_same(a, b) -> None:
    assert np.array_equal(a[0], b[0])
    assert a[1] == b[1]
    assert a[2] == b[2]


def schedule(snap: Snapshot, p: Pod, config: dict | None = None, sched: Scheduler | None = None):
    sched = sched or Scheduler(load_scheduler_config(config), snap, deterministic=True)
    return sched, sched.schedule_one(p)


# ------------------------------------------------------------------ full cycles
def test_preempts_the_node_with_the_lowest_priority_victims():
    a1, a2 = pod("a1", 4, priority=10), pod("a2", 4, priority=10)
    b1, b2 = pod("b1", 4, priority=5), pod("b2", 4, priority=5)
    snap = cluster({"node-a": [a1, a2], "node-b": [b1, b2]})
    before = state(snap)
    big = pod("big", 8, priority=100)
    sched, att = schedule(snap, big)
    assert att.node is None
    pf = att.post_filter
    assert pf.nominated_node == snap.index["node-b"]
    assert [v.key for v in pf.victims] == ["default/b1", "default/b2"]
    assert pf.status.code == SUCCESS
    assert att.message == (
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. "
        "preemption: found a potential placement for pod on node node-b, preempting 2 victims"
    )
    assert_same(before, state(snap))

    # What the executor does next: delete the victims and nominate; the pod then lands there.
    for v in pf.victims:
        snap.remove_pod(v)
    sched.nominate(big, pf.nominated_node)
    att2 = sched.schedule_one(big)
    assert att2.node == "node-b" and att2.via_nominated_node


def test_nominated_pod_keeps_the_freed_room_from_lower_priority_pods():
    b1, b2 = pod("b1", 4, priority=5), pod("b2", 4, priority=5)
    snap = cluster({"node-b": [b1, b2]})
    big = pod("big", 8, priority=100)
    sched, att = schedule(snap, big)
    for v in att.post_filter.victims:
        snap.remove_pod(v)
    sched.nominate(big, att.post_filter.nominated_node)
    # A lower-priority pod may not take the room, and cannot preempt the nominee.
    small = pod("small", 4, priority=50)
    _, att2 = schedule(snap, small, sched=sched)
    assert att2.node is None
    assert att2.message == (
        "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: 0/1 nodes are available: "
        "1 No preemption victims found for incoming pod."
    )


def test_preemption_policy_never_gets_the_exact_message():
    snap = cluster({"node-a": [pod("a1", 8, priority=1)], "node-b": [pod("b1", 8, priority=1)]})
    p = pod("never", 8, priority=100, preemption_policy="Never")
    _, att = schedule(snap, p)
    assert att.post_filter.nominated_node is None
    assert att.post_filter.nominating_mode == "Noop"
    assert att.message == (
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. "
        "preemption: not eligible due to preemptionPolicy=Never."
    )


def test_pod_that_fits_no_empty_node_is_not_helped():
    snap = cluster({"node-a": [pod("a1", 4, priority=1)], "node-b": []})
    _, att = schedule(snap, pod("huge", 16, priority=100))
    assert att.post_filter.nominated_node is None
    assert att.post_filter.nominating_mode == "Override"  # clears a stale nomination
    assert att.message == (
        "0/2 nodes are available: 2 Insufficient nvidia.com/gpu. "
        "preemption: 0/2 nodes are available: 2 Preemption is not helpful for scheduling."
    )


def test_histogram_of_victimless_and_unhelpful_nodes():
    snap = cluster(
        {"node-a": [pod("a1", 4, priority=100), pod("a2", 4, priority=100)], "node-b": [], "node-c": []},
        gpus={"node-b": 4, "node-c": 4},
    )
    _, att = schedule(snap, pod("p", 8, priority=50))
    assert att.message == (
        "0/3 nodes are available: 3 Insufficient nvidia.com/gpu. preemption: 0/3 nodes are available: "
        "1 No preemption victims found for incoming pod, 2 Preemption is not helpful for scheduling."
    )


def test_node_still_short_after_evicting_everything_reports_the_filter_reason():
    snap = cluster(
        {
            "node-a": [pod("a-high", 4, priority=100), pod("a-low", 4, priority=10)],
            "node-b": [],
        },
        taints={"node-b": [Taint("dedicated", "infra", "NoSchedule")]},
    )
    before = state(snap)
    _, att = schedule(snap, pod("p", 8, priority=50))
    assert att.message == (
        "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint(s). "
        "preemption: 0/2 nodes are available: 1 Insufficient nvidia.com/gpu, "
        "1 Preemption is not helpful for scheduling."
    )
    assert_same(before, state(snap))


def test_equal_priority_pods_are_never_victims():
    snap = cluster({"node-a": [pod("a1", 8, priority=100)]})
    _, att = schedule(snap, pod("p", 8, priority=100))
    assert att.post_filter.nominated_node is None
    assert att.message.endswith("preemption: 0/1 nodes are available: 1 No preemption victims found for incoming pod.")


def test_pods_of_other_profiles_and_nodename_pods_are_victims_too():
    other = pod("other", 8, priority=1, scheduler_name="gpu-scheduler")
    snap = cluster({"node-a": [other]})
    _, att = schedule(snap, pod("p", 8, priority=10))
    assert [v.key for v in att.post_filter.victims] == ["default/other"]


def test_disabling_default_preemption_leaves_only_the_fit_error():
    snap = cluster({"node-a": [pod("a1", 8, priority=1)]})
    cfg = {"profiles": [{"plugins": {"postFilter": {"disabled": [{"name": "DefaultPreemption"}]}}}]}
    _, att = schedule(snap, pod("p", 8, priority=100), config=cfg)
    assert att.post_filter is None
    assert att.message == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu."


# ------------------------------------------------------------------ unit level
def _ctx(snap: Snapshot, p: Pod, args: dict | None = None, handle=None):
    cfg = load_scheduler_config(None)
    prof = cfg.profiles["default-scheduler"]
    pl = DefaultPreemption(args, handle)
    ctx = CycleContext(pod=p, snapshot=snap, profile=prof)  # no run_filters: the plugin runs the profile itself
    fit = prof.plugins["NodeResourcesFit"]
    diag = Diagnosis()
    mask = fit.filter(ctx)
    for i in range(len(snap)):
        if not mask[i]:
            diag.node_status[i] = fit.filter_status(ctx, i)
    return pl, ctx, diag


def test_reprieve_keeps_the_most_important_pods_that_still_fit():
    low = pod("low", 2, priority=1)
    high = pod("high", 2, priority=3)
    mid = pod("mid", 4, priority=2)
    snap = cluster({"node-a": [low, high, mid]})
    before = state(snap)
    pl, ctx, diag = _ctx(snap, pod("p", 4, priority=10))
    res = pl.post_filter(ctx, diag)
    # Reprieve order high(2) -> fits, mid(4) -> no, low(2) -> fits: only mid goes.
    assert [v.name for v in res.victims] == ["mid"]
    assert res.status.message() == "preemption: found a potential placement for pod on node node-a, preempting 1 victims"
    assert_same(before, state(snap))


def test_victims_are_listed_most_important_first():
    snap = cluster({"node-a": [pod("v1", 4, priority=1), pod("v2", 4, priority=2)]})
    pl, ctx, diag = _ctx(snap, pod("p", 8, priority=10))
    assert [v.name for v in pl.post_filter(ctx, diag).victims] == ["v2", "v1"]


def test_pick_one_node_criteria():
    pick = DefaultPreemption.pick_one

    def v(priority: int, created: int = 0) -> Pod:
        p = pod("v", 1, priority=priority)
        p.created = created
        return p

    # 2. the node whose most important victim has the lowest priority
    assert pick([(0, [v(5)]), (1, [v(3)])]) == 1
    # 3. the smallest sum of priorities, each raised by 2^31 so that two victims at
    #    -10 count as more than one at -10 (a plain sum would say -20 < -10)
    assert pick([(0, [v(-10), v(-10)]), (1, [v(-10)])]) == 1
    assert pick([(0, [v(2), v(2)]), (1, [v(2), v(1)])]) == 1
    # 4. fewest victims: the sums tie only with a victim at MinInt32
    assert pick([(0, [v(7), v(-(2**31))]), (1, [v(7)])]) == 1
    # 5. the latest start among the highest-priority victims
    assert pick([(0, [v(1, created=10), v(0, created=1)]), (1, [v(1, created=20), v(0, created=1)])]) == 1
    assert pick([(0, [v(1, created=30)]), (1, [v(1, created=20)])]) == 0
    # 6. still tied: the first candidate
    assert pick([(0, [v(1, created=5)]), (1, [v(1, created=5)])]) == 0


def test_lowest_priority_victims_win_end_to_end():
    snap = cluster({"n1": [pod("a", 8, priority=5)], "n2": [pod("b", 8, priority=3)]})
    pl, ctx, diag = _ctx(snap, pod("p", 8, priority=100))
    assert snap.nodes[pl.post_filter(ctx, diag).nominated_node].name == "n2"


def test_candidate_count_limit_stops_the_dry_run_early():
    made = {"n1": [pod("a", 8, priority=50)], "n2": [pod("b", 8, priority=1)]}
    snap = cluster(made)
    p = pod("p", 8, priority=100)
    pl, ctx, diag = _ctx(snap, p, {"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 1})
    assert snap.nodes[pl.post_filter(ctx, diag).nominated_node].name == "n1"  # offset 0, first candidate
    pl, ctx, diag = _ctx(snap, p)
    assert snap.nodes[pl.post_filter(ctx, diag).nominated_node].name == "n2"


def test_num_candidates_and_offset():
    pl = DefaultPreemption()
    assert pl.num_candidates(50) == 50
    assert pl.num_candidates(5000) == 500
    assert DefaultPreemption({"minCandidateNodesPercentage": 1, "minCandidateNodesAbsolute": 3}).num_candidates(1000) == 10
    assert pl.offset(10) == 0
    import random

    h = SimpleNamespace(rng=random.Random(1), deterministic=False)
    assert DefaultPreemption(None, h).offset(10) == random.Random(1).randrange(10)


@pytest.mark.parametrize(
    "args, msg",
    [
        ({"minCandidateNodesPercentage": 120}, "minCandidateNodesPercentage: Invalid value: 120: not in valid range [0, 100]"),
        ({"minCandidateNodesAbsolute": -1}, "minCandidateNodesAbsolute: Invalid value: -1: not in valid range [0, inf)"),
        ({"minCandidateNodesPercentage": 0, "minCandidateNodesAbsolute": 0}, "cannot be zero at the same time"),
    ],
)
def test_args_validation(args, msg):
    with pytest.raises(GpuLabError, match=msg.replace("[", r"\[").replace("(", r"\(").replace(")", r"\)")):
        DefaultPreemption(args)


def test_candidates_follow_the_status_code():
    snap = cluster({"n1": [pod("a", 8, priority=1)], "n2": [pod("b", 8, priority=1)]})
    diag = Diagnosis(node_status={1: Status(UNSCHEDULABLE, ("x",)), 0: Status(UNRESOLVABLE, ("y",))})
    ctx = CycleContext(pod=pod("p"), snapshot=snap, profile=None)
    assert DefaultPreemption.potential_nodes(ctx, diag) == [1]
    # PreFilter rejected: absent nodes take its status.
    assert DefaultPreemption.potential_nodes(ctx, Diagnosis(absent_status=Status(UNSCHEDULABLE, ("z",)))) == [0, 1]
    assert DefaultPreemption.potential_nodes(ctx, Diagnosis(absent_status=Status(UNRESOLVABLE, ("z",)))) == []


def test_terminating_victim_on_the_nominated_node_blocks_a_second_preemption():
    dying = pod("dying", 4, priority=1)
    dying.raw = {
        "metadata": {"deletionTimestamp": "2026-01-01T00:00:00Z"},
        "status": {"conditions": [{"type": "DisruptionTarget", "status": "True", "reason": "PreemptionByScheduler"}]},
    }
    snap = cluster({"node-a": [dying, pod("other", 4, priority=1)]})
    p = pod("p", 8, priority=100)
    handle = SimpleNamespace(nominated={p.key: (p, 0)})
    pl, ctx, diag = _ctx(snap, p, handle=handle)
    res = pl.post_filter(ctx, diag)
    assert res.status.message() == "preemption: not eligible due to a terminating pod on the nominated node."
    # ... unless the nominated node can no longer take the pod at all.
    diag.node_status[0] = Status(UNRESOLVABLE, ("gone",))
    res = pl.post_filter(ctx, diag)
    assert res.status.message().startswith("preemption: 0/1 nodes are available")


def test_lower_priority_nominations_to_clear():
    a, b, c = pod("a", priority=1), pod("b", priority=5), pod("c", priority=1)
    nominated = {a.key: (a, 0), b.key: (b, 0), c.key: (c, 1)}
    assert lower_priority_nominated(nominated, 3, 0) == [a]
