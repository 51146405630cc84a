"""Lab 08's checks pass on a right-sized fleet and say precisely, in numbers, what is wrong otherwise."""

from __future__ import annotations

import copy
from pathlib import Path

import pandas as pd
import pytest
import yaml

import gpu_lab

LabCheckFailed = gpu_lab.labs.LabCheckFailed
lab08 = gpu_lab.labs.lab08

TODAY = Path(__file__).resolve().parents[2] / "lessons" / "scenarios" / "08_lab_today.yaml"
DOCS = [d for d in yaml.safe_load_all(TODAY.read_text()) if d]
TODAY_POOLS = [d for d in DOCS if d["kind"] == "NodePool"]
DEPLOYMENTS = [d for d in DOCS if d["kind"] == "Deployment"]
BIG = ("chat", "summarize")


def pool(name: str, count: int, *, plugin: dict | None = None, mig: dict | None = None,
         labels: dict | None = None, model: str = "A100-80GB", gpus: int = 1, cpu: str | None = None,
         memory: str | None = None) -> dict:
    spec: dict = {"count": count, "gpu": {"model": model, "count": gpus},
                  "devicePlugin": plugin or {"version": "v1", "flags": {"migStrategy": "none"}}}
    if mig:
        spec["mig"] = mig
    if labels:
        spec["labels"] = labels
    if cpu:
        spec["cpu"] = cpu
    if memory:
        spec["memory"] = memory
    return {"apiVersion": "gpulab.dev/v1alpha1", "kind": "NodePool", "metadata": {"name": name}, "spec": spec}


def shared(strategy: str, replicas: int) -> dict:
    return {"version": "v1", "sharing": {strategy: {"resources": [{"name": "nvidia.com/gpu", "replicas": replicas}]}}}


def mig_pool(name: str, count: int, layout: dict) -> dict:
    return pool(name, count, plugin={"version": "v1", "flags": {"migStrategy": "mixed"}},
                mig={"config": name, "migParted": {"version": "v1", "mig-configs": {
                    name: [{"devices": "all", "mig-enabled": True, "mig-devices": layout}]}}})


def requesting(profiles: dict[str, str] | None = None, *, selector: bool = False) -> list[dict]:
    """Today's Deployments, each asking for a MIG profile (``profiles``) or pinned by size."""
    out = copy.deepcopy(DEPLOYMENTS)
    for d in out:
        name = d["metadata"]["name"]
        spec = d["spec"]["template"]["spec"]
        if profiles:
            spec["containers"][0]["resources"]["limits"] = {f"nvidia.com/mig-{profiles[name]}": 1}
        if selector:
            spec["nodeSelector"] = {"workload": "big" if name in BIG else "small"}
    return out


MIG_PROFILES = {"embed": "1g.10gb", "rerank": "2g.20gb", "chat": "3g.40gb", "summarize": "3g.40gb"}
MIG_POOLS = [mig_pool("a100-big", 3, {"3g.40gb": 2}), mig_pool("a100-small", 2, {"2g.20gb": 2, "1g.10gb": 3})]


def by_size(strategy: str, big: int, small: int) -> list[dict]:
    """A pool for the two big services and one for the two small ones, shared ``big``/``small`` ways."""
    return [pool("a100-big", 3, plugin=shared(strategy, big), labels={"workload": "big"}),
            pool("a100-small", 2, plugin=shared(strategy, small), labels={"workload": "small"})]


def failures(check, *args) -> str:
    with pytest.raises(LabCheckFailed) as err:
        check(*args)
    return "\n".join(line for line in str(err.value).splitlines() if "✘" in line)


# ------------------------------------------------------------------ 1 · today's waste
def test_today_answer_passes_and_states_the_money():
    text = str(lab08.check_today(pd.Series({"search": 211.2, "assistant": 98.4})))
    assert "search wastes 211.2 GPU-hours a day ($724.61 at $3.4309 per A100-hour)" in text
    assert "assistant wastes 98.4 GPU-hours a day ($337.60" in text
    assert lab08.check_today({"assistant": 98.40001, "search": 211.19999}).passed  # a dict, float noise


def test_today_answer_from_the_exporter_text_matches_the_metrics_module():
    lab = gpu_lab.connect("sim", seed=0)
    lab.apply(str(TODAY))
    lab.schedule()
    waste = gpu_lab.metrics.waste(lab08.uses(lab))
    assert lab08.check_today(waste.groupby("namespace")["gpu_hours_wasted"].sum()).passed
    text = lab08.exporter_text(lab)
    assert text.count("DCGM_FI_DEV_GPU_UTIL{") == 16 and 'container="server"' in text


