import math

import pytest
from vizkit import dataset_with, pod, pool, session

import gpu_lab

charts, gpus = gpu_lab.charts, gpu_lab.gpus


def test_fleet_cost_counts_busy_gpu_nodes_only():
    h100 = gpus.get_model("H100-80GB").price_per_hour
    l4 = gpus.get_model("L4").price_per_hour
    spread = session(pool("h100", "H100-80GB", 8, count=3), pool("l4", "L4", 4),
                     pod("a", 2, node="h100-0"), pod("b", 2, node="h100-1"), pod("c", 1, node="l4-0"))
    packed = session(pool("h100", "H100-80GB", 8, count=3), pool("l4", "L4", 4),
                     pod("a", 2, node="h100-0"), pod("b", 2, node="h100-0"), pod("c", 1, node="l4-0"))
    table = charts.fleet_cost({"spread": spread, "packed": packed}, hours=730)
    assert list(table.columns) == ["option", "nodes", "gpus", "gpus_used", "dollars_per_month"]
    row = table.set_index("option")
    assert row.loc["spread", "nodes"] == 3 and row.loc["packed", "nodes"] == 2
    assert row.loc["spread", "gpus"] == 20 and row.loc["packed", "gpus"] == 12
    assert row.loc["spread", "gpus_used"] == row.loc["packed", "gpus_used"] == 5
    assert row.loc["spread", "dollars_per_month"] == pytest.approx((16 * h100 + 4 * l4) * 730, abs=0.01)
    assert row.loc["packed", "dollars_per_month"] == pytest.approx((8 * h100 + 4 * l4) * 730, abs=0.01)
    hour = charts.fleet_cost({"packed": packed}, hours=1)
    assert hour.loc[0, "dollars_per_month"] == pytest.approx(8 * h100 + 4 * l4, abs=0.01)


def test_mig_nodes_count_physical_gpus():
    extra = "  devicePlugin: {version: v1, flags: {migStrategy: mixed}}\n  mig: {config: all-1g.10gb}"
    lab = session(pool("a100", "A100-80GB", 2, extra=extra), pod("s", 3, "nvidia.com/mig-1g.10gb"))
    table = charts.fleet_cost(lab)
    price = gpus.get_model("A100-80GB").price_per_hour
    assert table.loc[0, "gpus"] == 2  # 2 GPUs, though 14 MIG instances are advertised
    assert table.loc[0, "gpus_used"] == 3
    assert table.loc[0, "dollars_per_month"] == pytest.approx(2 * price * 730, abs=0.01)


def test_time_sliced_nodes_count_physical_gpus():
    extra = ("  devicePlugin:\n    version: v1\n    sharing:\n      timeSlicing:\n"
             "        resources: [{name: nvidia.com/gpu, replicas: 4}]")
    lab = session(pool("l4", "L4", 2, extra=extra), pod("nb", 1))
    table = charts.fleet_cost(lab)
    assert table.loc[0, "gpus"] == 2
    assert table.loc[0, "dollars_per_month"] == pytest.approx(
        2 * gpus.get_model("L4").price_per_hour * 730, abs=0.01)


def test_idle_cluster_costs_nothing_and_cost_chart_labels_bars():
    idle = session(pool("h100", "H100-80GB", 8))
    busy = session(pool("h100", "H100-80GB", 8), pod("a", 1))
    table = charts.fleet_cost({"idle": idle, "busy": busy})
    assert table.set_index("option").loc["idle", "dollars_per_month"] == 0
    chart = charts.cost(table, title="Monthly")
    rows = dataset_with(chart, "option", "dollars_per_month", "label")
    assert [r["option"] for r in rows] == ["idle", "busy"]
    busy_cost = table.set_index("option").loc["busy", "dollars_per_month"]
    assert rows[1]["label"] == f"${busy_cost:,.0f}" and not math.isnan(busy_cost)
    assert chart.to_dict()["title"]["text"] == "Monthly"
    with pytest.raises(gpu_lab.GpuLabError, match="fleet_cost"):
        charts.cost(table.drop(columns=["dollars_per_month"]))
