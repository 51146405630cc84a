"""A real round trip: the fake plugin as its own process, the kubelet side in the test, unix sockets."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
import yaml

from gpu_lab.deviceplugin.plugin import HEALTH_FILE, socket_name
from gpu_lab.errors import DeviceAllocationError
from gpu_lab.gpus.labels import gpu_node_state
from gpu_lab.kubelet.devicemanager import DeviceManager
from gpu_lab.kubelet.registration import KubeletServer
from gpu_lab.model.nodepool import expand_node_pool

REPO = Path(__file__).resolve().parents[2]
GPU = "nvidia.com/gpu"
U = gpu_node_state("h100-0", "H100-80GB", 4).devices[GPU]
START = 20  # seconds a plugin process may take to register on a loaded machine


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


@pytest.fixture
def dirs():
    plugin_dir = tempfile.mkdtemp(prefix="gl", dir="/tmp")  # unix socket paths must stay < 108 bytes
    logs = tempfile.mkdtemp(prefix="gllog")  # outside the plugin dir, which the kubelet wipes
    try:
        yield plugin_dir, logs
    finally:
        shutil.rmtree(plugin_dir, ignore_errors=True)
        shutil.rmtree(logs, ignore_errors=True)


@pytest.fixture
def spawn(dirs):
    plugin_dir, logs = dirs
    procs = []

    def start(*extra, model="H100-80GB", gpus=4, node="h100-0"):
        cmd = [sys.executable, "-m", "gpu_lab.deviceplugin.plugin", "--model", model, "--gpus", str(gpus),
               "--node-name", node, "--plugin-dir", plugin_dir, *extra]
        with open(os.path.join(logs, f"plugin-{len(procs)}.log"), "wb") as log:
            p = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        procs.append(p)
        return p

    try:
        yield start
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait(10)


def logs_of(dirs) -> str:
    return "\n".join(p.read_text() for p in sorted(Path(dirs[1]).iterdir()))


def test_plugin_process_registers_lists_allocates_and_pushes_health(dirs, spawn):
    plugin_dir = dirs[0]
    with KubeletServer(plugin_dir) as kubelet:
        m = kubelet.manager
        proc = spawn()
        assert kubelet.wait_for(lambda: m.allocatable().get(GPU) == 4, START), logs_of(dirs)
        assert kubelet.connected() == {GPU: "nvidia-gpu.sock"}
        assert [r for _, r, _ in kubelet.registrations] == [GPU]
        assert m.devices == {GPU: U}
        assert m.endpoint(GPU).options == {"pre_start_required": False, "get_preferred_allocation_available": True}

        a = kubelet.allocate("default/train", "main", GPU, 2)
        assert a.device_ids == U[:2]
        assert a.envs == {"NVIDIA_VISIBLE_DEVICES": f"{U[0]},{U[1]}"}
        assert m.pods.container_envs("default/train", "main") == a.envs

        # Flip health from outside the plugin process: ListAndWatch pushes the new list.
        Path(plugin_dir, HEALTH_FILE).write_text(f"{U[3]} Unhealthy\n")
        assert kubelet.wait_for(lambda: m.allocatable()[GPU] == 3, 5), logs_of(dirs)
        assert m.capacity() == {GPU: 4} and m.health(GPU)[U[3]] is False
        with pytest.raises(DeviceAllocationError) as exc:
            kubelet.allocate("default/other", "main", GPU, 2)
        assert str(exc.value) == "requested number of devices unavailable for nvidia.com/gpu. Requested: 2, Available: 1"
        Path(plugin_dir, HEALTH_FILE).write_text("")
        assert kubelet.wait_for(lambda: m.allocatable()[GPU] == 4, 5), logs_of(dirs)

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        assert kubelet.wait_for(lambda: m.allocatable()[GPU] == 0, 5)
        assert not os.path.exists(os.path.join(plugin_dir, "nvidia-gpu.sock"))
    log = logs_of(dirs)
    assert "registered nvidia.com/gpu (4 devices)" in log and "allocate nvidia.com/gpu:" in log


def test_killed_plugin_allocatable_drops_at_once_capacity_after_grace_restart_restores(dirs, spawn):
    plugin_dir = dirs[0]
    clock = FakeClock()
    m = DeviceManager(clock=clock)
    with KubeletServer(plugin_dir, m) as kubelet:
        proc = spawn()
        assert kubelet.wait_for(lambda: m.allocatable().get(GPU) == 4, START), logs_of(dirs)
        kubelet.allocate("default/running", "main", GPU, 1)

        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert kubelet.wait_for(lambda: m.allocatable()[GPU] == 0, 2)
        assert m.capacity() == {GPU: 4}

        # Back within the grace period: both restored.
        clock.t += 120
        proc = spawn()
        assert kubelet.wait_for(lambda: m.allocatable()[GPU] == 4, START), logs_of(dirs)
        assert m.capacity() == {GPU: 4}
        assert m.pods.allocations("default/running") == {"main": {GPU: [U[0]]}}

        # Gone for longer than the grace period: capacity drops too (the name lingers at 0).
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        assert kubelet.wait_for(lambda: m.allocatable()[GPU] == 0, 2)
        clock.t += 300
        assert m.capacity() == {GPU: 4}
        clock.t += 1
        assert m.capacity() == {GPU: 0} and m.allocatable() == {GPU: 0}

        # Restarted: registration and the first ListAndWatch bring both back.
        spawn()
        assert kubelet.wait_for(lambda: m.allocatable()[GPU] == 4, START), logs_of(dirs)
        assert m.capacity() == {GPU: 4}


def a100_node(device_plugin, mig):
    """The simulator's node a100-0: A100-40GB x2 with this device-plugin config and MIG config."""
    (node,) = expand_node_pool({
        "apiVersion": "gpulab.dev/v1alpha1", "kind": "NodePool", "metadata": {"name": "a100"},
        "spec": {"count": 1, "gpu": {"model": "A100-40GB", "count": 2}, "cpu": "32", "memory": "256Gi",
                 "devicePlugin": device_plugin, "mig": mig}})
    return node


