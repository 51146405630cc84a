"""Lab 04's checks: the model answer passes, the usual wrong answers fail with specific messages."""

from __future__ import annotations

import pytest
import yaml

import gpu_lab

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


def gpu_pools(tainted: bool) -> str:
    """Both GPU pools, each with the taint appended to its spec when ``tainted``."""
    if not tainted:
        return lab04.GPU_POOLS
    return "---".join(doc.rstrip("\n") + "\n" + TAINT for doc in lab04.GPU_POOLS.split("---"))


def run(config: str, tainted: bool, seed: int | None = None):
    """The lab notebook's ``run``: config, GPU pools, CPU pool, then each arrival in turn."""
    lab = gpu_lab.connect("sim", deterministic=True) if seed is None else gpu_lab.connect("sim", seed=seed)
    if config:
        lab.apply(config)
    lab.apply(gpu_pools(tainted))
    lab.apply(lab04.CPU_POOL)
    for doc in yaml.safe_load_all(lab04.ARRIVALS):
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
    fb = lab04.check_packed(solved)
    assert "0 GPU nodes partially used (none), goal <= 0; 6 full, 0 empty" in str(fb)
    assert lab04.check_gpu_nodes_reserved(solved).passed
    placed = solved.pods().set_index("name")["node"]
    assert {placed[n] for n in placed.index if n.startswith("train-big-")} == {"h100-0", "h100-1"}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_model_answer_passes_whatever_the_tie_break(seed):
    lab = run(PACKING, tainted=True, seed=seed)
    lab04.check_training_fits(lab, PACKING)
    lab04.check_packed(lab)
    lab04.check_gpu_nodes_reserved(lab)


def test_gpu_only_rtcr_with_spreading_disabled_passes_too():
    lab = run(RTCR_GPU, tainted=True)
    lab04.check_training_fits(lab, RTCR_GPU)
    lab04.check_packed(lab)


def test_the_fleet_is_mixed_and_the_small_work_fills_the_l40s_pool_exactly():
    lab = run("", tainted=False)
    nodes = lab.nodes().set_index("name")
    assert dict(nodes["nvidia.com/gpu allocatable"]) == {
        "h100-0": 8, "h100-1": 8, "l40s-0": 4, "l40s-1": 4, "l40s-2": 4, "l40s-3": 4, "cpu-0": 0, "cpu-1": 0}
    docs = [d for d in yaml.safe_load_all(lab04.ARRIVALS) if d]
    small = sum(d["spec"].get("replicas", 1) * d["spec"]["template"]["spec"]["containers"][0]["resources"]
                .get("limits", {}).get("nvidia.com/gpu", 0) for d in docs
                if not d["metadata"]["name"].startswith("train-"))
    assert small == 16


def first_failure(text: str) -> str:
    return next(line for line in text.splitlines() if line.lstrip().startswith("✘"))


def test_default_profile_names_the_pending_jobs_the_free_block_and_the_strategy(default_profile):
    text = failure(lab04.check_training_fits, default_profile, "")
    assert "2 pods still pending: train-big-1-" in text and "(8 GPUs)" in text
    assert "16 GPUs are free, but the largest free block is 4 on l40s-" in text
    assert "LeastAllocated over cpu and memory" in text
    assert "`kubectl get pods --field-selector=status.phase=Pending`" in first_failure(text)
    assert "MostAllocated" not in text  # the symptom, not the answer
    assert "gpu_lab.labs.hint(4)" in text


def test_default_profile_is_not_packed(default_profile):
    text = failure(lab04.check_packed, default_profile)
    assert "4 GPU nodes partially used (h100-0: 7/8, h100-1: 7/8, l40s-0: 1/4" in text and "goal <= 0" in text
    assert "`kubectl describe node h100-0`" in text


def test_cpu_pods_on_untainted_gpu_nodes_are_named_without_the_answer(default_profile):
    text = failure(lab04.check_gpu_nodes_reserved, default_profile)
    assert "4 CPU-only pods run on GPU nodes: api-" in text
    assert "nothing on those nodes keeps out a pod without a toleration" in text
    assert "`kubectl describe node h100-0`" in first_failure(text)
    assert "nvidia.com/gpu=present:NoSchedule" not in text  # the answer is the last hint
    assert "nvidia.com/gpu=present:NoSchedule" in lab04.HINTS[-1]


def test_most_allocated_with_default_spreading_blames_pod_topology_spread(spread_kept):
    text = failure(lab04.check_training_fits, spread_kept, MOST_ALLOCATED)
    assert "1 pod still pending: train-big-2-" in text
    assert "8 GPUs are free, but the largest free block is 3" in text
    assert "MostAllocated over cpu, memory, nvidia.com/gpu" in text
    assert "defaultingType: System" in text and "set defaultingType" not in text
    # Read from explain(): the plugin that outvoted NodeResourcesFit, with its margin.
    assert "PodTopologySpread gave l40s-" in text and "more weighted points" in text


def test_most_allocated_with_default_spreading_leaves_partial_nodes(spread_kept):
    text = failure(lab04.check_packed, spread_kept)
    assert "4 GPU nodes partially used (l40s-0: 3/4, l40s-1: 3/4, l40s-2: 1/4, l40s-3: 1/4)" in text


def test_packing_without_taint_fails_only_the_cpu_check():
    lab = run(PACKING, tainted=False)
    lab04.check_training_fits(lab, PACKING)
    lab04.check_packed(lab)
    text = failure(lab04.check_gpu_nodes_reserved, lab)
    assert "5 CPU-only pods run on GPU nodes" in text and "on l40s-0" in text


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
