"""Property-based tests: invariants that must hold for any cluster and workload."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpu_lab

MODELS = ["T4", "L4", "A100-80GB", "H100-80GB"]
TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


@st.composite
def pools(draw):
    out = []
    for i in range(draw(st.integers(1, 4))):
        spec = {"count": draw(st.integers(1, 4)), "cpu": str(draw(st.sampled_from([4, 16, 64]))),
                "memory": f"{draw(st.sampled_from([16, 64, 256]))}Gi", "pods": draw(st.sampled_from([3, 110]))}
        if draw(st.booleans()):
            spec["gpu"] = {"model": draw(st.sampled_from(MODELS)), "count": draw(st.sampled_from([1, 2, 4, 8]))}
        if draw(st.booleans()):
            spec["taints"] = [TAINT]
        if draw(st.booleans()):
            spec["labels"] = {"tier": draw(st.sampled_from(["a", "b"]))}
        out.append({"apiVersion": "gpulab.dev/v1alpha1", "kind": "NodePool",
                    "metadata": {"name": f"pool{i}"}, "spec": spec})
    return out


@st.composite
def pods(draw):
    out = []
    classes = [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                "metadata": {"name": f"p{v}"}, "value": v} for v in (0, 100, 1000)]
    for i in range(draw(st.integers(1, 25))):
        res = {"requests": {"cpu": f"{draw(st.sampled_from([100, 500, 2000, 8000]))}m",
                            "memory": f"{draw(st.sampled_from([128, 1024, 8192]))}Mi"}}
        gpus = draw(st.sampled_from([0, 0, 1, 2, 4, 8]))
        if gpus:
            res["limits"] = {"nvidia.com/gpu": gpus}
        spec = {"containers": [{"name": "c", "image": "x", "resources": res}],
                "priorityClassName": f"p{draw(st.sampled_from([0, 100, 1000]))}"}
        if draw(st.booleans()):
            spec["tolerations"] = [TOLERATION]
        if draw(st.integers(0, 4)) == 0:
            spec["nodeSelector"] = {"tier": draw(st.sampled_from(["a", "b"]))}
        out.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": f"pod-{i}"}, "spec": spec})
    return classes + out


def run(docs, seed=0):
    lab = gpu_lab.connect("sim", seed=seed)
    lab.apply(docs)
    lab.schedule()
    return lab


def tolerated(taint, tolerations):
    return any(t.get("operator") == "Exists" and t.get("key") == taint["key"] for t in tolerations)


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(pools(), pods())
def test_no_node_is_ever_over_allocated(node_docs, pod_docs):
    lab = run(node_docs + pod_docs)
    snap = lab._sim.cluster.snapshot
    assert (snap.requested <= snap.allocatable).all()
    # and the bookkeeping matches the pods actually running there
    pods = lab.pods()
    for name, group in pods[pods["phase"] == "Running"].groupby("node"):
        assert snap.requested[snap.index[name], snap.rindex["pods"]] == len(group)


@SETTINGS
@given(pools(), pods())
def test_pods_only_land_where_every_filter_allows(node_docs, pod_docs):
    lab = run(node_docs + pod_docs)
    nodes = {n.name: n for n in lab._sim.cluster.snapshot.nodes}
    specs = {d["metadata"]["name"]: d["spec"] for d in pod_docs if d["kind"] == "Pod"}
    for _, row in lab.pods().iterrows():
        if row["node"] is None:
            continue
        node, spec = nodes[row["node"]], specs[row["name"]]
        for taint in node.taints:
            assert tolerated({"key": taint.key}, spec.get("tolerations", [])), row["name"]
        for k, v in (spec.get("nodeSelector") or {}).items():
            assert node.labels.get(k) == v
        gpus = (spec["containers"][0]["resources"].get("limits") or {}).get("nvidia.com/gpu", 0)
        assert len(row["devices"].get("nvidia.com/gpu", [])) == gpus


@SETTINGS
@given(pools(), pods(), st.integers(0, 2**16))
def test_same_seed_same_result(node_docs, pod_docs, seed):
    a = run(node_docs + pod_docs, seed).pods()
    b = run(node_docs + pod_docs, seed).pods()
    assert a[["name", "node", "phase", "message"]].equals(b[["name", "node", "phase", "message"]])
    assert a["devices"].tolist() == b["devices"].tolist()


@SETTINGS
@given(pools(), pods())
def test_every_pending_pod_has_the_schedulers_message(node_docs, pod_docs):
    lab = run(node_docs + pod_docs)
    n = len(lab._sim.cluster.snapshot)
    for _, row in lab.pods().iterrows():
        if row["phase"] == "Pending":
            assert row["message"].startswith(f"0/{n} nodes are available: "), row["message"]
            assert "preemption: " in row["message"]


@SETTINGS
@given(pools(), pods())
def test_no_device_is_handed_to_two_running_pods(node_docs, pod_docs):
    lab = run(node_docs + pod_docs)
    seen = set()
    for _, row in lab.pods().iterrows():
        if row["phase"] != "Running":
            continue
        for ids in row["devices"].values():
            for d in ids:
                assert (row["node"], d) not in seen
                seen.add((row["node"], d))