def write(dirs, name, doc) -> str:
    path = os.path.join(dirs[1], name)
    Path(path).write_text(yaml.safe_dump(doc))
    return path


def test_mixed_mig_plugin_process_registers_each_profile_like_the_simulated_node(dirs, spawn):
    plugin_dir = dirs[0]
    dp = {"version": "v1", "flags": {"migStrategy": "mixed"}}
    node = a100_node(dp, {"config": "all-balanced"})
    want = {r: n for r, n in node.capacity.items() if r.startswith("nvidia.com/")}
    assert want == {"nvidia.com/mig-1g.5gb": 4, "nvidia.com/mig-2g.10gb": 2, "nvidia.com/mig-3g.20gb": 2}
    with KubeletServer(plugin_dir) as kubelet:
        m = kubelet.manager
        proc = spawn("--config", write(dirs, "dp.yaml", dp), "--mig-config", "all-balanced",
                     model="A100-40GB", gpus=2, node="a100-0")
        assert kubelet.wait_for(lambda: m.allocatable() == want, START), logs_of(dirs)
        # one server, socket and registration per resource, named as NVIDIA names them
        assert sorted(r for _, r, _ in kubelet.registrations) == sorted(want)
        assert kubelet.connected() == {r: socket_name(r) for r in want}
        assert kubelet.connected()["nvidia.com/mig-1g.5gb"] == "nvidia-mig-1g.5gb.sock"
        assert m.devices == node.devices and m.capacity() == want

        # Allocate: the kubelet's choice equals the simulator's, the env names the MIG devices
        sim = DeviceManager(node.devices)
        for pod, res, n in (("default/infer", "nvidia.com/mig-1g.5gb", 2),
                            ("default/train", "nvidia.com/mig-3g.20gb", 1),
                            ("default/more", "nvidia.com/mig-1g.5gb", 1)):
            a = kubelet.allocate(pod, "main", res, n)
            assert a.device_ids == sim.allocate(pod, "main", res, n)
            assert all(d.startswith("MIG-") for d in a.device_ids)
            assert a.envs == {"NVIDIA_VISIBLE_DEVICES": ",".join(a.device_ids)}
        assert a.device_ids == node.devices["nvidia.com/mig-1g.5gb"][2:3]

        # An XID on GPU 0 (its UUID in the health file) takes down every MIG device on it
        gpu0 = gpu_node_state("a100-0", "A100-40GB", 2).devices[GPU][0]
        Path(plugin_dir, HEALTH_FILE).write_text(f"{gpu0} Unhealthy\n")
        half = {"nvidia.com/mig-1g.5gb": 2, "nvidia.com/mig-2g.10gb": 1, "nvidia.com/mig-3g.20gb": 1}
        assert kubelet.wait_for(lambda: m.allocatable() == half, 5), logs_of(dirs)
        assert m.capacity() == want

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(10) == 0
        assert kubelet.wait_for(lambda: m.allocatable() == dict.fromkeys(want, 0), 5)
        assert not [f for f in os.listdir(plugin_dir) if f.startswith("nvidia-")]
    log = logs_of(dirs)
    assert all(f"registered {r} ({n} devices)" in log for r, n in want.items()), log


