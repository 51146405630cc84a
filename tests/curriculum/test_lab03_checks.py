"""Lab 03's checks pass on a correct answer and say precisely what is wrong otherwise."""

from __future__ import annotations

from pathlib import Path

import pytest

import gpu_lab

LabCheckFailed = gpu_lab.labs.LabCheckFailed
lab03 = gpu_lab.labs.lab03

SCENARIOS = Path(__file__).resolve().parents[2] / "lessons" / "scenarios"
TODAY_FLEET = SCENARIOS / "03_l4_fleet_today.yaml"
TODAY_NOTEBOOKS = SCENARIOS / "03_dev_notebooks_today.yaml"
INFERENCE = SCENARIOS / "03_inference.yaml"


def pool(name: str, count: int, *, gpus: int = 1, sharing: dict | None = None, model: str = "L4") -> dict:
    plugin: dict = {"version": "v1", "flags": {"migStrategy": "none"}}
    if sharing:
        plugin["sharing"] = sharing
    return {"apiVersion": "gpulab.dev/v1alpha1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"count": count, "gpu": {"model": model, "count": gpus}, "cpu": str(8 * gpus),
                     "memory": f"{32 * gpus}Gi", "devicePlugin": plugin}}


def time_slicing(replicas: int, *, rename: bool = True, strategy: str = "timeSlicing") -> dict:
    block: dict = {"renameByDefault": rename,
                   "resources": [{"name": "nvidia.com/gpu", "replicas": replicas}]}
    if strategy == "timeSlicing":
        block["failRequestsGreaterThanOne"] = True
    return {strategy: block}


def notebooks(resource: str = "nvidia.com/gpu.shared", replicas: int = 12) -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "dev-notebook"},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": "dev-notebook"}},
                     "template": {"metadata": {"labels": {"app": "dev-notebook"}},
                                  "spec": {"containers": [{
                                      "name": "jupyter", "image": "jupyter",
                                      "resources": {"requests": {"cpu": "1", "memory": "4Gi"},
                                                    "limits": {resource: 1}}}]}}}}


def cluster(pools, dev, *, seed: int = 0):
    lab = gpu_lab.connect("sim", seed=seed)
    lab.apply(pools)
    lab.apply(str(INFERENCE))
    lab.apply(dev)
    lab.schedule()
    return lab


def good_pools(replicas: int = 6) -> list[dict]:
    return [pool("l4-shared", 2, sharing=time_slicing(replicas)), pool("l4-dedicated", 2)]


def good_pools_unrenamed() -> list[dict]:
    return [pool("l4-shared", 2, sharing=time_slicing(6, rename=False)), pool("l4-dedicated", 2)]


def failures(check, lab) -> str:
    with pytest.raises(LabCheckFailed) as err:
        check(lab)
    text = str(err.value)
    return "\n".join(line for line in text.splitlines() if "✘" in line)


# ------------------------------------------------------------------ correct answers

@pytest.mark.parametrize("pools", [
    good_pools(6),
    good_pools(8),  # more replicas than needed: the scheduler still spreads 6 + 6
    [pool("l4-shared", 1, gpus=2, sharing=time_slicing(6)), pool("l4-dedicated", 2)],
    [pool("l4-shared", 2, sharing=time_slicing(6)), pool("l4-dedicated", 1, gpus=2)],
], ids=["replicas-6", "replicas-8", "one-2gpu-shared-node", "one-2gpu-dedicated-node"])
@pytest.mark.parametrize("seed", [0, 1, 7])
def test_correct_answers_pass_every_check(pools, seed):
    lab = cluster(pools, notebooks(), seed=seed)
    for check in (lab03.check_fleet, lab03.check_dev_notebooks, lab03.check_inference):
        feedback = check(lab)
        assert feedback.passed, str(feedback)


def test_passed_feedback_states_the_numbers():
    text = str(lab03.check_dev_notebooks(cluster(good_pools(), notebooks())))
    assert "all 12 dev notebooks running" in text
    assert "6 x 3.0 GiB = 18.0 GiB of 22.5 GiB" in text
    assert "modelled worst case 62.5 ms (mean 15.25 ms) < 65 ms" in text


def test_sizing_answer():
    assert lab03.max_notebooks_per_gpu(gpu_lab.gpus.get_model("L4").memory_mib) == (7, 6, 6)
    assert lab03.check_sizing(6).passed
    text = str(lab03.check_sizing(6))
    assert "memory alone would allow 7" in text and "latency allows 6" in text


# ------------------------------------------------------------------ wrong answers

def test_sizing_too_many_names_the_binding_limit():
    with pytest.raises(LabCheckFailed, match=r"7 per GPU is too many: the worst case of a 10 ms request "
                                             r"is 73 ms, not under 65 ms"):
        lab03.check_sizing(7)
    with pytest.raises(LabCheckFailed, match=r"8 notebooks x 3.0 GiB = 24.0 GiB does not fit in 22.5 GiB"):
        lab03.check_sizing(8)


