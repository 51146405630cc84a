"""The public API is exactly what gpu_lab.__all__ lists, and it works without a cluster."""

import types

import pytest

import gpu_lab

EXPECTED = {"BACKENDS", "Explanation", "GpuLabError", "InvalidObject", "NodeDescription",
            "NotSupported", "Scenario", "Session", "Simulation", "__version__", "allocate_response", "backend_available", "cdi_edits", "cdi_spec", "charts",
            "connect", "drill", "errors", "gpus", "labs", "load_scenario", "metrics", "simulate", "visible_devices_env"}
NAMESPACES = ("gpus", "charts", "labs", "drill", "metrics", "errors")


def test_all_is_the_public_surface():
    assert set(gpu_lab.__all__) == EXPECTED
    for name in EXPECTED:
        assert getattr(gpu_lab, name) is not None, name
    # submodules are importable but private (the public namespaces are in __all__);
    # everything else without a leading underscore must be in __all__
    public = {n for n, v in vars(gpu_lab).items() if not n.startswith("_")
              and not isinstance(v, types.ModuleType)} - {"annotations"}
    assert public <= EXPECTED


@pytest.mark.parametrize("name", NAMESPACES)
def test_public_namespaces_list_what_they_serve(name):
    space = getattr(gpu_lab, name)
    assert space.__all__, name
    for attr in space.__all__:
        assert getattr(space, attr) is not None, f"gpu_lab.{name}.{attr}"


def test_backend_available_says_why_not():
    assert gpu_lab.backend_available("sim")[0]
    ok, why = gpu_lab.backend_available("local")
    assert isinstance(ok, bool) and why
    assert gpu_lab.backend_available("nope") == (False, 'unknown backend "nope" (choose from sim, local, kind, kubeconfig)')


def test_connect_sim_round_trip():
    lab = gpu_lab.connect("sim", seed=3)
    refs = lab.apply("""
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: l4}
spec: {count: 1, gpu: {model: L4, count: 2}, cpu: "8", memory: 32Gi}
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec:
  containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 2}}}]
""")
    assert refs == ["node/l4-0", "pod/default/p"]
    pods = lab.schedule()
    row = pods.iloc[0]
    assert row["node"] == "l4-0" and row["phase"] == "Running"
    assert len(row["devices"]["nvidia.com/gpu"]) == 2
    assert all(d.startswith("GPU-") for d in row["devices"]["nvidia.com/gpu"])
    exp = lab.explain("p")
    assert exp.node == "l4-0" and "only one feasible node" in " ".join(exp.notes)
    lab.reset()
    assert lab.pods().empty and lab.nodes().empty


def test_unknown_and_unbuilt_backends_are_clear_errors():
    with pytest.raises(gpu_lab.GpuLabError, match='unknown backend "nope"'):
        gpu_lab.connect("nope")


def test_apply_is_all_or_nothing():
    lab = gpu_lab.connect("sim")
    good = "apiVersion: v1\nkind: Pod\nmetadata: {name: a}\nspec: {containers: [{name: c, image: x}]}\n"
    bad = "apiVersion: v1\nkind: Pod\nmetadata: {name: b}\nspec: {containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 0.5}}}]}\n"
    with pytest.raises(gpu_lab.InvalidObject):
        lab.apply(good + "---\n" + bad)
    assert lab.pods().empty
    lab.apply(good)
    with pytest.raises(gpu_lab.GpuLabError, match='pods "a" already exists'):
        lab.apply(good)
    assert len(lab.pods()) == 1


def test_clock_frees_gpus_when_jobs_finish():
    lab = gpu_lab.connect("sim")
    lab.apply("""
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: t4}
spec: {count: 1, gpu: {model: T4, count: 1}, cpu: "8", memory: 32Gi}
---
apiVersion: batch/v1
kind: Job
metadata: {name: train}
spec:
  parallelism: 2
  completions: 2
  template:
    metadata: {annotations: {gpulab.dev/duration: 10m}}
    spec:
      restartPolicy: Never
      containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]
""")
    pods = lab.schedule()
    assert sorted(pods["phase"]) == ["Pending", "Running"]
    pods = lab.advance(600)
    assert sorted(pods["phase"]) == ["Running", "Succeeded"]
    assert pods.set_index("phase").loc["Running", "start"] == 600
    pods = lab.advance()
    assert list(pods["phase"]) == ["Succeeded", "Succeeded"]
    assert lab.now == 1200


def test_kubelet_rejects_cpu_it_cannot_hold():
    lab = gpu_lab.connect("sim")
    lab.apply("""
apiVersion: v1
kind: Node
metadata: {name: small}
status: {capacity: {cpu: "2", memory: 8Gi, pods: "110"}}
---
apiVersion: v1
kind: Pod
metadata: {name: pinned}
spec:
  nodeName: small
  containers: [{name: c, image: x, resources: {requests: {cpu: "4"}}}]
""")
    row = lab.pods().iloc[0]
    assert row["phase"] == "Failed" and row["reason"] == "OutOfcpu"
    assert row["message"] == ("Pod was rejected: Node didn't have enough resource: cpu, requested: 4000, "
                              "used: 0, capacity: 2000")


