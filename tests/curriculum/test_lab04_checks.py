"""Lab 04's checks: the model answer passes, the usual wrong answers fail with specific messages."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

import gpu_lab

SCENARIOS = Path(__file__).resolve().parents[2] / "lessons" / "scenarios"
lab04 = gpu_lab.labs.lab04

MOST_ALLOCATED = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources:
        - {name: cpu, weight: 1}
        - {name: memory, weight: 1}
        - {name: nvidia.com/gpu, weight: 3}
"""
PACKING = MOST_ALLOCATED + """
  - name: PodTopologySpread
    args:
      defaultingType: List
"""
RTCR_GPU = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- schedulerName: default-scheduler
  plugins:
    score:
      disabled: [{name: PodTopologySpread}]
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: RequestedToCapacityRatio
        resources: [{name: nvidia.com/gpu, weight: 1}]
        requestedToCapacityRatio:
          shape: [{utilization: 0, score: 0}, {utilization: 100, score: 10}]
"""
TAINT = "  taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]\n"


def gpu_pool(tainted: bool) -> str:
    text = (SCENARIOS / "04_lab_gpu_pool.yaml").read_text()
    return text + TAINT if tainted else text


def run(config: str, tainted: bool, seed: int | None = None):
    """The lab notebook's ``run``: config, GPU pool, CPU pool, then each arrival in turn."""
    lab = gpu_lab.connect("sim", deterministic=True) if seed is None else gpu_lab.connect("sim", seed=seed)
    if config:
        lab.apply(config)
    lab.apply(gpu_pool(tainted))
    lab.apply(SCENARIOS / "04_lab_cpu_pool.yaml")
    with open(SCENARIOS / "04_lab_arrivals.yaml") as f:
        for doc in yaml.safe_load_all(f):
            if doc:
                lab.apply(doc)
                lab.schedule()
    return lab


def failure(fn, *args, **kwargs) -> str:
    with pytest.raises(gpu_lab.labs.LabCheckFailed) as err:
        fn(*args, **kwargs)
    return str(err.value)


@pytest.fixture(scope="module")
def solved():
    return run(PACKING, tainted=True)


@pytest.fixture(scope="module")
def default_profile():
    return run("", tainted=False)


@pytest.fixture(scope="module")
def spread_kept():
    return run(MOST_ALLOCATED, tainted=True)


def test_model_answer_passes(solved):
    assert lab04.check_training_fits(solved, PACKING).passed
    fb = lab04.check_packed(solved, max_partial=1)
    assert "1 GPU node partially used" in str(fb)
    assert lab04.check_gpu_nodes_reserved(solved).passed


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_model_answer_passes_whatever_the_tie_break(seed):
    lab = run(PACKING, tainted=True, seed=seed)
    lab04.check_training_fits(lab, PACKING)
    lab04.check_packed(lab, max_partial=1)
    lab04.check_gpu_nodes_reserved(lab)


def test_gpu_only_rtcr_with_spreading_disabled_passes_too():
    lab = run(RTCR_GPU, tainted=True)
    lab04.check_training_fits(lab, RTCR_GPU)
    lab04.check_packed(lab, max_partial=1)


def test_default_profile_names_the_pending_jobs_the_free_block_and_the_strategy(default_profile):
    text = failure(lab04.check_training_fits, default_profile, "")
    assert "2 pods still pending: train-big-1-" in text and "(8 GPUs)" in text
    assert "25 GPUs are free, but the largest free block is 5 on h100-" in text
    assert "LeastAllocated over cpu and memory" in text


def test_default_profile_is_not_packed(default_profile):
    text = failure(lab04.check_packed, default_profile, max_partial=1)
    assert "6 GPU nodes partially used (h100-0: 3/8" in text and "goal <= 1" in text


def test_cpu_pods_on_untainted_gpu_nodes_are_named(default_profile):
    text = failure(lab04.check_gpu_nodes_reserved, default_profile)
    assert "7 CPU-only pods run on GPU nodes: api-" in text
    assert "nvidia.com/gpu=present:NoSchedule" in text


def test_most_allocated_with_default_spreading_blames_pod_topology_spread(spread_kept):
    text = failure(lab04.check_training_fits, spread_kept, MOST_ALLOCATED)
    assert "1 pod still pending: train-big-2-" in text
    assert "largest free block is 7" in text
    assert "MostAllocated over cpu, memory, nvidia.com/gpu" in text
    assert "defaultingType: System" in text
    # Read from explain(): the plugin that outvoted NodeResourcesFit, with its margin.
    assert "PodTopologySpread gave h100-" in text and "more weighted points" in text


def test_most_allocated_with_default_spreading_leaves_partial_nodes(spread_kept):
    text = failure(lab04.check_packed, spread_kept, max_partial=1)
    assert text.count("/8") == 5 and "5 GPU nodes partially used" in text


def test_packing_without_taint_fails_only_the_cpu_check():
    lab = run(PACKING, tainted=False)
    lab04.check_training_fits(lab, PACKING)
    lab04.check_packed(lab, max_partial=1)
    text = failure(lab04.check_gpu_nodes_reserved, lab)
    assert "CPU-only pods run on GPU nodes" in text


def test_gpu_only_most_allocated_is_named():
    config = MOST_ALLOCATED.replace("        - {name: nvidia.com/gpu, weight: 3}\n", "")
    lab = run(config, tainted=True)
    text = failure(lab04.check_training_fits, lab, config)
    assert "nvidia.com/gpu is not among its resources" in text


def test_profile_settings_reads_the_config():
    s = lab04.profile_settings(PACKING)
    assert s["strategy"] == "MostAllocated" and s["spread"] == "List"
    assert s["resources"] == ["cpu", "memory", "nvidia.com/gpu"]
    assert lab04.profile_settings(RTCR_GPU)["spread"] == "disabled"
    assert lab04.profile_settings("") is None
    spreading = RTCR_GPU.replace("score: 0}, {utilization: 100, score: 10}", "score: 10}, {utilization: 100, score: 0}")
    assert "it spreads" in lab04.describe_profile(lab04.profile_settings(spreading))