def test_single_mig_plugin_process_advertises_instances_as_gpus(dirs, spawn):
    plugin_dir = dirs[0]
    dp = {"version": "v1", "flags": {"migStrategy": "single"}}
    parted = {"version": "v1", "mig-configs": {
        "all-1g.5gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}],
        "all-3g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.20gb": 2}}],
    }}
    node = a100_node(dp, {"config": "all-1g.5gb", "migParted": parted})
    assert node.capacity[GPU] == 14 and node.labels["nvidia.com/gpu.product"].endswith("-MIG-1g.5gb")
    with KubeletServer(plugin_dir) as kubelet:
        m = kubelet.manager
        spawn("--config", write(dirs, "dp.yaml", dp), "--mig-config", write(dirs, "mig.yaml", parted),
              "--mig-config-name", "all-1g.5gb", model="A100-40GB", gpus=2, node="a100-0")
        assert kubelet.wait_for(lambda: m.allocatable() == {GPU: 14}, START), logs_of(dirs)  # 7 x 2 GPUs
        assert kubelet.connected() == {GPU: "nvidia-gpu.sock"}
        assert m.devices == node.devices
        a = kubelet.allocate("default/small", "main", GPU, 3)
        assert a.device_ids == DeviceManager(node.devices).allocate("default/small", "main", GPU, 3)
        assert a.envs == {"NVIDIA_VISIBLE_DEVICES": ",".join(node.devices[GPU][:3])}


def test_cdi_answers_reach_the_kubelet_side_over_grpc(dirs, spawn, tmp_path):
    """Under deviceListStrategy [cdi-cri, cdi-annotations] the Allocate answer the kubelet
    receives names NVIDIA's CDI devices, for the CRI's CDIDevices and as an annotation."""
    config = tmp_path / "config.yaml"
    config.write_text("version: v1\nflags:\n  plugin:\n    deviceListStrategy: [cdi-cri, cdi-annotations]\n")
    with KubeletServer(dirs[0]) as kubelet:
        spawn("--config", str(config))
        assert kubelet.wait_for(lambda: kubelet.manager.allocatable().get(GPU) == 4, START), logs_of(dirs)
        a = kubelet.allocate("default/infer", "main", GPU, 2)
        names = [f"k8s.device-plugin.nvidia.com/gpu={d}" for d in a.device_ids]
        assert a.cdi_devices == names and not a.envs
        ((key, value),) = a.annotations.items()
        assert key.startswith("cdi.k8s.io/nvidia-device-plugin_") and value == ",".join(names)


def test_an_eight_gpu_plugin_reports_numa_nodes_and_prefers_one_over_grpc(dirs, spawn):
    """ListAndWatch carries each GPU's NUMA node; GetPreferredAllocation keeps a request on
    one NUMA node and leaves the fuller one whole, as NVIDIA's best-effort policy does."""
    plugin_dir = dirs[0]
    u8 = gpu_node_state("h100-0", "H100-80GB", 8).devices[GPU]
    with KubeletServer(plugin_dir) as kubelet:
        m = kubelet.manager
        spawn(gpus=8)
        assert kubelet.wait_for(lambda: m.allocatable().get(GPU) == 8, START), logs_of(dirs)
        assert list(m.numa(GPU).values()) == [0, 0, 0, 0, 1, 1, 1, 1]
        assert kubelet.allocate("default/one", "c", GPU, 1).device_ids == [u8[0]]
        # NUMA node 0 has three free, node 1 four: four go to node 1, two to node 0
        assert kubelet.allocate("default/four", "c", GPU, 4).device_ids == u8[4:8]
        assert kubelet.allocate("default/two", "c", GPU, 2).device_ids == u8[1:3]
    log = logs_of(dirs)
    assert f"preferred allocation nvidia.com/gpu: 4 of {','.join(u8[1:])} -> {','.join(u8[4:])}" in log


def test_numa_nodes_flag_splits_the_gpus_and_a_bad_value_is_one_line(dirs, spawn):
    plugin_dir = dirs[0]
    with KubeletServer(plugin_dir) as kubelet:
        m = kubelet.manager
        spawn("--numa-nodes", "4", gpus=8)
        assert kubelet.wait_for(lambda: m.allocatable().get(GPU) == 8, START), logs_of(dirs)
        assert list(m.numa(GPU).values()) == [0, 0, 1, 1, 2, 2, 3, 3]
    bad = subprocess.run([sys.executable, "-m", "gpu_lab.deviceplugin.plugin", "--model", "H100-80GB",
                          "--gpus", "8", "--numa-nodes", "9", "--plugin-dir", plugin_dir],
                         cwd=REPO, capture_output=True, text=True, timeout=60)
    assert bad.returncode == 1
    assert bad.stderr.strip().splitlines() == ["error: numaNodes must be an integer from 1 to 8, got 9"]
