"""The kind session's pieces that need no Docker: placeholder images, the sim mirror of a
real cluster, and the one-line answers before a cluster exists."""

from __future__ import annotations

import pytest

import gpu_lab
from gpu_lab.backends.kind.manifests import IMAGE
from gpu_lab.backends.kind.session import KindSession, placeholder, show_devices_pod
from gpu_lab.fidelity import mirror_documents


def test_placeholder_runs_gpu_labs_image_and_keeps_resources():
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
           "spec": {"template": {"spec": {
               "initContainers": [{"name": "i", "image": "busybox", "args": ["x"]}],
               "containers": [{"name": "c", "image": "nvcr.io/nvidia/pytorch:24.08-py3",
                               "args": ["train.py"], "resources": {"limits": {"nvidia.com/gpu": 2}}}]}}}}
    out = placeholder(job)
    spec = out["spec"]["template"]["spec"]
    (c,) = spec["containers"]
    assert (c["image"], c["imagePullPolicy"]) == (IMAGE, "Never")
    assert c["command"] == ["sh", "-c", "trap 'exit 0' TERM; sleep infinity & wait"]
    assert "args" not in c and c["resources"] == {"limits": {"nvidia.com/gpu": 2}}
    assert spec["initContainers"][0]["command"] == ["sleep", "0"]
    assert job["spec"]["template"]["spec"]["containers"][0]["image"].startswith("nvcr.io")  # a copy
    shown = show_devices_pod("s", gpus=3)
    assert placeholder(shown) == shown  # gpu-lab's own image keeps its command
    ns = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "x"}}
    assert placeholder(ns) == ns


class _Client:
    def __init__(self, nodes, pods):
        self.items = {"Node": nodes, "Pod": pods}

    def list(self, kind, **_):
        return {"items": self.items[kind]}


def test_mirror_gives_the_sim_the_real_clusters_nodes_and_system_pods():
    nodes = [{"metadata": {"name": "kind-control-plane", "labels": {"node-role.kubernetes.io/control-plane": ""}},
              "spec": {"taints": [{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}]},
              "status": {"capacity": {"cpu": "2", "memory": "24Gi", "pods": "110"},
                         "allocatable": {"cpu": "2", "memory": "24Gi", "pods": "110"}}},
             {"metadata": {"name": "h100-0", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
              "spec": {},
              "status": {"capacity": {"cpu": "2", "memory": "24Gi", "pods": "110", "nvidia.com/gpu": "8"},
                         "allocatable": {"cpu": "2", "memory": "24Gi", "pods": "110", "nvidia.com/gpu": "8"}}}]
    pods = [{"metadata": {"name": "kube-apiserver-x", "namespace": "kube-system"},
             "spec": {"nodeName": "kind-control-plane", "priorityClassName": "system-node-critical",
                      "containers": [{"name": "a", "image": "k", "resources": {"requests": {"cpu": "250m"}}}]},
             "status": {"phase": "Running"}},
            {"metadata": {"name": "plugin-1", "namespace": "gpu-lab-system"},
             "spec": {"nodeName": "h100-0", "containers": [{"name": "p", "image": "i",
                                                            "resources": {"requests": {"cpu": "10m"}}}]},
             "status": {"phase": "Running"}},
            {"metadata": {"name": "mine", "namespace": "gpu-lab"},
             "spec": {"nodeName": "h100-0", "containers": [{"name": "c", "image": "i"}]},
             "status": {"phase": "Running"}},
            {"metadata": {"name": "done", "namespace": "kube-system"},
             "spec": {"nodeName": "h100-0", "containers": [{"name": "c", "image": "i"}]},
             "status": {"phase": "Succeeded"}}]
    docs = mirror_documents(_Client(nodes, pods), "gpu-lab")
    assert [(d["kind"], d["metadata"]["name"]) for d in docs] == [
        ("Namespace", "gpu-lab-system"), ("Node", "kind-control-plane"), ("Node", "h100-0"),
        ("Pod", "kube-apiserver-x"), ("Pod", "plugin-1")]
    sim = gpu_lab.connect("sim", deterministic=True)
    sim.apply(docs)
    sim.apply("apiVersion: v1\nkind: Pod\nmetadata: {name: t}\nspec:\n  containers:\n"
              "  - {name: c, image: x, resources: {limits: {nvidia.com/gpu: 9}}}\n")
    msg = sim.schedule().set_index("name").loc["t", "message"]
    assert msg.startswith("0/2 nodes are available: 1 Insufficient nvidia.com/gpu, "
                          "1 node(s) had untolerated taint(s)")
    nodes_after = sim.nodes().set_index("name")
    assert nodes_after.loc["kind-control-plane", "cpu_requested"] == 0.25
    assert nodes_after.loc["h100-0", "cpu_requested"] == 0.01


def test_without_a_cluster_the_session_says_what_to_do(tmp_path):
    lab = KindSession("none-yet", root=tmp_path)
    assert lab.pods().empty and lab.nodes().empty
    lab.reset()  # nothing to reset
    with pytest.raises(gpu_lab.GpuLabError, match="no kind cluster 'none-yet' yet: apply a scenario"):
        lab.apply("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: c, image: x}]}\n")
    with pytest.raises(gpu_lab.GpuLabError, match="refusing KubeSchedulerConfiguration"):
        lab.apply("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n")
    assert not (tmp_path / "kind" / "none-yet").exists()
    lab.close()


def test_containers_of_nodes_follow_the_config_up_wrote(tmp_path):
    from gpu_lab.backends.kind import KindCluster

    lab = KindCluster("cn", root=tmp_path)
    assert lab.containers_of_nodes() == {}  # nothing written yet
    plan = lab.plan("apiVersion: gpulab.dev/v1alpha1\nkind: NodePool\nmetadata: {name: h100}\n"
                    "spec: {count: 2, gpu: {model: H100-80GB, count: 8}}\n")
    plan.write()
    assert lab.containers_of_nodes() == {"cn-control-plane": "cn-control-plane", **plan.containers()}
    assert plan.containers() == {"h100-0": "cn-worker", "h100-1": "cn-worker2"}
