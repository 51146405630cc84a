"""The kubeconfig backend against a REAL control plane standing in for someone's GPU cluster.

One local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler)
for the module, with a unique name in a temporary root. GPU nodes are made the way they
look on a real cluster: Node objects with GFD labels, capacity written through the
``status`` subresource, a Ready condition and a Lease, all through the REST client, as
a kubelet, NVIDIA's device plugin and GFD would. Without the binaries these tests skip,
unless ``CI=true``: then they fail (``gpu-lab controlplane build`` makes the binaries).

The rule for node changes (``check_node_change``) is also tested on its own, without a
cluster.
"""

from __future__ import annotations

import json
import sys
import time
import uuid

import pytest
from realcluster import require_controlplane

from gpu_lab.backends.kubeconfig import MANAGED_LABEL, OWNED_LABEL
from gpu_lab.backends.kubeconfig.inventory import inventory, mig_summary, read_inventory
from gpu_lab.backends.kubeconfig.inventory import main as inventory_main
from gpu_lab.backends.kubeconfig.rules import check_node_change
from gpu_lab.backends.kubeconfig.session import KubeconfigSession
from gpu_lab.backends.local.build import DEFAULT_VERSION
from gpu_lab.errors import GpuLabError, NamespaceRefused, NodeChangeRefused
from gpu_lab.kube import NotFound
from gpu_lab.kubelet.nodestatus import conditions, lease_object, micro_time, rfc3339

LINUX = sys.platform.startswith("linux")


controlplane = pytest.mark.controlplane


# =========================================================================== the rule alone


def _node(name: str, labels: dict | None = None) -> dict:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels or {}}}


def test_node_change_refused_without_ownership_label():
    with pytest.raises(NodeChangeRefused) as exc:
        check_node_change(
            _node("gpu-0", {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}), "labels"
        )
    msg = str(exc.value)
    assert "\n" not in msg
    assert (
        'node "gpu-0"' in msg and f"{OWNED_LABEL}=true" in msg and "allow_node_changes=True" in msg
    )


@pytest.mark.parametrize("value", ["false", "True", "yes", ""])
def test_only_the_exact_ownership_label_counts(value):
    with pytest.raises(NodeChangeRefused):
        check_node_change(_node("gpu-0", {OWNED_LABEL: value}), "taints")


def test_node_change_allowed_when_owned_or_explicitly_allowed():
    check_node_change(_node("gpu-0", {OWNED_LABEL: "true"}), "labels")
    check_node_change(_node("gpu-0"), "status", allow_node_changes=True)
    check_node_change({"metadata": {"name": "bare"}}, "labels", allow_node_changes=True)


def test_mig_summary_reads_what_gfd_and_the_plugin_publish():
    assert mig_summary({"nvidia.com/mig.capable": "false"}, {"nvidia.com/gpu": 1}) == "not capable"
    assert mig_summary({"nvidia.com/mig.capable": "true"}, {"nvidia.com/gpu": 8}) == "disabled"
    single = {
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb",
    }
    assert mig_summary(single, {"nvidia.com/gpu": 56}) == "single: 56x 1g.10gb"
    mixed = {
        "nvidia.com/mig.strategy": "mixed",
        "nvidia.com/mig.config": "all-balanced",
        "nvidia.com/mig.config.state": "pending",
    }
    got = mig_summary(mixed, {"nvidia.com/mig-1g.5gb": 16, "nvidia.com/mig-3g.20gb": 8})
    assert got == "mixed: 16x 1g.5gb, 8x 3g.20gb (mig.config=all-balanced: pending)"


def test_system_namespaces_are_refused_before_any_request():
    for ns in ("default", "kube-system"):
        with pytest.raises(NamespaceRefused, match="never a system or shared one"):
            KubeconfigSession(client=object(), namespace=ns)
    with pytest.raises(NamespaceRefused, match="DNS-1123"):
        KubeconfigSession(client=object(), namespace="Not_A_Label")


# =========================================================================== real control plane


def _binaries_or_skip() -> None:
    require_controlplane("the local control plane tests")


