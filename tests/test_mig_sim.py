"""MIG on the simulator: mixed-strategy resources schedule, and relabelling repartitions."""

import pytest

import gpu_lab

POOL = """
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: a100}
spec:
  count: 1
  gpu: {model: A100-40GB, count: 1}
  cpu: "32"
  memory: 256Gi
  devicePlugin: {version: v1, flags: {migStrategy: mixed}}
  mig: {config: all-balanced}
"""


def pod(name, resource):
    return f"""
---
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec: {{containers: [{{name: c, image: x, resources: {{limits: {{{resource}: 1}}}}}}]}}
"""


def test_mixed_strategy_slices_are_scheduled_and_get_mig_devices():
    lab = gpu_lab.connect("sim")
    lab.apply(POOL + pod("small", "nvidia.com/mig-1g.5gb") + pod("big", "nvidia.com/mig-3g.20gb")
              + pod("too-many", "nvidia.com/mig-3g.20gb") + pod("whole", "nvidia.com/gpu"))
    pods = lab.schedule().set_index("name")
    assert pods.loc["small", "phase"] == "Running"
    assert pods.loc["small", "devices"]["nvidia.com/mig-1g.5gb"][0].startswith("MIG-")
    assert pods.loc["big", "phase"] == "Running"
    # all-balanced on an A100-40GB has one 3g.20gb and no whole GPU
    assert pods.loc["too-many", "message"].startswith("0/1 nodes are available: 1 Insufficient nvidia.com/mig-3g.20gb.")
    assert "Insufficient nvidia.com/gpu" in pods.loc["whole", "message"]


def test_relabel_repartitions_and_refuses_while_gpus_are_held():
    lab = gpu_lab.connect("sim")
    lab.apply(POOL + pod("small", "nvidia.com/mig-1g.5gb"))
    lab.schedule()
    with pytest.raises(gpu_lab.GpuLabError, match="default/small"):
        lab.label_node("a100-0", {"nvidia.com/mig.config": "all-1g.5gb"})
    evicted = lab.label_node("a100-0", {"nvidia.com/mig.config": "all-1g.5gb"}, evict=True)
    assert evicted == ["default/small"]
    node = lab.nodes().set_index("name").loc["a100-0"]
    assert node["nvidia.com/mig-1g.5gb allocatable"] == 7
    # resources the plugin no longer serves: allocatable 0 at once, capacity for the
    # kubelet's grace period, then 0 (kept on the node, not deleted)
    assert node["nvidia.com/mig-3g.20gb allocatable"] == 0
    assert node["nvidia.com/mig-3g.20gb capacity"] == 1  # all-balanced: one 3g per GPU
    lab.advance(301)
    node = lab.nodes().set_index("name").loc["a100-0"]
    assert (node["nvidia.com/mig-3g.20gb capacity"], node["nvidia.com/mig-3g.20gb allocatable"]) == (0, 0)
    assert node["nvidia.com/mig-1g.5gb capacity"] == 7
    assert lab.describe_node("a100-0").labels["nvidia.com/mig.config.state"] == "success"
    lab.apply(pod("again", "nvidia.com/mig-1g.5gb"))
    assert lab.schedule().set_index("name").loc["again", "phase"] == "Running"


def test_impossible_config_is_refused_without_change():
    lab = gpu_lab.connect("sim")
    lab.apply(POOL)
    with pytest.raises(gpu_lab.GpuLabError, match="all-nonsense"):
        lab.label_node("a100-0", {"nvidia.com/mig.config": "all-nonsense"})
    assert lab.describe_node("a100-0").labels["nvidia.com/mig.config"] == "all-balanced"
