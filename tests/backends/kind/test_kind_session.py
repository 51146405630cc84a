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


# ----------------------------------------------------- the real scheduler's scores on kind

SCORES = [  # what kube-scheduler v1.37.2 logs with --vmodule=schedule_one=10 (times UTC)
    ("2026-12-01T18:31:05.900000000Z", 'I1201 18:31:05.900000       1 schedule_one.go:101] "About to try and schedule pod" pod="gpu-lab/web"'),
    ("2026-12-01T18:31:05.900100000Z", 'I1201 18:31:05.900100       1 schedule_one.go:984] "Plugin scored node for pod" pod="gpu-lab/web" plugin="TaintToleration" node="big-0" score=300'),
    ("2026-12-01T18:31:05.900100000Z", 'I1201 18:31:05.900100       1 schedule_one.go:984] "Plugin scored node for pod" pod="gpu-lab/web" plugin="NodeResourcesFit" node="big-0" score=72'),
]
MORE = [  # the same second, then the next
    ("2026-12-01T18:31:05.900100000Z", 'I1201 18:31:05.900100       1 schedule_one.go:984] "Plugin scored node for pod" pod="gpu-lab/web" plugin="TaintToleration" node="small-0" score=0'),
    ("2026-12-01T18:31:05.900200000Z", 'I1201 18:31:05.900200       1 schedule_one.go:984] "Plugin scored node for pod" pod="gpu-lab/web" plugin="NodeResourcesFit" node="small-0" score=90'),
    ("2026-12-01T18:31:05.900300000Z", 'I1201 18:31:05.900300       1 schedule_one.go:1052] "Calculated node\'s final score for pod" pod="gpu-lab/web" node="big-0" score=372'),
    ("2026-12-01T18:31:05.900300000Z", 'I1201 18:31:05.900300       1 schedule_one.go:1052] "Calculated node\'s final score for pod" pod="gpu-lab/web" node="small-0" score=90'),
    ("2026-12-01T18:31:06.000000000Z", 'I1201 18:31:06.000000       1 schedule_one.go:483] "Successfully bound pod to node" pod="gpu-lab/web" node="big-0" evaluatedNodes=3 feasibleNodes=2'),
]


class _Response:
    def __init__(self, data: bytes):
        self.data = data


class _LogClient:
    """The API server's pods/log as the kubelet answers it: ``timestamps=true`` prefixes each
    line, ``sinceTime`` (whole seconds) drops the lines before it."""

    def __init__(self):
        self.lines: list[tuple[str, str]] = []
        self.asked: list[dict] = []

    def list(self, kind, namespace=None, label_selector=None, **_):
        assert (kind, namespace, label_selector) == ("Pod", "kube-system", "component=kube-scheduler")
        return {"items": [{"metadata": {"name": "kube-scheduler-k-control-plane"}}]}

    def request(self, method, path, params=None):
        assert (method, path) == ("GET", "/api/v1/namespaces/kube-system/pods/kube-scheduler-k-control-plane/log")
        self.asked.append(dict(params))
        since = params.get("sinceTime", "")
        rows = [f"{t} {text}" for t, text in self.lines if t[:19] >= since[:19]]
        return _Response("".join(r + "\n" for r in rows).encode())


def test_the_scheduler_log_is_read_once_line_by_line_across_reads():
    from gpu_lab.backends.kind.scheduler import SchedulerLog

    client = _LogClient()
    client.lines += SCORES
    log = SchedulerLog(client)
    assert log.refresh() == [text for _, text in SCORES]
    assert client.asked == [{"timestamps": "true"}]
    client.lines += MORE
    assert log.refresh() == [text for _, text in SCORES + MORE]  # nothing twice, nothing lost
    assert client.asked[-1] == {"timestamps": "true", "sinceTime": "2026-12-01T18:31:05Z"}
    assert log.refresh() == [text for _, text in SCORES + MORE]  # nothing new
    assert client.asked[-1]["sinceTime"] == "2026-12-01T18:31:06Z"
    (attempt,) = log.history(0)
    assert (attempt.pod, attempt.node, attempt.feasible) == ("gpu-lab/web", "big-0", 2)
    assert attempt.scores == {"big-0": {"TaintToleration": 300, "NodeResourcesFit": 72},
                              "small-0": {"TaintToleration": 0, "NodeResourcesFit": 90}}
    assert log.attempts()["gpu-lab/web"].totals == {"big-0": 372, "small-0": 90}
    mark = log.mark()  # as reset() takes it
    client.lines.append(("2026-12-01T18:31:07.000000000Z", SCORES[0][1].replace("web", "next")))
    assert [a.pod for a in log.history(mark)] == ["gpu-lab/next"]