H100_LABELS = {
    "nvidia.com/gpu.present": "true",
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    "nvidia.com/gpu.count": "8",
    "nvidia.com/gpu.memory": "81559",
    "nvidia.com/gpu.family": "hopper",
    "nvidia.com/gpu.compute.major": "9",
    "nvidia.com/gpu.compute.minor": "0",
    "nvidia.com/gpu.replicas": "1",
    "nvidia.com/gpu.sharing-strategy": "none",
    "nvidia.com/mig.capable": "true",
    "nvidia.com/cuda.driver-version.major": "550",
    "nvidia.com/cuda.driver-version.minor": "54",
    "nvidia.com/cuda.driver-version.revision": "15",
    "nvidia.com/cuda.runtime-version.major": "12",
    "nvidia.com/cuda.runtime-version.minor": "4",
}
A100_MIG_LABELS = {
    "nvidia.com/gpu.present": "true",
    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB",
    "nvidia.com/gpu.count": "8",
    "nvidia.com/gpu.memory": "40960",
    "nvidia.com/gpu.family": "ampere",
    "nvidia.com/gpu.replicas": "0",
    "nvidia.com/gpu.sharing-strategy": "none",
    "nvidia.com/mig.capable": "true",
    "nvidia.com/mig.strategy": "mixed",
    "nvidia.com/mig.config": "all-balanced",
    "nvidia.com/mig.config.state": "success",
    "nvidia.com/mig-1g.5gb.count": "16",
    "nvidia.com/mig-2g.10gb.count": "8",
    "nvidia.com/mig-3g.20gb.count": "8",
    OWNED_LABEL: "true",
}
BASE = {"cpu": "96", "memory": "1Ti", "pods": "110", "ephemeral-storage": "1Ti"}
NODES = {
    # name: (labels, extended resources)
    "gpu-h100-0": (H100_LABELS, {"nvidia.com/gpu": "8"}),
    "gpu-a100-0": (
        A100_MIG_LABELS,
        {
            "nvidia.com/mig-1g.5gb": "16",
            "nvidia.com/mig-2g.10gb": "8",
            "nvidia.com/mig-3g.20gb": "8",
        },
    ),
    "cpu-0": ({}, {}),
}


def _post_status(client, name: str, extra: dict) -> None:
    now = rfc3339()
    capacity = {**BASE, **extra}
    client.patch(
        "Node",
        name,
        {
            "status": {
                "capacity": capacity,
                "allocatable": capacity,
                "conditions": conditions(now, now),
            }
        },
        subresource="status",
    )
    lease = lease_object(name, None, 40, micro_time())
    try:
        client.create(lease)
    except GpuLabError:
        client.patch(
            "Lease", name, {"spec": lease["spec"]}, namespace=lease["metadata"]["namespace"]
        )


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """A fresh control plane with three stand-in nodes: an H100 node (not owned by
    gpu-lab), an A100 node in MIG mixed mode (owned) and a CPU node."""
    _binaries_or_skip()
    from gpu_lab.backends.local.cluster import LocalCluster

    lab = LocalCluster(f"kc-{uuid.uuid4().hex[:8]}", root=tmp_path_factory.mktemp("kc-home"))
    try:
        lab.up(progress=None)
        client = lab.client()
        for name, (labels, extra) in NODES.items():
            client.create(
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "metadata": {
                        "name": name,
                        "labels": {**labels, "kubernetes.io/hostname": name},
                    },
                }
            )
            _post_status(client, name, extra)
        # node-lifecycle lifts the not-ready taint the NodeTaint admission put on new nodes
        deadline = time.monotonic() + 30
        while any(
            t.get("key") == "node.kubernetes.io/not-ready"
            for n in client.list("Node")["items"]
            for t in n["spec"].get("taints") or []
        ):
            assert time.monotonic() < deadline, "nodes still tainted not-ready"
            time.sleep(0.2)
        # a namespace and pod of someone else, which gpu-lab must never touch
        client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
        yield lab
    finally:
        lab.down(progress=None, purge=True)


@pytest.fixture(scope="module")
def kube(cluster):
    return cluster.client()


@pytest.fixture(scope="module")
def lab(cluster):
    session = KubeconfigSession(cluster.kubeconfig(), timeout=30, settle=0.5)
    yield session
    session.close()


