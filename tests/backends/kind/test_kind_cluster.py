"""The device-plugin flow on a real kind cluster: real kubelets in Docker containers, our fake
NVIDIA device plugin as a DaemonSet registering over each kubelet's real ``kubelet.sock``.

The session's kind cluster (``shared_kind`` in conftest.py), reshaped for the module to
four GPU workers (whole GPUs, time-slicing, MIG mixed, MIG single), from ``gpu-lab kind
build``'s images. Marked ``kind``: in CI (``CI=true``) a missing Docker engine or image
fails, never skips.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

import pytest
import yaml
from fleets import A100_MIXED_MIG, T4_TIME_SLICED, TOLERATE, sized

import gpu_lab
from gpu_lab.backends.kind import build as kind_build
from gpu_lab.backends.kind.session import show_devices_pod
from gpu_lab.fidelity import mirror_documents, real_choices, replaying
from gpu_lab.gpus.labels import gpu_uuids

pytestmark = [pytest.mark.kind, pytest.mark.xdist_group("kind")]

SCENARIO = """
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: h100}
spec:
  count: 1
  gpu: {model: H100-80GB, count: 8}
  cpu: "2"
  memory: 8Gi
  taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
---
""" + sized(T4_TIME_SLICED, "2", "8Gi") + "---" + sized(A100_MIXED_MIG, "2", "8Gi") + """---
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: h200}
spec:
  count: 1
  gpu: {model: H200-141GB, count: 1}
  cpu: "2"
  memory: 8Gi
  devicePlugin: {version: v1, flags: {migStrategy: single}}
  mig: {config: all-1g.18gb}
"""


def _kubectl(lab, *args: str, check: bool = True) -> str:
    kubectl = str(kind_build.tool_path("kubectl"))
    res = subprocess.run([kubectl, "--kubeconfig", str(lab.cluster.kubeconfig()), *args],
                         capture_output=True, text=True, timeout=120)
    if check:
        assert res.returncode == 0, res.stderr
    return res.stdout


def _until(what: str, check, timeout: float = 120.0, every: float = 0.5):
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        assert time.monotonic() < deadline, f"timed out after {timeout:.0f} s waiting for {what}"
        time.sleep(every)


def _nvidia(node: dict, field: str) -> dict[str, int]:
    return {k: int(v) for k, v in (node["status"].get(field) or {}).items() if k.startswith("nvidia.com/")}


@pytest.fixture(scope="module")
def lab(shared_kind):
    """The session's kind cluster (conftest.py), reshaped to this module's four GPU workers."""
    shared_kind.reset()
    shared_kind.apply(SCENARIO)
    yield shared_kind
    shared_kind.reset()


@pytest.fixture(scope="module")
def sim():
    s = gpu_lab.connect("sim", deterministic=True)
    s.apply(SCENARIO)
    return s


def _node(lab, name: str) -> dict:
    return lab.client.get("Node", name)


def test_nodes_are_the_scenarios_with_the_same_names_and_labels(lab, sim):
    names = {n["metadata"]["name"] for n in lab.client.list("Node")["items"]}
    assert set(sim.nodes()["name"]) <= names
    assert len(names - set(sim.nodes()["name"])) == 1  # kind's control-plane node
    h100 = _node(lab, "h100-0")
    labels = h100["metadata"]["labels"]
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"
    assert labels["gpulab.dev/owned"] == "true"
    assert {(t["key"], t.get("value"), t["effect"]) for t in h100["spec"].get("taints") or []} == {
        ("nvidia.com/gpu", "present", "NoSchedule")}
    info = h100["status"]["nodeInfo"]
    assert info["kubeletVersion"] == "v1.37.2"
    assert info["containerRuntimeVersion"].startswith("containerd://2.")


def test_plugin_registered_with_the_real_kubelet(lab):
    """The kubelet's own log: a registration request over kubelet.sock, per resource."""
    containers = lab.cluster.containers_of_nodes()
    for node in ("h100-0", "t4-0", "a100-0", "h200-0"):
        # since the kubelet's last start (the module's reshape started it anew)
        since = subprocess.run(["docker", "exec", containers[node], "systemctl", "show", "kubelet",
                                "--property=ActiveEnterTimestamp", "--value"],
                               capture_output=True, text=True, timeout=60).stdout.strip()
        log = subprocess.run(["docker", "exec", containers[node], "journalctl", "-u", "kubelet", "--no-pager",
                              "--since", since], capture_output=True, text=True, timeout=60).stdout
        assert "Got registration request from device plugin with resource" in log, node
        sockets = subprocess.run(["docker", "exec", containers[node], "ls", "/var/lib/kubelet/device-plugins"],
                                 capture_output=True, text=True).stdout.split()
        assert "kubelet.sock" in sockets and any(s != "kubelet.sock" and s.endswith(".sock")
                                                 for s in sockets), sockets


