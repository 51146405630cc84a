"""The kubelet's device manager model: capacity, allocatable, grace period, health, allocation."""

import pytest

from gpu_lab.deviceplugin.deviceids import preferred_allocation, visible_devices_env
from gpu_lab.errors import DeviceAllocationError
from gpu_lab.kubelet.devicemanager import ENDPOINT_STOP_GRACE_PERIOD, DeviceManager

GPU = "nvidia.com/gpu"
IDS = [f"GPU-{i}" for i in range(4)]


class FakeClock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def dm(clock):
    m = DeviceManager(clock=clock)
    m.register(GPU, "nvidia-gpu.sock", {"get_preferred_allocation_available": True})
    m.update_devices(GPU, IDS)
    return m


def test_grace_period_is_the_kubelets_five_minutes():
    assert ENDPOINT_STOP_GRACE_PERIOD == 300


def test_registered_devices_count_in_capacity_and_allocatable(dm):
    assert dm.capacity() == dm.allocatable() == {GPU: 4}
    assert dm.devices == {GPU: IDS}
    assert dm.endpoint(GPU).endpoint == "nvidia-gpu.sock"


def test_unhealthy_devices_stay_in_capacity_but_leave_allocatable(dm):
    dm.update_devices(GPU, [(IDS[0], "Healthy"), (IDS[1], "Unhealthy"), (IDS[2], "Healthy"), (IDS[3], False)])
    assert dm.capacity() == {GPU: 4} and dm.allocatable() == {GPU: 2}
    assert dm.free_devices(GPU) == [IDS[0], IDS[2]]
    assert dm.allocate("ns/p", "c", GPU, 2) == [IDS[0], IDS[2]]
    with pytest.raises(DeviceAllocationError) as exc:
        dm.allocate("ns/q", "c", GPU, 1)
    assert str(exc.value) == f"requested number of devices unavailable for {GPU}. Requested: 1, Available: 0"
    dm.set_health(GPU, IDS[1], True)
    assert dm.allocatable() == {GPU: 3}
    assert dm.allocate("ns/q", "c", GPU, 1) == [IDS[1]]


def test_endpoint_gone_allocatable_zero_at_once_capacity_after_grace(dm, clock):
    dm.allocate("ns/p", "c", GPU, 1)
    assert dm.endpoint_stopped(GPU, "nvidia-gpu.sock")
    assert dm.capacity() == {GPU: 4} and dm.allocatable() == {GPU: 0}
    with pytest.raises(DeviceAllocationError) as exc:
        dm.allocate("ns/q", "c", GPU, 1)
    assert str(exc.value) == f"no healthy devices present; cannot allocate unhealthy devices {GPU}"
    clock.t += ENDPOINT_STOP_GRACE_PERIOD  # exactly the grace period: not yet expired
    assert dm.capacity() == {GPU: 4}
    clock.t += 0.001
    # The resource is dropped; node status keeps the stale name at 0.
    assert dm.capacity() == {GPU: 0} and dm.allocatable() == {GPU: 0}
    assert dm.devices == {} and dm.endpoint(GPU) is None
    with pytest.raises(DeviceAllocationError, match=f"^cannot allocate unregistered device {GPU}$"):
        dm.allocate("ns/q", "c", GPU, 1)
    # Re-registration plus the first ListAndWatch restore both.
    dm.register(GPU, "nvidia-gpu.sock")
    dm.update_devices(GPU, IDS)
    assert dm.capacity() == dm.allocatable() == {GPU: 4}
    assert dm.pods.allocations("ns/p") == {"c": {GPU: [IDS[0]]}}  # running pods keep their devices


def test_reregistration_within_grace_restores_both(dm, clock):
    dm.endpoint_stopped(GPU)
    clock.t += 60
    dm.register(GPU, "nvidia-gpu.sock")
    assert dm.capacity() == {GPU: 4} and dm.allocatable() == {GPU: 0}  # until ListAndWatch reports
    dm.update_devices(GPU, IDS)
    assert dm.capacity() == dm.allocatable() == {GPU: 4}
    clock.t += 10 * ENDPOINT_STOP_GRACE_PERIOD
    assert dm.capacity() == {GPU: 4}  # the new endpoint is live: no expiry


def test_stale_stop_from_a_replaced_endpoint_is_ignored(dm):
    dm.register(GPU, "nvidia-gpu-v2.sock")
    assert not dm.endpoint_stopped(GPU, "nvidia-gpu.sock")
    assert dm.allocatable() == {GPU: 4}
    assert not dm.endpoint_stopped("example.com/none")


