"""Bad arguments to the Python API, generated names at scale, and the one reading path."""

from __future__ import annotations

import math
import re
import time

import pytest
import yaml

import gpu_lab
from gpu_lab.model import yamlread
from gpu_lab.model.documents import load_documents
from gpu_lab.model.parse import NAME_ALPHABET, NameGenerator
from gpu_lab.model.scenario import MAX_PODS, parse_scenario

NODE = """
apiVersion: v1
kind: Node
metadata: {name: n1}
status: {capacity: {cpu: "8", memory: 32Gi, nvidia.com/gpu: "8"}}
"""


def deployment(replicas: int, name: str = "infer") -> dict:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
            "spec": {"replicas": replicas, "selector": {"matchLabels": {"app": name}},
                     "template": {"metadata": {"labels": {"app": name}},
                                  "spec": {"containers": [{"name": "c", "image": "x", "resources": {
                                      "limits": {"nvidia.com/gpu": 1}}}]}}}}


def job(pods: int) -> dict:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train"},
            "spec": {"parallelism": pods, "completions": pods,
                     "template": {"spec": {"restartPolicy": "Never", "containers": [
                         {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}}


@pytest.fixture
def lab():
    lab = gpu_lab.connect("sim")
    lab.apply(NODE)
    return lab


# ------------------------------------------------------------------ arguments


@pytest.mark.parametrize("call,message", [
    (lambda lab: lab.advance("1h"), "advance: seconds must be a number (e.g. 3600 for an hour) or None, not '1h'"),
    (lambda lab: lab.advance(-5), "advance: seconds must be 0 or more, not -5 (the clock only moves forward)"),
    (lambda lab: lab.advance(math.nan), "advance: seconds must be finite, not nan"),
    (lambda lab: lab.advance(math.inf), "advance: seconds must be finite, not inf"),
    (lambda lab: lab.apply(42), "cannot read a scenario from int"),
    (lambda lab: lab.apply(None), "cannot read a scenario from NoneType"),
    (lambda lab: lab.apply([]), "no objects passed to apply"),
    (lambda lab: lab.apply(""), "no objects passed to apply"),
    (lambda lab: lab.label_node(1, {"a": "b"}), "label_node: node must be its name (a string), not 1"),
    (lambda lab: lab.label_node("n1", "a=b"), "label_node: labels must be a dict"),
    (lambda lab: lab.label_node("n1", {"bad key": "x"}), 'Node "n1" is invalid: metadata.labels: Invalid value: "bad key"'),
    (lambda lab: lab.label_node("n1", {"a": "x" * 64}), 'Node "n1" is invalid: metadata.labels: Invalid value: "xxx'),
    (lambda lab: lab.label_node("n1", {"a": 1}), 'Node "n1" is invalid: metadata.labels: Invalid value: 1: must be a string'),
    (lambda lab: lab.label_node("n1", {1: "a"}), 'Node "n1" is invalid: metadata.labels: Invalid value: 1: must be a string key'),
    (lambda lab: lab.label_node("n1", {"a": "b"}, evict="yes"), "label_node: evict must be True or False"),
    (lambda lab: lab.cordon(None), "cordon: node must be its name (a string), not None"),
    (lambda lab: lab.cordon("n1", "no"), "cordon: unschedulable must be True or False, not 'no'"),
    (lambda lab: lab.delete(3), 'delete: pod must be "namespace/name" or a name (a string), not 3'),
    (lambda lab: lab.kill_plugin(["n1"]), "kill_plugin: node must be its name (a string), not ['n1']"),
    (lambda lab: lab.restart_plugin(None), "restart_plugin: node must be its name (a string), not None"),
    (lambda lab: lab.explain(None), "explain: pod must be"),
])
def test_wrong_arguments_are_one_line_errors(lab, call, message):
    before = lab.now
    with pytest.raises(gpu_lab.GpuLabError) as info:
        call(lab)
    assert str(info.value).startswith(message)
    assert "\n" not in str(info.value)
    assert lab.now == before  # nothing moved


def test_a_refused_label_changes_nothing(lab):
    with pytest.raises(gpu_lab.InvalidObject):
        lab.label_node("n1", {"good": "yes", "bad key": "x"})
    assert "good" not in lab.describe_node("n1").labels


def test_python_objects_with_non_string_label_keys_are_refused():
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": {1: "a"}},
           "spec": {"containers": [{"name": "c", "image": "x"}]}}
    with pytest.raises(gpu_lab.InvalidObject) as info:
        gpu_lab.connect("sim").apply(pod)
    assert str(info.value) == 'Pod "p" is invalid: metadata.labels: Invalid value: 1: must be a string key (quote it in YAML)'


def test_explain_of_a_pod_the_scheduler_never_saw_prints_no_empty_table():
    lab = gpu_lab.connect("sim")
    lab.apply(NODE + "---\n" + "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n"
              "spec: {nodeName: n1, containers: [{name: c, image: x}]}\n")
    text = str(lab.explain("p"))
    assert "Empty DataFrame" not in text and "spec.nodeName is set" in text
    assert "Empty DataFrame" not in lab.explain("p")._repr_html_()


# ------------------------------------------------------------- generated names


def test_generated_names_use_the_api_servers_alphabet_and_follow_the_seed():
    def names(seed):
        lab = gpu_lab.connect("sim", seed=seed)
        lab.apply([deployment(50)])
        return list(lab.pods()["name"])

    a, b, c = names(0), names(0), names(1)
    assert a == b and a != c
    assert all(re.fullmatch(rf"infer-[{NAME_ALPHABET}]{{10}}-[{NAME_ALPHABET}]{{5}}", n) for n in a)
    assert len(set(a)) == 50


def test_a_collision_is_drawn_again():
    gen = NameGenerator(0)
    first = gen.generate("default", "web-")
    again = NameGenerator(0, taken=lambda ns, name: name == first)
    assert again.generate("default", "web-") != first


def test_names_already_in_the_session_are_not_reused():
    lab = gpu_lab.connect("sim", seed=0)
    lab.apply([deployment(3)])
    taken = list(lab.pods()["name"])
    lab.delete(taken[0])  # the ReplicaSet controller replaces it under a new name
    assert taken[0] not in set(lab.pods()["name"]) and len(lab.pods()) == 3
    lab.apply([deployment(3, "other")])  # other prefixes never collide, and the same one retries
    pods = lab.pods()
    assert len(set(pods["name"])) == len(pods) == 6


def test_a_failed_apply_leaves_the_names_as_they_were():
    lab = gpu_lab.connect("sim", seed=0)
    with pytest.raises(gpu_lab.GpuLabError):
        lab.apply([deployment(3), {"apiVersion": "v1", "kind": "Bogus"}])
    lab.apply([deployment(3)])
    fresh = gpu_lab.connect("sim", seed=0)
    fresh.apply([deployment(3)])
    assert list(lab.pods()["name"]) == list(fresh.pods()["name"])


def test_generate_name_prefixes_are_truncated_like_the_api_server():
    name = NameGenerator(0).generate("default", "x" * 80)
    assert len(name) == 63 and name.startswith("x" * 58)


def test_100000_replicas_never_fail_on_names():
    t0 = time.monotonic()
    sc = parse_scenario([deployment(100_000)])
    assert len({p.name for p in sc.pods}) == 100_000
    assert time.monotonic() - t0 < 60


def test_10000_replica_deployment_and_3368_pod_job_run_on_the_sim():
    lab = gpu_lab.connect("sim", record=False)
    lab.apply({"apiVersion": "gpulab.dev/v1alpha1", "kind": "NodePool", "metadata": {"name": "h"},
               "spec": {"count": 2, "gpu": {"model": "H100-80GB", "count": 8}}})
    lab.apply([deployment(10_000), job(3368)])
    pods = lab.schedule()
    assert len(pods) == 13_368 and pods["name"].is_unique
    assert (pods["phase"] == "Running").sum() == 16


def test_a_count_past_the_budget_is_refused_before_any_pod_is_made():
    with pytest.raises(gpu_lab.GpuLabError, match="more than the simulator holds"):
        parse_scenario([deployment(MAX_PODS + 1)])


# --------------------------------------------------------------- reading YAML


def test_the_c_loader_is_used_where_libyaml_is_installed():
    assert bool(getattr(yaml, "__with_libyaml__", False)) == yamlread.C_LOADER


def test_scalars_read_as_kubectl_reads_them():
    doc = load_documents("apiVersion: v1\nkind: Pod\nmetadata:\n  name: p\n  labels: {1: a, 2.5: b}\n"
                         "  annotations: {when: 2024-01-02}\nspec: {true: x}\n")[0]
    assert doc["metadata"]["labels"] == {"1": "a", "2.5": "b"}
    assert doc["spec"] == {"true": "x"}
    assert doc["metadata"]["annotations"] == {"when": "2024-01-02"}
    # 1 and true are one Python key but two YAML keys: go-yaml keeps both, and so do we,
    # whether the document takes the fast builder or (with an alias) the full constructor
    for text in ("labels: {1: a, true: c}\n", "x: &x 1\ny: *x\nlabels: {1: a, true: c}\n"):
        assert load_documents(text)[0]["labels"] == {"1": "a", "true": "c"}


_TRICKY = [
    "a: 1\nb: 1.5\nc: true\nd: ~\ne: ''\nf: '1'\ng: 0x1F\nh: 1_000\ni: .inf\nj: yes\nk: 2024-01-02\n",
    "labels: {1: a, 2.5: b, true: c, 1e3: d}\nlist: [1, 'two', {x: [null]}]\n",
    "base: &b {x: 1}\nmerged: {<<: *b, y: 2}\n",  # aliases and a merge key: the full constructor
    "plain: {<<: {x: 1}, y: 2}\n",  # a merge key without an alias
    "tagged: !!binary aGVsbG8=\nset: !!set {a, b}\n",
    "stamp: !!timestamp 2024-01-02\nstr: !!str 12\nint: !!int '7'\n",
    "dup: 1\ndup: 2\n1: x\n'1': y\n",
    "? [a, b]\n: complex key\n",
    "null_key: {~: v}\n",
    "seq: !!seq [1]\nmap: !!map {a: 1}\n",
]


@pytest.mark.parametrize("text", _TRICKY)
def test_the_fast_builder_reads_what_the_full_constructor_reads(text):
    # yamlread._built takes what it can, the rest goes the full way: the same values or
    # the same error either way
    def full():
        loader = yamlread.Loader(text)
        try:
            return loader.get_single_data()
        finally:
            loader.dispose()

    try:
        expected = full()
    except yaml.YAMLError as err:
        with pytest.raises(gpu_lab.GpuLabError, match=re.escape(" ".join(str(err.problem or err).split())[:40])):
            yamlread.parse_documents(text, "t.yaml")
        return
    assert yamlread.parse_documents(text, "t.yaml")[0][0] == expected


def test_utf16_and_utf8_byte_order_marks_are_read(tmp_path):
    text = NODE.strip() + "\n"
    for i, data in enumerate([text.encode("utf-16"), b"\xef\xbb\xbf" + text.encode()]):
        path = tmp_path / f"n{i}.yaml"
        path.write_bytes(data)
        assert load_documents(path)[0]["metadata"]["name"] == "n1"


def test_aliases_in_moderation_are_fine():
    docs = load_documents("apiVersion: v1\nkind: Pod\nmetadata: {name: p, labels: &l {app: a}, "
                          "annotations: *l}\nspec: {containers: [{name: c, image: x}]}\n")
    assert docs[0]["metadata"]["annotations"] == {"app": "a"}


def test_an_object_over_the_request_limit_is_refused():
    big = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "x" * (3 * 2**20)}}
    with pytest.raises(gpu_lab.GpuLabError, match="Request entity too large: limit is 3145728"):
        load_documents(yaml.safe_dump(big))