def test_capacity_and_allocatable_come_from_the_device_manager_as_nvidia_advertises(lab, sim):
    """Whole GPUs, time-slicing replicas, MIG mixed and single: what the real kubelet reports
    is what the simulator's NVIDIA model advertises for the same NodePools."""
    want = {row["name"]: row for row in sim.nodes().to_dict("records")}
    for name in ("h100-0", "t4-0", "a100-0", "h200-0"):
        node = _node(lab, name)
        cap, alloc = _nvidia(node, "capacity"), _nvidia(node, "allocatable")
        sim_alloc = {k.split(" ")[0]: int(v) for k, v in want[name].items()
                     if k.endswith(" allocatable") and k.startswith("nvidia.com/") and v == v and v}
        assert alloc == sim_alloc, name
        assert cap == alloc, name
    assert _nvidia(_node(lab, "t4-0"), "allocatable") == {"nvidia.com/gpu": 4}
    assert _nvidia(_node(lab, "h200-0"), "allocatable") == {"nvidia.com/gpu": 7}
    mixed = _nvidia(_node(lab, "a100-0"), "allocatable")
    assert mixed and all(k.startswith("nvidia.com/mig-") for k in mixed)


def test_a_container_sees_the_devices_the_plugin_allocated(lab, sim):
    pod = show_devices_pod("show-devices", gpus=2)
    pod["spec"]["tolerations"] = TOLERATE
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "h100-0"}
    lab.apply([pod])

    def done():
        p = lab.client.get("Pod", "show-devices", namespace=lab.namespace)
        return p if p["status"].get("phase") in ("Succeeded", "Failed") else None

    assert _until("show-devices to finish", done)["status"]["phase"] == "Succeeded"
    out = _kubectl(lab, "-n", lab.namespace, "logs", "show-devices").strip()
    assert out.startswith("NVIDIA_VISIBLE_DEVICES=GPU-")
    got = out.split("=", 1)[1].split(",")
    sim.apply([pod])
    sim.schedule()
    want = sim.pods().set_index("name").loc["show-devices", "devices"]["nvidia.com/gpu"]
    # the same two UUIDs, chosen the same way; their order is the order of the kubelet's
    # Allocate request, which comes from a set (it differs from run to run)
    assert sorted(got) == sorted(want)
    lab.delete("show-devices")


def test_without_its_plugin_a_node_keeps_capacity_but_allocatable_drops_to_zero(lab):
    """The classic fault: the plugin's pod is gone (``kill_plugin`` labels the node out of
    the DaemonSet), the kubelet's device manager marks its devices unhealthy, allocatable
    goes to 0 while capacity keeps the GPUs; healthy GPUs sit unused and a pod that needs
    them waits with the sim's message. ``restart_plugin`` brings it back, the pod lands."""
    assert _nvidia(_node(lab, "h100-0"), "allocatable") == {"nvidia.com/gpu": 8}
    lab.kill_plugin("h100-0")
    try:
        _plugin_gone(lab)
    finally:
        lab.restart_plugin("h100-0")
    assert _nvidia(_node(lab, "h100-0"), "allocatable") == {"nvidia.com/gpu": 8}
    landed = _until("big-train to land once the plugin is back",
                    lambda: lab.schedule().set_index("name").loc["big-train", "node"] == "h100-0",
                    timeout=120, every=2)
    assert landed
    lab.delete("big-train")