@pytest.mark.parametrize("answer, words", [
    ({"search": 8.8, "assistant": 4.1}, "search: 8.8 is per hour; the question is per day (24 hours)"),
    ({"search": 28.8, "assistant": 98.4}, "search: 28.8 GPU-hours is what its pods use; the waste is what they "
                                          "hold minus what they use"),
    ({"search": 240, "assistant": 98.4}, "search: 240 GPU-hours is what its 10 GPUs are held for in a day"),
    ({"search": 21120, "assistant": 98.4}, "search: 21120: DCGM_FI_DEV_GPU_UTIL is a percent"),
    ({"search": 200, "assistant": 98.4}, "search: got 200 GPU-hours; its pods hold 10 whole GPUs for 24 h "
                                         "(240 GPU-hours) and keep them busy 12.0 % of the time on average"),
], ids=["per-hour", "used", "held", "percent", "off"])
def test_today_wrong_numbers_name_the_likely_mistake(answer, words):
    assert words in failures(lab08.check_today, answer)


def test_today_wrong_shapes():
    assert "missing assistant" in failures(lab08.check_today, {"search": 211.2})
    assert "'' hold(s) none of the team's GPUs" in failures(
        lab08.check_today, {"search": 211.2, "assistant": 98.4, "": 0.0})
    assert "should be a pandas Series (or a dict)" in failures(lab08.check_today, [211.2, 98.4])
    assert "assistant: 'a lot' is not a number of GPU-hours" in failures(
        lab08.check_today, {"search": 211.2, "assistant": "a lot"})


# ------------------------------------------------------------------ 2 · right answers
@pytest.mark.parametrize("pools, deployments", [
    (MIG_POOLS, requesting(MIG_PROFILES)),
    (by_size("timeSlicing", 2, 5), requesting(selector=True)),
    (by_size("mps", 2, 5), requesting(selector=True)),
], ids=["mig", "time-slicing-by-size", "mps-by-size"])
def test_right_sized_fleets_pass_both_checks(pools, deployments):
    fleet = lab08.check_fleet(pools, deployments)
    assert fleet.passed and "all 16 replicas running" in str(fleet)
    bill = str(lab08.check_bill(pools, deployments))
    assert "5 GPUs paid for (today: 16): $411.71 a day instead of $1,317.47" in bill
    assert "120 GPU-hours a day paid for, 74.4 used: 45.6 wasted (38.0 %, $156.45 a day" in bill


def test_yaml_text_and_the_devices_table():
    pools_yaml = yaml.safe_dump_all(MIG_POOLS)
    assert lab08.check_fleet(pools_yaml, yaml.safe_dump_all(requesting(MIG_PROFILES))).passed
    devices = lab08.devices(lab08.run(MIG_POOLS, requesting(MIG_PROFILES))).set_index("device")
    summarize = devices[devices["pods"].map(lambda p: p[0].startswith("summarize-"))]
    assert list(summarize.index) == ["MIG 3g.40gb"] * 2 and (summarize["memory_mib"] == 40448).all()
    assert summarize["offered"].round(4).tolist() == [0.8167] * 2  # 35 % of an A100 on 3 of 7 slices
    assert (devices["problem"] == "").all()


# ------------------------------------------------------------------ 2 · wrong answers
def test_today_unchanged_runs_but_costs_sixteen_gpus():
    assert lab08.check_fleet(TODAY_POOLS, DEPLOYMENTS).passed
    text = failures(lab08.check_bill, TODAY_POOLS, DEPLOYMENTS)
    assert ("the team pays for 16 GPUs on 16 node(s), at most 5 allowed; every one of them holds a replica"
            in text)
    assert "384 GPU-hours a day paid for, 74.4 used: 309.6 wasted (80.6 %, $1,062.21 a day" in text


def test_one_time_sliced_pool_lets_the_scheduler_stack_big_models():
    pools = [pool("a100", 4, plugin=shared("timeSlicing", 4))]
    text = failures(lab08.check_fleet, pools, DEPLOYMENTS)
    assert "4 pods take turns and declare 82.0 GiB in all on one 80.0 GiB GPU" in text
    assert "1 of them fails with CUDA out of memory" in text
    assert "The scheduler counts replicas, not memory" in text
    assert lab08.check_bill(pools, DEPLOYMENTS).passed  # cheap, and broken: the fleet check is what catches it


def test_a_saturated_time_sliced_gpu():
    pools = [pool("a100-big", 3, plugin=shared("timeSlicing", 2), labels={"workload": "big"}),
             pool("a100-small", 1, plugin=shared("timeSlicing", 10), labels={"workload": "small"}, cpu="24",
                  memory="192Gi")]  # room for 10 pods' cpu and memory requests
    text = failures(lab08.check_fleet, pools, requesting(selector=True))
    assert text.count("✘") == 1
    assert "10 pods offer 1.20 GPUs of work to a time-sliced GPU that delivers at most 0.952" in text