def test_kubelet_admission_rejects_what_the_node_cannot_hold():
    # With NodeResourcesFit's filter disabled the scheduler binds blindly; the
    # kubelet's admission check then fails the pod, as on a real node.
    lab = gpu_lab.connect("sim", deterministic=True)
    lab.apply("""
apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
profiles:
- plugins: {filter: {disabled: [{name: NodeResourcesFit}]}}
---
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: t4}
spec: {count: 1, gpu: {model: T4, count: 1}, cpu: "8", memory: 32Gi}
---
apiVersion: v1
kind: Pod
metadata: {name: a}
spec: {containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: b}
spec: {containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]}
""")
    pods = lab.schedule().set_index("name")
    assert pods.loc["a", "phase"] == "Running"
    # the kubelet's device manager allocates first: no free GPU is an UnexpectedAdmissionError
    assert pods.loc["b", "phase"] == "Failed" and pods.loc["b", "reason"] == "UnexpectedAdmissionError"
    assert pods.loc["b", "message"] == (
        "Pod was rejected: Allocate failed due to requested number of devices unavailable for nvidia.com/gpu. "
        "Requested: 1, Available: 0, which is unexpected")
    node = lab.nodes().iloc[0]  # the rejected pod holds nothing
    assert node["nvidia.com/gpu requested"] == 1 <= node["nvidia.com/gpu allocatable"]
    assert node["cpu_requested"] <= node["cpu_allocatable"]


def test_time_slicing_refuses_more_than_one_replica_like_the_plugin():
    lab = gpu_lab.connect("sim")
    lab.apply("""
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: l4}
spec:
  count: 1
  gpu: {model: L4, count: 1}
  cpu: "16"
  memory: 64Gi
  devicePlugin:
    version: v1
    sharing:
      timeSlicing:
        failRequestsGreaterThanOne: true
        resources: [{name: nvidia.com/gpu, replicas: 4}]
---
apiVersion: v1
kind: Pod
metadata: {name: one}
spec: {containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]}
---
apiVersion: v1
kind: Pod
metadata: {name: two}
spec: {containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 2}}}]}
""")
    pods = lab.schedule().set_index("name")
    assert lab.nodes().loc[0, "nvidia.com/gpu allocatable"] == 4
    assert pods.loc["one", "phase"] == "Running"
    assert pods.loc["one", "devices"]["nvidia.com/gpu"][0].endswith("::0")
    # the scheduler places it (2 of 4 replicas free), the plugin's Allocate refuses it
    assert pods.loc["two", "phase"] == "Failed" and pods.loc["two", "reason"] == "UnexpectedAdmissionError"
    assert "maximum request size for shared resources is 1; found 2" in pods.loc["two", "message"]
    assert lab.nodes().loc[0, "nvidia.com/gpu requested"] == 1
    assert lab.describe_node("l4-0").allocated["nvidia.com/gpu"] == "1"


def test_plugin_crash_zeroes_allocatable_and_restart_recovers():
    lab = gpu_lab.connect("sim")
    lab.apply("""
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: h100}
spec: {count: 1, gpu: {model: H100-80GB, count: 8}, cpu: "96", memory: 1024Gi}
---
apiVersion: v1
kind: Pod
metadata: {name: before}
spec: {containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 2}}}]}
""")
    lab.schedule()
    lab.kill_plugin("h100-0")
    node = lab.nodes().iloc[0]
    assert node["nvidia.com/gpu allocatable"] == 0
    assert node["nvidia.com/gpu capacity"] == 8  # capacity stays
    d = lab.describe_node("h100-0")
    assert (d.capacity["nvidia.com/gpu"], d.allocatable["nvidia.com/gpu"]) == ("8", "0")
    lab.apply("""
apiVersion: v1
kind: Pod
metadata: {name: after}
spec: {containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]}
""")
    pods = lab.schedule().set_index("name")
    assert pods.loc["before", "phase"] == "Running"  # running pods keep their GPUs
    assert pods.loc["after", "message"].startswith("0/1 nodes are available: 1 Insufficient nvidia.com/gpu.")
    lab.advance(301)  # past the kubelet's 5-minute grace period capacity drops too
    assert lab.nodes().loc[0, "nvidia.com/gpu capacity"] == 0
    lab.restart_plugin("h100-0")
    pods = lab.pods().set_index("name")
    assert pods.loc["after", "phase"] == "Running"
    assert lab.describe_node("h100-0").capacity["nvidia.com/gpu"] == "8"


def test_events_are_part_of_every_session():
    from gpu_lab.backends.base import CONTRACT

    assert "events" in CONTRACT
    ev = gpu_lab.connect("sim").events()
    assert list(ev.columns) == ["namespace", "object", "type", "reason", "message", "count"] and ev.empty
