from collections import Counter

import pytest
from vizkit import dataset_with, pod, pool, session, subtitle, walk

import gpu_lab
from gpu_lab.viz._common import POD_COLOURS

charts = gpu_lab.charts


def test_one_cell_per_gpu_slot_with_the_holding_pod():
    lab = session(pool("h100", "H100-80GB", 8, count=2), pool("l4", "L4", 4),
                  pool("cpu", "L4", 0), pod("train", 4), pod("chat", 1), pod("too-big", 16))
    rows = dataset_with(charts.occupancy(lab), "node", "slot", "holder")
    per_node = Counter(r["node"] for r in rows)
    # capacity per node: 8 + 8 + 4; the GPU-less node gets no row
    assert per_node == {"h100-0": 8, "h100-1": 8, "l4-0": 4}
    held = Counter(r["holder"] for r in rows if r["state"] == "in use")
    assert held == {"train": 4, "chat": 1}
    placed = lab.pods().set_index("name")["node"]
    assert {r["node"] for r in rows if r["holder"] == "train"} == {placed["train"]}
    assert Counter(r["state"] for r in rows) == {"in use": 5, "free": 15}
    # cells per node match the pod's device IDs
    devices = lab.pods().set_index("name")["devices"]
    assert held["train"] == len(devices["train"]["nvidia.com/gpu"])


def test_pending_gpu_pods_in_subtitle():
    lab = session(pool("l4", "L4", 4), pod("a", 4), pod("b", 1), pod("c", 2))
    assert lab.pods()["phase"].tolist().count("Pending") == 2
    assert "2 GPU pods pending" in subtitle(charts.occupancy(lab))


def test_dead_plugin_slots_are_marked_not_allocatable():
    lab = session(pool("h100", "H100-80GB", 8, count=2), pod("train", 4))
    node = lab.pods().set_index("name").loc["train", "node"]
    other = "h100-1" if node == "h100-0" else "h100-0"
    lab.kill_plugin(other)
    if "nvidia.com/gpu capacity" not in lab.nodes().columns:
        pytest.skip("nodes() has no capacity column yet")
    chart = charts.occupancy(lab)
    rows = dataset_with(chart, "node", "slot", "state")
    dead = [r for r in rows if r["state"] == "not allocatable"]
    assert {r["node"] for r in dead} == {other} and len(dead) == 8
    spec = chart.to_dict()
    scale = next(e["scale"] for e in walk(spec) if isinstance(e.get("scale"), dict)
                 and "not allocatable" in e["scale"].get("domain", []))
    colour = dict(zip(scale["domain"], scale["range"]))
    assert colour["not allocatable"] != colour["free"]
    # the crosses layer draws only on dead cells
    assert any("not allocatable" in str(e.get("filter", "")) for e in walk(spec))


def test_dead_plugin_keeps_running_pods_visible():
    lab = session(pool("h100", "H100-80GB", 8), pod("train", 4))
    lab.kill_plugin("h100-0")
    if "nvidia.com/gpu capacity" not in lab.nodes().columns:
        pytest.skip("nodes() has no capacity column yet")
    rows = dataset_with(charts.occupancy(lab), "node", "slot", "state")
    assert Counter(r["state"] for r in rows) == {"in use": 4, "not allocatable": 4}


def test_mig_resources_and_resource_filter():
    extra = "  devicePlugin: {version: v1, flags: {migStrategy: mixed}}\n  mig: {config: all-balanced}"
    lab = session(pool("a100", "A100-40GB", 2, extra=extra),
                  pod("s0", 1, "nvidia.com/mig-1g.5gb"), pod("s1", 1, "nvidia.com/mig-2g.10gb"))
    nodes = lab.nodes().iloc[0]
    chart = charts.occupancy(lab)
    rows = dataset_with(chart, "node", "resource", "holder")
    by_res = Counter(r["resource"] for r in rows)
    for res, n in by_res.items():
        assert n == nodes[f"{res} capacity" if f"{res} capacity" in nodes else f"{res} allocatable"]
    assert {r["holder"]: r["resource"] for r in rows if r["state"] == "in use"} == {
        "s0": "nvidia.com/mig-1g.5gb", "s1": "nvidia.com/mig-2g.10gb"}
    assert "facet" in chart.to_dict()  # one panel per MIG resource
    only = dataset_with(charts.occupancy(lab, resource="nvidia.com/mig-1g.5gb"), "resource")
    assert {r["resource"] for r in only} == {"nvidia.com/mig-1g.5gb"}
    with pytest.raises(gpu_lab.GpuLabError, match="no node advertises"):
        charts.occupancy(lab, resource="nvidia.com/gpu")


def test_large_cluster_is_summed_per_pool():
    lab = gpu_lab.connect("sim", deterministic=True, record=False)
    lab.apply(pool("big", "H100-80GB", 8, count=120) + pool("small", "L4", 4, count=10)
              + pod("a", 8) + pod("b", 3))
    lab.schedule()
    chart = charts.occupancy(lab)
    rows = dataset_with(chart, "pool", "state", "slots")
    total = {(r["pool"], r["state"]): r["slots"] for r in rows}
    assert total[("big", "in use")] + total.get(("small", "in use"), 0) == 11
    assert sum(r["slots"] for r in rows if r["pool"] == "big") == 960
    assert sum(r["slots"] for r in rows if r["pool"] == "small") == 40
    assert any("summed per pool" in s for s in subtitle(chart))


def _colour_scale(chart) -> dict:
    return next(enc["color"]["scale"] for enc in walk(chart.to_dict())
                if isinstance(enc.get("color"), dict) and "scale" in enc["color"]
                and "domain" in enc["color"]["scale"])


def test_past_twenty_pods_no_two_pods_share_a_colour():
    lab = session(pool("l4", "L4", 8, count=5), *(pod(f"p{i:02d}", 1) for i in range(36)))
    scale = _colour_scale(charts.occupancy(lab))
    pods = [d for d in scale["domain"] if d not in ("free", "not allocatable")]
    assert len(pods) == 36
    colours = scale["range"][:len(pods)]
    assert len(set(colours)) == 36, "a colour is reused"
    assert not {"#e4e4e4", "#c62828"} & set(colours)  # none looks free or dead
    assert colours[:16] == POD_COLOURS  # the first sixteen as before: charts look the same
