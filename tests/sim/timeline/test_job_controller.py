"""The Job controller on the clock: completions, replacements after failures, backoff, the limit."""

import gpu_lab

from .kit import job, pod, pool, priority_class


def test_completions_run_in_waves_of_parallelism():
    lab = gpu_lab.connect("sim")
    lab.apply([pool(gpus=2), job("waves", 2, completions=6, duration="10m")])
    lab.advance(None)
    j = lab.jobs().iloc[0]
    assert j["state"] == "Complete" and j["succeeded"] == 6 and j["finished_at"] == 1800
    assert len(lab.timeline()) == 6


def test_a_preempted_job_pod_is_replaced_after_the_failure_backoff():
    lab = gpu_lab.connect("sim")
    lab.apply([pool(gpus=1), priority_class("high", 1000), job("batch", 1, duration="1h")])
    lab.schedule()
    lab.advance(100)
    lab.apply([pod("urgent", duration="5m", priority_class="high")])
    lab.schedule()
    t = lab.timeline()
    victim = t[(t["owner"] == "batch") & (t["phase"] == "Failed")]
    assert len(victim) == 1 and victim.iloc[0]["reason"] == "PreemptionByScheduler"
    # The replacement is created 10 s after the failure (DefaultJobPodFailureBackOff) and
    # waits for the GPU; it starts when "urgent" ends at 100 + 300 s.
    lab.advance(9)
    assert (lab.timeline()["owner"] == "batch").sum() == 1
    lab.advance(1)
    t = lab.timeline()
    replacement = t[(t["owner"] == "batch") & (t["phase"] != "Failed")].iloc[0]
    assert replacement["created_at"] == 110
    lab.advance(None)
    j = lab.jobs().iloc[0]
    assert j["state"] == "Complete" and j["failed"] == 1 and j["finished_at"] == 400 + 3600


def test_backoff_limit_fails_the_job_in_the_controllers_words():
    lab = gpu_lab.connect("sim")
    lab.apply([pool(gpus=1), priority_class("high", 1000), job("fragile", 1, backoff_limit=0)])
    lab.schedule()
    lab.apply([pod("urgent", priority_class="high")])
    lab.schedule()
    j = lab.jobs().iloc[0]
    assert j["state"] == "Failed" and j["reason"] == "BackoffLimitExceeded" and j["failed"] == 1


def test_a_deployment_pod_that_is_preempted_is_replaced_at_once():
    lab = gpu_lab.connect("sim")
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "serve"},
                  "spec": {"replicas": 1, "selector": {"matchLabels": {"app": "serve"}},
                           "template": {"metadata": {"labels": {"app": "serve"}},
                                        "spec": {"containers": [{"name": "c", "image": "x", "resources": {
                                            "limits": {"nvidia.com/gpu": 1}}}]}}}}
    lab.apply([pool(gpus=1), priority_class("high", 1000), deployment])
    lab.schedule()
    lab.apply([pod("urgent", priority_class="high")])
    pods = lab.schedule()
    serve = pods[pods["name"].str.startswith("serve-")]
    assert sorted(serve["phase"]) == ["Failed", "Pending"]
    assert "Insufficient nvidia.com/gpu" in serve[serve["phase"] == "Pending"].iloc[0]["message"]
