"""Lab 02's checks pass on a correct answer and say precisely what is wrong otherwise.

The ticket: four services moved from an H100 cluster to two nodes of 8 A100-40GB; their
Deployments still ask for H100 MIG resources and the pool runs all-1g.5gb under the single
strategy. Figures are derived from the catalog, the planner and the session, not typed in.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

import gpu_lab

LabCheckFailed = gpu_lab.labs.LabCheckFailed

ROOT = Path(__file__).resolve().parents[2]
FLEET = ROOT / "lessons" / "scenarios" / "02_a100_migration.yaml"
MODEL = "A100-40GB"
lab02 = gpu_lab.labs.lab02
S = gpu_lab.gpus.Service

SERVICES = [S("translate", 10, 2, 2), S("guard", 18, 4, 2), S("rerank", 5, None, 4), S("ocr", 4, None, 4)]
GOOD = {s.name: gpu_lab.gpus.smallest_mig_profile(MODEL, s.memory_gb, s.compute_slices).name for s in SERVICES}
# Half of every service per node, on two MIG GPUs of each node; the other 6 GPUs keep MIG off.
GOOD_LAYOUT = [{GOOD["guard"]: 1, GOOD["translate"]: 1}, {GOOD["rerank"]: 2, GOOD["ocr"]: 2}]
PROFILES = {p.name: p for p in gpu_lab.gpus.mig_profiles(MODEL)}
POOL = next(d for d in yaml.safe_load_all(FLEET.read_text()) if d["kind"] == "NodePool")
NODES, PER_NODE = POOL["spec"]["count"], POOL["spec"]["gpu"]["count"]
TOTAL = NODES * PER_NODE


def gib(profile: str) -> str:
    return f"{PROFILES[profile].memory_gib:.2f} GiB"


def pool(config: str | list[dict], strategy: str = "mixed") -> dict:
    spec = {"count": NODES, "gpu": {"model": MODEL, "count": PER_NODE}, "cpu": "96", "memory": "1152Gi",
            "devicePlugin": {"version": "v1", "flags": {"migStrategy": strategy}}}
    if isinstance(config, str):
        spec["mig"] = {"config": config}
    else:
        entries = [{"devices": [i], "mig-enabled": True, "mig-devices": layout}
                   for i, layout in enumerate(config)]
        rest = list(range(len(config), PER_NODE))
        if rest:
            entries.append({"devices": rest, "mig-enabled": False})
        spec["mig"] = {"config": "fleet",
                       "migParted": {"version": "v1", "mig-configs": {"fleet": entries}}}
    return {"apiVersion": "gpulab.dev/v1alpha1", "kind": "NodePool", "metadata": {"name": "a100"},
            "spec": spec}


def deployments(profiles: dict[str, str], *, replicas: dict[str, int] | None = None,
                count: int = 1) -> str:
    """The ticket's Deployments with each one's GPU request rewritten (``whole`` asks for
    nvidia.com/gpu, ``keep`` leaves the H100 resource the ticket has)."""
    docs = FLEET.read_text().split("\n---\n")[1:]
    out = []
    for doc in docs:
        name = re.search(r"metadata: \{name: (\S+)\}", doc).group(1)
        if name not in profiles:
            continue
        p = profiles[name]
        if p != "keep":
            resource = "nvidia.com/gpu" if p == "whole" else f"nvidia.com/mig-{p}"
            doc = re.sub(r"nvidia\.com/mig-\S+: 1", f"{resource}: {count}", doc)
        if replicas and name in replicas:
            doc = re.sub(r"replicas: \d+", f"replicas: {replicas[name]}", doc)
        out.append(doc)
    return "\n---\n".join(out)


def session(node_pool, profiles, **kw):
    lab = gpu_lab.connect("sim", deterministic=True)
    lab.apply(node_pool)
    lab.apply(deployments(profiles, **kw))
    lab.schedule()
    return lab


def failure(check, lab, **kw) -> str:
    with pytest.raises(LabCheckFailed) as err:
        check(lab, SERVICES, **kw)
    return str(err.value)


def test_the_ticket_every_replica_pends_on_a_name_no_node_advertises():
    lab = gpu_lab.connect("sim", deterministic=True)
    lab.apply(FLEET)
    pods = lab.schedule()
    assert len(pods) == sum(s.replicas for s in SERVICES) and set(pods["phase"]) == {"Pending"}
    usage = lab02.fleet_usage(lab)
    assert list(usage["mig_enabled"]) == [PER_NODE] * NODES and usage["whole_gpus_free"].sum() == 0
    text = failure(lab02.check_fleet, lab)
    first = next(line for line in text.splitlines() if "✘" in line)
    assert "kubectl describe node a100-0" in first
    for doc in yaml.safe_load_all(FLEET.read_text()):
        if doc["kind"] == "Deployment":
            (resource,) = doc["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
            assert f"ask for {resource}: no node advertises {resource}" in text
    assert f"is no MIG profile of the cluster's GPUs ({MODEL})" in text
    assert (f"✘ only 0 GPUs of {TOTAL} stay whole and free for training (advertised as nvidia.com/gpu, "
            f"MIG off, no pod on it); the goal is at least {TOTAL // 2}") in text
    # symptoms only: none of the A100 profiles the answer needs is named
    for profile in {GOOD["translate"], GOOD["guard"], GOOD["ocr"]}:
        assert profile not in text


def test_a_correct_answer_passes_both_checks():
    lab = session(pool(GOOD_LAYOUT), GOOD)
    usage = lab02.fleet_usage(lab)
    tied, free = int(usage["tied_up"].sum()), int(usage["whole_gpus_free"].sum())
    assert tied == NODES * len(GOOD_LAYOUT) and free == TOTAL - tied
    feedback = lab02.check_fleet(lab, SERVICES)
    assert feedback.passed
    assert (f"{free} of {TOTAL} GPUs stay whole and free for training (goal: at least {TOTAL // 2}); "
            f"the services tie up {tied}") in str(feedback)
    plan = gpu_lab.gpus.plan_mig(SERVICES, MODEL)
    gpu = gpu_lab.gpus.get_model(MODEL)
    cost = lab02.check_cost(lab, SERVICES)
    assert cost.passed and plan.gpu_count == tied
    assert (f"{tied} GPUs, as few as the planner's {plan.gpu_count}: "
            f"${tied * gpu.price_per_hour * 730:,.0f}/month") in str(cost)
    table = lab02.replica_slices(lab, SERVICES)
    assert len(table) == sum(s.replicas for s in SERVICES) and table["fits"].all()
    assert set(table.loc[table["service"] == "rerank", "gib"]) == {round(PROFILES[GOOD["rerank"]].memory_gib, 2)}


def test_the_hints_end_with_this_answer():
    answer = gpu_lab.labs.lab02.HINTS[-1]
    for name, profile in GOOD.items():
        assert f"{name} {profile}" in answer
    for layout in GOOD_LAYOUT:
        gpu_lab.gpus.validate_mig_layout(MODEL, layout)  # raises on a layout the slots refuse
    assert not any(p in h for h in gpu_lab.labs.lab02.HINTS[:-1] for p in (GOOD["guard"], GOOD["translate"]))


def test_the_profile_name_rounds_gb_a_5_gib_model_does_not_fit_1g_5gb():
    small = min((p for p in PROFILES.values() if "+" not in p.name), key=lambda p: p.memory_gib).name
    assert PROFILES[small].memory_gib < 5 and "5gb" in small
    layout = [{GOOD["guard"]: 1, GOOD["translate"]: 1}, {small: 4}]
    lab = session(pool(layout), dict(GOOD, rerank=small))
    text = failure(lab02.check_fleet, lab)
    assert "✔ no pod is pending" in text
    assert (f"✘ a replica's GPU slice cannot hold its model: 4 rerank replicas: the MIG profile you chose "
            f"for rerank ({small}) has {gib(small)} (`nvidia-smi` memory), the model needs 5 GiB") in text
    assert GOOD["rerank"] not in text


def test_a_10gb_profile_holds_less_than_10_gib():
    named = next(p.name for p in PROFILES.values() if p.name.startswith("2g."))
    layout = [{GOOD["guard"]: 1, named: 1}, {GOOD["rerank"]: 2, GOOD["ocr"]: 2}]
    lab = session(pool(layout), dict(GOOD, translate=named))
    text = failure(lab02.check_fleet, lab)
    assert (f"2 translate replicas: the MIG profile you chose for translate ({named}) has {gib(named)} "
            "(`nvidia-smi` memory), the model needs 10 GiB") in text


def test_enough_memory_but_too_little_compute():
    three = GOOD["translate"]
    layout = [{three: 2}, {GOOD["rerank"]: 2, GOOD["ocr"]: 2}, {three: 1}]
    lab = session(pool(layout), dict(GOOD, guard=three))
    text = failure(lab02.check_fleet, lab)
    assert (f"2 guard replicas: the MIG profile you chose for guard ({three}) has "
            f"{PROFILES[three].compute_slices} compute slices, guard needs 4") in text


def test_the_h100_names_pend_even_under_the_mixed_strategy():
    lab = session(pool(GOOD_LAYOUT), dict.fromkeys(GOOD, "keep"))
    text = failure(lab02.check_fleet, lab)
    assert "no node advertises nvidia.com/mig-3g.40gb" in text
    assert 'scheduler: "0/2 nodes are available: 2 Insufficient nvidia.com/mig-3g.40gb.' in text
    assert "guard: 0 of 2 replicas running" in text


def test_single_strategy_advertises_no_mig_names_and_keeps_no_gpu_whole():
    lab = session(pool("all-1g.10gb", "single"), GOOD)
    text = failure(lab02.check_fleet, lab)
    assert f"no node advertises nvidia.com/mig-{GOOD['rerank']}" in text
    lab = session(pool("all-1g.10gb", "single"), dict.fromkeys(GOOD, "whole"))
    usage = lab02.fleet_usage(lab)
    assert list(usage["mig_enabled"]) == [PER_NODE] * NODES and usage["whole_gpus_free"].sum() == 0
    assert f"only 0 GPUs of {TOTAL} stay whole" in failure(lab02.check_fleet, lab)


def test_a_predefined_config_partitions_every_gpu():
    lab = session(pool("all-balanced"), GOOD)
    usage = lab02.fleet_usage(lab)
    assert usage["mig_enabled"].sum() == TOTAL
    text = failure(lab02.check_fleet, lab)
    assert f"only 0 GPUs of {TOTAL} stay whole" in text
    assert "a100-0: 8 MIG-enabled (" in text


def test_a_layout_that_breaks_the_slot_geometry_is_refused_at_apply():
    lab = gpu_lab.connect("sim", deterministic=True)
    with pytest.raises(gpu_lab.errors.GpuLabError, match="needs 9 memory slices; an A100-40GB has 8"):
        lab.apply(pool([{GOOD["translate"]: 2, GOOD["ocr"]: 1}]))


def test_pending_because_the_profile_is_sold_out():
    layout = [{GOOD["guard"]: 1, GOOD["translate"]: 1}, {GOOD["rerank"]: 1, GOOD["ocr"]: 2}]
    lab = session(pool(layout), GOOD)
    text = failure(lab02.check_fleet, lab)
    resource = f"nvidia.com/mig-{GOOD['rerank']}"
    assert (f"2 pods still pending: 2 rerank replicas ask for {resource}: the nodes offer {NODES} "
            f"{resource} in all and {NODES} are taken") in text
    assert "rerank: 2 of 4 replicas running" in text


def test_missing_and_short_deployments():
    lab = session(pool(GOOD_LAYOUT), {k: v for k, v in GOOD.items() if k != "ocr"},
                  replicas={"rerank": 3})
    text = failure(lab02.check_fleet, lab)
    assert "rerank: only 3 pods exist, 3 running, of 4 replicas the service needs" in text
    assert "ocr: no pods found (name its Deployment ocr" in text


def test_one_replica_across_two_instances_is_refused():
    lab = session(pool(GOOD_LAYOUT), GOOD)
    lab.apply(deployments({"rerank": GOOD["ocr"]}, count=2).replace("name: rerank", "name: rerank-big"))
    lab.schedule()
    text = failure(lab02.check_fleet, lab)
    assert f"asks for 2 x nvidia.com/mig-{GOOD['ocr']}: a replica must fit in ONE MIG instance" in text


def test_time_sliced_gpus_give_no_isolation():
    node_pool = pool("all-disabled", "none")
    node_pool["spec"].pop("mig")
    node_pool["spec"]["devicePlugin"] = {"version": "v1", "sharing": {"timeSlicing": {
        "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}
    lab = session(node_pool, dict.fromkeys(GOOD, "whole"))
    text = failure(lab02.check_fleet, lab)
    assert "shared by time-slicing (4 replicas): no memory isolation" in text


def test_cost_stretch_names_the_planner_minimum():
    # one service per GPU: the goal (half the GPUs whole), not the stretch
    layout = [{GOOD["guard"]: 1}, {GOOD["translate"]: 1}, {GOOD["rerank"]: 2, GOOD["ocr"]: 2}]
    lab = session(pool(layout), GOOD)
    assert lab02.check_fleet(lab, SERVICES).passed
    tied = int(lab02.fleet_usage(lab)["tied_up"].sum())
    plan = gpu_lab.gpus.plan_mig(SERVICES, MODEL)
    gpu = gpu_lab.gpus.get_model(MODEL)
    assert tied == NODES * len(layout) > plan.gpu_count
    text = failure(lab02.check_cost, lab)
    assert (f"✘ the fleet ties up {tied} GPUs; plan_mig fits these services on {plan.gpu_count} "
            f"(${plan.cost()['per_month']:,.0f}/month)") in text
    assert f"${tied * gpu.price_per_hour * 730:,.0f}/month for {tied} {MODEL} GPUs" in text


def test_an_empty_session_fails_every_requirement_it_can():
    text = failure(lab02.check_fleet, gpu_lab.connect("sim"))
    assert "✘ not every replica runs: translate: no pods found (name its Deployment translate" in text
    assert "✘ no replica of the services exists yet, so there is no GPU slice to check" in text
    assert "✘ no GPU node found: the NodePool is not applied" in text
