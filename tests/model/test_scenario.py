"""Scenario loading: documents in, validated records out, nothing half-applied."""

from pathlib import Path

import pytest
import yaml

from gpu_lab.errors import GpuLabError
from gpu_lab.model.documents import load_documents
from gpu_lab.model.objects import Node, Pod
from gpu_lab.model.scenario import Scenario, load_scenario, parse_scenario

POD = """apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:
{extra}  containers: [{{name: c, image: x, resources: {{limits: {{nvidia.com/gpu: 1}}}}}}]
"""
HIGH = "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: high}\nvalue: 1000\n"


def pod(name: str, extra: str = "") -> str:
    return POD.format(name=name, extra=extra)


# ------------------------------------------------------------- load_documents


def test_yaml_string_with_empty_documents():
    docs = load_documents("---\n" + pod("a") + "---\n# just a comment\n---\n" + pod("b") + "---\n")
    assert [d["metadata"]["name"] for d in docs] == ["a", "b"]


def test_path_and_path_string(tmp_path: Path):
    path = tmp_path / "s.yaml"
    path.write_text(pod("a") + "---\n" + pod("b"))
    assert load_documents(path) == load_documents(str(path)) == load_documents(path.read_text())


def test_dicts_and_lists_pass_through_and_v1_list_unpacks():
    doc = yaml.safe_load(pod("a"))
    assert load_documents(doc) == [doc]
    assert load_documents([doc, None, doc]) == [doc, doc]
    listed = {"apiVersion": "v1", "kind": "List", "items": [doc, yaml.safe_load(pod("b"))]}
    assert [d["metadata"]["name"] for d in load_documents(listed)] == ["a", "b"]


def test_a_document_must_be_a_mapping():
    with pytest.raises(GpuLabError) as info:
        load_documents(pod("a") + "---\n- just\n- a list\n")
    assert str(info.value) == "error parsing <string>: a document must be a mapping, got list (line 7)"


def test_yaml_errors_are_one_line_with_the_line_number():
    with pytest.raises(GpuLabError) as info:
        load_documents("a: 1\nb: [1, 2\nc: 3\n")
    text = str(info.value)
    assert text.startswith("error parsing <string>: ") and text.endswith("(line 3)")
    assert "\n" not in text


# ------------------------------------------------------------- parse_scenario

EARLY = pod("early", "  priorityClassName: high\n")
FULL = f"""
{EARLY}---
apiVersion: v1
kind: Namespace
metadata: {{name: ml}}
---
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {{name: h100}}
spec: {{count: 2, gpu: {{model: H100-80GB, count: 8}}, cpu: "96", memory: 1024Gi}}
---
apiVersion: v1
kind: Node
metadata: {{name: cpu-0, labels: {{kind: cpu}}}}
status: {{capacity: {{cpu: "16", memory: 64Gi}}}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: web, namespace: ml}}
spec:
  replicas: 2
  selector: {{matchLabels: {{app: web}}}}
  template:
    metadata: {{labels: {{app: web}}}}
    spec: {{containers: [{{name: c, image: x}}]}}
---
{pod("late")}---
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles: [{{schedulerName: default-scheduler}}]
---
{HIGH}"""


def test_every_kind_lands_in_its_place():
    sc = load_scenario(FULL, first_created=100)
    assert isinstance(sc, Scenario)
    assert [n.name for n in sc.nodes] == ["h100-0", "h100-1", "cpu-0"]
    assert all(isinstance(n, Node) for n in sc.nodes)
    assert sc.nodes[0].allocatable["nvidia.com/gpu"] == 8 and sc.nodes[0].pool == "h100"
    assert sc.nodes[2].allocatable["cpu"] == 16000
    assert [p["metadata"]["name"] for p in sc.node_pools] == ["h100"]
    assert sc.namespaces == ["ml"]
    assert sc.scheduler_config["profiles"] == [{"schedulerName": "default-scheduler"}]
    assert list(sc.priority_classes) == ["high"]
    assert sc.priority_classes["high"]["preemptionPolicy"] == "PreemptLowerPriority"
    assert sc.priority_classes["high"]["globalDefault"] is False
    assert len(sc.documents) == 8
    # pods in document order, the Deployment's pods where the Deployment stands
    assert all(isinstance(p, Pod) for p in sc.pods)
    names = [p.name for p in sc.pods]
    assert names[0] == "early" and names[-1] == "late"
    assert all(n.startswith("web-") for n in names[1:3])
    assert [p.created for p in sc.pods] == [100, 101, 102, 103]
    # the PriorityClass is last in the file, yet the first pod resolved it
    assert sc.pods[0].priority == 1000
    (web,) = sc.workloads
    assert (web["kind"], web["namespace"], web["name"]) == ("Deployment", "ml", "web")
    assert web["pods"] == names[1:3]
    assert web["raw"]["metadata"]["name"] == "web"