def test_grace_period_is_configurable(clock):
    m = DeviceManager({GPU: IDS}, grace_period=5, clock=clock)
    m.endpoint_stopped(GPU)
    clock.t += 5.5
    assert m.capacity() == {GPU: 0}


def test_listandwatch_replaces_the_device_list(dm):
    dm.update_devices(GPU, {IDS[0]: "Healthy", "GPU-9": "Healthy"})
    assert dm.devices == {GPU: [IDS[0], "GPU-9"]} and dm.capacity() == {GPU: 2}
    with pytest.raises(Exception, match="which no plugin registered"):
        dm.update_devices("example.com/x", ["a"])


def test_simulator_api_unchanged():
    m = DeviceManager({GPU: IDS})
    assert "nvidia.com/gpu" in m.devices
    assert m.allocate("ns/a", "main", GPU, 2) == IDS[:2]
    assert m.allocate("ns/a", "side", GPU, 1) == [IDS[2]]
    assert m.pods.allocations("ns/a") == {"main": {GPU: IDS[:2]}, "side": {GPU: [IDS[2]]}}
    assert m.pods.pod_devices("ns/a") == {GPU: IDS[:3]}
    assert m.free_devices(GPU) == [IDS[3]]
    with pytest.raises(RuntimeError, match="Requested: 2, Available: 1"):
        m.allocate("ns/b", "main", GPU, 2)
    m.pods.release("ns/a")
    assert m.free_devices(GPU) == IDS
    assert m.free_devices("example.com/none") == []


def test_container_restart_gets_the_same_devices_and_changed_counts_fail(dm):
    first = dm.allocate("ns/p", "c", GPU, 2)
    assert dm.allocate("ns/p", "c", GPU, 2) == first
    with pytest.raises(DeviceAllocationError, match='changed request for resource "nvidia.com/gpu" from 2 to 3'):
        dm.allocate("ns/p", "c", GPU, 3)


def test_plugin_preference_is_followed_within_free_healthy_devices(dm):
    dm.allocate("ns/p", "c", GPU, 1)  # takes GPU-0
    ids = dm.allocate("ns/q", "c", GPU, 2, prefer=lambda *_: ["GPU-0", "GPU-3"])  # GPU-0 is taken
    assert ids == ["GPU-3", "GPU-1"]


def test_release_container_and_admission_message(dm):
    dm.allocate("ns/p", "c", GPU, 4)
    dm.pods.release_container("ns/p", "c", GPU)
    assert dm.pods.allocations("ns/p") == {} and len(dm.free_devices(GPU)) == 4
    err = DeviceAllocationError("x")
    assert err.reason == "UnexpectedAdmissionError"
    assert err.admission_message == "Allocate failed due to x, which is unexpected"


def test_preferred_allocation_whole_gpus_lowest_first_and_must_include():
    assert preferred_allocation(IDS, [], 2) == IDS[:2]
    assert preferred_allocation(IDS, ["GPU-3"], 2) == ["GPU-3", "GPU-0"]
    assert preferred_allocation(IDS, ["GPU-3", "GPU-2"], 1) == ["GPU-3", "GPU-2"]
    with pytest.raises(Exception, match="not enough available devices"):
        preferred_allocation(IDS[:1], [], 2)


def test_preferred_allocation_spreads_replicas_over_gpus_like_nvidia():
    all_ids = [f"GPU-{g}::{r}" for g in range(2) for r in range(4)]
    assert preferred_allocation(all_ids, [], 3, all_ids) == ["GPU-0::0", "GPU-1::0", "GPU-0::1"]
    # GPU-0 already has two replicas taken: the next ones come from GPU-1 first
    free = [i for i in all_ids if i not in ("GPU-0::0", "GPU-0::1")]
    assert preferred_allocation(free, [], 3, all_ids) == ["GPU-1::0", "GPU-1::1", "GPU-0::2"]


def test_sim_allocation_of_replicas_spreads_too():
    ids = [f"GPU-{g}::{r}" for g in range(2) for r in range(2)]
    m = DeviceManager({GPU: ids})
    assert m.allocate("ns/a", "c", GPU, 1) == ["GPU-0::0"]
    assert m.allocate("ns/b", "c", GPU, 1) == ["GPU-1::0"]


def test_visible_devices_strip_replica_suffixes():
    assert visible_devices_env(["GPU-a::0", "GPU-b::3"]) == {"NVIDIA_VISIBLE_DEVICES": "GPU-a,GPU-b"}
    assert visible_devices_env(["GPU-a", "GPU-b"]) == {"NVIDIA_VISIBLE_DEVICES": "GPU-a,GPU-b"}
