"""parse_pod: what the API server stores for a pod, in the units the scheduler reads."""

import copy

import pytest
import yaml

from gpu_lab.errors import Forbidden, InvalidObject
from gpu_lab.model.objects import DEFAULT_MEMORY_REQUEST, DEFAULT_MILLI_CPU_REQUEST, HostPort
from gpu_lab.model.parse import NAME_ALPHABET, parse_pod
from gpu_lab.model.validation import quantity_string
from gpu_lab.names import stable_uid


def manifest(text: str) -> dict:
    return yaml.safe_load(text)


GPU_POD = manifest("""
apiVersion: v1
kind: Pod
metadata:
  name: train
  namespace: ml
  labels: {app: train}
  annotations: {note: hi}
spec:
  containers:
  - name: main
    image: pytorch
    resources:
      requests: {cpu: 500m, memory: 1.5Gi}
      limits: {nvidia.com/gpu: 2, memory: 2Gi}
  - name: sidecar
    image: log
""")


def test_units_defaults_and_totals():
    pod = parse_pod(GPU_POD, created=7)
    main, side = pod.containers
    # cpu in millicores, memory in bytes; the gpu request comes from its limit
    assert main.requests == {"cpu": 500, "memory": 1536 * 2**20, "nvidia.com/gpu": 2}
    assert main.limits == {"nvidia.com/gpu": 2, "memory": 2 * 2**30}
    assert main.stated == frozenset({"cpu", "memory"})
    assert side.requests == {} and side.stated == frozenset()
    assert pod.requests == {"cpu": 500, "memory": 1536 * 2**20, "nvidia.com/gpu": 2}
    # the sidecar states nothing, so scoring counts kube-scheduler's stand-ins for it
    assert pod.nonzero_cpu == 500 + DEFAULT_MILLI_CPU_REQUEST
    assert pod.nonzero_memory == 1536 * 2**20 + DEFAULT_MEMORY_REQUEST
    assert (pod.namespace, pod.name, pod.key, pod.created) == ("ml", "train", "ml/train", 7)
    assert pod.uid == stable_uid("ml", "train")
    assert pod.labels == {"app": "train"} and pod.annotations == {"note": "hi"}
    assert pod.scheduler_name == "default-scheduler"
    assert (pod.priority, pod.priority_class_name, pod.preemption_policy) == (0, "", "PreemptLowerPriority")


def test_request_only_for_cpu_counts_as_stated_after_defaulting_from_limits():
    pod = parse_pod(manifest("""
metadata: {name: p}
spec:
  containers:
  - {name: c, image: x, resources: {limits: {cpu: "2", memory: 1Gi}}}
"""))
    assert pod.containers[0].requests == {"cpu": 2000, "memory": 2**30}
    assert pod.containers[0].stated == frozenset({"cpu", "memory"})


def test_explicit_zero_request_is_stated_and_dropped_from_totals():
    pod = parse_pod(manifest("""
metadata: {name: p}
spec:
  containers: [{name: c, image: x, resources: {requests: {cpu: "0"}}}]
"""))
    assert pod.containers[0].stated == frozenset({"cpu"})
    assert pod.requests == {}
    assert pod.nonzero_cpu == 0  # stated zero is not replaced by the default


def test_namespace_and_scheduler_defaults_and_node_name():
    pod = parse_pod(manifest("""
metadata: {name: p}
spec:
  schedulerName: gpu-scheduler
  nodeName: node-1
  containers: [{name: c, image: x}]
"""))
    assert pod.namespace == "default"
    assert pod.scheduler_name == "gpu-scheduler"
    assert pod.node_name == "node-1"


def test_init_containers_and_overhead():
    pod = parse_pod(manifest("""
metadata: {name: p}
spec:
  overhead: {cpu: 250m, memory: 120Mi}
  initContainers:
  - {name: init, image: x, resources: {requests: {cpu: "4", memory: 1Gi}}}
  containers:
  - {name: c, image: x, resources: {requests: {cpu: "1", memory: 2Gi}}}
"""))
    assert [c.name for c in pod.init_containers] == ["init"]
    assert pod.overhead == {"cpu": 250, "memory": 120 * 2**20}
    # max(sum of app containers, largest init container) + overhead
    assert pod.requests == {"cpu": 4000 + 250, "memory": 2 * 2**30 + 120 * 2**20}


