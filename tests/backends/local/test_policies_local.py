"""PodDisruptionBudgets, ResourceQuotas and LimitRanges against the real control plane.

The simulator's refusals of bad objects, and its admission refusals (LimitRanger's
min/max, ResourceQuota's), are checked word for word against the API server itself (the
manifest sent as it is, bypassing gpu-lab's own checks); the disruption and quota
controllers' status must come to equal what the shared model computes from the pods.
"""

from __future__ import annotations

import time

import pytest
from realcluster import refused_alike, shared_lab

import gpu_lab
from gpu_lab.backends import policyobjects
from gpu_lab.kube import ApiError
from gpu_lab.model.documents import load_documents

BAD = [
    """
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: b}
spec: {minAvailable: "50", selector: {matchLabels: {app: web}}}
""",
    """
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: b}
spec: {maxUnavailable: -1, unhealthyPodEvictionPolicy: Never}
""",
    """
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: b}
spec: {minAvailable: 150%, selector: {matchExpressions: [{key: app, operator: In}]}}
""",
    """
apiVersion: v1
kind: ResourceQuota
metadata: {name: q}
spec: {hard: {gpus: "2"}}
""",
    """
apiVersion: v1
kind: ResourceQuota
metadata: {name: q}
spec: {hard: {requests.nvidia.com/gpu: "-1"}}
""",
    """
apiVersion: v1
kind: LimitRange
metadata: {name: l}
spec:
  limits:
  - {type: Container, min: {cpu: "2"}, max: {cpu: "1"}}
""",
    """
apiVersion: v1
kind: LimitRange
metadata: {name: l}
spec:
  limits:
  - {type: Container, default: {memory: 1Gi}, defaultRequest: {memory: 2Gi, cpu: "-1"}}
""",
]


@pytest.fixture(scope="module")
def local(request):
    yield from shared_lab(request, "the real-cluster tests")


@pytest.mark.controlplane
@pytest.mark.parametrize("text", BAD, ids=[f"bad{i}" for i in range(len(BAD))])
def test_the_simulator_refuses_in_the_api_servers_words(text, local):
    refused_alike(text, local)


POLICIES = """
apiVersion: v1
kind: LimitRange
metadata: {name: lr}
spec:
  limits:
  - type: Container
    max: {cpu: "2"}
    min: {memory: 64Mi}
    defaultRequest: {cpu: 500m, memory: 128Mi}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: q}
spec: {hard: {requests.nvidia.com/gpu: "1", limits.memory: 1Gi}}
"""

PODS = [  # each refused by admission; the reason in a comment
    # LimitRanger: over max (and the default limit, from max, is 2)
    {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"cpu": "4"}}}]},
    # LimitRanger: under min
    {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"memory": "1Mi"}}}]},
    # ResourceQuota: limits.memory quota'd, and no memory limit (the range gives none)
    {"containers": [{"name": "c", "image": "x"}, {"name": "d", "image": "y"}]},
    # ResourceQuota: more GPUs than the quota
    {"containers": [{"name": "c", "image": "x",
                     "resources": {"limits": {"nvidia.com/gpu": 2, "memory": "256Mi"}}}]},
]


@pytest.mark.controlplane
@pytest.mark.parametrize("spec", PODS, ids=[f"pod{i}" for i in range(len(PODS))])
def test_admission_refuses_in_the_api_servers_words(spec, local):
    local.reset()
    local.apply(POLICIES)
    sim = gpu_lab.connect("sim")
    sim.apply(POLICIES)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}
    with pytest.raises(gpu_lab.GpuLabError) as ours:
        sim.apply(pod)
    deadline = time.monotonic() + 30
    theirs: ApiError | None = None
    while time.monotonic() < deadline:  # a quota's status and a namespace's ServiceAccount come from controllers
        try:
            local.client.create(pod, namespace="default")
        except ApiError as err:
            theirs = err
            waiting = ("status unknown for quota", "serviceaccount")  # controllers a moment behind
            if not any(w in str(err) for w in waiting):
                break
        else:  # the API server's quota informer had not seen the new quota yet: behind, too
            theirs = None
            local.client.delete("Pod", "p", namespace="default", grace_period_seconds=0)
        time.sleep(0.2)
    assert theirs is not None, "the API server kept admitting the pod for 30 s"
    assert str(ours.value) == str(theirs)
    with pytest.raises(gpu_lab.GpuLabError) as via_local:  # the local backend's own answer: the same
        local.apply(pod)
    assert str(via_local.value) == str(theirs)


@pytest.mark.controlplane
def test_the_controllers_status_is_what_the_model_computes(local):
    """minAvailable and maxUnavailable, as ints and percents, over Deployments, a bare pod and
    a Job (one PDB per set of pods: Kubernetes does not support overlapping ones): the real
    disruption controller's status equals the model's, and so does the quota's."""
    local.reset()
    budgets = [("int", {"minAvailable": 1}, "a"), ("pct", {"minAvailable": "50%"}, "b"),
               ("max", {"maxUnavailable": "30%"}, "c"), ("bare", {"maxUnavailable": 1}, "d"),
               ("job", {"maxUnavailable": 1}, "e")]
    docs = [{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": n},
             "spec": {**spec, "selector": {"matchLabels": {"app": app}}}} for n, spec, app in budgets]
    docs += load_documents("""
apiVersion: v1
kind: ResourceQuota
metadata: {name: q}
spec: {hard: {requests.nvidia.com/gpu: "16", pods: "20", count/pods: "20"}}
---
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: l4}
spec: {count: 2, gpu: {model: L4, count: 8}}
---
apiVersion: v1
kind: Pod
metadata: {name: d, labels: {app: d}}
spec: {containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]}
---
apiVersion: batch/v1
kind: Job
metadata: {name: e}
spec:
  parallelism: 2
  template:
    metadata: {labels: {app: e}}
    spec:
      restartPolicy: Never
      containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]
""")
    for app, replicas in (("a", 2), ("b", 3), ("c", 4)):
        docs.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": app}, "spec": {
            "replicas": replicas, "selector": {"matchLabels": {"app": app}},
            "template": {"metadata": {"labels": {"app": app}}, "spec": {"containers": [
                {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}})
    local.apply(docs)
    assert set(local.schedule()["phase"]) == {"Running"}
    deadline = time.monotonic() + 30
    while not policyobjects.synced(local.client):
        assert time.monotonic() < deadline, [
            (b["metadata"]["name"], b.get("status")) for b in
            local.client.list("PodDisruptionBudget", api_version="policy/v1")["items"]]
        time.sleep(0.2)
    allowed = {b["metadata"]["name"]: b["status"]["disruptionsAllowed"] for b in
               local.client.list("PodDisruptionBudget", api_version="policy/v1")["items"]}
    # a: 2 ready - 1; b: 3 - 2 (50% of 3 rounds up); c: 30% of 4 rounds up to 2 unavailable;
    # d: a bare pod has no scale, so nothing is expected; e: a Job has no scale (the sync fails)
    assert allowed == {"int": 1, "pct": 1, "max": 2, "bare": 0, "job": 0}
