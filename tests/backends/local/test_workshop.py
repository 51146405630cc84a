"""``gpu-lab workshop``: argument errors and pieces without a cluster, then the isolation a
participant gets, proven on a real local control plane (etcd, kube-apiserver with RBAC,
kube-controller-manager, kube-scheduler) in a private lab that is purged afterwards.

The participant's side always talks through the kubeconfig file provision wrote (its
ServiceAccount token, nothing of the admin's): what that file can do is what a participant
can do.
"""

from __future__ import annotations

import base64
import json
import stat
import time
from pathlib import Path

import pytest
import yaml
from realcluster import require_controlplane

from gpu_lab import workshop as w
from gpu_lab.backends.local.cluster import LocalCluster
from gpu_lab.cli import main as cli_main
from gpu_lab.kube import ApiError, KubeClient, NotFound
from gpu_lab.kube import kubeconfig as kc

LAB = "workshop"


def gpu_pod(name: str, gpus: int) -> dict:
    res = {"limits": {"nvidia.com/gpu": gpus}} if gpus else {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": res}]}}


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err, err
    return err


# =========================================================================== no cluster


@pytest.mark.parametrize(("argv", "says"), [
    (["provision", "--out", "d"], "--participants"),
    (["provision", "--participants", "two", "--out", "d"], "invalid int value"),
    (["provision", "--participants", "0", "--out", "d"], "from 1 to"),
    (["provision", "--participants", "2", "--gpus-per-participant", "-1", "--out", "d"],
     ">= 0"),
    (["provision", "--participants", "2", "--out", "d", "--token-hours", "0.01"],
     "10 minutes"),
    (["provision", "--participants", "2"], "--out"),
    (["provision", "--participants", "2", "--out", "d", "--backend", "kind"],
     "kind lab 'default' has no kubeconfig"),
    (["provision", "--participants", "2", "--out", "d", "--backend", "aws"],
     "use local, kind, kubeconfig"),
    (["provision", "--participants", "2", "--out", "d", "--name", "Bad_Name"],
     "invalid workshop name"),
    (["status", "--kubeconfig", "x"], "--backend kubeconfig"),
    (["status", "--backend", "kubeconfig", "--kubeconfig", "/nonexistent/kubeconfig"],
     "does not exist"),
    (["frobnicate"], "invalid choice"),
])
def test_bad_input_is_one_line_and_exit_2(argv, says, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("GPU_LAB_HOME", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    assert cli_main(["workshop", *argv]) == 2
    assert says in one_line_error(capsys)
    assert not (tmp_path / "d").exists()  # nothing was written


def test_out_that_is_a_file_is_refused_before_the_cluster(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("GPU_LAB_HOME", str(tmp_path))
    (tmp_path / "f").write_text("")
    assert cli_main(["workshop", "provision", "--participants", "1", "--out",
                     str(tmp_path / "f")]) == 2
    assert "is not a directory" in one_line_error(capsys)


def test_no_running_lab_is_a_cluster_failure_exit_1(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("GPU_LAB_HOME", str(tmp_path))
    assert cli_main(["workshop", "status", "--name", "nolab"]) == 1
    assert "gpu-lab up" in one_line_error(capsys)


def test_help_and_no_arguments(capsys):
    assert cli_main(["workshop", "--help"]) == 0
    assert "provision" in capsys.readouterr().out
    assert cli_main(["workshop"]) == 2
    assert cli_main(["workshop", "provision", "--help"]) == 0
    assert "--gpus-per-participant" in capsys.readouterr().out


class FakeResponse:
    def __init__(self, doc):
        self.doc = doc

    def json(self):
        return self.doc


class FakeDiscovery:
    def __init__(self, docs: dict):
        self.docs = docs

    def request(self, method, path, **_kw):
        assert method == "GET"
        return FakeResponse(self.docs.get(path, {}))


def test_kueue_detection_reads_api_discovery():
    core = {"/apis": {"groups": [{"name": "apps", "preferredVersion": {"version": "v1"}}]}}
    assert w.detect_kueue(FakeDiscovery(core)) is None
    kueue_group = {"name": "kueue.x-k8s.io", "preferredVersion": {"version": "v1beta1"},
                   "versions": [{"version": "v1beta1"}]}
    half = {"/apis": {"groups": [kueue_group]},
            "/apis/kueue.x-k8s.io/v1beta1": {"resources": [{"name": "workloads"}]}}
    assert w.detect_kueue(FakeDiscovery(half)) is None  # no queues served: not usable
    full = {"/apis": {"groups": [kueue_group]},
            "/apis/kueue.x-k8s.io/v1beta1": {"resources": [
                {"name": "localqueues"}, {"name": "clusterqueues"}, {"name": "localqueues/status"}]}}
    assert w.detect_kueue(FakeDiscovery(full)) == "v1beta1"


def test_kueue_objects_share_one_cluster_queue():
    ws = w.Workshop(client=None, name="demo")
    flavor, cq = w.kueue_objects(ws, "v1beta1", [1, 2, 3], 2)
    assert flavor["kind"] == "ResourceFlavor" and cq["kind"] == "ClusterQueue"
    assert cq["metadata"]["name"] == "gpu-lab-demo"
    assert cq["spec"]["namespaceSelector"] == {"matchLabels": {w.WORKSHOP_LABEL: "demo"}}
    quotas = {r["name"]: r["nominalQuota"] for r in cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"]}
    assert quotas["nvidia.com/gpu"] == "6"
    lq = w.local_queue(ws, "v1beta1", 3)
    assert lq["metadata"] == {"name": "workshop", "namespace": "participant-3",
                              "labels": {**w._labels(ws, 3)}}
    assert lq["spec"] == {"clusterQueue": "gpu-lab-demo"}


def test_participant_objects_grant_nothing_cluster_wide():
    ws = w.Workshop(client=None, name="demo")
    objs = w.participant_objects(ws, 4, 3)
    kinds = [o["kind"] for o in objs]
    assert kinds == ["Namespace", "ResourceQuota", "ServiceAccount", "Role", "RoleBinding"]
    assert "ClusterRole" not in kinds and "ClusterRoleBinding" not in kinds
    assert objs[1]["spec"]["hard"] == {"requests.nvidia.com/gpu": "3"}
    assert all(o["metadata"].get("namespace") == "participant-4" for o in objs[1:])
    granted = {r for rule in objs[3]["rules"] for r in rule["resources"]}
    assert not granted & {"nodes", "namespaces", "roles", "rolebindings", "secrets"}
    quota_rule = next(r for r in objs[3]["rules"] if "resourcequotas" in r["resources"])
    assert set(quota_rule["verbs"]) == {"get", "list", "watch"}  # cannot raise their own quota


def test_pod_gpus_and_token_claims():
    pod = gpu_pod("p", 2)
    pod["spec"]["initContainers"] = [{"name": "i", "resources": {"requests": {"nvidia.com/gpu": "3"}}}]
    assert w._pod_gpus(pod) == 3
    assert w._pod_gpus(gpu_pod("q", 0)) == 0
    claims = {"sub": "system:serviceaccount:participant-1:learner", "exp": 123}
    token = "h." + base64.urlsafe_b64encode(json.dumps(claims).encode()).decode().rstrip("=") + ".s"
    assert w._jwt_claims(token) == claims
    assert w._jwt_claims("garbage") == {}


def test_status_table_text():
    df = w.pd.DataFrame([
        {"participant": 1, "namespace": "participant-1", "running": 1, "pending": 1,
         "gpus_requested": 2, "gpu_quota": 2, "pods": "a(Running, 1 gpu), b(Pending, 1 gpu)"},
        {"participant": 2, "namespace": "participant-2", "running": 0, "pending": 0,
         "gpus_requested": 0, "gpu_quota": None, "pods": ""},
    ], columns=w.STATUS_COLUMNS)
    text = w._table(df)
    assert "2 / 2" in text and "0 / -" in text
    assert w._table(df.iloc[0:0]) == "(no participants)"


# =========================================================================== local cluster


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    require_controlplane("the workshop isolation tests")
    root = tmp_path_factory.mktemp("workshop-home")
    cluster = LocalCluster(LAB, root=root)
    try:
        cluster.up(progress=None)
        yield cluster
    finally:
        cluster.down(progress=None, purge=True)
    assert not cluster.dir.exists()


@pytest.fixture(scope="module")
def out(lab, tmp_path_factory):
    return tmp_path_factory.mktemp("kubeconfigs")


@pytest.fixture
def home(lab, monkeypatch):
    """The CLI finds the private lab through $GPU_LAB_HOME."""
    monkeypatch.setenv("GPU_LAB_HOME", str(lab.dir.parent.parent))
    return lab


def admin(lab) -> w.Workshop:
    return w.connect("local", LAB, root=lab.dir.parent.parent)


def participant(out: Path, i: int) -> KubeClient:
    return KubeClient.from_kubeconfig(out / f"participant-{i}.kubeconfig")


def refused(call) -> ApiError:
    with pytest.raises(ApiError) as info:
        call()
    return info.value


@pytest.mark.controlplane
def test_provision_writes_one_kubeconfig_per_participant(home, out, capsys):
    rc = cli_main(["workshop", "provision", "--participants", "2", "--out", str(out),
                   "--name", LAB])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert "2 participant(s), 1 GPU(s) each: 10 created" in text
    assert w.KUEUE_MISSING in text
    for i in (1, 2):
        path = out / f"participant-{i}.kubeconfig"
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        doc = yaml.safe_load(path.read_text())
        ctx = doc["contexts"][0]["context"]
        assert ctx["namespace"] == f"participant-{i}"
        user = doc["users"][0]["user"]
        assert set(user) == {"token"}  # a token only: no client certificate, no admin key
        assert w._jwt_claims(user["token"])["sub"] == f"system:serviceaccount:participant-{i}:learner"
        cluster = doc["clusters"][0]["cluster"]
        assert cluster["server"] == home.server()
        assert base64.b64decode(cluster["certificate-authority-data"]) == home.pki.ca_crt.read_bytes()
        assert kc.load(path).token == user["token"]


@pytest.mark.controlplane
def test_participant_works_in_its_namespace_only(lab, out):
    with participant(out, 1) as p1:
        created = p1.create(gpu_pod("train", 1), namespace="participant-1")
        assert created["metadata"]["namespace"] == "participant-1"
        assert [p["metadata"]["name"] for p in p1.list("Pod", "participant-1")["items"]] == ["train"]
        p1.patch("Pod", "train", {"metadata": {"labels": {"mine": "yes"}}}, "participant-1")
        p1.list("Event", "participant-1")
        quota = p1.get("ResourceQuota", w.QUOTA, "participant-1")
        assert quota["spec"]["hard"] == {"requests.nvidia.com/gpu": "1"}

        who = 'User "system:serviceaccount:participant-1:learner"'
        e = refused(lambda: p1.list("Pod", "participant-2"))
        assert e.code == 403 and e.reason == "Forbidden"
        assert str(e) == (f'pods is forbidden: {who} cannot list resource "pods" in API group "" '
                          'in the namespace "participant-2"')
        e = refused(lambda: p1.get("ResourceQuota", w.QUOTA, "participant-2"))
        assert e.code == 403
        e = refused(lambda: p1.create(gpu_pod("intruder", 0), namespace="participant-2"))
        assert e.code == 403
        assert str(e) == (f'pods is forbidden: {who} cannot create resource "pods" in API group "" '
                          'in the namespace "participant-2"')
        e = refused(lambda: p1.delete("Pod", "anything", "participant-2"))
        assert e.code == 403
        e = refused(lambda: p1.list("Node"))
        assert e.code == 403
        assert str(e) == (f'nodes is forbidden: {who} cannot list resource "nodes" in API group "" '
                          "at the cluster scope")
        e = refused(lambda: p1.patch("Node", "any", {"metadata": {"labels": {"x": "y"}}}))
        assert e.code == 403
        e = refused(lambda: p1.list("Namespace"))
        assert e.code == 403
        assert str(e) == (f'namespaces is forbidden: {who} cannot list resource "namespaces" in '
                          'API group "" at the cluster scope')
        # nor can they lift their own limits or grant themselves more
        e = refused(lambda: p1.patch("ResourceQuota", w.QUOTA,
                                     {"spec": {"hard": {"requests.nvidia.com/gpu": "8"}}},
                                     "participant-1"))
        assert e.code == 403
        e = refused(lambda: p1.list("RoleBinding", "participant-1"))
        assert e.code == 403
        e = refused(lambda: p1.list("Secret", "participant-1"))
        assert e.code == 403


@pytest.mark.controlplane
def test_quota_refuses_gpus_beyond_it_at_creation(lab, out):
    # no node exists: the quota is checked by admission when the pod is created
    with participant(out, 1) as p1, participant(out, 2) as p2:
        e = refused(lambda: p2.create(gpu_pod("greedy", 2), namespace="participant-2"))
        assert e.code == 403
        assert str(e) == ('pods "greedy" is forbidden: exceeded quota: gpu-lab-gpus, requested: '
                          "requests.nvidia.com/gpu=2, used: requests.nvidia.com/gpu=0, "
                          "limited: requests.nvidia.com/gpu=1")
        # participant-1 already holds its one GPU (the "train" pod)
        e = refused(lambda: p1.create(gpu_pod("second", 1), namespace="participant-1"))
        assert str(e) == ('pods "second" is forbidden: exceeded quota: gpu-lab-gpus, requested: '
                          "requests.nvidia.com/gpu=1, used: requests.nvidia.com/gpu=1, "
                          "limited: requests.nvidia.com/gpu=1")
        p1.create(gpu_pod("cpu-only", 0), namespace="participant-1")  # no GPU: not limited
        e = refused(lambda: p2.create(
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "root"},
             "spec": {"containers": [{"name": "c", "image": "x",
                                      "securityContext": {"privileged": True}}]}},
            namespace="participant-2"))
        assert e.code == 403 and 'violates PodSecurity "baseline' in str(e)


@pytest.mark.controlplane
def test_status_counts_pods_and_gpus(home, capsys):
    with admin(home) as ws:
        df = w.status(ws)
    rows = df.set_index("namespace").to_dict("index")
    assert set(rows) == {"participant-1", "participant-2"}
    assert rows["participant-1"]["pending"] == 2 and rows["participant-1"]["running"] == 0
    assert rows["participant-1"]["gpus_requested"] == 1 and rows["participant-1"]["gpu_quota"] == 1
    assert rows["participant-1"]["pods"] == "cpu-only(Pending, 0 gpu), train(Pending, 1 gpu)"
    assert rows["participant-2"]["pending"] == 0 and rows["participant-2"]["gpus_requested"] == 0

    assert cli_main(["workshop", "status", "--name", LAB, "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [r["namespace"] for r in doc] == ["participant-1", "participant-2"]
    assert doc[0]["gpus_requested"] == 1 and doc[0]["gpu_quota"] == 1
    # the kubeconfig backend (an existing cluster) reads the same through the admin kubeconfig
    assert cli_main(["workshop", "status", "--backend", "kubeconfig", "--kubeconfig",
                     str(home.kubeconfig()), "--name", LAB, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == doc
    chart = home.dir / "status.svg"
    assert cli_main(["workshop", "status", "--name", LAB, "--chart", str(chart)]) == 0
    text = capsys.readouterr().out
    assert "participant-1" in text and "1 / 1" in text
    assert chart.read_text().lstrip().startswith("<svg")


@pytest.mark.controlplane
def test_provision_again_changes_nothing_and_a_larger_n_adds(home, out, capsys):
    with admin(home) as ws:
        before = {ns: {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
                       for kind in ("ResourceQuota", "ServiceAccount", "Role", "RoleBinding")
                       for o in ws.client.list(kind, ns)["items"]}
                  for ns in ("participant-1", "participant-2")}
        files = {p.name: p.read_bytes() for p in out.glob("*.kubeconfig")}
        rep = w.provision(ws, 2, out, progress=None)
        assert rep.counts() == {"unchanged": 10}
        assert set(rep.kubeconfigs.values()) == {"kept"}
        assert {p.name: p.read_bytes() for p in out.glob("*.kubeconfig")} == files
        after = {ns: {o["metadata"]["name"]: o["metadata"]["resourceVersion"]
                      for kind in ("ResourceQuota", "ServiceAccount", "Role", "RoleBinding")
                      for o in ws.client.list(kind, ns)["items"]}
                 for ns in ("participant-1", "participant-2")}
        assert after == before

    assert cli_main(["workshop", "provision", "--participants", "3", "--out", str(out),
                     "--name", LAB]) == 0
    text = capsys.readouterr().out
    assert "5 created, 0 updated, 10 unchanged" in text
    assert (out / "participant-3.kubeconfig").exists()
    with participant(out, 3) as p3:
        p3.create(gpu_pod("mine", 1), namespace="participant-3")
        assert refused(lambda: p3.list("Pod", "participant-1")).code == 403


@pytest.mark.controlplane
def test_a_namespace_gpu_lab_did_not_create_is_refused(home, out, capsys):
    with admin(home) as ws:
        ws.client.create({"apiVersion": "v1", "kind": "Namespace",
                          "metadata": {"name": "participant-5"}})
        assert cli_main(["workshop", "provision", "--participants", "5", "--out", str(out),
                         "--name", LAB]) == 1
        err = one_line_error(capsys)
        assert "namespace participant-5 already exists and is not gpu-lab's" in err
        with pytest.raises(NotFound):  # refused before any change
            ws.client.get("Namespace", "participant-4")


@pytest.mark.controlplane
def test_kueue_where_its_api_is_served(home, out):
    """Kueue itself is not installed here: its three CRDs (schemaless) make the API server
    serve kueue.x-k8s.io, which is all provision looks for."""
    with admin(home) as ws:
        for plural, kind, scope in (("resourceflavors", "ResourceFlavor", "Cluster"),
                                    ("clusterqueues", "ClusterQueue", "Cluster"),
                                    ("localqueues", "LocalQueue", "Namespaced")):
            ws.client.create({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": f"{plural}.kueue.x-k8s.io"},
                "spec": {"group": "kueue.x-k8s.io", "scope": scope,
                         "names": {"plural": plural, "kind": kind,
                                   "singular": kind.lower(), "listKind": f"{kind}List"},
                         "versions": [{"name": "v1beta1", "served": True, "storage": True,
                                       "schema": {"openAPIV3Schema": {
                                           "type": "object",
                                           "x-kubernetes-preserve-unknown-fields": True}}}]}})
    deadline = time.monotonic() + 30
    while True:
        with admin(home) as ws:
            if ws.kueue_version() == "v1beta1":
                break
        assert time.monotonic() < deadline, "kueue.x-k8s.io never appeared in discovery"
        time.sleep(0.5)
    with admin(home) as ws:
        rep = w.provision(ws, 3, out, progress=None)
        assert rep.kueue == "Kueue v1beta1: LocalQueue workshop on ClusterQueue gpu-lab-workshop"
        assert rep.objects["localqueue/participant-2/workshop"] == "created"
        assert rep.objects["clusterqueue/gpu-lab-workshop"] == "created"
        cq = ws.client.get("ClusterQueue", "gpu-lab-workshop", api_version="kueue.x-k8s.io/v1beta1")
        gpu = cq["spec"]["resourceGroups"][0]["flavors"][0]["resources"][2]
        assert gpu == {"name": "nvidia.com/gpu", "nominalQuota": "3"}
    with participant(out, 2) as p2:
        queues = p2.list("LocalQueue", "participant-2", api_version="kueue.x-k8s.io/v1beta1")
        assert [q["spec"]["clusterQueue"] for q in queues["items"]] == ["gpu-lab-workshop"]
        assert refused(lambda: p2.list("ClusterQueue", api_version="kueue.x-k8s.io/v1beta1")).code == 403


@pytest.mark.controlplane
def test_teardown_removes_only_the_workshops_namespaces(home, out, capsys):
    with admin(home) as ws:
        ws.client.create({"apiVersion": "v1", "kind": "Namespace",
                          "metadata": {"name": "other-team",
                                       "labels": {w.WORKSHOP_LABEL: "another-workshop"}}})
    (out / "notes.txt").write_text("keep me")
    assert cli_main(["workshop", "teardown", "--name", LAB, "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "3 namespace(s) deleted, 3 kubeconfig(s) removed" in text
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    with admin(home) as ws:
        left = {ns["metadata"]["name"] for ns in ws.client.list("Namespace")["items"]}
        assert not {"participant-1", "participant-2", "participant-3"} & left
        assert {"participant-5", "other-team", "default", "kube-system"} <= left
        assert ws.client.list("ClusterQueue", api_version="kueue.x-k8s.io/v1beta1")["items"] == []
        assert w.status(ws).empty
    assert cli_main(["workshop", "teardown", "--name", LAB]) == 0  # nothing left: still fine
    assert "0 namespace(s) deleted" in capsys.readouterr().out
