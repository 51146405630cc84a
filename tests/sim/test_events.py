"""The sim's Events (``lab.events()``): the real components' reasons and words, counted as
the API server's event correlator counts repeats."""

from __future__ import annotations

from pathlib import Path

import pytest

import gpu_lab
from gpu_lab.backends.events import EVENT_COLUMNS
from gpu_lab.fidelity import Case, run_case
from gpu_lab.sim.events import EventLog, truncate

SCENARIOS = Path(__file__).parent.parent / "fidelity" / "scenarios"


def _case(name: str):
    lab = gpu_lab.connect("sim")
    run_case(Case.load(SCENARIOS / f"{name}.yaml"), lab)
    return lab


def test_preemption_records_scheduled_failed_and_preempted_in_order():
    lab = _case("preemption_evicts_low")
    ev = lab.events()
    assert list(ev.columns) == EVENT_COLUMNS
    uid = lab._sim.cluster.records["default/urgent"].pod.uid
    assert [tuple(r) for r in ev[["object", "type", "reason", "message"]].itertuples(index=False)] == [
        ("Pod/batch-a", "Normal", "Scheduled", "Successfully assigned default/batch-a to h100-0"),
        ("Pod/batch-b", "Normal", "Scheduled", "Successfully assigned default/batch-b to h100-0"),
        ("Pod/urgent", "Warning", "FailedScheduling", "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. "
         "preemption: found a potential placement for pod on node h100-0, preempting 2 victims"),
        ("Pod/batch-a", "Normal", "Preempted", f"Preempted by pod {uid} on node h100-0"),
        ("Pod/batch-b", "Normal", "Preempted", f"Preempted by pod {uid} on node h100-0"),
        ("Pod/urgent", "Normal", "Scheduled", "Successfully assigned default/urgent to h100-0"),
    ]
    assert set(ev["namespace"]) == {"default"} and set(ev["count"]) == {1}
    assert list(lab.events(name="urgent")["reason"]) == ["FailedScheduling", "Scheduled"]
    assert lab.events(namespace="team-a").empty


def test_quota_refusal_is_the_replicasets_failedcreate():
    lab = _case("quota_leaves_replicas_uncreated")
    rs = lab.events(kind="ReplicaSet")
    assert len(rs) == 1
    row = rs.iloc[0]
    assert (row["namespace"], row["type"], row["reason"]) == ("team-a", "Warning", "FailedCreate")
    assert row["object"].startswith("ReplicaSet/serve-")
    assert row["message"].startswith('Error creating: pods "serve-')
    assert row["message"].endswith('" is forbidden: exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=1, '
                                   "used: requests.nvidia.com/gpu=3, limited: requests.nvidia.com/gpu=3")
    assert list(lab.events(kind="pod")["reason"]) == ["Scheduled"] * 3  # kind matches as kubectl's does
    assert lab.events(kind="ReplicaSet", name="nope").empty


def test_repeated_failures_count_on_one_event():
    lab = gpu_lab.connect("sim")
    lab.apply("""
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: l4}
spec: {count: 1, gpu: {model: L4, count: 1}}
---
apiVersion: v1
kind: Pod
metadata: {name: big}
spec:
  containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 2}}}]
""")
    lab.schedule()
    first = lab.events(name="big")
    assert list(first["reason"]) == ["FailedScheduling"] and list(first["count"]) == [1]
    assert first.iloc[0]["message"] == "0/1 nodes are available: 1 Insufficient nvidia.com/gpu. preemption: " \
        "0/1 nodes are available: 1 Preemption is not helpful for scheduling."
    lab.cordon("l4-0")  # a node change: the pod is tried again, with a new message
    lab.cordon("l4-0", False)  # and again, with the first message: counted on its Event
    again = lab.events(name="big")
    assert len(again) == 2 and list(again["count"]) == [2, 1]


def test_the_correlator_counts_identical_events_and_truncates_long_notes():
    log = EventLog()
    for t in (1.0, 2.0):
        log.record("default", "Pod", "p", "Warning", "FailedScheduling", "no", t)
    log.record("default", "Pod", "p", "Warning", "FailedScheduling", "other", 3.0)
    assert [(e.message, e.count, e.time) for e in log] == [("no", 2, 1.0), ("other", 1, 3.0)]
    long = "x" * 2000
    assert truncate(long) == "x" * 1020 + " ..." and len(truncate(long)) == 1024
    assert truncate("short") == "short"


def test_bad_filters_are_one_line():
    lab = gpu_lab.connect("sim")
    with pytest.raises(gpu_lab.GpuLabError, match=r"^events: kind must be its name \(a string\), not 3$"):
        lab.events(kind=3)
    assert lab.events().empty


def test_reset_forgets_the_events():
    lab = _case("preemption_evicts_low")
    lab.reset()
    assert lab.events().empty
