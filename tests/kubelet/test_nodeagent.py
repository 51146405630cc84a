"""The node agent: simulated GPU nodes driven by the fake device plugin, against the REAL
kube-apiserver, kube-scheduler and kube-controller-manager.

The first tests need no cluster (admission arithmetic, messages, node figures). The
rest share one lab started for the module (``LocalCluster`` in a temporary root) and
one ``NodeAgent`` for a 2-node H100 pool. Without the control-plane binaries they
skip, unless ``CI=true``: then they fail, because CI must run them.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest
from fleets import H100_POOL, TOLERATE
from realcluster import require_controlplane

from gpu_lab.errors import DeviceAllocationError
from gpu_lab.kube import AlreadyExists
from gpu_lab.kubelet import nodestatus as ns
from gpu_lab.kubelet import podlifecycle as pl
from gpu_lab.kubelet.admission import admission_error_message, fit_failure
from gpu_lab.kubelet.agent import NodeAgent, nodes_of
from gpu_lab.kubelet.node import AgentNode
from gpu_lab.model.scenario import load_scenario

REPO = Path(__file__).resolve().parents[2]
LINUX = sys.platform.startswith("linux")

POOL = H100_POOL


controlplane = pytest.mark.controlplane


def gpu_pod(name, gpus, node=None, annotations=None, node_name=None, cpu=None):
    requests = {"cpu": cpu} if cpu else {}
    spec = {
        "tolerations": TOLERATE,
        "containers": [
            {
                "name": "main",
                "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
                "resources": {"requests": requests, "limits": {"nvidia.com/gpu": gpus}}
                if gpus
                else {"requests": requests},
            }
        ],
    }
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    if node_name:
        spec["nodeName"] = node_name
    meta = {"name": name, "namespace": "default"}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def wait_for(fn, timeout=15.0, every=0.05, what="condition"):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout} s waiting for {what} (last: {last!r})")


# =========================================================================== no cluster


def test_pod_requests_sum_containers_and_take_the_largest_init_container():
    pod = {
        "spec": {
            "initContainers": [{"name": "i", "resources": {"requests": {"cpu": "4"}}}],
            "containers": [
                {"name": "a", "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "2"}}},
                {"name": "b", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
            ],
            "overhead": {"cpu": "100m"},
        }
    }
    assert pl.pod_requests(pod) == {"cpu": 4100, "memory": 2**30, "nvidia.com/gpu": 2}
    assert pl.device_requests(pod, {"nvidia.com/gpu"}) == [("a", "nvidia.com/gpu", 2)]


def test_fit_failure_checks_pods_first_then_cpu_memory_and_skips_unknown_extended():
    alloc = {"pods": 2, "cpu": 4000, "memory": 100, "nvidia.com/gpu": 8}
    assert fit_failure({"cpu": 1000}, {}, 2, alloc) == (
        "OutOfpods",
        "Pod was rejected: Node didn't have enough resource: pods, requested: 1, used: 2, capacity: 2",
    )
    reason, msg = fit_failure({"cpu": 3000, "memory": 200}, {"cpu": 2000}, 1, alloc)
    assert (reason, msg.split(": ", 1)[1]) == (
        "OutOfcpu",
        "Node didn't have enough resource: cpu, requested: 3000, used: 2000, capacity: 4000",
    )
    assert fit_failure({"example.com/fpga": 1}, {}, 0, alloc) is None
    assert fit_failure({"nvidia.com/gpu": 8}, {"nvidia.com/gpu": 1}, 0, alloc)[0] == (
        "OutOfnvidia.com/gpu"
    )


def test_outofcpu_message_is_the_simulators():
    import gpu_lab

    lab = gpu_lab.connect("sim")
    lab.apply(POOL)
    lab.apply(gpu_pod("big", 0, node_name="h100-0", cpu="200"))
    row = lab.schedule().set_index("name").loc["big"]
    reason, message = fit_failure({"cpu": 200_000}, {}, 0, {"pods": 110, "cpu": 96_000})
    assert (row["phase"], row["reason"], row["message"]) == ("Failed", reason, message)


def test_admission_error_message_is_the_kubelets():
    err = DeviceAllocationError("no healthy devices present; cannot allocate unhealthy devices x/y")
    assert admission_error_message(err) == (
        "Pod was rejected: Allocate failed due to no healthy devices present; cannot allocate "
        "unhealthy devices x/y, which is unexpected"
    )


def test_duration_parsing_matches_the_simulator():
    from gpu_lab.backends.sim import DURATION_ANNOTATION, parse_duration

    assert pl.DURATION_ANNOTATION == DURATION_ANNOTATION
    for text in ("2s", "90s", "1h30m", "1.5h", "250ms"):
        assert pl.parse_duration(text) == parse_duration(text)
    with pytest.raises(Exception, match="invalid duration"):
        pl.parse_duration("soon")


def test_node_figures_take_device_resources_from_the_device_manager(tmp_path):
    node = load_scenario(POOL).nodes[0]
    sn = AgentNode(node, 0, tmp_path, grace_period=300)
    assert sn.has_plugin and sn.plugin_resources == {"nvidia.com/gpu"}
    cap, alloc = sn.published()  # no plugin has registered: no GPUs yet, as on a real node
    assert "nvidia.com/gpu" not in cap and cap["cpu"] == 96_000
    sn.manager.register("nvidia.com/gpu", "nvidia-gpu.sock")
    sn.manager.update_devices("nvidia.com/gpu", node.devices["nvidia.com/gpu"])
    sn.manager.endpoint_stopped("nvidia.com/gpu")
    cap, alloc = sn.published()
    assert (cap["nvidia.com/gpu"], alloc["nvidia.com/gpu"]) == (8, 0)
    status = ns.node_status(node, sn.ip, cap, alloc, "boot")
    assert status["capacity"]["memory"] == "1Ti" and status["allocatable"]["nvidia.com/gpu"] == "0"
    assert status["nodeInfo"]["kubeletVersion"] == "v1.37.2"
    assert status["nodeInfo"]["containerRuntimeVersion"] == "gpu-lab://fake"
    assert status["addresses"][0] == {"type": "InternalIP", "address": "127.0.0.2"}


def test_plain_nodes_with_gpu_capacity_get_fixed_devices(tmp_path):
    doc = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": "plain"},
        "status": {"capacity": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "2"}},
    }
    sn = AgentNode(load_scenario(doc).nodes[0], 3, tmp_path, grace_period=300)
    assert not sn.has_plugin
    cap, alloc = sn.published()
    assert cap["nvidia.com/gpu"] == alloc["nvidia.com/gpu"] == 2
    assert sn.ip == "127.0.0.5"


def test_a_work_dir_too_deep_for_unix_sockets_moves_them_to_a_short_folder(tmp_path):
    deep = tmp_path / ("d" * 120)
    sn = AgentNode(load_scenario(POOL).nodes[0], 0, deep, grace_period=300)
    sn.check_socket_paths()
    assert len(str(sn.plugin_dir / "nvidia-gpu.shared.sock")) <= 107
    assert sn.plugin_dir_note and sn.dir == deep / "h100-0"  # logs and config stay put


# =========================================================================== real cluster


def _binaries_or_skip() -> None:
    require_controlplane("the node agent tests")


@pytest.fixture(scope="module")
def lab():
    _binaries_or_skip()
    from gpu_lab.backends.local.cluster import LocalCluster

    root = Path(tempfile.mkdtemp(prefix="gla-"))  # short: plugin sockets live below it
    cluster = LocalCluster(f"na{os.getpid()}", root=root)
    try:
        cluster.up(progress=None)
        kube = cluster.client()
        # pods need it; kube-controller-manager makes it only seconds after up()
        with contextlib.suppress(AlreadyExists):
            kube.create(
                {
                    "apiVersion": "v1",
                    "kind": "ServiceAccount",
                    "metadata": {"name": "default", "namespace": "default"},
                }
            )
        yield cluster, kube, root
    finally:
        cluster.down(progress=None)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="module")
def agent(lab):
    _, kube, root = lab
    a = NodeAgent(kube, load_scenario(POOL).nodes, root / "w", heartbeat=1.0)
    t0 = time.monotonic()
    a.start()
    a.ready_after = time.monotonic() - t0
    yield a
    a.stop(delete_nodes=True)
    for sn in a.nodes.values():
        assert not sn.plugin.alive


@pytest.fixture
def kube(lab, agent):
    _, kube, _ = lab
    made: list[tuple[str, str]] = []
    kube.made = made
    yield kube
    for kind, name in made:
        with contextlib.suppress(Exception):
            kube.delete(
                kind, name, "default", grace_period_seconds=0, propagation_policy="Background"
            )


def create(kube, obj):
    kube.made.append((obj["kind"], obj["metadata"]["name"]))
    return kube.create(obj)


def running(kube, name):
    pod = kube.get("Pod", name, "default")
    return pod if (pod.get("status") or {}).get("phase") == "Running" else None


def node_figures(kube, name, resource="nvidia.com/gpu"):
    st = kube.get("Node", name)["status"]
    return st["capacity"].get(resource), st["allocatable"].get(resource)


@controlplane
def test_pool_nodes_are_ready_with_gpus_gfd_labels_taints_and_leases(lab, agent, kube):
    assert agent.ready_after < 10
    records = {n.name: n for n in load_scenario(POOL).nodes}
    for name, rec in records.items():
        node = kube.get("Node", name)
        labels = node["metadata"]["labels"]
        assert {k: labels.get(k) for k in rec.labels} == rec.labels
        assert labels["nvidia.com/gpu.product"].startswith("NVIDIA-H100")
        assert labels["nvidia.com/gpu.count"] == "8"
        assert node["spec"]["taints"] == [
            {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
        ]
        st = node["status"]
        ready = {c["type"]: c["status"] for c in st["conditions"]}
        assert ready == {
            "Ready": "True",
            "MemoryPressure": "False",
            "DiskPressure": "False",
            "PIDPressure": "False",
        }
        assert st["allocatable"]["nvidia.com/gpu"] == st["capacity"]["nvidia.com/gpu"] == "8"
        assert st["allocatable"]["cpu"] == "96" and st["allocatable"]["pods"] == "110"
        assert st["nodeInfo"]["kubeletVersion"] == "v1.37.2"
        assert st["nodeInfo"]["architecture"] == "amd64"
        assert st["addresses"][0]["address"].startswith("127.0.0.")
        lease = kube.get("Lease", name, "kube-node-lease", "coordination.k8s.io/v1")
        assert lease["spec"]["holderIdentity"] == name
        assert lease["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]
    first = kube.get("Lease", "h100-0", "kube-node-lease", "coordination.k8s.io/v1")
    wait_for(
        lambda: (
            kube.get("Lease", "h100-0", "kube-node-lease", "coordination.k8s.io/v1")["spec"][
                "renewTime"
            ]
            != first["spec"]["renewTime"]
        ),
        timeout=5,
        what="a renewed Lease",
    )


@controlplane
def test_gpu_pod_is_scheduled_for_real_and_gets_the_simulators_device_ids(agent, kube):
    import gpu_lab

    t0 = time.monotonic()
    create(kube, gpu_pod("train", 2))
    pod = wait_for(lambda: running(kube, "train"), what="train Running")
    took = time.monotonic() - t0
    assert took < 10
    node = pod["spec"]["nodeName"]
    # the scheduler's event broadcaster writes the Event after the bind, on its own time:
    # the pod may be Running before it is there (a run on a loaded machine saw none yet)
    wait_for(lambda: [e for e in kube.list("Event", "default", field_selector="involvedObject.name=train")["items"]
                      if e["reason"] == "Scheduled" and e.get("reportingComponent") == "default-scheduler"],
             what="the default-scheduler's Scheduled event for train")
    ann = pod["metadata"]["annotations"]
    devices = json.loads(ann[pl.DEVICES_ANNOTATION])["main"]["nvidia.com/gpu"]
    assert len(devices) == 2 and all(d.startswith("GPU-") for d in devices)
    env = json.loads(ann[pl.ENV_ANNOTATION])["main"]
    assert env == {"NVIDIA_VISIBLE_DEVICES": ",".join(devices)}
    st = pod["status"]
    assert {c["type"]: c["status"] for c in st["conditions"]}.items() >= {
        "PodScheduled": "True",
        "Initialized": "True",
        "ContainersReady": "True",
        "Ready": "True",
    }.items()
    assert st["containerStatuses"][0]["state"]["running"]["startedAt"]
    assert st["hostIP"] == agent.node(node).ip and st["podIP"].startswith("10.244.")
    # the simulator, given the same cluster and the pod on the same node, picks the same GPUs
    sim = gpu_lab.connect("sim")
    sim.apply(POOL)
    sim.apply(gpu_pod("train", 2, node=node))
    row = sim.schedule().set_index("name").loc["train"]
    assert row["node"] == node
    assert row["devices"]["nvidia.com/gpu"] == devices


@controlplane
def test_killed_plugin_zeroes_allocatable_pods_pend_and_a_restart_recovers(agent, kube):
    victim = "h100-1"
    t0 = time.monotonic()
    agent.kill_plugin(victim)
    wait_for(lambda: node_figures(kube, victim) == ("8", "0"), timeout=5, what="allocatable 0")
    latency = time.monotonic() - t0
    assert latency < 3
    assert not agent.plugin_alive(victim)
    assert node_figures(kube, "h100-0") == ("8", "8")

    create(kube, gpu_pod("stuck", 1, node=victim))

    def unschedulable():
        conds = kube.get("Pod", "stuck", "default").get("status", {}).get("conditions") or []
        return next(
            (c for c in conds if c["type"] == "PodScheduled" and c["status"] == "False"), None
        )

    cond = wait_for(unschedulable, what="stuck unschedulable")
    assert cond["reason"] == "Unschedulable"
    assert "Insufficient nvidia.com/gpu" in cond["message"], cond["message"]
    events = kube.list("Event", "default", field_selector="involvedObject.name=stuck")["items"]
    assert any(
        e["reason"] == "FailedScheduling" and "Insufficient nvidia.com/gpu" in e["message"]
        for e in events
    )
    time.sleep(0.5)
    assert kube.get("Pod", "stuck", "default")["status"].get("phase") == "Pending"

    assert agent.restart_plugin(victim)
    wait_for(lambda: node_figures(kube, victim) == ("8", "8"), timeout=5, what="allocatable 8")
    pod = wait_for(lambda: running(kube, "stuck"), timeout=20, what="stuck Running")
    assert pod["spec"]["nodeName"] == victim


@controlplane
def test_job_pods_finish_after_their_duration_and_the_job_completes(agent, kube):
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "finetune", "namespace": "default"},
        "spec": {
            "parallelism": 2,
            "completions": 2,
            "backoffLimit": 0,
            "template": {
                "metadata": {"annotations": {pl.DURATION_ANNOTATION: "2s"}},
                "spec": {**gpu_pod("x", 4)["spec"], "restartPolicy": "Never"},
            },
        },
    }
    t0 = time.monotonic()
    create(kube, job)

    def complete():
        conds = kube.get("Job", "finetune", "default").get("status", {}).get("conditions") or []
        return any(c["type"] == "Complete" and c["status"] == "True" for c in conds)

    wait_for(complete, timeout=30, every=0.2, what="Job Complete")
    assert time.monotonic() - t0 >= 2
    pods = kube.list("Pod", "default", label_selector="job-name=finetune")["items"]
    assert len(pods) == 2 and {p["status"]["phase"] for p in pods} == {"Succeeded"}
    term = pods[0]["status"]["containerStatuses"][0]["state"]["terminated"]
    assert term["exitCode"] == 0 and term["reason"] == "Completed"
    uids = {p["metadata"]["uid"] for p in pods}
    for sn in agent.nodes.values():  # devices released
        assert not uids & set(sn.manager.pods.held)


@controlplane
def test_deleted_pods_release_their_devices(agent, kube):
    node = "h100-0"
    wait_for(lambda: _held(agent, node) == 0, timeout=5, what="earlier pods' devices released")
    create(kube, gpu_pod("whole-0", 8, node=node))
    wait_for(lambda: running(kube, "whole-0"), what="whole-0 Running")
    assert _held(agent, node) == 8
    kube.delete("Pod", "whole-0", "default")  # graceful: the agent finishes it at once
    wait_for(lambda: _held(agent, node) == 0, timeout=5, what="devices released")
    wait_for(
        lambda: not kube.list("Pod", "default", field_selector="metadata.name=whole-0")["items"],
        timeout=5,
        what="whole-0 gone",
    )
    create(kube, gpu_pod("whole-1", 8, node=node))
    pod = wait_for(lambda: running(kube, "whole-1"), what="whole-1 Running")
    assert (
        len(
            json.loads(pod["metadata"]["annotations"][pl.DEVICES_ANNOTATION])["main"][
                "nvidia.com/gpu"
            ]
        )
        == 8
    )


def _held(agent, node) -> int:
    return agent.node(node).held().get("nvidia.com/gpu", 0)


@controlplane
def test_kubelet_admission_rejects_what_the_node_cannot_hold(agent, kube):
    node = "h100-1"
    free = 8 - _held(agent, node)
    create(kube, gpu_pod("too-many", 9, node_name=node))
    create(kube, gpu_pod("too-big", 0, node_name=node, cpu="200"))

    def failed(name):
        st = kube.get("Pod", name, "default").get("status") or {}
        return st if st.get("phase") == "Failed" else None

    st = wait_for(lambda: failed("too-many"), what="too-many Failed")
    assert st["reason"] == "UnexpectedAdmissionError"
    assert st["message"] == (
        "Pod was rejected: Allocate failed due to requested number of devices unavailable for "
        f"nvidia.com/gpu. Requested: 9, Available: {free}, which is unexpected"
    )
    st = wait_for(lambda: failed("too-big"), what="too-big Failed")
    assert st["reason"] == "OutOfcpu"
    assert st["message"].startswith(
        "Pod was rejected: Node didn't have enough resource: cpu, requested: 200000, used: "
    )
    assert st["message"].endswith(", capacity: 96000")
    events = kube.list("Event", "default", field_selector="involvedObject.name=too-big")["items"]
    assert any(e["reason"] == "OutOfcpu" and e["source"]["component"] == "kubelet" for e in events)


@controlplane
def test_an_agent_started_again_adopts_the_pods_its_nodes_run(lab, agent, kube):
    _, _, root = lab
    node = "h100-0"
    wait_for(lambda: _held(agent, node) == 0, timeout=5, what="earlier pods' devices released")
    pod = create(kube, gpu_pod("keeper", 8, node=node))
    pod = wait_for(lambda: running(kube, "keeper"), what="keeper Running")
    ids = json.loads(pod["metadata"]["annotations"][pl.DEVICES_ANNOTATION])
    agent.stop()
    other = NodeAgent(kube, load_scenario(POOL).nodes, root / "w2", heartbeat=1.0)
    try:
        other.start()
        sn = other.node(node)
        wait_for(lambda: _held(other, node) == 8, timeout=5, what="devices held again")
        assert sn.manager.pods.allocations(pod["metadata"]["uid"]) == ids
        create(kube, gpu_pod("squeezed", 1, node_name=node))  # the kubelet's own check
        st = wait_for(
            lambda: (kube.get("Pod", "squeezed", "default").get("status") or {}).get("reason"),
            what="squeezed rejected",
        )
        assert st == "UnexpectedAdmissionError"
    finally:
        other.stop()
        agent.start()
    assert kube.get("Node", node)["status"]["allocatable"]["nvidia.com/gpu"] == "8"


@controlplane
def test_pods_deleted_while_the_agent_was_down_are_finished_before_start_returns(agent, kube):
    node = "h100-1"
    create(kube, gpu_pod("leftover", 1, node=node))
    wait_for(lambda: running(kube, "leftover"), what="leftover Running")
    agent.stop()
    kube.delete("Pod", "leftover", "default")  # graceful: no kubelet to finish it
    assert kube.get("Pod", "leftover", "default")["metadata"]["deletionTimestamp"]
    agent.start()
    gone = kube.list("Pod", "default", field_selector="metadata.name=leftover")["items"]
    assert gone == [] and _held(agent, node) == 0


@controlplane
def test_a_cancelled_watch_ends_at_once(lab):
    import threading

    from gpu_lab.kube import CancellableWatch

    cluster, _, _ = lab
    watcher = CancellableWatch(cluster.client())
    seen = []
    t = threading.Thread(
        target=lambda: seen.extend(watcher.stream("Namespace", timeout_seconds=60)), daemon=True
    )
    t.start()
    wait_for(lambda: len(seen) >= 4, timeout=5, what="the initial ADDED events")
    t0 = time.monotonic()
    watcher.cancel()
    t.join(5)
    assert not t.is_alive() and time.monotonic() - t0 < 1


@controlplane
def test_runs_as_a_process_until_sigterm_and_takes_its_plugins_along(lab, agent, kube):
    cluster, _, root = lab
    scenario = root / "l4.yaml"
    scenario.write_text(POOL.replace("h100", "l4").replace("H100-80GB", "L4").replace("8}", "1}"))
    assert [n.name for n in nodes_of(scenario)] == ["l4-0", "l4-1"]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gpu_lab.kubelet.agent",
            "--kubeconfig",
            str(cluster.kubeconfig()),
            "--scenario",
            str(scenario),
            "--work-dir",
            str(root / "p"),
        ],  # fmt: skip
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline()
        assert "node agent: 2 node(s) ready" in line, line + proc.stderr.read()
        assert node_figures(kube, "l4-1") == ("1", "1")
        children = _children(proc.pid)
        assert len(children) == 2  # one plugin per node
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(15) == 0
        for pid in children:
            wait_for(lambda p=pid: not Path(f"/proc/{p}").exists(), timeout=5, what="plugin gone")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for name in ("l4-0", "l4-1"):
            kube.delete("Node", name, missing_ok=True)


def _children(pid: int) -> list[int]:
    out = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError):
                fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
                if int(fields[1]) == pid:
                    out.append(int(d.name))
    return out
