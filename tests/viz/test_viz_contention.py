import pytest
from vizkit import dataset_with

import gpu_lab

charts, gpus = gpu_lab.charts, gpu_lab.gpus


def test_latencies_come_from_the_model():
    chart = charts.contention(service_ms=4.0, duty_cycle=0.5, max_sharers=6)
    rows = dataset_with(chart, "sharers", "series", "latency_ms")
    assert sorted({r["sharers"] for r in rows}) == list(range(1, 7))
    pick = {(r["sharers"], r["series"]): r for r in rows}
    for n in range(1, 7):
        ts = gpus.timeslice_latency(4.0, 0.5, n_pods=n)
        assert pick[(n, "time-slicing, mean")]["latency_ms"] == pytest.approx(ts.mean_ms)
        assert pick[(n, "time-slicing, worst case")]["latency_ms"] == pytest.approx(ts.worst_ms)
        assert pick[(n, "time-slicing, mean")]["saturated"] == ts.saturated
        mps = gpus.mps_latency(4.0, n)
        assert pick[(n, "MPS (every request)")]["latency_ms"] == pytest.approx(mps.mean_ms)
    # the module docstring's worked example: 4 pods, 4 ms -> 10.3 mean, 16.6 worst, MPS 16
    assert pick[(4, "time-slicing, mean")]["latency_ms"] == pytest.approx(10.3)
    assert pick[(4, "time-slicing, worst case")]["latency_ms"] == pytest.approx(16.6)
    assert pick[(4, "MPS (every request)")]["latency_ms"] == pytest.approx(16.0)


def test_says_it_is_a_model():
    title = charts.contention(title="Sharing").to_dict()["title"]
    assert title["text"] == "Sharing"
    assert any("contention MODEL, not a measurement" in s for s in title["subtitle"])
    with pytest.raises(gpu_lab.GpuLabError):
        charts.contention(max_sharers=0)
