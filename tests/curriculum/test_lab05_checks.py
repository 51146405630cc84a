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
POOLS = {d["metadata"]["name"]: d["spec"] for d in DOCS if d["kind"] == "NodePool"}
D = "default-scheduler"
PACKED_TEAMS = {"training": "gpu-packing", "batch": "gpu-packing"}

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
ZONE_RULE = """
  - name: PodTopologySpread
    args:
      defaultingType: List
      defaultConstraints:
      - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: DoNotSchedule}
"""
PACKING_PROFILE = "- schedulerName: gpu-packing" + GPU_MOST_ALLOCATED + NO_DEFAULT_SPREAD
# The solution: inference and web packed under a zone rule, Jobs on a packing profile.
SOLUTION = HEAD + "- schedulerName: default-scheduler" + GPU_MOST_ALLOCATED + ZONE_RULE + PACKING_PROFILE
# Packing with the system-default spreading kept: a zone maxSkew of 5, and only a score.
PACK_SYSTEM_SPREAD = HEAD + "- schedulerName: default-scheduler" + GPU_MOST_ALLOCATED + PACKING_PROFILE
# One packing profile with no spreading at all.
PACK_ALL = HEAD + "- schedulerName: default-scheduler" + GPU_MOST_ALLOCATED + NO_DEFAULT_SPREAD
# Lesson 05's two-profile option: training packed, inference left on the default profile.
LESSON_TWO_PROFILES = HEAD + "- schedulerName: default-scheduler\n" + PACKING_PROFILE


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
    return run(SOLUTION, PACKED_TEAMS)


def monthly(pool: str, nodes: int) -> float:
    """A pool's nodes at the catalog's on-demand price, 730 hours a month."""
    gpu = POOLS[pool]["gpu"]
    return nodes * gpu["count"] * gpu_lab.gpus.get_model(gpu["model"]).price_per_hour * 730


def test_baseline_is_the_default_profile():
    base = lab05.baseline(FLEET)
    assert base["pending"] == 4
    # every GPU node holds a pod today: the pools' full size
    assert base["pools"] == {pool: spec["count"] for pool, spec in POOLS.items() if "gpu" in spec}
    assert base["nodes"] == sum(base["pools"].values())
    assert base["dollars_per_month"] == pytest.approx(sum(monthly(p, n) for p, n in base["pools"].items()))


def test_workloads_owners_and_zones(today):
    asked = lab05.workloads(FLEET)
    assert len(asked) == 41 and sum(w["pods"] for w in asked.values()) == 154
    assert asked["llama-70b-api"] == {"kind": "Deployment", "team": "inference", "pods": 3}
    assert lab05.owner("finetune-1-abcde", asked) == "finetune-1"
    assert lab05.owner("finetune-11-abcde", asked) == "finetune-11"   # not finetune-1
    assert lab05.owner("chat-api-5d8f9c7b6-xk2lp", asked) == "chat-api"
    assert lab05.owner("other-0-abcde", asked) is None
    zones = lab05.zones(today)
    assert len(zones) == sum(spec["count"] for spec in POOLS.values())
    assert sorted(set(zones.values())) == ["us-east-1a", "us-east-1b", "us-east-1c"]
    assert list(zones.values()).count("us-east-1b") == len(zones) // 3


def test_solution_passes(solved):
    assert lab05.check_scheduled(solved, FLEET).passed
    zones = lab05.check_zones(solved, FLEET)
    assert "each of the 15 inference services differs by at most one replica" in str(zones)
    feedback = str(lab05.check_savings(solved, FLEET))
    base = lab05.baseline(FLEET)["dollars_per_month"]
    # the fewest nodes that hold the asked GPUs: 67 of 8 per H200 node, 101 of 4 per L40S node
    best = monthly("h200", 9) + monthly("l40s", 26)
    assert f"-> ${best:,.0f}, a {1 - best / base:.0%} cut (goal >= 20%)" in feedback
    assert "h200 12 -> 9, l40s 30 -> 26" in feedback