def test_explain_on_kind_takes_the_weights_from_the_schedulers_configz(monkeypatch):
    """The one explain of both backends, fed kind's log and the running scheduler's /configz."""
    import json
    import subprocess

    from gpu_lab.backends.account import scheduler_account
    from gpu_lab.backends.kind import scheduler
    from gpu_lab.backends.local import schedulerlog

    config = {"kind": "KubeSchedulerConfiguration", "profiles": [{
        "schedulerName": "default-scheduler",
        "plugins": {"multiPoint": {"enabled": [{"name": "TaintToleration", "weight": 3},
                                               {"name": "NodeResourcesFit", "weight": 1},
                                               {"name": "DefaultBinder"}]}}}]}
    ran = []

    def run(argv, **kw):
        ran.append(argv)
        return subprocess.CompletedProcess(argv, 0, json.dumps({"componentconfig": config}), "")

    monkeypatch.setattr(scheduler.subprocess, "run", run)
    assert scheduler.configz("k-control-plane") == config
    assert ran[0][:3] == ["docker", "exec", "k-control-plane"]
    assert ran[0][-3:] == ["get", "--raw", "/configz"] and "--server=https://127.0.0.1:10259" in ran[0]

    client = _LogClient()
    client.lines += SCORES + MORE
    pod = {"metadata": {"name": "web", "namespace": "gpu-lab"},
           "spec": {"nodeName": "big-0", "schedulerName": "default-scheduler",
                    "containers": [{"name": "c", "image": "app"}]},
           "status": {"phase": "Running", "conditions": [{"type": "PodScheduled", "status": "True"}]}}

    class Client(_LogClient):
        def get(self, kind, name, namespace=None):
            return pod

        def list(self, kind, **kw):
            return {"items": []} if kind == "Event" else super().list(kind, **kw)

    both = Client()
    both.lines = client.lines
    log = scheduler.SchedulerLog(both)
    account = scheduler_account(both, "gpu-lab", "web")
    e = schedulerlog.explain(account, log.attempts(), lambda: scheduler.configz("k-control-plane"),
                             lambda: ["small-0", "k-control-plane", "big-0"]).to_dict()
    by = {n["name"]: n for n in e["nodes"]}
    assert by["k-control-plane"]["result"] == "infeasible" and "scores" not in by["k-control-plane"]
    assert by["big-0"]["scores"]["TaintToleration"] == {"normalized": 100, "weighted": 300}
    assert by["small-0"]["scores"]["NodeResourcesFit"] == {"normalized": 90, "weighted": 90}
    assert (by["big-0"]["total"], by["small-0"]["total"]) == (372, 90)
    assert e["notes"][-1] == schedulerlog.FROM_THE_LOG


def test_a_scheduler_without_configz_is_one_line(monkeypatch):
    import subprocess

    from gpu_lab.backends.kind import scheduler

    monkeypatch.setattr(scheduler.subprocess, "run", lambda argv, **kw: subprocess.CompletedProcess(
        argv, 1, "", "Error from server (Forbidden): forbidden\nerror: exit status 1\n"))
    with pytest.raises(gpu_lab.GpuLabError, match=r"^cannot read kube-scheduler's /configz on k-control-plane: "
                                                   r"error: exit status 1$"):
        scheduler.configz("k-control-plane")


def test_a_bound_pod_is_done_once_its_kubelet_started_it_or_says_why_not():
    """A real kubelet takes a moment to create a bound pod's containers; until then the pod is
    Pending, which fidelity and pods() would read as waiting."""
    def pod(phase, node="h100-0", **states):
        return {"spec": {"nodeName": node},
                "status": {"phase": phase, "containerStatuses": [{"state": s} for s in states.values()]}}

    assert not KindSession.scheduler_done(pod("Pending"))  # bound, no status from the kubelet yet
    assert not KindSession.scheduler_done(pod("Pending", c={"waiting": {"reason": "ContainerCreating"}}))
    assert not KindSession.scheduler_done(pod("Pending", c={"waiting": {"reason": "PodInitializing"}}))
    assert KindSession.scheduler_done(pod("Pending", c={"waiting": {"reason": "ErrImagePull"}}))
    assert KindSession.scheduler_done(pod("Running", c={"running": {}}))
    assert KindSession.scheduler_done(pod("Succeeded"))
    unschedulable = {"spec": {}, "status": {"phase": "Pending", "conditions": [
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable"}]}}
    assert KindSession.scheduler_done(unschedulable)
    assert not KindSession.scheduler_done({"spec": {}, "status": {"phase": "Pending"}})  # not tried yet