def test_sizing_too_few_and_not_a_number():
    with pytest.raises(LabCheckFailed, match=r"5 per GPU leaves room: 6 notebooks still meet both limits"):
        lab03.check_sizing(5)
    with pytest.raises(LabCheckFailed, match=r"whole number of notebooks, got '6'"):
        lab03.check_sizing("6")


def test_today_unchanged_fails_with_the_schedulers_words():
    lab = cluster(str(TODAY_FLEET), str(TODAY_NOTEBOOKS))
    assert "no node shares its GPUs: every node advertises each GPU once" in failures(lab03.check_fleet, lab)
    text = failures(lab03.check_dev_notebooks, lab)
    assert "the dev notebooks ask for nvidia.com/gpu: not one replica of the renamed, time-sliced resource" in text
    assert "10 dev notebook(s) not running (Pending): the scheduler says: 0/4 nodes are available: " \
           "4 Insufficient nvidia.com/gpu." in text
    assert "notebook(s) hold a whole, unshared GPU" in text


def test_too_few_replicas_says_how_many_are_needed():
    lab = cluster(good_pools(5), notebooks())
    lab03.check_fleet(lab)  # the fleet itself is fine
    text = failures(lab03.check_dev_notebooks, lab)
    assert ("2 dev notebook(s) not running (Pending): nvidia.com/gpu.shared advertises 10 in total "
            "(l4-shared-0: 5, l4-shared-1: 5); 12 notebooks on 2 shared GPU(s) need replicas >= 6") in text
    assert text.count("✘") == 1


def test_not_renamed_lets_inference_land_on_a_shared_gpu():
    lab = cluster(good_pools_unrenamed(), notebooks("nvidia.com/gpu"))
    fleet = failures(lab03.check_fleet, lab)
    assert "shared GPUs must be advertised under a renamed resource: l4-shared-0 advertises 6 nvidia.com/gpu" in fleet
    assert "Set renameByDefault: true" in fleet
    inference = failures(lab03.check_inference, lab)
    assert "landed on a shared GPU (replica ID GPU-" in inference
    assert "::" in inference and "a noisy neighbour can stall it" in inference
    assert "instead of 25 ms alone" in inference


def test_one_gpu_for_all_notebooks_breaks_memory_and_latency():
    pools = [pool("l4-shared", 1, sharing=time_slicing(12)), pool("l4-dedicated", 3)]
    # 12 notebooks need 12 CPUs: give the shared node 16.
    pools[0]["spec"].update(cpu="16", memory="64Gi")
    lab = cluster(pools, notebooks())
    lab03.check_fleet(lab)
    text = failures(lab03.check_dev_notebooks, lab)
    assert ("12 notebooks x 3.0 GiB = 36.0 GiB on one 22.5 GiB L4: time-slicing does not split memory, "
            "so 5 notebook(s) fail with CUDA out of memory; at most 7 fit") in text
    assert ("12 notebooks take turns, so a 10 ms request takes up to 125.5 ms in the model "
            "(goal: under 65 ms); at most 6 notebooks per GPU meet it") in text


def test_three_shared_gpus_leave_an_inference_service_pending():
    pools = [pool("l4-shared", 3, sharing=time_slicing(4)), pool("l4-dedicated", 1)]
    lab = cluster(pools, notebooks())
    fleet = failures(lab03.check_fleet, lab)
    assert "3 GPUs are shared (l4-shared-0, l4-shared-1, l4-shared-2): the dev notebooks may use at most 2" in fleet
    assert "only 1 GPU(s) are left unshared: the 2 inference services need one dedicated GPU each" in fleet
    assert "the dev notebooks use 3 physical GPUs, at most 2 allowed" in failures(lab03.check_dev_notebooks, lab)
    assert "is Pending: 0/4 nodes are available" in failures(lab03.check_inference, lab)


def test_mps_is_not_what_the_task_asks_for():
    pools = [pool("l4-shared", 2, sharing=time_slicing(6, strategy="mps")), pool("l4-dedicated", 2)]
    lab = cluster(pools, notebooks())
    assert "share(s) by MPS: the task asks for time-slicing" in failures(lab03.check_fleet, lab)


def test_wrong_hardware_and_missing_notebooks():
    pools = [pool("a10g-shared", 2, sharing=time_slicing(6), model="A10G"), pool("l4-dedicated", 2)]
    lab = cluster(pools, notebooks(replicas=10))
    fleet = failures(lab03.check_fleet, lab)
    assert "your nodes have 4 GPUs, some not L4: a10g-shared-0 (NVIDIA-A10G), a10g-shared-1 (NVIDIA-A10G)" in fleet
    assert ("10 dev-notebook pods found, the team runs 12: keep Deployment dev-notebook at replicas: 12"
            in failures(lab03.check_dev_notebooks, lab))


def test_no_inference_applied():
    lab = gpu_lab.connect("sim", seed=0)
    lab.apply(good_pools())
    lab.apply(notebooks())
    lab.schedule()
    text = failures(lab03.check_inference, lab)
    assert "no pod of infer-chat found" in text and "no pod of infer-search found" in text
