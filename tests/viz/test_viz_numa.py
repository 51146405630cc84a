import pytest
from vizkit import dataset_with, pod, pool, session, subtitle

import gpu_lab

charts = gpu_lab.charts


def test_gpus_by_numa_node_with_their_holders_and_the_pods_that_span():
    lab = session(pool("h100", "H100-80GB", 8), pod("one", 1), pod("four", 4), pod("two", 2))
    rows = dataset_with(charts.numa_layout(lab, "h100-0"), "gpu", "numa", "holder")
    held = {r["gpu"]: (r["numa"], r["holder"]) for r in rows}
    assert len(held) == 8
    assert held[0] == ("NUMA node 0", "one")  # the plugin's choice: the lowest first
    assert {held[g][1] for g in (4, 5, 6, 7)} == {"four"}  # node 1 whole for the 4-GPU pod
    assert {held[g][1] for g in (1, 2)} == {"two"} and held[3][1] == "free"
    assert "no pod spans NUMA nodes" in subtitle(charts.numa_layout(lab, "h100-0"))


def test_a_pod_across_sockets_is_named():
    lab = session(pool("h100", "H100-80GB", 8), pod("six", 6))
    assert "spanning NUMA nodes: six" in subtitle(charts.numa_layout(lab, "h100-0"))
    rows = dataset_with(charts.numa_layout(lab, "h100-0", numa_nodes=4), "gpu", "numa")
    assert sorted({r["numa"] for r in rows}) == [f"NUMA node {n}" for n in range(4)]


def test_a_node_without_gpus_is_one_line():
    lab = session(pool("cpu", "L4", 0))
    with pytest.raises(gpu_lab.GpuLabError, match='^node "cpu-0" has no GPUs'):
        charts.numa_layout(lab, "cpu-0")
