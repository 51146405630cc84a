"""Deployments, ReplicaSets and Jobs expand into the pods their controllers would create."""

import re

import pytest
import yaml

from gpu_lab.errors import Forbidden, InvalidObject
from gpu_lab.model.parse import NAME_ALPHABET
from gpu_lab.model.workloads import expand_workload, pod_template_hash
from gpu_lab.names import stable_uid

CHARS = f"[{NAME_ALPHABET}]"

DEPLOYMENT = yaml.safe_load("""
apiVersion: apps/v1
kind: Deployment
metadata: {name: infer, namespace: serving}
spec:
  replicas: 3
  selector: {matchLabels: {app: infer}}
  template:
    metadata: {labels: {app: infer, tier: gpu}, annotations: {a: b}}
    spec:
      priorityClassName: high
      containers:
      - name: server
        image: vllm
        resources:
          requests: {cpu: "8", memory: 64Gi}
          limits: {nvidia.com/gpu: 2}
""")
CLASSES = {"high": {"value": 1000}}


def test_deployment_makes_a_replicaset_and_its_pods():
    record, pods = expand_workload(DEPLOYMENT, priority_classes=CLASSES, first_created=5)
    rs = record["replicaset"]
    h = record["pod_template_hash"]
    assert re.fullmatch(f"{CHARS}{{10}}", h)
    assert rs == f"infer-{h}"
    assert [p.created for p in pods] == [5, 6, 7]
    assert record["pods"] == [p.name for p in pods]
    assert len(set(record["pods"])) == 3
    for p in pods:
        assert re.fullmatch(f"infer-{h}-{CHARS}{{5}}", p.name)
        assert p.namespace == "serving"
        assert p.labels == {"app": "infer", "tier": "gpu", "pod-template-hash": h}
        assert p.annotations == {"a": "b"}
        assert (p.owner_kind, p.owner_name) == ("ReplicaSet", rs)
        assert p.raw["metadata"]["ownerReferences"][0]["uid"] == stable_uid("ReplicaSet", "serving", rs)
        # pod-level defaulting applies to controller-made pods: the gpu request comes from the limit
        assert p.requests == {"cpu": 8000, "memory": 64 * 2**30, "nvidia.com/gpu": 2}
        assert p.priority == 1000
    assert record["selector"] == {"matchLabels": {"app": "infer", "pod-template-hash": h}}
    assert (record["kind"], record["namespace"], record["name"], record["replicas"]) == (
        "Deployment", "serving", "infer", 3)


def test_expansion_is_deterministic_and_does_not_touch_the_manifest():
    before = yaml.safe_dump(DEPLOYMENT)
    a = expand_workload(DEPLOYMENT, priority_classes=CLASSES)[0]
    b = expand_workload(DEPLOYMENT, priority_classes=CLASSES)[0]
    assert a["pods"] == b["pods"]
    assert yaml.safe_dump(DEPLOYMENT) == before


def test_template_hash_follows_the_template():
    t = DEPLOYMENT["spec"]["template"]
    changed = yaml.safe_load(yaml.safe_dump(t))
    changed["spec"]["containers"][0]["image"] = "vllm:v2"
    assert pod_template_hash(t) == pod_template_hash(yaml.safe_load(yaml.safe_dump(t)))
    assert pod_template_hash(changed) != pod_template_hash(t)


def test_replicas_default_to_one_and_zero_means_none():
    raw = yaml.safe_load(yaml.safe_dump(DEPLOYMENT))
    del raw["spec"]["replicas"]
    assert len(expand_workload(raw, priority_classes=CLASSES)[1]) == 1
    raw["spec"]["replicas"] = 0
    record, pods = expand_workload(raw, priority_classes=CLASSES)
    assert pods == [] and record["pods"] == []


def test_replicaset_owns_its_pods_directly():
    raw = yaml.safe_load("""
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: cache}
spec:
  replicas: 2
  selector: {matchExpressions: [{key: app, operator: In, values: [cache]}]}
  template:
    metadata: {labels: {app: cache}}
    spec: {containers: [{name: c, image: redis}]}
""")
    record, pods = expand_workload(raw)
    assert [p.name for p in pods] == record["pods"]
    for p in pods:
        assert re.fullmatch(f"cache-{CHARS}{{5}}", p.name)
        assert (p.owner_kind, p.owner_name) == ("ReplicaSet", "cache")
        assert p.labels == {"app": "cache"}
        assert p.namespace == "default"
    assert "replicaset" not in record


