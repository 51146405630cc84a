"""The scheduling cycle: how many nodes are searched, messages, ties, scoring."""

import pytest
import simkit as k

from gpu_lab.sim.framework import Diagnosis, Status, fit_error_message
from gpu_lab.sim.scheduler import num_feasible_nodes_to_find


@pytest.mark.parametrize("nodes,pct,expected", [
    (50, 0, 50),        # under 100 nodes: all
    (1000, 0, 420),     # adaptive: 50 - 1000/125 = 42%
    (5000, 0, 500),     # 50 - 40 = 10%
    (10000, 0, 500),    # floor of 5%: 500
    (200, 0, 100),      # 48% of 200 = 96 -> at least 100
    (1000, 30, 300),
])
def test_num_feasible_nodes_to_find(nodes, pct, expected):
    assert num_feasible_nodes_to_find(pct, nodes) == expected


def test_fit_error_message_sorts_reason_counts():
    d = Diagnosis(node_status={
        0: Status("Unschedulable", ("Insufficient nvidia.com/gpu",)),
        1: Status("Unschedulable", ("Insufficient cpu", "Insufficient nvidia.com/gpu")),
        2: Status("UnschedulableAndUnresolvable", ("node(s) had untolerated taint(s)",)),
    })
    assert fit_error_message(3, d) == (
        "0/3 nodes are available: 1 Insufficient cpu, 1 node(s) had untolerated taint(s), "
        "2 Insufficient nvidia.com/gpu."
    )


def test_first_rejecting_plugin_is_the_reported_reason():
    # tainted + too small: TaintToleration runs before NodeResourcesFit and is what is reported
    snap = k.snapshot(k.node("a", gpus=8, taints=[("nvidia.com/gpu", "present", "NoSchedule")]), k.node("b"))
    a = k.scheduler(snap).schedule_one(k.pod("p", gpus=16))
    assert a.node is None
    assert a.message.startswith(
        "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, 1 node(s) had untolerated taint(s)."
    )


def test_default_profile_spreads_by_cpu_memory_not_gpus():
    snap = k.snapshot(k.node("a", gpus=8), k.node("b", gpus=8))
    s = k.scheduler(snap)
    placed = []
    for i in range(4):
        p = k.pod(f"p{i}", cpu_m=2000, mem_mi=4096, gpus=2, created=i)
        a = s.schedule_one(p)
        k.bind(snap, p, a.node)
        placed.append(a.node)
    assert sorted(placed) == ["a", "a", "b", "b"]


def test_single_feasible_node_is_chosen_without_scoring():
    snap = k.snapshot(k.node("gpu", gpus=1), k.node("cpu"))
    a = k.scheduler(snap).schedule_one(k.pod("p", gpus=1))
    assert a.node == "gpu" and a.scores == {}


def test_seeded_ties_are_reproducible_and_vary_by_seed():
    nodes = [k.node(f"n{i}") for i in range(8)]

    def first_choice(seed):
        snap = k.snapshot(*nodes)
        return k.scheduler(snap, deterministic=False).__class__(
            k.scheduler(snap).config, snap, seed=seed).schedule_one(k.pod("p", cpu_m=100)).node

    assert first_choice(1) == first_choice(1)
    assert len({first_choice(s) for s in range(12)}) > 1


def test_deterministic_mode_takes_lowest_name():
    snap = k.snapshot(k.node("n2"), k.node("n1"), k.node("n3"))
    assert k.scheduler(snap, deterministic=True).schedule_one(k.pod("p")).node == "n1"


def test_percentage_of_nodes_to_score_rotates_the_start():
    snap = k.snapshot(*[k.node(f"n{i:03d}") for i in range(200)])
    s = k.scheduler(snap)
    a = s.schedule_one(k.pod("p"))
    # 48% of 200 = 96 -> 100 nodes searched, all feasible
    assert len(a.evaluated) == 100 and len(a.feasible) == 100
    assert s.next_start_node_index == 100
    b = s.schedule_one(k.pod("q"))
    assert int(b.evaluated[0]) == 100


def test_unknown_scheduler_name_is_left_alone():
    snap = k.snapshot(k.node("a"))
    a = k.scheduler(snap).schedule_one(k.pod("p", scheduler_name="volcano"))
    assert a.node is None and "volcano" in a.message