def _plugin_gone(lab) -> None:
    node = _node(lab, "h100-0")
    assert _nvidia(node, "allocatable") == {"nvidia.com/gpu": 0}
    assert _nvidia(node, "capacity") == {"nvidia.com/gpu": 8}
    assert not lab.client.list("Pod", namespace="gpu-lab-system",
                               field_selector="spec.nodeName=h100-0")["items"]
    described = lab.describe_node("h100-0")
    assert (described.capacity["nvidia.com/gpu"], described.allocatable["nvidia.com/gpu"]) == ("8", "0")
    big = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "big-train"},
           "spec": {"tolerations": TOLERATE, "nodeSelector": {"kubernetes.io/hostname": "h100-0"},
                    "containers": [{"name": "c", "image": "pytorch",
                                    "resources": {"limits": {"nvidia.com/gpu": 8}}}]}}
    lab.apply([big])
    waiting = lab.schedule().set_index("name").loc["big-train"]
    assert "Insufficient nvidia.com/gpu" in waiting["message"]


def test_a_failed_gpu_leaves_allocatable_as_on_the_sim(lab):
    """``fail_device``: the plugin reads the GPU's UUID in its control file and reports that
    GPU's devices Unhealthy to the real kubelet, which counts them out of allocatable and
    keeps capacity, as the sim's device manager does: a whole GPU, a time-sliced one (its 4
    replicas) and a MIG one (its instances). ``heal_device`` brings them back."""
    twin = gpu_lab.connect("sim", deterministic=True)
    twin.apply(SCENARIO)
    failing = {"h100-0": 2, "t4-0": 0, "a100-0": 1}
    before = {n: _nvidia(_node(lab, n), "allocatable") for n in failing}
    try:
        for node, index in failing.items():
            lab.fail_device(node, index, reason="Xid 79")
            twin.fail_device(node, index, reason="Xid 79")
        for node in failing:
            got = _node(lab, node)
            want = twin.describe_node(node)
            assert _nvidia(got, "allocatable") == {r: int(v) for r, v in want.allocatable.items()
                                                   if r.startswith("nvidia.com/")}
            assert _nvidia(got, "capacity") == {r: int(v) for r, v in want.capacity.items()
                                                if r.startswith("nvidia.com/")}
            assert _nvidia(got, "allocatable") != before[node]
    finally:
        for node, index in failing.items():
            lab.heal_device(node, index)
    assert {n: _nvidia(_node(lab, n), "allocatable") for n in failing} == before


def _checkpoint(lab, node: str) -> dict:
    """The real kubelet's device-manager checkpoint on the node: who holds which device."""
    container = lab.cluster.containers_of_nodes()[node]
    out = subprocess.run(["docker", "exec", container, "cat",
                          "/var/lib/kubelet/device-plugins/kubelet_internal_checkpoint"],
                         capture_output=True, text=True, timeout=30, check=True).stdout
    return json.loads(out)


def test_a_plugin_restart_leaves_running_pods_their_devices(lab):
    """An upgrade's plugin restart: the kubelet, not the plugin, remembers who holds which
    GPU (its checkpoint file), so a running pod keeps its devices while the plugin is away
    and after it registers again; allocatable is 0 meanwhile."""
    keeper = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "keeper"},
              "spec": {"tolerations": TOLERATE, "nodeSelector": {"kubernetes.io/hostname": "h100-0"},
                       "containers": [{"name": "c", "image": "x",
                                       "resources": {"limits": {"nvidia.com/gpu": 3}}}]}}
    lab.apply([keeper])
    _until("keeper to run", lambda: lab.schedule().set_index("name").loc["keeper", "phase"] == "Running")
    devices = sorted(lab.pods().set_index("name").loc["keeper", "devices"]["nvidia.com/gpu"])
    uid = lab.client.get("Pod", "keeper", namespace=lab.namespace)["metadata"]["uid"]

    def held(data: dict) -> list[str]:
        entries = [e for e in data["Data"]["PodDeviceEntries"] if e["PodUID"] == uid]
        return sorted(d for e in entries for ids in e["DeviceIDs"].values() for d in ids)

    assert len(devices) == 3 and held(_checkpoint(lab, "h100-0")) == devices
    lab.kill_plugin("h100-0")
    try:
        assert _nvidia(_node(lab, "h100-0"), "allocatable") == {"nvidia.com/gpu": 0}
        assert held(_checkpoint(lab, "h100-0")) == devices
        assert lab.client.get("Pod", "keeper", namespace=lab.namespace)["status"]["phase"] == "Running"
    finally:
        lab.restart_plugin("h100-0")
    assert lab.pods().set_index("name").loc["keeper", "phase"] == "Running"
    assert held(_checkpoint(lab, "h100-0")) == devices
    lab.delete("keeper")


