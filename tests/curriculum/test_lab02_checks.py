"""Lab 02's checks pass on a correct answer and say precisely what is wrong otherwise."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import gpu_lab

LabCheckFailed = gpu_lab.labs.LabCheckFailed

ROOT = Path(__file__).resolve().parents[2]
FLEET = ROOT / "lessons" / "scenarios" / "02_inference_fleet.yaml"
lab02 = gpu_lab.labs.lab02
S = gpu_lab.gpus.Service

SERVICES = [S("summarize", 34, 3, 2), S("chat", 18, 2, 4), S("moderation", 15, None, 2),
            S("embed", 3, None, 4), S("asr", 6, None, 2)]
GOOD = {"summarize": "3g.40gb", "chat": "2g.20gb", "moderation": "1g.20gb",
        "embed": "1g.10gb", "asr": "1g.10gb"}
# Half the fleet per node, on two MIG GPUs of each node; the other 6 GPUs keep MIG off.
GOOD_LAYOUT = [{"3g.40gb": 1, "2g.20gb": 1, "1g.20gb": 1}, {"2g.20gb": 1, "1g.10gb": 3}]


def pool(config: str | list[dict], strategy: str = "mixed") -> dict:
    spec = {"count": 2, "gpu": {"model": "H100-80GB", "count": 8}, "cpu": "192", "memory": "2048Gi",
            "devicePlugin": {"version": "v1", "flags": {"migStrategy": strategy}}}
    if isinstance(config, str):
        spec["mig"] = {"config": config}
    else:
        entries = [{"devices": [i], "mig-enabled": True, "mig-devices": layout}
                   for i, layout in enumerate(config)]
        rest = list(range(len(config), 8))
        if rest:
            entries.append({"devices": rest, "mig-enabled": False})
        spec["mig"] = {"config": "fleet",
                       "migParted": {"version": "v1", "mig-configs": {"fleet": entries}}}
    return {"apiVersion": "gpulab.dev/v1alpha1", "kind": "NodePool", "metadata": {"name": "h100"},
            "spec": spec}


def deployments(profiles: dict[str, str], *, replicas: dict[str, int] | None = None,
                count: int = 1) -> str:
    """The lab's Deployments with each one's GPU request rewritten (``whole`` keeps nvidia.com/gpu)."""
    docs = FLEET.read_text().split("\n---\n")[1:]
    out = []
    for doc in docs:
        name = re.search(r"metadata: \{name: (\S+)\}", doc).group(1)
        if name not in profiles:
            continue
        p = profiles[name]
        resource = "nvidia.com/gpu" if p == "whole" else f"nvidia.com/mig-{p}"
        doc = doc.replace("nvidia.com/gpu: 1", f"{resource}: {count}")
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


def test_the_starting_fleet_ties_up_14_gpus():
    lab = gpu_lab.connect("sim", deterministic=True)
    lab.apply(FLEET)
    lab.schedule()
    usage = lab02.fleet_usage(lab)
    assert usage["tied_up"].sum() == 14 and usage["mig_enabled"].sum() == 0
    text = failure(lab02.check_fleet, lab)
    assert "✔ no pod is pending" in text
    assert ("✘ the fleet ties up 14 GPUs, the goal is at most 7: h100-0: 7 whole GPUs held by pods; "
            "h100-1: 7 whole GPUs held by pods") in text


def test_a_correct_answer_passes_both_checks():
    lab = session(pool(GOOD_LAYOUT), GOOD)
    feedback = lab02.check_fleet(lab, SERVICES)
    assert feedback.passed
    assert "the fleet ties up 4 GPUs (goal: at most 7); 12 of 16 GPUs stay whole" in str(feedback)
    cost = lab02.check_cost(lab, SERVICES)
    assert "4 GPUs, as few as the planner's 4: $20,090/month" in str(cost)
    table = lab02.replica_slices(lab, SERVICES)
    assert len(table) == 14 and table["fits"].all()
    assert set(table.loc[table["service"] == "chat", "gib"]) == {19.62}


def test_too_small_a_profile_names_service_profile_and_need():
    layout = [{"3g.40gb": 1, "1g.20gb": 1, "1g.10gb": 2}, {"1g.10gb": 5}]
    lab = session(pool(layout), dict(GOOD, chat="1g.10gb"))
    text = failure(lab02.check_fleet, lab)
    assert "✔ no pod is pending" in text
    assert ("✘ a replica's GPU slice cannot hold its model: 4 chat replicas: the MIG profile you chose "
            "for chat (1g.10gb) has 9.75 GiB, the model needs 18 GiB; the smallest H100-80GB profile "
            "that holds it is 2g.20gb (19.62 GiB)") in text


def test_enough_memory_but_too_little_compute():
    layout = [{"3g.40gb": 1, "1g.20gb": 2}, {"1g.20gb": 1, "1g.10gb": 3}]
    lab = session(pool(layout), dict(GOOD, chat="1g.20gb"))
    text = failure(lab02.check_fleet, lab)
    assert ("4 chat replicas: the MIG profile you chose for chat (1g.20gb) has 1 compute slice, "
            "chat needs 2") in text


def test_a_predefined_config_partitions_every_gpu():
    lab = session(pool("all-3g.40gb"), {k: "3g.40gb" for k in GOOD})
    text = failure(lab02.check_fleet, lab)
    assert "✔ every replica has its own GPU instance" in text
    assert ("✘ the fleet ties up 16 GPUs, the goal is at most 7: h100-0: 8 MIG-enabled (7 of 16 "
            "instances used); h100-1: 8 MIG-enabled (7 of 16 instances used)") in text
    assert "list GPU indexes in a mig-parted config (devices: [0, 1])" in text


def test_single_strategy_counts_every_gpu_of_the_node():
    lab = session(pool("all-3g.40gb", "single"), {k: "whole" for k in GOOD})
    usage = lab02.fleet_usage(lab)
    assert list(usage["mig_enabled"]) == [8, 8]
    table = lab02.replica_slices(lab, SERVICES)
    assert set(table["profile"]) == {"3g.40gb"} and table["fits"].all()
    assert "the fleet ties up 16 GPUs" in failure(lab02.check_fleet, lab)


def test_pending_because_no_node_offers_the_profile():
    layout = [{"2g.20gb": 2, "1g.20gb": 1}, {"1g.10gb": 3}]
    lab = session(pool(layout), GOOD)
    text = failure(lab02.check_fleet, lab)
    assert ("✘ 2 pods still pending: 2 summarize replicas ask for nvidia.com/mig-3g.40gb: no node "
            "advertises nvidia.com/mig-3g.40gb: put 3g.40gb instances in a node's MIG config") in text
    assert 'scheduler: "0/2 nodes are available: 2 Insufficient nvidia.com/mig-3g.40gb.' in text
    assert "summarize: 0 of 2 replicas running" in text


def test_pending_because_the_profile_is_sold_out():
    layout = [{"3g.40gb": 1, "2g.20gb": 1, "1g.20gb": 1}, {"1g.10gb": 3}]
    lab = session(pool(layout), GOOD)
    text = failure(lab02.check_fleet, lab)
    assert ("2 pods still pending: 2 chat replicas ask for nvidia.com/mig-2g.20gb: the nodes offer 2 "
            "nvidia.com/mig-2g.20gb in all and 2 are taken") in text
    assert "chat: 2 of 4 replicas running" in text


def test_pending_with_too_small_a_profile_says_both():
    layout = [{"3g.40gb": 1, "1g.20gb": 2}, {"1g.20gb": 2}]
    lab = session(pool(layout), dict(GOOD, chat="1g.10gb", embed="1g.20gb", asr="1g.20gb"))
    text = failure(lab02.check_fleet, lab)
    assert ("✘ 4 pods still pending: 4 chat replicas ask for nvidia.com/mig-1g.10gb: the MIG profile "
            "you chose for chat (1g.10gb) has 9.75 GiB, the model needs 18 GiB; no node advertises "
            "nvidia.com/mig-1g.10gb") in text


def test_missing_and_short_deployments():
    lab = session(pool(GOOD_LAYOUT), {k: v for k, v in GOOD.items() if k != "asr"},
                  replicas={"chat": 3})
    text = failure(lab02.check_fleet, lab)
    assert "chat: only 3 pods exist, 3 running; set replicas: 4" in text
    assert "asr: no pods found (name its Deployment asr" in text


def test_one_replica_across_two_instances_is_refused():
    layout = [{"3g.40gb": 2}, {"2g.20gb": 3, "1g.10gb": 1}, {"1g.20gb": 4}, {"1g.10gb": 7}]
    lab = session(pool(layout), dict(GOOD, chat="1g.10gb"), count=1)
    lab.apply(deployments({"chat": "1g.10gb"}, count=2).replace("name: chat", "name: chat-big"))
    lab.schedule()
    text = failure(lab02.check_fleet, lab)
    assert "asks for 2 x nvidia.com/mig-1g.10gb: a replica must fit in ONE MIG instance" in text


def test_time_sliced_gpus_give_no_isolation():
    node_pool = pool("all-disabled", "none")
    node_pool["spec"].pop("mig")
    node_pool["spec"]["devicePlugin"] = {"version": "v1", "sharing": {"timeSlicing": {
        "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}
    lab = session(node_pool, {k: "whole" for k in GOOD})
    text = failure(lab02.check_fleet, lab)
    assert "shared by time-slicing (4 replicas): no memory isolation" in text


def test_cost_stretch_names_the_planner_minimum():
    layout = [{"3g.40gb": 1, "2g.20gb": 1, "1g.20gb": 1}, {"2g.20gb": 1, "1g.10gb": 3}, {"1g.10gb": 1}]
    lab = session(pool(layout), GOOD)
    assert lab02.check_fleet(lab, SERVICES).passed  # 6 GPUs: the goal, not the stretch
    text = failure(lab02.check_cost, lab)
    assert "✘ the fleet ties up 6 GPUs; plan_mig fits these services on 4 ($20,090/month)" in text
    assert "$30,134/month for 6 H100-80GB GPUs at $6.88/GPU-hour" in text


def test_an_empty_session_fails_every_requirement_it_can():
    text = failure(lab02.check_fleet, gpu_lab.connect("sim"))
    assert "✘ not every replica runs: summarize: no pods found (name its Deployment summarize" in text
    assert "✘ no replica of the services exists yet, so there is no GPU slice to check" in text
    assert "✘ no GPU node found: apply the NodePools first" in text
