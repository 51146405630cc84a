"""Lab 06's checks: the solution passes; yesterday and each half-fix fail with specific feedback."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest

import gpu_lab

LabCheckFailed = gpu_lab.labs.LabCheckFailed
lab06 = gpu_lab.labs.lab06

DAY = str(Path(__file__).resolve().parents[2] / "lessons" / "scenarios" / "06_lab_day.yaml")
YESTERDAY = lab06.load(DAY)
CHECKS = (lab06.check_jobs, lab06.check_scale_down, lab06.check_bill)

PACK = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
        "profiles": [{"schedulerName": "default-scheduler", "pluginConfig": [
            {"name": "NodeResourcesFit", "args": {"scoringStrategy": {
                "type": "MostAllocated", "resources": [{"name": "nvidia.com/gpu", "weight": 1}]}}},
            {"name": "PodTopologySpread", "args": {"defaultingType": "List"}}]}]}
NO_EVICT = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}
MAY_EVICT = {"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}


def day(config=None, unneeded=None, jobs=None, shipper=None, autoscaler=None):
    """Yesterday with a scheduler configuration, the Autoscaler's unneeded time (or a whole spec)
    and annotations on the Jobs' and the log shipper's pod templates."""
    docs = copy.deepcopy(YESTERDAY)
    for doc in docs:
        if doc["kind"] == "Autoscaler":
            if autoscaler is not None:
                doc["spec"] = autoscaler
            if unneeded is not None:
                doc["spec"]["scaleDownUnneededTime"] = unneeded
        elif doc["kind"] == "Job" and jobs:
            doc["spec"]["template"]["metadata"]["annotations"].update(jobs)
        elif doc["metadata"]["name"] == "log-shipper" and shipper:
            doc["spec"]["template"]["metadata"].setdefault("annotations", {}).update(shipper)
    return ([config] if config else []) + docs


SOLUTION = day(PACK, "10m", NO_EVICT, MAY_EVICT)


def failure(check, manifests) -> str:
    with pytest.raises(LabCheckFailed) as info:
        check(manifests, DAY)
    return str(info.value)


# ------------------------------------------------------------------ the day and its work
def test_the_day_and_its_work():
    kinds = [d["kind"] for d in YESTERDAY]
    assert kinds.count("Job") == 100 and kinds.count("NodePool") == 2 and kinds.count("Autoscaler") == 1
    assert lab06.work_gpu_hours(DAY) == pytest.approx(419.5)
    assert lab06.changes(YESTERDAY, DAY) == [] and lab06.changes(SOLUTION, DAY) == []
    assert lab06.autoscaler_spec(YESTERDAY) == {"scaleDownUnneededTime": "1h"}


def test_manifests_load_from_a_path_yaml_text_or_dicts():
    text = Path(DAY).read_text()
    assert lab06.load(DAY) == lab06.load(text) == lab06.load(YESTERDAY)
    assert lab06.load(YESTERDAY[0]) == [YESTERDAY[0]]
    with pytest.raises(gpu_lab.GpuLabError, match="give the manifests as"):
        lab06.load(42)


def test_times_read_as_a_clock_and_durations():
    assert lab06.clock(66180) == "18:23" and lab06.clock(86400) == "24:00"
    assert lab06.span(6060) == "1h41m" and lab06.span(2700) == "45m" and lab06.span(7200) == "2h"
    assert lab06.span(30) == "30s"


# ------------------------------------------------------------------ the solution
def test_solution_passes_every_check():
    for check in CHECKS:
        assert check(SOLUTION, DAY).passed
    text = str(lab06.check_bill(SOLUTION, DAY))
    assert "the day cost $4,028.01" in text and "(goal: under $4,200)" in text
    assert "you paid for 585.5 GPU-hours (73.2 h100 node-hours): 419.5 allocated and 166.0 idle" in text
    assert "the last one went after the last Job finished (18:23)" in str(lab06.check_scale_down(SOLUTION, DAY))


def test_a_shorter_unneeded_time_passes_too():
    assert lab06.check_bill(day(PACK, "5m", NO_EVICT, MAY_EVICT), DAY).passed


# ------------------------------------------------------------------ yesterday
def test_yesterday_fails_every_check():
    text = failure(lab06.check_jobs, YESTERDAY)
    assert re.search(r"no Job may restart: \d+ Jobs lost work\. train-\d+'s pod train-\d+-\w+ stopped at "
                     r"\d\d:\d\d on h100-\d+ after \w+ of its \w+, when the autoscaler removed the node "
                     r"\(Scale-down: removing node h100-\d+, utilization: \{nvidia.com/gpu 0\.\d+\}", text)
    assert "GPU-hours of work done twice" in text
    text = failure(lab06.check_scale_down, YESTERDAY)
    assert re.search(r"h100-\d+ was still up at 24:00, .* after its last GPU pod finished", text)
    assert "it holds kube-system/log-shipper-" in text and "a kube-system pod" in text
    text = failure(lab06.check_bill, YESTERDAY)
    assert re.search(r"the day cost \$5,\d{3}\.\d\d \(yesterday \$5,\d{3}\.\d\d\); the goal is under \$4,200", text)
    assert re.search(r"allocated \(\d+\.\d of them work done twice\)", text)


# ------------------------------------------------------------------ each half-fix
def test_protecting_jobs_without_moving_the_shipper_leaves_a_node_up():
    manifests = day(PACK, "10m", NO_EVICT)
    assert lab06.check_jobs(manifests, DAY).passed
    text = failure(lab06.check_scale_down, manifests)
    assert ("the last Job finished at 18:23, but h100-4 was still up at 24:00, 5h37m after its last GPU pod "
            "finished ($309.14 at $55.04 per node-hour): it holds kube-system/log-shipper-") in text
    assert "the day cost $4,327.98" in failure(lab06.check_bill, manifests)


def test_the_old_unneeded_time_keeps_the_bill_up():
    manifests = day(PACK, None, NO_EVICT, MAY_EVICT)
    assert lab06.check_jobs(manifests, DAY).passed and lab06.check_scale_down(manifests, DAY).passed
    text = failure(lab06.check_bill, manifests)
    assert "the day cost $4,551.81" in text
    assert "Empty GPU nodes waiting to be removed: 6.0 node-hours on 9 nodes" in text


def test_protected_jobs_spread_by_the_default_profile_cost_most():
    manifests = day(None, "10m", NO_EVICT, MAY_EVICT)
    assert lab06.check_jobs(manifests, DAY).passed and lab06.check_scale_down(manifests, DAY).passed
    text = failure(lab06.check_bill, manifests)
    assert "the day cost $5,140" in text and "idle" in text


def test_karpenter_ignores_cluster_autoscalers_annotation():
    manifests = day(PACK, jobs=NO_EVICT, shipper=MAY_EVICT, autoscaler={"mode": "Consolidation"})
    text = failure(lab06.check_jobs, manifests)
    assert "Jobs lost work" in text and "when the autoscaler removed the node (Disrupting Node: " in text


# ------------------------------------------------------------------ what may not change
def test_changed_work_and_hardware_are_named():
    docs = copy.deepcopy(SOLUTION)
    job = next(d for d in docs if d["kind"] == "Job")
    job["spec"]["template"]["metadata"]["annotations"]["gpulab.dev/duration"] = "1m"
    pool = next(d for d in docs if d["kind"] == "NodePool")
    pool["spec"]["autoscaling"]["maxCount"] = 20
    docs = [d for d in docs if d.get("metadata", {}).get("name") != "log-shipper"]
    docs.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "extra"},
                 "spec": {"containers": [{"name": "c", "image": "x"}]}})
    text = failure(lab06.check_jobs, docs)
    assert f"Job default/{job['metadata']['name']}: duration changed (the day's file has duration" in text
    assert "NodePool default/h100 differs from the day's file (the node pools are fixed)" in text
    assert "Pod default/extra is not in the day's file" in text
    assert "Deployment kube-system/log-shipper is missing" in text


def test_work_not_done_saves_nothing():
    elsewhere = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                 "profiles": [{"schedulerName": "batch-scheduler"}]}
    manifests = day(elsewhere, "10m", NO_EVICT, MAY_EVICT)
    text = failure(lab06.check_jobs, manifests)
    assert "every Job must be Complete by 24:00: 100 of 100 are not: train-000 (Pending)" in text
    assert "a bill for work not done saves nothing" in failure(lab06.check_bill, manifests)


def test_manifests_that_do_not_apply_fail_in_one_line():
    manifests = day(autoscaler={"scaleDownUnneededTime": "soon"})
    text = failure(lab06.check_bill, manifests)
    line = next(x for x in text.splitlines() if "do not apply" in x)
    assert 'the manifests do not apply: Autoscaler "cluster-autoscaler"' in line
    assert 'spec.scaleDownUnneededTime: Invalid value: "soon"' in line


# ------------------------------------------------------------------ other days, other reasons
SMALL_DAY = """
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: h100}
spec:
  gpu: {model: H100-80GB, count: 8}
  autoscaling: {minCount: 0, maxCount: 2, provisioningDelay: 5m}