POD = """
apiVersion: v1
kind: Pod
metadata: {name: train-0}
spec:
  containers:
  - name: main
    image: registry.example/train:1
    resources:
      limits: {nvidia.com/gpu: 2}
---
apiVersion: v1
kind: Pod
metadata: {name: too-big, namespace: gpu-lab}
spec:
  containers:
  - name: main
    image: registry.example/train:1
    resources:
      limits: {nvidia.com/gpu: 16}
---
apiVersion: v1
kind: Pod
metadata: {name: mig-small}
spec:
  containers:
  - name: main
    image: registry.example/infer:1
    resources:
      limits: {nvidia.com/mig-1g.5gb: 1}
"""


@controlplane
def test_inventory_lists_the_gpu_nodes_read_only(cluster, kube, capsys, monkeypatch):
    # Read-only means: every request the inventory sends is a GET. (Comparing the Nodes'
    # resourceVersions would be flaky: kube-controller-manager's node-lifecycle controller
    # updates these kubelet-less stand-in nodes on its own.)
    from gpu_lab.kube import KubeClient

    methods: list[str] = []
    real_request = KubeClient.request

    def recording(self, method, path, **kw):
        methods.append(method.upper())
        return real_request(self, method, path, **kw)

    monkeypatch.setattr(KubeClient, "request", recording)
    inv = inventory(cluster.kubeconfig())
    assert inv.gpu_nodes == ["gpu-a100-0", "gpu-h100-0"]
    assert inv.total_nodes == 3 and inv.version == DEFAULT_VERSION
    assert list(inv.nodes["name"]) == ["gpu-a100-0", "gpu-h100-0"]
    assert inv.nodes.set_index("name").loc["gpu-h100-0", "nvidia.com/gpu allocatable"] == 8
    gpus = inv.gpus.set_index("node")
    h100, a100 = gpus.loc["gpu-h100-0"], gpus.loc["gpu-a100-0"]
    assert (h100["product"], h100["model"], h100["gpus"], h100["memory_mib"]) == (
        "NVIDIA-H100-80GB-HBM3",
        "H100-80GB",
        8,
        81559,
    )
    assert (h100["driver"], h100["cuda"], h100["compute"]) == ("550.54.15", "12.4", "9.0")
    assert h100["mig"] == "disabled" and h100["ready"]
    assert (a100["model"], a100["mig_strategy"], a100["mig_config"], a100["mig_config_state"]) == (
        "A100-40GB",
        "mixed",
        "all-balanced",
        "success",
    )
    assert a100["mig"] == "mixed: 16x 1g.5gb, 8x 2g.10gb, 8x 3g.20gb"
    assert a100["owned"] and not h100["owned"]
    assert a100["labels"]["nvidia.com/mig-1g.5gb.count"] == "16"
    res = inv.resources.set_index(["node", "resource"])
    assert res.loc[("gpu-a100-0", "nvidia.com/mig-1g.5gb"), "allocatable"] == 16
    assert "cpu-0" not in set(inv.resources["node"])
    assert "gpu-h100-0" in str(inv) and inv.to_dict()["gpu_nodes"][0]["node"] == "gpu-a100-0"
    assert inventory_main(["--kubeconfig", str(cluster.kubeconfig()), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [n["node"] for n in doc["gpu_nodes"]] == ["gpu-a100-0", "gpu-h100-0"]
    assert doc["gpu_nodes"][1]["ready"] is True and doc["gpu_nodes"][1]["gpus"] == 8
    assert methods and set(methods) == {"GET"}  # nothing written
    with pytest.raises(NotFound):
        kube.get("Namespace", "gpu-lab")  # reading created nothing


@controlplane
def test_apply_lands_only_in_gpu_labs_namespace(lab, kube):
    refs = lab.apply(POD)
    assert refs == ["pod/gpu-lab/train-0", "pod/gpu-lab/too-big", "pod/gpu-lab/mig-small"]
    ns = kube.get("Namespace", "gpu-lab")
    assert ns["metadata"]["labels"][MANAGED_LABEL] == "true"
    pods = lab.schedule().set_index("name")
    assert set(pods["namespace"]) == {"gpu-lab"}
    assert pods.loc["train-0", "node"] == "gpu-h100-0"
    assert pods.loc["mig-small", "node"] == "gpu-a100-0"
    assert pods.loc["too-big", "node"] is None
    assert "Insufficient nvidia.com/gpu" in pods.loc["too-big", "message"]
    assert kube.list("Pod", namespace="team-a")["items"] == []
    # the real scheduler's own words
    exp = lab.explain("too-big")
    assert exp.node is None and "0/3 nodes are available" in exp.message
    assert any(n.startswith("FailedScheduling: 0/3 nodes are available") for n in exp.notes)
    assert lab.explain("gpu-lab/train-0").node == "gpu-h100-0"
    # requested shows up in the inventory and the node table
    res = read_inventory(kube).resources.set_index(["node", "resource"])
    assert res.loc[("gpu-h100-0", "nvidia.com/gpu"), "requested"] == 2
    assert res.loc[("gpu-h100-0", "nvidia.com/gpu"), "free"] == 6
    nodes = lab.nodes().set_index("name")
    assert set(nodes.index) == {"cpu-0", "gpu-a100-0", "gpu-h100-0"}
    assert nodes.loc["gpu-a100-0", "nvidia.com/mig-1g.5gb requested"] == 1
    doc = lab.to_dict()
    assert doc["backend"] == "kubeconfig" and {p["namespace"] for p in doc["pods"]} == {"gpu-lab"}
    # a deleted bare pod is not waited for: schedule() settles on the pods that are left
    lab.delete("too-big")
    lab._wait(lambda: "too-big" not in set(lab.pods()["name"]), "too-big to go")
    assert set(lab.schedule()["name"]) == {"train-0", "mig-small"}
    # a controller's pod is replaced, so schedule() waits for its replacement
    lab.apply("apiVersion: apps/v1\nkind: ReplicaSet\nmetadata: {name: rs}\nspec:\n  replicas: 1\n"
              "  selector: {matchLabels: {app: rs}}\n  template:\n    metadata: {labels: {app: rs}}\n"
              "    spec: {containers: [{name: c, image: x}]}\n")
    (first,) = [n for n in lab.schedule()["name"] if n.startswith("rs-")]
    lab.delete(first)
    assert lab._expected_pods == 3  # train-0, mig-small and the ReplicaSet's one pod
    after = set(lab.schedule()["name"])  # settles once the replacement is placed
    assert any(n.startswith("rs-") and n != first for n in after)


@controlplane
@pytest.mark.parametrize(
    ("manifest", "match"),
    [
        (
            "apiVersion: v1\nkind: Pod\nmetadata: {name: x, namespace: team-a}\n"
            "spec: {containers: [{name: c, image: i}]}",
            'refusing to create Pod "x" in namespace "team-a"',
        ),
        (
            "apiVersion: v1\nkind: Namespace\nmetadata: {name: team-b}",
            'refusing to create Namespace "team-b"',
        ),
        (
            "apiVersion: v1\nkind: Node\nmetadata: {name: fake-gpu}",
            'refusing to create Node "fake-gpu"',
        ),
        (
            "apiVersion: gpulab.dev/v1alpha1\nkind: NodePool\nmetadata: {name: h100}\n"
            "spec: {count: 1, gpu: {model: H100-80GB, count: 8}}",
            'refusing to create NodePool "h100"',
        ),
        (
            "apiVersion: scheduling.k8s.io/v1\nkind: PriorityClass\nmetadata: {name: hi}\nvalue: 10",
            'refusing to create PriorityClass "hi"',
        ),
    ],
)
def test_apply_outside_the_namespace_is_refused_and_creates_nothing(lab, kube, manifest, match):
    ok = (
        "apiVersion: v1\nkind: Pod\nmetadata: {name: harmless}\n"
        "spec: {containers: [{name: c, image: i}]}\n---\n"
    )
    with pytest.raises(GpuLabError, match=match) as exc:
        lab.apply(ok + manifest)
    assert "\n" not in str(exc.value)
    with pytest.raises(NotFound):
        kube.get("Pod", "harmless", namespace="gpu-lab")
    assert kube.list("Pod", namespace="team-a")["items"] == []
    assert "fake-gpu" not in {n["metadata"]["name"] for n in kube.list("Node")["items"]}


@controlplane
def test_a_namespace_gpu_lab_did_not_create_is_refused(cluster, kube):
    other = KubeconfigSession(cluster.kubeconfig(), namespace="team-a", timeout=10)
    with pytest.raises(
        NamespaceRefused, match='namespace "team-a" exists and was not created by gpu-lab'
    ):
        other.apply(
            "apiVersion: v1\nkind: Pod\nmetadata: {name: x}\nspec: {containers: [{name: c, image: i}]}"
        )
    with pytest.raises(NamespaceRefused):
        other.reset()
    assert kube.get("Namespace", "team-a")["metadata"].get("deletionTimestamp") is None


@controlplane
def test_node_changes_need_ownership_or_the_flag(cluster, lab, kube):
    before = kube.get("Node", "gpu-h100-0")["metadata"]
    for change in (
        lambda: lab.label_node("gpu-h100-0", {"team": "a"}),
        lambda: lab.label_node("gpu-h100-0", {OWNED_LABEL: "true"}),
        lambda: lab.cordon("gpu-h100-0"),
        lambda: lab.taint_node("gpu-h100-0", "nvidia.com/gpu", "present"),
        lambda: lab.patch_node_status("gpu-h100-0", {"capacity": {"nvidia.com/gpu": "0"}}),
    ):
        with pytest.raises(NodeChangeRefused, match='node "gpu-h100-0": gpu-lab does not own it'):
            change()
    after = kube.get("Node", "gpu-h100-0")["metadata"]
    assert (
        after["labels"] == before["labels"]
        and after["resourceVersion"] == before["resourceVersion"]
    )

    # the owned node may be changed, and the change is real
    lab.label_node("gpu-a100-0", {"gpulab.dev/lesson": "mig", "nvidia.com/mig.config.state": None})
    lab.taint_node("gpu-a100-0", "gpulab.dev/lesson", "mig", "NoSchedule")
    node = kube.get("Node", "gpu-a100-0")
    assert node["metadata"]["labels"]["gpulab.dev/lesson"] == "mig"
    assert "nvidia.com/mig.config.state" not in node["metadata"]["labels"]
    assert {"key": "gpulab.dev/lesson", "value": "mig", "effect": "NoSchedule"} in node["spec"][
        "taints"
    ]
    lab.taint_node("gpu-a100-0", "gpulab.dev/lesson", effect="NoSchedule", remove=True)
    lab.label_node(
        "gpu-a100-0", {"gpulab.dev/lesson": None, "nvidia.com/mig.config.state": "success"}
    )

    # an explicit flag allows any node
    brave = KubeconfigSession(cluster.kubeconfig(), allow_node_changes=True)
    brave.label_node("gpu-h100-0", {"gpulab.dev/lesson": "x"})
    brave.label_node("gpu-h100-0", {"gpulab.dev/lesson": None})
    assert "gpulab.dev/lesson" not in kube.get("Node", "gpu-h100-0")["metadata"]["labels"]


@controlplane
def test_reset_deletes_only_gpu_labs_namespace(lab, kube):
    lab.apply(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: left-over}\n"
        "spec: {containers: [{name: c, image: i}]}"
    )
    kube.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "theirs", "namespace": "team-a"},
            "spec": {"containers": [{"name": "c", "image": "i"}]},
        }
    )
    namespaces = {n["metadata"]["name"] for n in kube.list("Namespace")["items"]}
    lab.reset(force=True)  # force: pods bound to these kubelet-less nodes never finish terminating
    with pytest.raises(NotFound):
        kube.get("Namespace", "gpu-lab")
    assert {n["metadata"]["name"] for n in kube.list("Namespace")["items"]} == namespaces - {
        "gpu-lab"
    }
    assert (
        kube.get("Pod", "theirs", namespace="team-a")["metadata"].get("deletionTimestamp") is None
    )
    assert {n["metadata"]["name"] for n in kube.list("Node")["items"]} == set(NODES)
    assert lab.pods().empty
    lab.reset()  # nothing left: a no-op
    # and the namespace comes back on the next apply
    lab.apply(
        "apiVersion: v1\nkind: Pod\nmetadata: {name: again}\nspec: {containers: [{name: c, image: i}]}"
    )
    assert list(lab.schedule()["name"]) == ["again"]
    lab.reset(force=True)


