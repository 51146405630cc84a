"""Lab 05's checks: the solution passes; each wrong answer fails with its specific feedback."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

import gpu_lab

LabCheckFailed = gpu_lab.labs.LabCheckFailed
lab05 = gpu_lab.labs.lab05

FLEET = str(Path(__file__).resolve().parents[2] / "lessons" / "scenarios" / "05_lab_fleet.yaml")
DOCS = [d for d in yaml.safe_load_all(Path(FLEET).read_text()) if d]
D = "default-scheduler"

HEAD = """
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
"""
GPU_MOST_ALLOCATED = """
  pluginConfig:
  - name: NodeResourcesFit
    args:
      scoringStrategy:
        type: MostAllocated
        resources: [{name: nvidia.com/gpu, weight: 1}]
"""
NO_DEFAULT_SPREAD = """
  - name: PodTopologySpread
    args: {defaultingType: List}
"""
# The solution: inference and web on a MostAllocated default profile (system-default spreading
# kept), training on a packing profile.
SOLUTION = (HEAD + "- schedulerName: default-scheduler" + GPU_MOST_ALLOCATED
            + "- schedulerName: gpu-packing" + GPU_MOST_ALLOCATED + NO_DEFAULT_SPREAD)
# One packing profile for everyone: inference replicas pile up on shared nodes.
PACK_ALL = HEAD + "- schedulerName: default-scheduler" + GPU_MOST_ALLOCATED + NO_DEFAULT_SPREAD
# Lesson 05's two-profile option: training packed, inference spread over every L4 node.
TRAINING_ONLY = (HEAD + "- schedulerName: default-scheduler\n"
                 + "- schedulerName: gpu-packing" + GPU_MOST_ALLOCATED + NO_DEFAULT_SPREAD)


def run(config: str | None, scheduler_for: dict[str, str] | None = None, docs=None):
    lab = gpu_lab.connect("sim", seed=0, record=False)
    if config:
        lab.apply(config)
    docs = copy.deepcopy(DOCS if docs is None else docs)
    for doc in docs:
        if doc["kind"] in ("Deployment", "Job"):
            team = doc["metadata"]["labels"]["team"]
            doc["spec"]["template"]["spec"]["schedulerName"] = (scheduler_for or {}).get(team, D)
    lab.apply(docs)
    lab.schedule()
    return lab


def failure(check, *args) -> str:
    with pytest.raises(LabCheckFailed) as info:
        check(*args)
    return str(info.value)


@pytest.fixture(scope="module")
def today():
    return run(None)


@pytest.fixture(scope="module")
def solved():
    return run(SOLUTION, {"training": "gpu-packing"})


def test_baseline_is_the_default_profile():
    base = lab05.baseline(FLEET)
    assert base["nodes"] == 76 and base["pending"] == 2
    assert base["pools"] == {"a100": 24, "h100": 16, "l4": 36}
    assert base["dollars_per_month"] > 1_000_000


def test_workloads_and_owners():
    asked = lab05.workloads(FLEET)
    assert len(asked) == 64 and sum(w["pods"] for w in asked.values()) == 284
    assert asked["infer-0"] == {"kind": "Deployment", "team": "inference", "pods": 3}
    assert lab05.owner("train-2-abcde", asked) == "train-2"
    assert lab05.owner("train-20-abcde", asked) == "train-20"   # not train-2
    assert lab05.owner("infer-1-5d8f9c7b6-xk2lp", asked) == "infer-1"
    assert lab05.owner("other-0-abcde", asked) is None


def test_solution_passes(solved):
    assert lab05.check_scheduled(solved, FLEET).passed
    assert lab05.check_inference(solved, FLEET).passed
    feedback = lab05.check_savings(solved, FLEET)
    assert "GPU nodes in use: 76 -> 46, a 39% cut" in str(feedback)


def test_one_mostallocated_profile_also_passes():
    lab = run(HEAD + "- schedulerName: default-scheduler" + GPU_MOST_ALLOCATED)
    for check in (lab05.check_scheduled, lab05.check_inference, lab05.check_savings):
        assert check(lab, FLEET).passed


def test_default_profile_fails_every_check(today):
    text = failure(lab05.check_scheduled, today, FLEET)
    assert "no pod may pend: 2 pending (train-20-" in text
    assert "Insufficient nvidia.com/gpu" in text
    text = failure(lab05.check_inference, today, FLEET)
    assert "inference services must share l4 nodes: 36 l4 nodes hold pods, today 36" in text
    text = failure(lab05.check_savings, today, FLEET)
    assert "GPU nodes in use: 76 -> 76, a 0% cut; the goal is >= 25% (<= 57 nodes)" in text
    assert "nothing saved" in text


def test_packing_everything_stacks_inference_replicas():
    lab = run(PACK_ALL)
    assert lab05.check_scheduled(lab, FLEET).passed
    text = failure(lab05.check_inference, lab, FLEET)
    assert "may take down only one replica" in text
    assert "holds 4 replicas of infer-" in text
    assert lab05.check_savings(lab, FLEET).passed   # the saving alone is not enough


def test_packing_training_only_falls_short():
    lab = run(TRAINING_ONLY, {"training": "gpu-packing"})
    assert lab05.check_scheduled(lab, FLEET).passed
    assert "36 l4 nodes hold pods, today 36" in failure(lab05.check_inference, lab, FLEET)
    text = failure(lab05.check_savings, lab, FLEET)
    assert "GPU nodes in use: 76 -> 61, a 20% cut; the goal is >= 25% (<= 57 nodes)" in text
    assert "✔ $ per month" in text   # dollars do fall: the training nodes are the expensive ones


def test_a_missing_profile_leaves_pods_pending():
    lab = run(None, {"training": "gpu-packing"})
    text = failure(lab05.check_scheduled, lab, FLEET)
    assert "pending" in text and "train-" in text
    assert 'no scheduler profile serves schedulerName "gpu-packing"' in text


def test_changed_workload_is_named():
    docs = copy.deepcopy(DOCS)
    dropped = next(d for d in docs if d["metadata"].get("name") == "infer-0")
    dropped["spec"]["replicas"] = 1
    lab = run(SOLUTION, {"training": "gpu-packing"}, docs=docs)
    text = failure(lab05.check_scheduled, lab, FLEET)
    assert "infer-0 has 1 pod(s), the fleet file asks for 3" in text


def test_inference_moved_off_l4_is_named():
    docs = copy.deepcopy(DOCS)
    moved = next(d for d in docs if d["metadata"].get("name") == "infer-0")
    moved["spec"]["template"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    lab = run(SOLUTION, {"training": "gpu-packing"}, docs=docs)
    text = failure(lab05.check_inference, lab, FLEET)
    assert "inference pods must stay on the l4 pool: 3 run elsewhere, e.g. infer-0-" in text
    assert "(pool h100)" in text


def test_an_empty_session_fails_with_a_hint():
    lab = gpu_lab.connect("sim")
    assert "the session has no pods" in failure(lab05.check_scheduled, lab, FLEET)
    assert "no inference pod is running" in failure(lab05.check_inference, lab, FLEET)
