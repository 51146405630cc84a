"""Lab 11's checks: the model answer passes; each of today's faults fails with its symptom and
the kubectl command that shows it, never the answer."""

from __future__ import annotations

import pytest

import gpu_lab

lab11 = gpu_lab.labs.lab11

CAP = 'max: {nvidia.com/gpu: "1"}'
FIXED = (lab11.TODAY_POLICY
         .replace('requests.nvidia.com/gpu: "16"', 'requests.nvidia.com/gpu: "12"')
         .replace('namespace: inference}\nspec:\n  hard: {requests.nvidia.com/gpu: "4"}',
                  'namespace: inference}\nspec:\n  hard: {requests.nvidia.com/gpu: "8"}')
         .replace(CAP, CAP + '\n    default: {nvidia.com/gpu: "0"}')
         .replace('hard: {nvidia.com/gpu: "4"}', 'hard: {requests.nvidia.com/gpu: "4"}'))
# The quotas right, the LimitRange as today: each replica still takes 2 GPUs.
QUOTAS_ONLY = FIXED.replace('\n    default: {nvidia.com/gpu: "0"}', "")
# The LimitRange dropped instead of fixed: serve runs, the cap is gone.
NO_CAP = "---".join(d for d in FIXED.split("---") if "LimitRange" not in d)


def failure(fn, *args) -> str:
    with pytest.raises(gpu_lab.labs.LabCheckFailed) as err:
        fn(*args)
    return str(err.value)


def first_failure(text: str) -> str:
    return next(line for line in text.splitlines() if line.lstrip().startswith("✘"))


def test_the_fixed_policy_passes_every_check():
    assert lab11.check_diagnosis(2, 4).passed
    assert "runs 6/6" in str(lab11.check_serve(FIXED))
    fb = lab11.check_shares(FIXED)
    assert "research 8, inference 6, vision 4" in str(fb)
    assert lab11.check_cap(FIXED).passed


def test_today_is_short_not_pending():
    lab = lab11.run(lab11.TODAY_POLICY)
    pods = lab.pods()
    serve = pods[pods["name"].str.startswith("serve-")]
    assert len(serve) == 2 and (serve["gpus"] == 2).all() and (pods["phase"] == "Running").all()
    nodes = lab.nodes()
    assert int((nodes["nvidia.com/gpu allocatable"] - nodes["nvidia.com/gpu requested"]).sum()) == 6


def test_diagnosis_names_the_kubectl_commands():
    text = failure(lab11.check_diagnosis, 1, 2)
    assert "gpus_per_replica is 1" in text and "missing_replicas is 2" in text
    assert "kubectl get pods -n inference -o custom-columns=" in first_failure(text)
    assert "kubectl get deploy serve -n inference" in text
    assert "gpu_lab.labs.hint(11)" in text


def test_today_serve_names_the_symptom_and_the_events_command():
    text = failure(lab11.check_serve, lab11.TODAY_POLICY)
    first = first_failure(text)
    assert "inference/serve is at 2/6 with 0 Pending and 6 GPUs free: 4 replicas were never created" in first
    assert "exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=2" in first
    assert "`kubectl get events -n inference --field-selector reason=FailedCreate`" in first
    assert "2 serve replica(s) hold 2 GPUs each" in text
    assert "default" not in text  # the symptom, not the answer


def test_quotas_alone_leave_serve_short_with_sidecar_gpus():
    text = failure(lab11.check_serve, QUOTAS_ONLY)
    assert "inference/serve is at 4/6" in text and "hold 2 GPUs each" in text
    lab11.check_shares(QUOTAS_ONLY)


def test_today_shares_name_each_team():
    text = failure(lab11.check_shares, lab11.TODAY_POLICY)
    assert "research: its quota allows 16 GPUs, its share is 12" in text
    assert "inference: its quota allows 4 GPUs, its share is 8" in text
    assert ("vision: no quota counts its GPUs (the key nvidia.com/gpu counts nothing for an extended "
            "resource); it holds 6 GPUs, its share is 4") in text
    assert "the quotas add up to 20 GPUs, the fleet has 24" in text
    assert "vision holds 6, its share is 4" in text
    assert "kubectl get resourcequota -n research" in first_failure(text)


def test_dropping_the_limitrange_loses_the_cap():
    lab11.check_serve(NO_CAP)
    text = failure(lab11.check_cap, NO_CAP)
    assert "a container asking for 2 GPUs was created in inference" in first_failure(text)
    assert "kubectl run probe -n inference" in first_failure(text)


def test_today_cap_gives_a_web_pod_a_gpu_or_refuses_it():
    text = failure(lab11.check_cap, lab11.TODAY_POLICY)
    assert "✔ a 2-GPU container is refused" in text
    assert "a web pod that names no GPU was refused in inference" in text


def test_a_policy_with_other_objects_is_refused_in_one_line():
    extra = FIXED + "---\napiVersion: gpulab.dev/v1alpha1\nkind: NodePool\nmetadata: {name: more}\n" \
                    "spec: {count: 1, gpu: {model: H100-80GB, count: 8}}\n"
    text = failure(lab11.check_serve, extra)
    assert "the policy holds NodePool more: only ResourceQuota and LimitRange objects" in text


def test_plain_limits_key_is_named_as_ignored():
    policy = FIXED.replace('hard: {requests.nvidia.com/gpu: "4"}', 'hard: {limits.nvidia.com/gpu: "4"}')
    text = failure(lab11.check_shares, policy)
    assert "the key limits.nvidia.com/gpu counts nothing" in text