# ============================================= StatefulSets, DaemonSets, Services and policies


class _Lists:
    """Just enough of a client for the pod-set rule: fixed Pod, Node and Event lists, and
    every object with the uid ``u1``."""

    def __init__(self, nodes: list[dict], pods: list[dict], events: list[dict] | None = None):
        self.items = {"Node": nodes, "Pod": pods, "Event": events if events is not None else []}

    def list(self, kind: str, namespace: str | None = None, field_selector: str | None = None, **_kw) -> dict:
        items = self.items[kind]
        if kind == "Event" and field_selector:  # only involvedObject.uid=..., as the rule asks
            uid = field_selector.split("=", 1)[1]
            items = [e for e in items if e["involvedObject"]["uid"] == uid]
        return {"items": items}

    def get(self, kind: str, name: str, namespace: str | None = None) -> dict:
        return {"metadata": {"name": name, "namespace": namespace, "uid": "u1"}}


def _daemon_pod(owner: str, node: str) -> dict:
    pin = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": [node]}]}]}
    return {"metadata": {"name": f"{owner}-{node}", "namespace": "gpu-lab",
                         "ownerReferences": [{"kind": "DaemonSet", "name": owner, "controller": True}]},
            "spec": {"affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": pin}}}}


@pytest.mark.parametrize("tolerate_all", [False, True])
def test_a_daemonsets_expected_pods_come_from_the_clusters_real_nodes(tolerate_all):
    # A kind cluster: the control-plane node is tainted NoSchedule, so the DaemonSet
    # controller makes no pod for it unless the template tolerates the taint.
    from gpu_lab.backends.podsets import PodSets
    from gpu_lab.model.documents import load_documents
    from gpu_lab.model.scenario import parse_scenario

    tolerations = "\n      tolerations: [{operator: Exists}]" if tolerate_all else ""
    sc = parse_scenario(load_documents(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: probe, namespace: gpu-lab}\nspec:\n"
        "  selector: {matchLabels: {app: probe}}\n  template:\n    metadata: {labels: {app: probe}}\n"
        f"    spec:{tolerations}\n      containers: [{{name: c, image: x}}]\n"))
    control = {"metadata": {"name": "lab-control-plane", "labels": {}},
               "spec": {"taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]}}
    workers = [{"metadata": {"name": f"lab-worker{i}", "labels": {}}, "spec": {}} for i in ("", "2")]
    nodes = [control, *workers]
    pods = [_daemon_pod("probe", "lab-worker")]
    sets = PodSets(_Lists(nodes, pods))  # type: ignore[arg-type]
    sets.add(sc.workloads)
    assert not sets.settled()  # lab-worker2 has none yet
    pods.append(_daemon_pod("probe", "lab-worker2"))
    pods.append(_daemon_pod("other", "lab-control-plane"))  # another DaemonSet's pod does not count
    assert sets.settled() is not tolerate_all
    pods.append(_daemon_pod("probe", "lab-control-plane"))
    assert sets.settled()


def test_a_pod_set_whose_create_was_refused_is_settled():
    # A quota refused the DaemonSet's pod for lab-worker2: its controller reported
    # FailedCreate on the DaemonSet (this one, by uid) and waits for something to change.
    from gpu_lab.backends.podsets import PodSets
    from gpu_lab.model.documents import load_documents
    from gpu_lab.model.scenario import parse_scenario

    sc = parse_scenario(load_documents(
        "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {name: probe, namespace: gpu-lab}\nspec:\n"
        "  selector: {matchLabels: {app: probe}}\n  template:\n    metadata: {labels: {app: probe}}\n"
        "    spec:\n      containers: [{name: c, image: x}]\n"))
    nodes = [{"metadata": {"name": f"lab-worker{i}", "labels": {}}, "spec": {}} for i in ("", "2")]
    events: list[dict] = [{"reason": "FailedCreate", "involvedObject": {"uid": "old"}}]  # an earlier probe's
    sets = PodSets(_Lists(nodes, [_daemon_pod("probe", "lab-worker")], events))  # type: ignore[arg-type]
    sets.add(sc.workloads)
    assert not sets.settled()
    events.append({"reason": "FailedCreate", "involvedObject": {"uid": "u1"}})
    assert sets.settled()


PODSETS = """
apiVersion: v1
kind: Service
metadata: {name: shards}
spec:
  selector: {app: shard}
  ports: [{port: 80}]
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: shard}
spec:
  serviceName: shards
  podManagementPolicy: Parallel
  replicas: 2
  selector: {matchLabels: {app: shard}}
  template:
    metadata: {labels: {app: shard}}
    spec: {containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 2}}}]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: big}
spec:
  replicas: 3
  selector: {matchLabels: {app: big}}
  template:
    metadata: {labels: {app: big}}
    spec: {containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 16}}}]}
---
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: probe}
spec:
  selector: {matchLabels: {app: probe}}
  template:
    metadata: {labels: {app: probe}}
    spec:
      nodeSelector: {nvidia.com/gpu.present: "true"}
      tolerations: [{operator: Exists}]
      containers: [{name: c, image: x, resources: {requests: {cpu: 100m}}}]
"""

POLICIES = """
apiVersion: v1
kind: ResourceQuota
metadata: {name: gpus}
spec:
  hard: {requests.nvidia.com/gpu: "4"}
---
apiVersion: v1
kind: LimitRange
metadata: {name: cpu-default}
spec:
  limits:
  - type: Container
    defaultRequest: {cpu: 250m}
---
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: train}
spec:
  minAvailable: 1
  selector: {matchLabels: {app: train}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: train}
spec:
  replicas: 3
  selector: {matchLabels: {app: train}}
  template:
    metadata: {labels: {app: train}}
    spec: {containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 2}}}]}
"""

OVER_QUOTA = ("apiVersion: v1\nkind: Pod\nmetadata: {name: extra}\n"
              "spec: {containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]}\n")


def _sim_of_this_cluster():
    """The simulator with Nodes as this module's stand-in nodes look."""
    import yaml

    import gpu_lab

    docs = []
    for name, (labels, extra) in NODES.items():
        capacity = {**BASE, **extra}
        docs.append({"apiVersion": "v1", "kind": "Node",
                     "metadata": {"name": name, "labels": {**labels, "kubernetes.io/hostname": name}},
                     "status": {"capacity": capacity, "allocatable": capacity}})
    sim = gpu_lab.connect("sim")
    sim.apply(yaml.safe_dump_all(docs))
    return sim


def _heartbeat(kube) -> None:
    """The stand-in nodes post a fresh status and Lease, as their kubelets would: node
    lifecycle would otherwise taint them unreachable once the first Lease expired."""
    for name, (_labels, extra) in NODES.items():
        _post_status(kube, name, extra)
    deadline = time.monotonic() + 30
    while any(n["spec"].get("taints") for n in kube.list("Node")["items"]):
        assert time.monotonic() < deadline, "nodes still tainted after a heartbeat"
        time.sleep(0.2)


def _placements(frame) -> set[tuple[str, str | None, str]]:
    """(pod, node, message), a DaemonSet's pods by their DaemonSet (their names are random)."""
    return {(n.rsplit("-", 1)[0] if n.startswith("probe-") else n, node, message)
            for n, node, message in zip(frame["name"], frame["node"], frame["message"], strict=True)}


@controlplane
def test_statefulsets_daemonsets_and_services_place_as_on_the_sim(lab, kube):
    lab.reset(force=True)
    _heartbeat(kube)
    refs = lab.apply(PODSETS)  # returns: no wait for big-1, which OrderedReady never makes here
    assert refs == ["service/gpu-lab/shards", "statefulset/gpu-lab/shard", "statefulset/gpu-lab/big",
                    "daemonset/gpu-lab/probe"]
    got = lab.schedule()
    sim = _sim_of_this_cluster()
    sim.apply(PODSETS)
    want = sim.schedule()
    assert _placements(got) == _placements(want)
    pending = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    assert {("shard-0", "gpu-h100-0", ""), ("shard-1", "gpu-h100-0", ""), ("probe", "gpu-h100-0", ""),
            ("probe", "gpu-a100-0", "")} < _placements(got)
    (big,) = [m for n, m in zip(got["name"], got["message"], strict=True) if n.startswith("big-")]
    assert big.startswith(pending)  # big-0 pending; big-1 waits for it (OrderedReady)
    assert sorted(got["name"])[:1] == ["big-0"] and len(got) == 5
    svc = kube.get("Service", "shards", namespace="gpu-lab")
    assert svc["spec"]["clusterIP"] and svc["spec"]["ports"][0]["targetPort"] == 80  # defaulted
    # a DaemonSet pod deleted is made again: schedule() waits for it, by node
    (gone,) = [n for n, node in zip(got["name"], got["node"], strict=True)
               if n.startswith("probe-") and node == "gpu-a100-0"]
    lab.delete(gone)
    # no kubelet here to finish the graceful deletion; the controller replaces the pod only
    # once it is gone, and schedule() waits until it has
    kube.delete("Pod", gone, namespace="gpu-lab", grace_period_seconds=0, missing_ok=True)
    again = lab.schedule()
    assert ("probe", "gpu-a100-0", "") in _placements(again) and gone not in set(again["name"])


@controlplane
def test_quotas_limit_ranges_and_budgets_admit_as_on_the_sim(lab, kube):
    lab.reset(force=True)
    _heartbeat(kube)
    refs = lab.apply(POLICIES)
    assert refs == ["resourcequota/gpu-lab/gpus", "limitrange/gpu-lab/cpu-default",
                    "poddisruptionbudget/gpu-lab/train", "deployment/gpu-lab/train"]
    got = lab.schedule()  # two of three replicas: the third is over quota, never waited for
    sim = _sim_of_this_cluster()
    sim.apply(POLICIES)
    want = sim.schedule()
    assert len(got) == len(want) == 2
    assert sorted(zip(got["node"], got["message"], got["requests"].map(sorted), strict=True)) == sorted(
        zip(want["node"], want["message"], want["requests"].map(sorted), strict=True))
    assert all(r == {"nvidia.com/gpu": "2", "cpu": "250m"} for r in got["requests"])  # LimitRanger's default
    # the disruption controller's verdict: an int minAvailable expects the pods there are, and
    # pods on these kubelet-less nodes never become Ready
    st = kube.get("PodDisruptionBudget", "train", namespace="gpu-lab", api_version="policy/v1")["status"]
    assert (st["currentHealthy"], st["desiredHealthy"], st["expectedPods"], st["disruptionsAllowed"]) == (0, 1, 2, 0)
    # events(): the ReplicaSet's refused create, as the sim records it (the controller may
    # report it a moment after its pods exist; the sim records no SuccessfulCreate)
    def failed(events):
        return events[events["reason"] == "FailedCreate"]

    deadline = time.monotonic() + 20
    while failed(real_events := lab.events(kind="ReplicaSet")).empty and time.monotonic() < deadline:
        time.sleep(0.5)
    real_failed, sim_failed = failed(real_events), failed(sim.events(kind="ReplicaSet"))
    assert len(real_failed) and len(sim_failed)
    assert real_failed["message"].iloc[0].split(" is forbidden: ")[1] == \
        sim_failed["message"].iloc[0].split(" is forbidden: ")[1]
    # a bare pod over quota: the API server's refusal, word for word the sim's, nothing created
    with pytest.raises(GpuLabError) as real:
        lab.apply(OVER_QUOTA)
    with pytest.raises(GpuLabError) as modelled:
        sim.apply(OVER_QUOTA)
    assert str(real.value) == str(modelled.value)
    assert str(real.value).startswith('pods "extra" is forbidden: exceeded quota: gpus')
    with pytest.raises(NotFound):
        kube.get("Pod", "extra", namespace="gpu-lab")


@controlplane
def test_reset_removes_the_new_kinds_with_gpu_labs_namespace(lab, kube):
    lab.reset(force=True)
    _heartbeat(kube)
    lab.apply(PODSETS)
    lab.apply(POLICIES)
    lab.schedule()
    lab.reset(force=True)
    with pytest.raises(NotFound):
        kube.get("Namespace", "gpu-lab")
    for kind, api in (("StatefulSet", None), ("DaemonSet", None), ("Service", None),
                      ("ResourceQuota", None), ("LimitRange", None), ("PodDisruptionBudget", "policy/v1")):
        left = [o["metadata"]["name"] for o in kube.list(kind, api_version=api)["items"]
                if o["metadata"]["namespace"] == "gpu-lab"]
        assert left == [], kind
    assert kube.get("Service", "kubernetes", namespace="default")  # the API server's own stays
    # nothing of them is waited for any more
    lab.apply("apiVersion: v1\nkind: Pod\nmetadata: {name: after}\nspec: {containers: [{name: c, image: i}]}")
    assert list(lab.schedule()["name"]) == ["after"]
    lab.reset(force=True)
