"""KubeSchedulerConfiguration: profiles by schedulerName, enabling/disabling plugins, weights."""

import pytest
import simkit as k

from gpu_lab.errors import GpuLabError
from gpu_lab.sim.profile import load_scheduler_config

TWO_PROFILES = {
    "profiles": [
        {"schedulerName": "default-scheduler"},
        {"schedulerName": "gpu-packer",
         "plugins": {"score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}],
                               "enabled": [{"name": "NodeResourcesFit", "weight": 5}]}},
         "pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {
             "type": "MostAllocated", "resources": [{"name": "nvidia.com/gpu", "weight": 1}]}}}]},
    ]
}


def test_default_profile_matches_v137_defaults():
    prof = load_scheduler_config(None).profile_for("default-scheduler")
    assert prof.phases["filter"] == ["NodeName", "NodeUnschedulable", "TaintToleration", "NodeAffinity",
                                     "NodePorts", "NodeResourcesFit", "PodTopologySpread", "InterPodAffinity",
                                     "DynamicResources"]  # applyDynamicResources: DRA is GA, on by default
    assert prof.weights == {"TaintToleration": 3, "NodeAffinity": 2, "NodeResourcesFit": 1,
                            "PodTopologySpread": 2, "InterPodAffinity": 2, "DynamicResources": 2,
                            "NodeResourcesBalancedAllocation": 1}
    assert prof.phases["postFilter"] == ["DefaultPreemption"]


def test_second_profile_is_chosen_by_scheduler_name():
    cfg = load_scheduler_config(TWO_PROFILES)
    packer = cfg.profile_for("gpu-packer")
    assert "NodeResourcesBalancedAllocation" not in packer.phases["score"]
    assert packer.weights["NodeResourcesFit"] == 5
    snap = k.snapshot(k.node("a", gpus=8), k.node("b", gpus=8))
    k.bind(snap, k.pod("x", gpus=4), "b")
    s = k.scheduler(snap, TWO_PROFILES)
    # default profile: LeastAllocated on cpu/memory, equal -> lowest name (deterministic)
    assert s.schedule_one(k.pod("p", cpu_m=100, gpus=1)).node == "a"
    # packer: MostAllocated on GPUs only -> the fuller node
    assert s.schedule_one(k.pod("q", cpu_m=100, gpus=1, scheduler_name="gpu-packer")).node == "b"


def test_disable_all_filters_but_keep_fit():
    cfg = {"profiles": [{"plugins": {"filter": {"disabled": [{"name": "*"}],
                                                "enabled": [{"name": "NodeResourcesFit"}]}}}]}
    prof = load_scheduler_config(cfg).profile_for("default-scheduler")
    assert prof.phases["filter"] == ["NodeResourcesFit"]


def test_per_profile_percentage_of_nodes_to_score():
    cfg = {"profiles": [{"percentageOfNodesToScore": 10}]}
    snap = k.snapshot(*[k.node(f"n{i:03d}") for i in range(300)])
    a = k.scheduler(snap, cfg).schedule_one(k.pod("p"))
    assert len(a.feasible) == 100  # 10% of 300 = 30, but at least 100


@pytest.mark.parametrize("cfg,msg", [
    ({"profiles": [{"plugins": {"score": {"enabled": [{"name": "ImageLocalityX"}]}}}]}, "not supported"),
    ({"profiles": [{}, {}]}, 'Duplicate value: "default-scheduler"'),
    ({"percentageOfNodesToScore": 120}, "not in valid range"),
])
def test_bad_configuration_is_one_line(cfg, msg):
    with pytest.raises(GpuLabError, match=msg) as info:
        load_scheduler_config(cfg)
    assert "\n" not in str(info.value)
