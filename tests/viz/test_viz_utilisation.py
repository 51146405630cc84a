"""Per-pod GPU utilisation: GPU-hours requested split into used and wasted."""

import pytest
from vizkit import dataset_with, subtitle

import gpu_lab
from gpu_lab.metrics import GpuUse, utilisation, waste
from gpu_lab.viz.utilisation import MAX_PODS

charts = gpu_lab.charts
H100 = gpu_lab.gpus.get_model("H100-80GB")


def use(pod, gpu, util, mem=1000.0, **kw):
    return GpuUse("default", pod, "srv", "h100-0", "H100-80GB", gpu, f"GPU-{gpu}", util, mem, **kw)


def test_used_and_wasted_per_pod_most_wasteful_first():
    uses = [use("chat", 0, 20), use("train", 1, 90, requested=2), use("train", 2, 80, requested=2),
            use("mystery", 3, None)]
    chart = charts.utilisation(uses)
    rows = dataset_with(chart, "label", "state", "gpu_hours")
    parts = {(r["label"], r["state"]): r["gpu_hours"] for r in rows}
    assert parts[("chat", "used")] == pytest.approx(0.2) and parts[("chat", "wasted")] == pytest.approx(0.8)
    assert parts[("train", "used")] == pytest.approx(1.7) and parts[("train", "wasted")] == pytest.approx(0.3)
    assert parts[("mystery", "utilisation not declared")] == 1 and ("mystery", "wasted") not in parts
    # bars sorted by waste; an undeclared pod ranks by its whole request
    order = list(dict.fromkeys(r["label"] for r in rows))
    assert order == ["mystery", "chat", "train"]
    texts = {r["label"]: r["text"] for r in rows}
    assert texts["train"] == "85 % busy, 2 GPUs" and texts["mystery"] == "not declared, 1 GPU"
    sub = subtitle(chart)
    assert sub[0] == f"1.10 of 3.00 GPU-hours requested wasted (37 %), ${1.1 * H100.price_per_hour:,.2f}"
    assert sub[1] == "1 pod declares no utilisation (gpulab.dev/gpu-utilization)"


def test_tables_work_as_well_as_records():
    uses = [use(f"p{i}", i, 10 * i) for i in range(5)]
    a = dataset_with(charts.utilisation(uses), "label", "state", "gpu_hours")
    b = dataset_with(charts.utilisation(waste(uses)), "label", "state", "gpu_hours")
    c = dataset_with(charts.utilisation(utilisation(uses)), "label", "state", "gpu_hours")
    assert a == b == c


def test_many_pods_show_the_most_wasteful():
    uses = [GpuUse("default", f"p{i:02d}", "srv", f"n{i}", "L4", 0, f"GPU-{i}", float(i % 100), 100.0)
            for i in range(MAX_PODS + 10)]
    chart = charts.utilisation(uses)
    labels = {r["label"] for r in dataset_with(chart, "label", "state", "gpu_hours")}
    assert len(labels) == MAX_PODS and "p00" in labels and f"p{MAX_PODS + 9}" not in labels
    assert any(f"the {MAX_PODS} most wasteful of {MAX_PODS + 10} pods" in s for s in subtitle(chart))
    with pytest.raises(gpu_lab.GpuLabError, match="needs columns"):
        charts.utilisation(waste(uses).drop(columns=["gpu_hours_used"]))