def test_tolerations_selectors_affinity_spread_are_kept():
    raw = manifest("""
metadata: {name: p}
spec:
  containers: [{name: c, image: x}]
  nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
  tolerations:
  - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
  - {key: dedicated, value: ml}
  - {operator: Exists, effect: NoExecute, tolerationSeconds: 30}
  affinity:
    podAntiAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - {labelSelector: {matchLabels: {app: x}}, topologyKey: kubernetes.io/hostname}
  topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: topology.kubernetes.io/zone, whenUnsatisfiable: ScheduleAnyway}
""")
    before = copy.deepcopy(raw)
    pod = parse_pod(raw)
    assert pod.node_selector == {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}
    t0, t1, t2 = pod.tolerations
    assert (t0.key, t0.operator, t0.value, t0.effect) == ("nvidia.com/gpu", "Exists", "", "NoSchedule")
    assert (t1.key, t1.operator, t1.value, t1.effect) == ("dedicated", "Equal", "ml", "")
    assert (t2.key, t2.operator, t2.toleration_seconds) == ("", "Exists", 30)
    assert pod.affinity == raw["spec"]["affinity"]
    assert pod.topology_spread_constraints == raw["spec"]["topologySpreadConstraints"]
    # copies, not aliases: later edits of the manifest do not reach the pod
    raw["spec"]["affinity"]["podAntiAffinity"] = {}
    assert pod.affinity["podAntiAffinity"]
    assert pod.raw is raw
    assert before["spec"]["affinity"] != raw["spec"]["affinity"]


def test_parse_does_not_mutate_the_manifest():
    raw = copy.deepcopy(GPU_POD)
    parse_pod(raw)
    assert raw == GPU_POD  # limits did not leak into requests of the caller's dict


def test_host_ports_default_protocol_and_ip_and_include_sidecars_only():
    pod = parse_pod(manifest("""
metadata: {name: p}
spec:
  initContainers:
  - {name: sidecar, image: x, restartPolicy: Always, ports: [{containerPort: 9000, hostPort: 9000}]}
  - {name: setup, image: x, ports: [{containerPort: 9001, hostPort: 9001}]}
  containers:
  - name: c
    image: x
    ports:
    - {containerPort: 80, hostPort: 8080}
    - {containerPort: 53, hostPort: 53, protocol: UDP, hostIP: 10.0.0.1}
    - {containerPort: 81}
"""))
    assert pod.host_ports == [HostPort(9000), HostPort(8080), HostPort(53, "UDP", "10.0.0.1")]


def test_host_network_publishes_container_ports():
    pod = parse_pod(manifest("""
metadata: {name: p}
spec:
  hostNetwork: true
  containers: [{name: c, image: x, ports: [{containerPort: 8443}]}]
"""))
    assert pod.host_ports == [HostPort(8443, "TCP", "0.0.0.0")]


def test_owner_reference_prefers_the_controller():
    pod = parse_pod(manifest("""
metadata:
  name: p
  ownerReferences:
  - {apiVersion: v1, kind: ConfigMap, name: cm}
  - {apiVersion: apps/v1, kind: ReplicaSet, name: web-abc, controller: true}
spec: {containers: [{name: c, image: x}]}
"""))
    assert (pod.owner_kind, pod.owner_name) == ("ReplicaSet", "web-abc")
    plain = parse_pod(manifest("""
metadata:
  name: q
  ownerReferences: [{apiVersion: apps/v1, kind: StatefulSet, name: db}]
spec: {containers: [{name: c, image: x}]}
"""))
    assert (plain.owner_kind, plain.owner_name) == ("StatefulSet", "db")


CLASSES = {
    "high": {"value": 1000, "preemptionPolicy": "Never"},
    "low": {"value": 10},
}


def test_priority_class_sets_priority_and_policy():
    pod = parse_pod(manifest("""
metadata: {name: p}
spec: {priorityClassName: high, containers: [{name: c, image: x}]}
"""), priority_classes=CLASSES)
    assert (pod.priority_class_name, pod.priority, pod.preemption_policy) == ("high", 1000, "Never")
    low = parse_pod(manifest("""
metadata: {name: q}
spec: {priorityClassName: low, containers: [{name: c, image: x}]}
"""), priority_classes=CLASSES)
    assert (low.priority, low.preemption_policy) == (10, "PreemptLowerPriority")