def job(spec: str) -> dict:
    return yaml.safe_load(f"""
apiVersion: batch/v1
kind: Job
metadata: {{name: train}}
spec:
{spec}
  template:
    metadata: {{labels: {{team: ml}}}}
    spec:
      restartPolicy: Never
      containers: [{{name: c, image: x, resources: {{limits: {{nvidia.com/gpu: 8}}}}}}]
""")


@pytest.mark.parametrize("spec,count", [
    ("  suspend: false", 1),                    # neither set: one pod
    ("  parallelism: 4", 4),                    # work queue: parallelism pods
    ("  parallelism: 4\n  completions: 2", 2),  # never more than the completions left
    ("  completions: 3", 1),                    # parallelism defaults to 1
    ("  parallelism: 0", 0),
    ("  parallelism: 3\n  suspend: true", 0),   # a suspended Job (Kueue's gate) starts nothing
])
def test_job_pod_count(spec, count):
    record, pods = expand_workload(job(spec))
    assert len(pods) == count == len(record["pods"])


def test_job_pods_carry_the_job_labels_and_owner():
    record, pods = expand_workload(job("  parallelism: 2"), first_created=10)
    uid = stable_uid("Job", "default", "train")
    assert record["uid"] == uid
    assert record["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": uid}}
    assert [p.created for p in pods] == [10, 11]
    for p in pods:
        assert re.fullmatch(f"train-{CHARS}{{5}}", p.name)
        assert p.labels == {"team": "ml", "job-name": "train", "batch.kubernetes.io/job-name": "train",
                            "controller-uid": uid, "batch.kubernetes.io/controller-uid": uid}
        assert (p.owner_kind, p.owner_name) == ("Job", "train")
        assert p.requests == {"nvidia.com/gpu": 8}


def test_indexed_job_names_pods_by_index():
    _, pods = expand_workload(job("  completionMode: Indexed\n  completions: 4\n  parallelism: 2"))
    for i, p in enumerate(pods):
        assert re.fullmatch(f"train-{i}-{CHARS}{{5}}", p.name)
        assert p.labels["batch.kubernetes.io/job-completion-index"] == str(i)
        assert p.annotations == {"batch.kubernetes.io/job-completion-index": str(i)}
        assert p.raw["spec"]["hostname"] == f"train-{i}"


def test_job_selector_on_job_name_is_accepted_but_on_other_labels_refused():
    ok = job("  selector: {matchLabels: {job-name: train}}")
    assert len(expand_workload(ok)[1]) == 1
    bad = job("  selector: {matchLabels: {team: ml}}")
    with pytest.raises(InvalidObject) as info:
        expand_workload(bad)
    uid = stable_uid("Job", "default", "train")
    assert str(info.value) == (
        'Job.batch "train" is invalid: spec.selector: Invalid value: {"matchLabels":{"batch.kubernetes.io/'
        f'controller-uid":"{uid}","team":"ml"}}}}: `selector` not auto-generated')


def test_deployment_without_selector():
    raw = yaml.safe_load(yaml.safe_dump(DEPLOYMENT))
    del raw["spec"]["selector"]
    with pytest.raises(InvalidObject) as info:
        expand_workload(raw, priority_classes=CLASSES)
    assert info.value.errors == [
        "spec.selector: Required value",
        'spec.template.metadata.labels: Invalid value: {"app":"infer","tier":"gpu"}: '
        "`selector` does not match template `labels`",
    ]


def test_empty_selector_is_refused():
    raw = yaml.safe_load(yaml.safe_dump(DEPLOYMENT))
    raw["spec"]["selector"] = {}
    with pytest.raises(InvalidObject) as info:
        expand_workload(raw, priority_classes=CLASSES)
    assert info.value.errors == ["spec.selector: Invalid value: {}: empty selector is invalid for deployment"]


def test_template_errors_use_template_paths():
    raw = yaml.safe_load(yaml.safe_dump(DEPLOYMENT))
    raw["spec"]["template"]["spec"]["containers"][0]["resources"] = {"requests": {"nvidia.com/gpu": 1}}
    with pytest.raises(InvalidObject) as info:
        expand_workload(raw, priority_classes=CLASSES)
    assert str(info.value) == (
        'Deployment.apps "infer" is invalid: spec.template.spec.containers[0].resources.limits: Required value: '
        "Limit must be set for non overcommitable resources")


def test_unknown_priority_class_refuses_the_first_pod():
    with pytest.raises(Forbidden) as info:
        expand_workload(DEPLOYMENT)
    record_pod = info.value.name
    assert record_pod.startswith("infer-")
    assert str(info.value) == f'pods "{record_pod}" is forbidden: no PriorityClass with name high was found'