def test_known_priority_classes_resolve_and_stay_untouched():
    known = {"high": {"value": 7, "preemptionPolicy": "PreemptLowerPriority"}}
    sc = parse_scenario(load_documents(pod("a", "  priorityClassName: high\n")), known_priority_classes=known)
    assert sc.pods[0].priority == 7
    assert sc.priority_classes == {}
    assert known == {"high": {"value": 7, "preemptionPolicy": "PreemptLowerPriority"}}


def test_global_default_class_in_the_same_scenario():
    docs = HIGH.replace("value: 1000", "value: 1000\nglobalDefault: true") + "---\n" + pod("a")
    assert load_scenario(docs).pods[0].priority_class_name == "high"


def test_a_second_global_default_against_a_known_one():
    known = {"base": {"value": 1, "globalDefault": True}}
    with pytest.raises(GpuLabError) as info:
        load_scenario(HIGH + "globalDefault: true\n", known_priority_classes=known)
    assert str(info.value) == ('priorityclasses.scheduling.k8s.io "high" is forbidden: PriorityClass base is '
                               "already marked as default. Only one default can exist")


@pytest.mark.parametrize("docs,message", [
    (HIGH + "---\n" + HIGH, 'priorityclasses.scheduling.k8s.io "high" already exists'),
    ("apiVersion: v1\nkind: Namespace\nmetadata: {name: ml}\n---\napiVersion: v1\nkind: Namespace\n"
     "metadata: {name: ml}\n", 'namespaces "ml" already exists'),
    ("apiVersion: v1\nkind: Node\nmetadata: {name: h100-0}\n---\napiVersion: gpulab.dev/v1alpha1\n"
     "kind: NodePool\nmetadata: {name: h100}\nspec: {count: 1, cpu: '8', memory: 8Gi}\n", 'nodes "h100-0" already exists'),
    ("apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    spec:\n"
     "      restartPolicy: Never\n      containers: [{name: c, image: x}]\n---\n"
     "apiVersion: batch/v1\nkind: Job\nmetadata: {name: j}\nspec:\n  template:\n    spec:\n"
     "      restartPolicy: Never\n      containers: [{name: c, image: x}]\n", 'jobs.batch "j" already exists'),
    ("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n---\n"
     "apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n",
     "KubeSchedulerConfiguration: a scenario holds at most one (kube-scheduler reads a single --config file)"),
    ("apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: system-mine}\nvalue: 5\n",
     'PriorityClass.scheduling.k8s.io "system-mine" is invalid: metadata.name: Forbidden: priority class names '
     "with 'system-' prefix are reserved for system use only. error: system-mine is not a known system "
     "priority class"),
    ("apiVersion: v1\nkind: Namespace\nmetadata: {name: team.a}\n",
     'Namespace "team.a" is invalid: metadata.name: Invalid value: "team.a": must not contain dots'),
])
def test_scenario_level_refusals(docs, message):
    with pytest.raises(GpuLabError) as info:
        load_scenario(docs)
    assert str(info.value) == message


def test_same_pod_name_in_two_namespaces_is_fine():
    other = pod("a").replace("metadata: {name: a}", "metadata: {name: a, namespace: ml}")
    sc = load_scenario(pod("a") + "---\n" + other)
    assert [p.key for p in sc.pods] == ["default/a", "ml/a"]


def test_an_error_anywhere_returns_nothing():
    known: dict = {}
    with pytest.raises(GpuLabError):
        parse_scenario(load_documents(HIGH + "---\n" + pod("a") + "---\n" + pod("Bad_Name")),
                       known_priority_classes=known)
    assert known == {}


def test_kinds_are_checked_before_any_object():
    # a bad kind late in the file wins over a bad pod early: kubectl maps every kind first
    with pytest.raises(GpuLabError) as info:
        load_scenario(pod("Bad_Name") + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: s}\n")
    assert str(info.value) == 'no matches for kind "ConfigMap" in version "v1"'


def test_lesson_and_golden_scenarios_load():
    root = Path(__file__).parents[2]
    paths = sorted((root / "tests" / "scenarios").glob("*.yaml")) + sorted((root / "lessons").glob("**/*.yaml"))
    paths = [p for p in paths if not p.name.endswith(".expected.yaml")]
    assert paths
    for path in paths:
        sc = load_scenario(path)
        assert sc.nodes or sc.pods or sc.dra, path  # a later step may add only DRA objects


def test_a_long_one_line_manifest_is_yaml_not_a_path():
    doc = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n", "labels": {"k": "v" * 60}},
           "x": "y" * 400}
    assert load_documents(yaml.safe_dump(doc, default_flow_style=True, width=10_000).strip()) == [doc]


def test_cluster_scoped_objects_ignore_a_namespace():
    sc = load_scenario(HIGH.replace("{name: high}", "{name: high, namespace: ml}"))
    assert list(sc.priority_classes) == ["high"]
