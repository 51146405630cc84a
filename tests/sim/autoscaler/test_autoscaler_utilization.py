"""How cluster-autoscaler measures a node: GPU requests alone on a GPU node, else max(cpu, memory)."""

import pytest
from scalekit import cpu_group, gpu_group, node, pod

from gpu_lab.sim.autoscaler import NodeState, Utilization, utilization


def test_gpu_node_judged_by_gpus_alone():
    busy_cpu = pod("etl", cpu_m=180_000, mem_mi=1_900_000)  # nearly all of the node's cpu and memory
    u = utilization(node("h100-0", gpu_group(), busy_cpu))
    assert u == Utilization("nvidia.com/gpu", 0.0, gpu=0.0)


@pytest.mark.parametrize(("gpus", "value"), [(1, 0.125), (3, 0.375), (4, 0.5), (8, 1.0)])
def test_gpu_ratio(gpus, value):
    assert utilization(node("h100-0", gpu_group(), pod("t", gpus=gpus))).value == value


def test_gpu_node_without_advertised_gpus_counts_zero():
    # the GPU label is there (driver or device plugin not up yet, or MIG mixed): CA returns 0 so it can go
    n = NodeState("h100-0", "h100", {"cpu": 192_000, "memory": 2**40}, [pod("t", cpu_m=100_000)], gpu_node=True)
    assert utilization(n) == Utilization("nvidia.com/gpu", 0.0)


def test_cpu_node_takes_the_larger_of_cpu_and_memory():
    g = cpu_group(cpu=10, mem_gi=10)
    assert utilization(node("cpu-0", g, pod("a", cpu_m=6000, mem_mi=1024))) == Utilization("cpu", 0.6, 0.6, 0.1)
    assert utilization(node("cpu-0", g, pod("a", cpu_m=4000, mem_mi=4608))) == Utilization("memory", 0.45, 0.4, 0.45)


def test_memory_wins_a_tie():
    g = cpu_group(cpu=10, mem_gi=10)
    assert utilization(node("cpu-0", g, pod("a", cpu_m=5000, mem_mi=5120))).resource == "memory"


def test_daemonsets_count_unless_ignored():
    g = cpu_group(cpu=10, mem_gi=10)
    n = node("cpu-0", g, pod("agent", cpu_m=2000, mem_mi=0, owner="DaemonSet"), pod("a", cpu_m=3000, mem_mi=0))
    assert utilization(n).value == 0.5
    assert utilization(n, ignore_daemonsets=True).value == 0.3


def test_printed_as_resource_and_value():
    assert str(utilization(node("h100-0", gpu_group(), pod("t", gpus=1)))) == "{nvidia.com/gpu 0.125}"