def test_mps_caps_memory_and_sms():
    big_on_four = [pool("a100", 4, plugin=shared("mps", 4))]
    text = failures(lab08.check_fleet, big_on_four, DEPLOYMENTS)
    assert "MPS limits each pod to 20.0 GiB (floor(memory / 4))" in text
    small_on_eight = by_size("mps", 2, 8)
    small_on_eight[1]["spec"].update(count=1, cpu="24")
    text = failures(lab08.check_fleet, small_on_eight, requesting(selector=True))
    assert "MPS caps each pod at 12 % of the SMs (100 // 8)" in text and "rerank-" in text


def test_mig_instances_too_small_for_memory_or_work():
    small = dict(MIG_PROFILES, rerank="1g.10gb")
    pools = [mig_pool("a100-big", 3, {"3g.40gb": 2}), mig_pool("a100-small", 2, {"1g.10gb": 7})]
    text = failures(lab08.check_fleet, pools, requesting(small))
    assert ("declares 10.0 GiB of GPU memory but a 1g.10gb instance has 9.5 GiB: it fails with CUDA out of "
            "memory (the smallest profile that holds it: 2g.20gb)") in text
    slow = dict(MIG_PROFILES, rerank="1g.20gb")
    pools = [mig_pool("a100-big", 3, {"3g.40gb": 2}), mig_pool("a100-small", 2, {"1g.20gb": 2, "1g.10gb": 3})]
    text = failures(lab08.check_fleet, pools, requesting(slow))
    assert ("keeps a whole A100 busy 15 % of the time; on 1 of 7 compute slices that is 105 % of the instance: "
            "it cannot keep up (the smallest profile that holds it: 2g.20gb)") in text


def test_too_few_instances_leave_replicas_pending_in_the_schedulers_words():
    pools = [mig_pool("a100-big", 3, {"3g.40gb": 2}), mig_pool("a100-small", 1, {"2g.20gb": 2, "1g.10gb": 3})]
    text = failures(lab08.check_fleet, pools, requesting(MIG_PROFILES))
    assert "replica(s) not running: search/embed-" in text and "Insufficient nvidia.com/mig-1g.10gb" in text
    assert "check_fleet says why" in failures(lab08.check_bill, pools, requesting(MIG_PROFILES))


def test_idle_nodes_are_named_on_the_bill():
    pools = [*MIG_POOLS, pool("a100-spare", 1)]  # no replica asks for a whole nvidia.com/gpu
    text = failures(lab08.check_bill, pools, requesting(MIG_PROFILES))
    assert "the team pays for 6 GPUs on 6 node(s), at most 5 allowed; 1 of them holds no replica" in text
    assert "144 GPU-hours a day paid for, 74.4 used: 69.6 wasted (48.3 %" in text
    spread = [mig_pool("a100-big", 4, {"3g.40gb": 2}), MIG_POOLS[1]]  # the scheduler spreads over all 4
    assert "every one of them holds a replica: the same replicas must fit on fewer GPUs" in failures(
        lab08.check_bill, spread, requesting(MIG_PROFILES))


def test_the_work_may_not_change():
    deployments = requesting(MIG_PROFILES)
    deployments[0]["spec"]["replicas"] = 3
    deployments[1]["spec"]["template"]["metadata"]["annotations"]["gpulab.dev/gpu-utilization"] = "5"
    deployments[2]["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"] = {"nvidia.com/mig-3g.40gb": 2}
    text = failures(lab08.check_fleet, MIG_POOLS, deployments[:3])
    assert "search/embed has replicas: 3, the service needs 6" in text
    assert 'search/rerank\'s pod template must keep gpulab.dev/gpu-utilization: "15"' in text
    assert "assistant/chat's replicas ask for 2 GPU devices each" in text
    assert "Deployment assistant/summarize is missing" in text


def test_other_hardware_and_bad_manifests():
    pools = [pool("h100", 1, model="H100-80GB", gpus=8)]
    assert "GPU nodes of another model: h100-0 (NVIDIA-H100-80GB-HBM3): the team runs on A100-80GB GPUs" in \
        failures(lab08.check_fleet, pools, DEPLOYMENTS)
    small_a100s = [pool("a100-40", 3, model="A100-40GB", plugin={"version": "v1", "flags": {"migStrategy": "mixed"}},
                        mig={"config": "all-1g.5gb"})]
    text = failures(lab08.check_fleet, small_a100s, requesting(dict.fromkeys(MIG_PROFILES, "1g.5gb")))
    assert "GPU nodes of another model: a100-40-0 (NVIDIA-A100-SXM4-40GB)" in text
    assert "declares 6.0 GiB of GPU memory but a 1g.5gb instance has 4.8 GiB" in text
    bad = [pool("a100", 1, plugin=shared("timeSlicing", 0))]
    for check in (lab08.check_fleet, lab08.check_bill):
        text = failures(check, bad, DEPLOYMENTS)
        assert text.count("✘") == 1 and "the manifests do not apply: " in text
    assert "the manifests do not apply: not YAML" in failures(lab08.check_fleet, "a: [b", DEPLOYMENTS)