---
apiVersion: batch/v1
kind: Job
metadata: {name: late, annotations: {gpulab.dev/submit-at: 22h}}
spec:
  template:
    metadata: {annotations: {gpulab.dev/duration: 4h}}
    spec:
      restartPolicy: Never
      containers:
      - {name: train, image: trainer, resources: {limits: {nvidia.com/gpu: 4}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: notebook}
spec:
  replicas: 1
  selector: {matchLabels: {app: notebook}}
  template:
    metadata: {labels: {app: notebook}, annotations: {karpenter.sh/do-not-disrupt: "true"}}
    spec:
      containers:
      - {name: lab, image: jupyter, resources: {requests: {cpu: "1"}, limits: {nvidia.com/gpu: 1}}}
"""


@pytest.fixture
def small_day(tmp_path):
    path = tmp_path / "day.yaml"
    path.write_text(SMALL_DAY)
    return str(path)


def test_a_node_kept_by_its_gpu_requests_is_named(small_day):
    with pytest.raises(LabCheckFailed) as info:
        lab06.check_scale_down(small_day, small_day)
    text = str(info.value)
    assert "was still up at 24:00" in text
    assert re.search(r"5 of its 8 GPUs are requested, at or above scaleDownGpuUtilizationThreshold "
                     r"\(0\.5\), by notebook-\w+-\w+, late-\w+", text)
    with pytest.raises(LabCheckFailed) as info:
        lab06.check_jobs(small_day, small_day)
    assert "every Job must be Complete by 24:00: 1 of 1 are not: late (Running)" in str(info.value)


def test_under_karpenter_only_its_annotation_keeps_a_node(small_day):
    karpenter = {"apiVersion": "gpulab.dev/v1alpha1", "kind": "Autoscaler", "metadata": {"name": "k"},
                 "spec": {"mode": "Consolidation"}}
    with pytest.raises(LabCheckFailed) as info:
        lab06.check_scale_down([*lab06.load(small_day), karpenter], small_day)
    assert 'it holds default/notebook-' in str(info.value)
    assert 'a pod annotated karpenter.sh/do-not-disrupt: "true"' in str(info.value)
