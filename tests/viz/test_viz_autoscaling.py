"""Nodes and GPUs over simulated time, and dollars and node-hours per run."""

import pandas as pd
import pytest
from vizkit import dataset_with, subtitle, walk

import gpu_lab

charts = gpu_lab.charts
SERIES = ["time", "nodes", "gpu_nodes", "gpus_total", "gpus_allocated", "gpus_stranded", "pods_pending",
          "cost_per_hour_usd"]


def series(rows):
    return pd.DataFrame(rows, columns=SERIES)


SPREAD = series([[0, 4, 3, 24, 0, 0, 3, 165.1], [600, 4, 3, 24, 16, 8, 0, 165.1],
                 [3600, 4, 3, 24, 20, 0, 0, 165.1], [7200, 2, 1, 8, 0, 0, 0, 55.0]])
PACK = series([[0, 3, 2, 16, 0, 0, 3, 110.1], [600, 3, 2, 16, 16, 8, 0, 110.1],
               [7200, 2, 1, 8, 0, 0, 0, 55.0]])


class Run:
    """What gpu_lab.simulate returns, for the parts the charts read."""

    def __init__(self, s, metrics, until):
        self.series, self.metrics, self.until_s = s, metrics, until


def test_steps_per_run_and_measure_to_the_end():
    chart = charts.nodes_over_time({"spread": SPREAD, "pack": PACK})
    rows = dataset_with(chart, "option", "measure", "value", "t")
    nodes = [(r["t"], r["value"]) for r in rows if r["option"] == "pack" and r["measure"] == "GPU nodes"]
    # the last level is repeated at the end so the step reaches it; time in hours (2 h span)
    assert nodes == [(0, 2), (600 / 3600, 2), (2, 1), (2, 1)]
    stranded = [r["value"] for r in rows if r["option"] == "spread" and r["measure"] == "GPUs stranded"]
    assert stranded == [0, 8, 0, 0, 0]
    assert {r["measure"] for r in rows} == {"GPU nodes", "GPUs on nodes", "GPUs allocated", "GPUs stranded"}
    spec = chart.to_dict()
    assert {m.get("interpolate") for m in walk(spec) if m.get("type") == "line"} == {"step-after"}
    assert any(e.get("title") == "simulated time (h)" for e in walk(spec))
    domains = [e["scale"]["domain"] for e in walk(spec) if isinstance(e.get("scale"), dict)
               and "domain" in e["scale"]]
    assert ["spread", "pack"] in domains


def test_a_run_extends_to_until_and_totals_go_in_the_subtitle():
    run = Run(PACK, {"node_hours": 5.2, "cost_usd": 240.5}, until=4 * 3600)
    chart = charts.nodes_over_time(run)
    rows = dataset_with(chart, "option", "measure", "value", "t")
    assert max(r["t"] for r in rows) == 4
    assert subtitle(chart) == ["run: 5.2 node-hours, $240.50"]
    with pytest.raises(gpu_lab.GpuLabError, match="missing gpus_stranded"):
        charts.nodes_over_time(SPREAD.drop(columns=["gpus_stranded"]))


def test_cost_comparison_bars_dollars_and_node_hours():
    runs = {"spread": Run(SPREAD, {"cost_usd": 330.2, "node_hours": 7.0, "gpu_hours_allocated": 30.0,
                                   "gpu_hours_stranded": 1.3, "makespan_s": 7200}, 7200),
            "pack": {"cost_usd": 220.2, "node_hours": 5.0, "gpu_hours_allocated": 30.0,
                     "gpu_hours_stranded": 1.3, "makespan_s": 7200}}
    table = charts.run_costs(runs)
    assert list(table["option"]) == ["spread", "pack"]
    assert list(table["cost_usd"]) == [330.2, 220.2] and list(table["node_hours"]) == [7.0, 5.0]
    chart = charts.cost_comparison(runs)
    rows = dataset_with(chart, "option", "cost_usd", "dollars", "hours")
    assert [r["dollars"] for r in rows] == ["$330", "$220"] and [r["hours"] for r in rows] == ["7.0", "5.0"]
    assert subtitle(chart) == ["spread costs $110.00 more than pack (2.0 node-hours)"]
    assert charts.cost_comparison(table).to_dict()["title"] == chart.to_dict()["title"]
    with pytest.raises(gpu_lab.GpuLabError, match="run_costs\\(\\): x: needs cost_usd"):
        charts.run_costs({"x": {"node_hours": 1}})
    with pytest.raises(gpu_lab.GpuLabError, match="missing node_hours"):
        charts.cost_comparison(table.drop(columns=["node_hours"]))


def test_real_simulations_compare():
    pool = {"apiVersion": "gpulab.dev/v1alpha1", "kind": "NodePool", "metadata": {"name": "a100"},
            "spec": {"count": 2, "gpu": {"model": "A100-80GB", "count": 8}}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "annotations": {"gpulab.dev/duration": "1h"}},
           "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 4}}}]}}
    run = gpu_lab.simulate([pool, pod], until="2h")
    chart = charts.nodes_over_time({"a": run, "b": run})
    rows = dataset_with(chart, "option", "measure", "value", "t")
    alloc = [r["value"] for r in rows if r["option"] == "a" and r["measure"] == "GPUs allocated"]
    assert alloc[0] == 4 and alloc[-1] == 0
    table = charts.run_costs({"a": run})
    assert table.loc[0, "cost_usd"] == run.metrics["cost_usd"]