def test_a_hostname_preference_beside_the_zone_rule_also_passes():
    config = SOLUTION.replace(
        "whenUnsatisfiable: DoNotSchedule}\n",
        "whenUnsatisfiable: DoNotSchedule}\n"
        "      - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway}\n")
    assert config != SOLUTION
    lab = run(config, PACKED_TEAMS)
    for check in (lab05.check_scheduled, lab05.check_zones, lab05.check_savings):
        assert check(lab, FLEET).passed


def test_default_profile_fails_every_check(today):
    text = failure(lab05.check_scheduled, today, FLEET)
    assert "no pod may pend: 4 pending (finetune-11-" in text and "llama-70b-api-" in text
    assert "Insufficient nvidia.com/gpu" in text
    text = failure(lab05.check_zones, today, FLEET)
    assert "a service is zone-safe only when all its replicas run: llama-70b-api runs 0 of its 3" in text
    text = failure(lab05.check_savings, today, FLEET)
    assert "a 0% cut; the goal is >= 20%" in text and "h200 12 -> 12, l40s 30 -> 30" in text


def test_packing_with_the_system_default_spreading_leaves_a_zone_heavy():
    lab = run(PACK_SYSTEM_SPREAD, PACKED_TEAMS)
    assert lab05.check_scheduled(lab, FLEET).passed
    assert lab05.check_savings(lab, FLEET).passed   # the saving alone is not enough
    text = failure(lab05.check_zones, lab, FLEET)
    assert "summarize-api has 3 in us-east-1a, 2 in us-east-1b, 1 in us-east-1c" in text
    assert "losing us-east-1a takes 3 of its 6 replicas" in text
    assert "`kubectl get pods -o wide -l app=summarize-api`" in text


def test_packing_without_any_spreading_stacks_services_in_one_zone():
    lab = run(PACK_ALL)
    assert lab05.check_scheduled(lab, FLEET).passed
    text = failure(lab05.check_zones, lab, FLEET)
    assert "translate-api has 0 in us-east-1a, 6 in us-east-1b, 0 in us-east-1c" in text
    assert "13 more service(s) uneven" in text


def test_the_lessons_two_profiles_leave_the_new_service_pending():
    lab = run(LESSON_TWO_PROFILES, PACKED_TEAMS)
    text = failure(lab05.check_scheduled, lab, FLEET)
    assert "no pod may pend: 3 pending (llama-70b-api-" in text
    text = failure(lab05.check_savings, lab, FLEET)
    assert "h200 12 -> 9, l40s 30 -> 30" in text   # training packed, the L40S pool still spread
    assert "a 19% cut; the goal is >= 20%" in text


def test_a_missing_profile_leaves_pods_pending():
    lab = run(None, PACKED_TEAMS)
    text = failure(lab05.check_scheduled, lab, FLEET)
    assert "pending" in text and "finetune-" in text
    assert 'no scheduler profile serves schedulerName "gpu-packing"' in text


def test_changed_workload_is_named():
    docs = copy.deepcopy(DOCS)
    dropped = next(d for d in docs if d["metadata"].get("name") == "llama-70b-api")
    dropped["spec"]["replicas"] = 1
    lab = run(SOLUTION, PACKED_TEAMS, docs=docs)
    text = failure(lab05.check_scheduled, lab, FLEET)
    assert "llama-70b-api has 1 pod(s), the fleet file asks for 3" in text


def test_inference_moved_off_l40s_is_named():
    docs = copy.deepcopy(DOCS)
    moved = next(d for d in docs if d["metadata"].get("name") == "chat-api")
    moved["spec"]["template"]["spec"]["nodeSelector"] = {"nvidia.com/gpu.product": "NVIDIA-H200"}
    lab = run(SOLUTION, PACKED_TEAMS, docs=docs)
    text = failure(lab05.check_zones, lab, FLEET)
    assert "inference pods must stay on the l40s pool: 4 run elsewhere, e.g. chat-api-" in text
    assert "(pool h200)" in text


def test_an_empty_session_fails_with_a_hint():
    lab = gpu_lab.connect("sim")
    assert "the session has no pods" in failure(lab05.check_scheduled, lab, FLEET)
    assert "no inference pod is running" in failure(lab05.check_zones, lab, FLEET)