def test_the_real_kubelet_asks_the_plugin_which_gpus_and_takes_its_numa_choice(lab):
    """``GetPreferredAllocation`` on the real kubelet: with GPU 0 taken, a 4-GPU pod gets the
    whole second NUMA node (GPUs 4-7), the plugin's best-effort answer (the kubelet alone
    takes any four from a set: all on one node by chance 1 in 35). The plugin's log has the
    kubelet's question and its answer; the sim hands out the same GPUs."""
    def pod(name: str, gpus: int) -> dict:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                "spec": {"tolerations": TOLERATE, "nodeSelector": {"kubernetes.io/hostname": "h100-0"},
                         "containers": [{"name": "c", "image": "x",
                                         "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}

    twin = gpu_lab.connect("sim", deterministic=True)
    twin.apply(SCENARIO)
    held = {}
    for name, gpus in (("numa-one", 1), ("numa-four", 4)):
        lab.apply([pod(name, gpus)])
        _until(f"{name} to run", lambda n=name: lab.schedule().set_index("name").loc[n, "phase"] == "Running")
        held[name] = sorted(lab.pods().set_index("name").loc[name, "devices"]["nvidia.com/gpu"])
        twin.apply([pod(name, gpus)])
        twin.schedule()
        assert sorted(twin.pods().set_index("name").loc[name, "devices"]["nvidia.com/gpu"]) == held[name]
    uuids = gpu_uuids("h100-0", 8)
    assert held == {"numa-one": [uuids[0]], "numa-four": sorted(uuids[4:])}
    plugin = _kubectl(lab, "-n", "gpu-lab-system", "get", "pods", "-o", "name",
                      "--field-selector", "spec.nodeName=h100-0").split()
    assert len(plugin) == 1, plugin
    log = _kubectl(lab, "-n", "gpu-lab-system", "logs", plugin[0])
    assert "preferred allocation nvidia.com/gpu: 4 of " in log
    assert f"-> {','.join(uuids[4:])}" in log
    for name in held:
        lab.delete(name)


def test_scheduling_on_kind_matches_the_sim(lab, sim):
    """Pods that ask only for GPUs: the real scheduler on real kubelets places them as the
    simulator does, and the one that cannot fit is refused for the same reason."""
    pods = []
    for name, gpus in (("fill-a", 5), ("fill-b", 3), ("too-many", 1)):
        pods.append({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                     "spec": {"tolerations": TOLERATE,
                              "nodeSelector": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"},
                              "containers": [{"name": "c", "image": "registry.invalid/train:1",
                                              "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}})
    lab.reset()
    lab.apply(pods)
    got = lab.schedule().set_index("name")
    s = gpu_lab.connect("sim", deterministic=True)
    s.apply(SCENARIO)
    s.apply(pods)
    want = s.schedule().set_index("name")
    assert got.loc["fill-a", "node"] == want.loc["fill-a", "node"] == "h100-0"
    assert got.loc["fill-b", "node"] == "h100-0"
    # placeholder containers run, so each pod's devices are what its container sees
    held = [got.loc[p, "devices"].get("nvidia.com/gpu", []) for p in ("fill-a", "fill-b")]
    assert [len(h) for h in held] == [5, 3] and not set(held[0]) & set(held[1])
    assert set(held[0]) | set(held[1]) == {i for row in want["devices"] for i in row.get("nvidia.com/gpu", [])}
    assert got.loc["too-many", "node"] is None or got.loc["too-many", "node"] != got.loc["too-many", "node"]
    assert "Insufficient nvidia.com/gpu" in got.loc["too-many", "message"]
    assert "Insufficient nvidia.com/gpu" in want.loc["too-many", "message"]
    exp = lab.explain("too-many")
    assert "Insufficient nvidia.com/gpu" in str(exp)
    lab.reset()


def test_explain_carries_the_real_schedulers_scores_and_they_equal_the_sims(lab, tmp_path):
    """kubeadm's kube-scheduler runs with the local backend's --vmodule, so explain reads its
    own per-plugin scores from its log, weighted as its /configz says, in the sim's shape. A
    GPU pod that does not tolerate the H100 taint fits two nodes (t4-0 time-sliced, h200-0
    MIG single); the sim, given the same cluster (the API server's Nodes and system pods),
    scores both the same, plugin by plugin. Equal totals are a tie the real scheduler broke:
    the sim takes its node (fidelity's replay), so the chosen node is compared too."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "scored"},
           "spec": {"containers": [{"name": "c", "image": "app", "resources": {
               "requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"nvidia.com/gpu": 1}}}]}}
    lab.reset()
    lab.apply([pod])
    lab.schedule()
    real = lab.explain("scored").to_dict()
    s = gpu_lab.connect("sim", seed=0)
    s.apply(mirror_documents(lab.client, lab.namespace))
    with replaying(real_choices(lab, ["scored"]), ["scored"]):
        s.apply([pod])
        s.schedule()
    model = s.explain("default/scored").to_dict()
    lab.reset()

    def scored(d):
        return {n["name"]: ({p: v["weighted"] for p, v in n["scores"].items() if v["weighted"]}, n["total"])
                for n in d["nodes"] if n.get("scores")}

    assert set(scored(real)) == {"t4-0", "h200-0"}
    assert scored(real) == scored(model)
    assert real["node"] == model["node"] in ("t4-0", "h200-0")
    assert {n["name"] for n in real["nodes"] if n["result"] == "infeasible"} == {
        "h100-0", "a100-0", f"{lab.cluster.name}-control-plane"}
    t4 = next(n for n in real["nodes"] if n["name"] == "t4-0")["scores"]
    # weights from the running scheduler's /configz: TaintToleration 3, NodeResourcesFit 1
    assert t4["TaintToleration"] == {"normalized": 100, "weighted": 300}
    assert t4["NodeResourcesFit"]["weighted"] == t4["NodeResourcesFit"]["normalized"] > 0
    # the command line says the same (a new session: the log read from its start)
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(pod))
    res = subprocess.run([sys.executable, "-m", "gpu_lab.cli", "explain", str(tmp_path / "pod.yaml"), "scored",
                          "--backend", "kind", "--name", lab.cluster.name, "--json"],
                         capture_output=True, text=True, timeout=300,
                         env={**os.environ, "GPU_LAB_HOME": str(lab.cluster.dir.parent.parent)})
    assert res.returncode == 0, res.stderr
    assert scored(json.loads(res.stdout)) == scored(real)


def test_kubeconfig_command_prints_the_clusters_kubeconfig(lab):
    res = subprocess.run([sys.executable, "-m", "gpu_lab.cli", "kubeconfig", "--backend", "kind",
                          "--name", lab.cluster.name],
                         capture_output=True, text=True,
                         env={**os.environ, "GPU_LAB_HOME": str(lab.cluster.dir.parent.parent)})
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == str(lab.cluster.kubeconfig())
    cfg = json.loads(_kubectl(lab, "config", "view", "-o", "json", "--raw"))
    assert cfg["clusters"][0]["cluster"]["server"].startswith("https://127.0.0.1:")
