import pytest
from vizkit import pod, pool

import gpu_lab

charts = gpu_lab.charts
CLUSTER = pool("h100", "H100-80GB", 8, count=2)


def _whatif(**kw):
    return charts.whatif({
        "fits": [CLUSTER, pod("a", 8) + pod("b", 8)],
        "too many": [CLUSTER, pod("a", 8), pod("b", 8) + pod("c", 4)],
    }, **kw)


def test_results_are_pending_counts_and_lazy():
    w = _whatif()
    assert w._labs == {}  # nothing scheduled until asked
    assert w.results == {"fits": 0, "too many": 1}
    lab = w.session("too many")
    assert lab.pods().set_index("name").loc["c", "phase"] == "Pending"
    assert w.session("too many") is lab  # cached


def test_static_chart_side_by_side_with_pending_counts():
    static = _whatif(title="Two options").static()
    spec = static.to_dict()
    assert len(spec["hconcat"]) == 2
    titles = [c["title"]["text"] for c in spec["hconcat"]]
    assert titles == ["fits: 0 pods pending", "too many: 1 pod pending"]
    assert spec["title"]["text"] == "Two options"


def test_mimebundle_has_widget_and_static_fallback():
    w = _whatif()
    bundle = w._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert bundle["application/vnd.jupyter.widget-view+json"]["model_id"]
    html = bundle["text/html"]
    assert "<svg" in html and "too many: <b>1</b> pods pending" in html
    assert "http" not in html.split("<svg", 1)[0]  # no remote script before the inline SVG
    assert "1 pending" in bundle["text/plain"]


def test_widget_switches_option():
    w = _whatif()
    box = w.widget()
    pick, line, out = box.children
    assert "<b>0</b>" in line.value and len(out.outputs) == 1
    pick.value = "too many"
    assert "<b>1</b> pod pending" in line.value and len(out.outputs) == 1


def test_callable_chart_and_bad_input():
    w = charts.whatif({"one": CLUSTER + pod("a", 3)}, chart=lambda lab: charts.fragmentation(lab))
    spec = w.static().to_dict()
    assert spec["hconcat"][0]["title"] == "one: 0 pods pending"
    with pytest.raises(gpu_lab.GpuLabError):
        charts.whatif({})
    with pytest.raises(gpu_lab.GpuLabError):
        charts.whatif({"x": [CLUSTER]}, chart="bars")


def test_long_option_labels_are_not_cut():
    long = "RequestedToCapacityRatio on nvidia.com/gpu"
    w = charts.whatif({"LeastAllocated (default)": [CLUSTER, pod("a", 8)], long: [CLUSTER, pod("a", 8)]})
    pick = w.widget().children[0]
    width = int(pick.style.button_width.removesuffix("px"))
    assert width >= len(long) * 7  # room for every character of the longest label
    assert list(pick.tooltips) == ["LeastAllocated (default)", long]
