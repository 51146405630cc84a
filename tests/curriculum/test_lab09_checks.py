"""Lab 09's checks: today's claims fail each check with pods, devices and numbers; the DRA answer passes."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

import gpu_lab

SERVICES = Path(__file__).resolve().parents[2] / "lessons" / "scenarios" / "09_lab_services.yaml"
lab09 = gpu_lab.labs.lab09
CHECKS = (lab09.check_all_running, lab09.check_memory, lab09.check_tensor_parallel, lab09.check_no_whole_h100)


def failure(fn, *args) -> str:
    with pytest.raises(gpu_lab.labs.LabCheckFailed) as err:
        fn(*args)
    return str(err.value)


def template(name: str, cls: str, cel: str | None = None, count: int = 1, same_gpu: bool = False) -> dict:
    exactly: dict = {"deviceClassName": cls}
    if count != 1:
        exactly["count"] = count
    if cel:
        exactly["selectors"] = [{"cel": {"expression": cel}}]
    devices: dict = {"requests": [{"name": "dev", "exactly": exactly}]}
    if same_gpu:
        devices["constraints"] = [{"matchAttribute": "gpu.nvidia.com/parentUUID"}]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": name},
            "spec": {"spec": {"devices": devices}}}


def with_templates(**uses: str) -> list[dict]:
    """Today's services, each pod named in ``uses`` switched to that template."""
    docs = copy.deepcopy(lab09.documents(SERVICES))
    for d in docs:
        if d["kind"] == "Pod" and d["metadata"]["name"] in uses:
            d["spec"]["resourceClaims"][0]["resourceClaimTemplateName"] = uses[d["metadata"]["name"]]
    return docs


PROFILE = "device.attributes['gpu.nvidia.com'].profile == '{}'"
GPU_70GI = template("gpu-70gi", "gpu.nvidia.com", "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('70Gi')) >= 0")
MIG_3G = template("mig-3g", "mig.nvidia.com", PROFILE.format("3g.40gb"))


def answer(tp_profile: str = "1g.20gb", same_gpu: bool = True) -> list[dict]:
    tp = template("tp-pair", "mig.nvidia.com", PROFILE.format(tp_profile), count=2, same_gpu=same_gpu)
    return with_templates(llm="gpu-70gi", ranker="mig-3g", **{"translate-tp": "tp-pair"}) + [GPU_70GI, MIG_3G, tp]


# ------------------------------------------------------------------ today
def test_today_fails_every_check_naming_the_cause():
    today = str(SERVICES)
    text = failure(lab09.check_all_running, today)
    assert "3 of 4 services Running; pending: translate-tp: 0/2 nodes are available: 2 cannot allocate all claims" in text
    text = failure(lab09.check_memory, today)
    assert "llm needs 70Gi per device and got gpu-1 on a100-0 (whole A100-40GB, 40Gi): 30Gi short" in text
    text = failure(lab09.check_tensor_parallel, today)
    assert "translate-tp is not Running" in text
    text = failure(lab09.check_no_whole_h100, today)
    assert "ranker (30Gi) holds gpu-0 on h100-0 (whole H100-80GB, 79.65Gi), but a 3g.40gb slice" in text


def test_the_work_may_not_change():
    docs = lab09.documents(SERVICES)
    docs = [d for d in docs if d["metadata"]["name"] != "ocr"]
    docs[-1]["metadata"]["annotations"]["gpulab.dev/gpu-memory"] = "40Gi"
    text = failure(lab09.check_all_running, docs)
    assert "Pod ocr is missing" in text and "llm says gpulab.dev/gpu-memory: '40Gi', the service needs 70Gi" in text
    pool = yaml.safe_load(lab09.CLUSTER.split("---")[0])
    assert "the fleet is fixed" in failure(lab09.check_memory, answer() + [pool])


def test_a_selector_that_does_not_compile_is_named_in_the_api_servers_words():
    bad = template("gpu-70gi", "gpu.nvidia.com", "device.capacity['gpu.nvidia.com'].memory >=")
    text = failure(lab09.check_memory, with_templates(llm="gpu-70gi") + [bad])
    assert "the submission was not applied: ResourceClaimTemplate.resource.k8s.io \"gpu-70gi\" is invalid" in text
    assert "compilation failed" in text


# ------------------------------------------------------------------ half answers
def test_two_2g_slices_cannot_share_the_3g_gpu_so_the_llm_loses_its_h100():
    docs = answer(tp_profile="2g.20gb")
    # H100 2g.20gb starts at memory slice 0, 2 or 4: with the 3g.40gb at 0-3 only one fits on gpu-0,
    # so the pair takes gpu-1 and no whole H100 is left for the LLM.
    assert "pending: llm: 0/2 nodes are available: 2 cannot allocate all claims" in failure(lab09.check_all_running, docs)
    assert lab09.check_tensor_parallel(docs).passed


def test_two_whole_gpus_are_not_two_mig_devices_on_one_gpu():
    docs = with_templates(llm="gpu-70gi", ranker="mig-3g", ocr="mig-3g", **{"translate-tp": "two-gpus"})
    docs += [GPU_70GI, MIG_3G]
    text = failure(lab09.check_tensor_parallel, docs)
    assert ("translate-tp holds 2 device(s) (gpu-0 on a100-0 (whole A100-40GB, 40Gi), gpu-1 on a100-0 "
            "(whole A100-40GB, 40Gi)); its 2 ranks want 2 MIG devices") in text
    assert "sit on 2 physical GPUs (a100-0 gpu-0, a100-0 gpu-1)" in text and "matchAttribute" in text


def test_a_memory_selector_alone_fixes_the_llm_but_not_the_ranker():
    docs = with_templates(llm="gpu-70gi") + [GPU_70GI]
    fb = str(failure(lab09.check_memory, docs))
    assert "llm" not in fb.split("✘", 1)[-1]
    assert "ranker (30Gi) holds gpu-0 on h100-0" in failure(lab09.check_no_whole_h100, docs)


# ------------------------------------------------------------------ the answer
def test_the_dra_answer_passes_every_check():
    docs = answer()
    for check in CHECKS:
        assert check(docs).passed, check.__name__
    rows = lab09.run(docs).set_index("name")
    assert rows.loc["llm", "held"] == "gpu-1 on h100-0 (whole H100-80GB, 79.65Gi)"
    assert rows.loc["ranker", "held"].startswith("gpu-0-mig-3g40gb-9-0 on h100-0")
    assert [d.name for d in rows.loc["translate-tp", "devices"]] == ["gpu-0-mig-1g20gb-15-4", "gpu-0-mig-1g20gb-15-6"]
