"""Time-slicing and MPS semantics and the contention model, with numbers worked by hand."""

import pytest

from gpu_lab.errors import GpuLabError
from gpu_lab.gpus.sharing import (
    efficiency,
    mps_latency,
    mps_memory,
    mps_share,
    mps_throughput,
    timeslice_latency,
    timeslice_memory,
    timeslice_throughput,
)


def test_docstring_example_four_pods_half_busy():
    r = timeslice_throughput(4, 0.5)  # slice 2 ms, switch 0.1 ms
    assert r.capacity == pytest.approx(2 / 2.1)
    assert r.offered == 2.0 and r.saturated
    assert r.granted == pytest.approx((0.2381,) * 4, abs=1e-4)
    assert r.throughput == pytest.approx((0.47619,) * 4, abs=1e-5)
    assert r.slowdown == pytest.approx((2.1,) * 4)
    lat = timeslice_latency(4, [0.5] * 4)
    assert (lat.mean_ms, lat.worst_ms) == pytest.approx((10.3, 16.6))  # 4 + 2*1.5*2.1, 4 + 2*3*2.1
    assert lat.mean_inflation == pytest.approx(2.575) and lat.saturated


def test_one_pod_alone_is_unaffected():
    r = timeslice_throughput(1, 0.9)
    assert r.throughput == (1.0,) and r.capacity == 1.0 and not r.saturated
    assert timeslice_latency(5, [0.9]).mean_ms == 5


def test_light_load_keeps_throughput_but_not_latency():
    r = timeslice_throughput(2, [0.2, 0.3])
    assert r.throughput == (1.0, 1.0) and not r.saturated
    lat = timeslice_latency(1, [0.2, 0.3], pod=0)  # one slice; the other pod busy 30% of the time
    assert lat.mean_ms == pytest.approx(1 + 1 * 0.3 * 2.1)
    assert lat.worst_ms == pytest.approx(1 + 2.1)


def test_max_min_fairness_lets_light_pods_keep_what_they_need():
    r = timeslice_throughput(3, [0.1, 0.5, 0.9])
    cap = 2 / 2.1
    assert r.granted[0] == pytest.approx(0.1)
    assert r.granted[1] == pytest.approx(r.granted[2]) == pytest.approx((cap - 0.1) / 2)
    assert sum(r.granted) == pytest.approx(cap)
    assert r.throughput[0] == 1.0 and r.throughput[2] < r.throughput[1] < 1


def test_latency_grows_with_neighbours():
    mean = [timeslice_latency(4, [0.5] * n).mean_ms for n in range(1, 6)]
    assert mean == pytest.approx([4, 6.1, 8.2, 10.3, 12.4])
    assert efficiency(1) == 1.0 and efficiency(2, slice_ms=1, switch_ms=1) == 0.5


def test_mps_shares_follow_nvidias_daemon():
    # daemon.go: total bytes / replicas / MiB, and 100 / replicas percent
    assert mps_share(81559, 4).memory_limit_mib == 20389
    assert mps_share(81559, 4).active_thread_percentage == 25
    assert mps_share(15360, 3).memory_limit_mib == 5120 and mps_share(15360, 3).active_thread_percentage == 33
    assert mps_share(23034, 10).pinned_mem_limit == "2303M"


def test_mps_throughput_and_latency_do_not_depend_on_neighbours():
    r = mps_throughput(4, 0.5)
    assert r.throughput == (0.5, 0.5, 0.5, 0.5)  # speed 0.25, needs 0.5/0.25 = 2x the time it has
    assert mps_latency(4, 4) == mps_latency(4, 4)  # deterministic: no queueing behind others
    assert mps_latency(4, 4).mean_ms == 16.0 and mps_latency(4, 4).worst_ms == 16.0
    light = mps_throughput(4, [0.1, 0.1], n_pods=2)
    assert light.throughput == (1.0, 1.0) and not light.saturated  # 0.1 / 0.25 = 0.4 of its time
    narrow = mps_throughput(4, 0.5, widths=0.25)  # kernels that use a quarter of the SMs anyway
    assert narrow.throughput == (1.0,) * 4
    assert mps_latency(4, 4, width=0.25).mean_ms == 4.0


def test_memory_time_slicing_has_no_isolation():
    r = timeslice_memory([30000, 30000, 30000], 81559)
    assert not r.fits and r.oom == (2,) and r.used_mib == 60000
    assert timeslice_memory([20000] * 4, 81559).fits


def test_memory_mps_limits_each_client():
    r = mps_memory([20000, 21000], 81559, 4)  # limit 20389 MiB each
    assert r.capacity_mib == 20389 and r.oom == (1,) and r.used_mib == 20000
    with pytest.raises(GpuLabError, match="3 pods cannot share a GPU advertised as 2 MPS replicas"):
        mps_memory([1, 1, 1], 81559, 2)


@pytest.mark.parametrize("call, message", [
    (lambda: timeslice_throughput(0, 0.5), "number of pods must be a positive integer, got 0"),
    (lambda: timeslice_throughput(2, [0.5]), "1 duty cycles given for 2 pods"),
    (lambda: timeslice_throughput(2, 1.5), r"duty cycles must be in \(0, 1\], got 1.5"),
    (lambda: timeslice_throughput(2, 0.5, slice_ms=0), "slice_ms must be positive, got 0"),
    (lambda: timeslice_latency(-1, [0.5]), "service_ms must be positive, got -1"),
    (lambda: timeslice_latency(1, 0.5), "give n_pods with a single duty cycle"),
    (lambda: timeslice_latency(1, [0.5], pod=3), "pod index 3 out of range for 1 pods"),
    (lambda: mps_share(80000, 0), "replicas must be a positive integer, got 0"),
    (lambda: mps_throughput(2, 0.5, n_pods=3), "3 pods cannot share a GPU advertised as 2 MPS replicas"),
    (lambda: timeslice_memory([-1], 100), "memory footprints must be non-negative MiB, got -1"),
])
def test_bad_input(call, message):
    with pytest.raises(GpuLabError, match=message):
        call()