def test_global_default_applies_when_no_class_is_named():
    classes = {**CLASSES, "normal": {"value": 100, "globalDefault": True}}
    pod = parse_pod(manifest("metadata: {name: p}\nspec: {containers: [{name: c, image: x}]}"),
                    priority_classes=classes)
    assert (pod.priority_class_name, pod.priority) == ("normal", 100)


def test_system_classes_always_exist():
    pod = parse_pod(manifest("""
metadata: {name: p, namespace: kube-system}
spec: {priorityClassName: system-node-critical, containers: [{name: c, image: x}]}
"""))
    assert pod.priority == 2000001000


def test_matching_priority_in_spec_is_accepted_and_a_different_one_refused():
    ok = parse_pod(manifest("""
metadata: {name: p}
spec: {priorityClassName: high, priority: 1000, containers: [{name: c, image: x}]}
"""), priority_classes=CLASSES)
    assert ok.priority == 1000
    with pytest.raises(Forbidden) as info:
        parse_pod(manifest("""
metadata: {name: p}
spec: {priorityClassName: low, preemptionPolicy: Never, containers: [{name: c, image: x}]}
"""), priority_classes=CLASSES)
    assert str(info.value) == (
        'pods "p" is forbidden: the string value of PreemptionPolicy (Never) must not be provided in pod spec; '
        "priority admission controller computed PreemptLowerPriority from the given PriorityClass name")


def test_admission_runs_before_validation():
    # the API server's Priority plugin refuses before validation sees the bad quantity
    with pytest.raises(Forbidden):
        parse_pod(manifest("""
metadata: {name: p}
spec: {priorityClassName: nope, containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 0.5}}}]}
"""))


def test_generate_name_gets_a_stable_suffix():
    raw = manifest("metadata: {generateName: worker-}\nspec: {containers: [{name: c, image: x}]}")
    a, b = parse_pod(raw, created=3), parse_pod(raw, created=3)
    assert a.name == b.name
    assert a.name.startswith("worker-") and len(a.name) == len("worker-") + 5
    assert set(a.name[len("worker-"):]) <= set(NAME_ALPHABET)
    assert parse_pod(raw, created=4).name != a.name


def test_all_errors_of_a_pod_are_reported_together():
    with pytest.raises(InvalidObject) as info:
        parse_pod(manifest("""
metadata: {name: Bad_Name}
spec:
  nodeSelector: {zone: "a b"}
  containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1.5}}}]
"""))
    fields = [e.split(":")[0] for e in info.value.errors]
    assert fields == ["metadata.name", "spec.containers[0].resources.limits[nvidia.com/gpu]",
                      "spec.containers[0].resources.requests[nvidia.com/gpu]", "spec.nodeSelector"]


# Quantity.String() of each input, as printed by k8s.io/apimachinery v0.37.2.
GO_QUANTITY_STRINGS = [
    ("0.5", "500m"), ("500m", "500m"), ("2", "2"), ("1000", "1k"), ("1.5", "1500m"),
    ("1.5Gi", "1536Mi"), ("1024Mi", "1Gi"), ("16Gi", "16Gi"), ("1e3", "1e3"), ("1E3", "1E3"),
    ("-1", "-1"), ("-100m", "-100m"), ("0.0000000001", "1n"), ("100Mi", "100Mi"), ("2.0", "2"),
    ("+500m", "+500m"), ("1000m", "1"), ("0", "0"), ("0.1", "100m"), ("12345678", "12345678"),
    ("1Ki", "1Ki"), ("1023Ki", "1023Ki"), ("1.5e3", "1500"), ("0.5Gi", "512Mi"),
    (0.5, "500m"), (2, "2"), (2.0, "2"), (1000, "1k"),
]


@pytest.mark.parametrize("raw,want", GO_QUANTITY_STRINGS)
def test_quantity_string_matches_apimachinery(raw, want):
    assert quantity_string(raw) == want