def test_scheduler_config_as_a_dict_is_decoded_strictly():
    lab = gpu_lab.connect("sim")
    with pytest.raises(gpu_lab.GpuLabError) as info:
        lab.apply({"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
                   "profiles": [{"schedulerName": "a", "percentageOfNodesToScore": 200}]})
    assert str(info.value) == ("KubeSchedulerConfiguration: profiles[0].percentageOfNodesToScore: "
                               "Invalid value: 200: not in valid range [0-100]")


@pytest.mark.parametrize("text", [
    "a: y\nb: ~\nc: [~, ~, ~]\nd: {x, y, z}\n",
    "s: \"\U0001F600\U0001F600\U0001F600\"\nt: \U0001F600\n",
    "q: \"\\U0001F600\\x01\\t\"\n",
    "? a\n? b\nk:\n",
])
def test_a_documents_json_is_at_most_json_bytes_per_char_times_its_text(text):
    # the read measures a document's JSON only where its text could reach the request limit
    import json

    from gpu_lab.model.documents import JSON_BYTES_PER_CHAR

    (doc, _, span), = yamlread.parse_documents(text, "t.yaml")
    size = len(json.dumps(doc, separators=(",", ":"), default=str).encode())
    assert size <= JSON_BYTES_PER_CHAR * span


def test_astral_characters_past_the_request_limit_are_refused():
    # 300,000 characters of text, 3.6 MB of JSON: measured, and refused
    text = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: big}\ndata: {x: \"" + "\U0001F600" * 300_000 + "\"}\n"
    with pytest.raises(gpu_lab.GpuLabError, match="Request entity too large"):
        load_documents(text)
