"""NodeResourcesFit: filter reasons and the three scoring strategies, worked by hand."""

import numpy as np
import simkit as k

from gpu_lab.sim.framework import UNRESOLVABLE, UNSCHEDULABLE
from gpu_lab.sim.plugins.noderesources.fit import Fit

GPU_PACKING = {
    "profiles": [{"pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {
        "type": "MostAllocated",
        "resources": [{"name": "cpu", "weight": 1}, {"name": "memory", "weight": 1},
                      {"name": "nvidia.com/gpu", "weight": 3}]}}}]}]
}


def test_filter_reports_every_insufficient_resource():
    snap = k.snapshot(k.node("a", cpu=4, gpus=8), k.node("b", cpu=4, gpus=0))
    p = k.pod("p", cpu_m=6000, gpus=2)
    c = k.ctx(p, snap)
    fit = Fit()
    assert list(fit.filter(c)) == [False, False]
    st = fit.filter_status(c, snap.index["a"])
    assert st.reasons == ("Insufficient cpu",)
    # 6 cores > 4 allocatable: no eviction can help
    assert st.code == UNRESOLVABLE
    st_b = fit.filter_status(c, snap.index["b"])
    assert st_b.reasons == ("Insufficient cpu", "Insufficient nvidia.com/gpu")


def test_gpu_shortage_is_resolvable_when_the_node_has_enough_in_total():
    snap = k.snapshot(k.node("a", gpus=8))
    k.bind(snap, k.pod("busy", cpu_m=100, gpus=7), "a")
    c = k.ctx(k.pod("p", cpu_m=100, gpus=2), snap)
    fit = Fit()
    assert not fit.filter(c)[0]
    st = fit.filter_status(c, 0)
    assert st.reasons == ("Insufficient nvidia.com/gpu",) and st.code == UNSCHEDULABLE


def test_too_many_pods_even_without_requests():
    snap = k.snapshot(k.node("a", pods=1))
    k.bind(snap, k.pod("first"), "a")
    c = k.ctx(k.pod("second"), snap)
    assert not Fit().filter(c)[0]
    assert Fit().filter_status(c, 0).reasons == ("Too many pods",)


def test_least_allocated_worked_example():
    # 8 cores / 32Gi; 2 cores + 8Gi already requested; pod asks 1 core + 4Gi.
    # cpu: (8000-3000)*100/8000 = 62; memory: (32-12)*100/32 = 62; mean 62.
    snap = k.snapshot(k.node("a", cpu=8, mem_gi=32))
    k.bind(snap, k.pod("x", cpu_m=2000, mem_mi=8 * 1024), "a")
    c = k.ctx(k.pod("p", cpu_m=1000, mem_mi=4 * 1024), snap)
    assert Fit().score(c, np.array([0])).tolist() == [62]


def test_missing_requests_score_as_100m_and_200Mi():
    snap = k.snapshot(k.node("a", cpu=1, mem_gi=1))
    c = k.ctx(k.pod("besteffort"), snap)
    # cpu: (1000-100)*100/1000 = 90; memory: (1024-200)*100/1024 = 80.4 -> 80; mean 85
    assert Fit().score(c, np.array([0])).tolist() == [85]


def test_default_profile_ignores_gpus_when_scoring():
    # Same cpu/memory on both nodes, very different GPU use: identical scores.
    snap = k.snapshot(k.node("empty", gpus=8), k.node("busy", gpus=8))
    k.bind(snap, k.pod("g", gpus=6), "busy")
    c = k.ctx(k.pod("p", cpu_m=1000, mem_mi=1024, gpus=1), snap)
    s = Fit().score(c, np.array([0, 1]))
    assert s[0] == s[1]


def test_most_allocated_with_gpu_weight_packs():
    # 8 cores/32Gi/8 GPUs, with 2 cores, 8Gi, 2 GPUs requested; pod: 1 core, 4Gi, 2 GPUs.
    # cpu 3000*100/8000 = 37, memory 12*100/32 = 37, gpu 4*100/8 = 50
    # (37 + 37 + 3*50) / 5 = 44
    snap = k.snapshot(k.node("a", gpus=8))
    k.bind(snap, k.pod("x", cpu_m=2000, mem_mi=8 * 1024, gpus=2), "a")
    fit = Fit(GPU_PACKING["profiles"][0]["pluginConfig"][0]["args"])
    c = k.ctx(k.pod("p", cpu_m=1000, mem_mi=4 * 1024, gpus=2), snap)
    assert fit.score(c, np.array([0])).tolist() == [44]
    # A CPU-only pod leaves the GPU out of its average: (37 + 37) / 2
    c2 = k.ctx(k.pod("cpuonly", cpu_m=1000, mem_mi=4 * 1024), snap)
    assert fit.score(c2, np.array([0])).tolist() == [37]


def test_requested_to_capacity_ratio_shape_scaled_by_ten():
    args = {"scoringStrategy": {"type": "RequestedToCapacityRatio",
                                "resources": [{"name": "nvidia.com/gpu", "weight": 1}],
                                "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0},
                                                                       {"utilization": 100, "score": 10}]}}}
    snap = k.snapshot(k.node("a", gpus=8), k.node("b", gpus=8))
    k.bind(snap, k.pod("x", gpus=4), "a")
    c = k.ctx(k.pod("p", gpus=2), snap)
    # a: 6/8 = 75% -> 75; b: 2/8 = 25% -> 25
    assert Fit(args).score(c, np.array([0, 1])).tolist() == [75, 25]


def test_requested_to_capacity_ratio_decreasing_shape_truncates_like_go():
    args = {"scoringStrategy": {"type": "RequestedToCapacityRatio",
                                "resources": [{"name": "cpu", "weight": 1}],
                                "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 10},
                                                                       {"utilization": 30, "score": 0}]}}}
    snap = k.snapshot(k.node("a", cpu=3))
    c = k.ctx(k.pod("p", cpu_m=100), snap)
    # 100*100/3000 = 3%; 100 + (0-100)*3/30 = 90 (Go truncation toward zero)
    assert Fit(args).score(c, np.array([0])).tolist() == [90]


def test_bad_strategy_and_weight_are_clear_errors():
    import pytest

    from gpu_lab.errors import GpuLabError

    with pytest.raises(GpuLabError, match='Unsupported value: "Packed"'):
        Fit({"scoringStrategy": {"type": "Packed"}})
    with pytest.raises(GpuLabError, match="should be in range"):
        Fit({"scoringStrategy": {"resources": [{"name": "cpu", "weight": 500}]}})
