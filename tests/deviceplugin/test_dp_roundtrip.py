"""A real round trip: the fake plugin as its own process, the kubelet side in the test, unix sockets."""

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from gpu_lab.deviceplugin.kubelet import KubeletServer
from gpu_lab.deviceplugin.manager import DeviceAllocationError, DeviceManager
from gpu_lab.deviceplugin.plugin import HEALTH_FILE, gpu_uuids

REPO = Path(__file__).resolve().parents[2]
GPU = "nvidia.com/gpu"
U = gpu_uuids("h100-0", 4)
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

    def start():
        cmd = [sys.executable, "-m", "gpu_lab.deviceplugin.plugin", "--model", "H100-80GB", "--gpus", "4",
               "--node-name", "h100-0", "--plugin-dir", plugin_dir]
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
        assert m.container_envs("default/train", "main") == a.envs

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
        assert m.allocations("default/running") == {"main": {GPU: [U[0]]}}

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
