"""Gantt chart of pods and Jobs over simulated time: segments, stranded time, grouping, axis units."""

import math

import pandas as pd
import pytest
from vizkit import dataset_with, subtitle, walk

import gpu_lab
from gpu_lab.viz.timeline import MAX_ROWS, STRANDED

charts = gpu_lab.charts
NAN = math.nan
COLUMNS = ["namespace", "pod", "owner_kind", "owner", "node", "pool", "gpus", "phase", "reason",
           "created_at", "started_at", "finished_at", "stranded_s"]


def pod(name, owner, phase, created, started, finished, stranded=0.0, gpus=1, reason=""):
    return {"namespace": "default", "pod": name, "owner_kind": "Job" if owner else None, "owner": owner,
            "node": "a100-0" if not math.isnan(started) else None, "pool": "a100", "gpus": gpus,
            "phase": phase, "reason": reason, "created_at": created, "started_at": started,
            "finished_at": finished, "stranded_s": stranded}


def table(*rows):
    return pd.DataFrame(list(rows), columns=COLUMNS)


def segments(chart):
    rows = dataset_with(chart, "row", "state", "from", "to")
    return {(r["row"], r["state"]): (r["from"], r["to"]) for r in rows}


def test_pending_stranded_and_phase_segments_in_hours():
    df = table(pod("w-0", "train", "Succeeded", 0, 0, 10800, stranded=7200, gpus=8),
               pod("w-1", "train", "Succeeded", 0, 7200, 10800, gpus=8),
               pod("inference", None, "Running", 0, 0, NAN, gpus=2))
    chart = charts.timeline(df, now=14400)
    seg = segments(chart)
    assert seg[("w-0", STRANDED)] == (0, 2) and seg[("w-0", "Succeeded")] == (2, 3)
    assert seg[("w-1", "Pending")] == (0, 2) and seg[("w-1", "Succeeded")] == (2, 3)
    assert ("w-1", STRANDED) not in seg
    assert seg[("inference", "Running")] == (0, 4)  # unfinished: runs to `now`
    spec = chart.to_dict()
    assert any(isinstance(e.get("title"), str) and e["title"] == "simulated time (h)" for e in walk(spec))
    assert "facet" in spec  # one row per owner
    assert subtitle(chart)[0] == "3 pods; 16.00 GPU-hours stranded"


def test_stranded_colour_stands_apart_and_failures_are_marked():
    df = table(pod("w-0", "train", "Failed", 0, 0, 600, stranded=600, reason="RendezvousTimeout"),
               pod("w-1", "train", "Pending", 0, NAN, NAN))
    chart = charts.timeline(df)
    seg = segments(chart)
    assert seg[("w-0", STRANDED)] == (0, 10)  # minutes: a 10-minute run
    assert ("w-0", "Failed") not in seg  # all of its run was stranded
    assert seg[("w-1", "Pending")] == (0, 10)
    spec = chart.to_dict()
    scale = next(e["scale"] for e in walk(spec) if isinstance(e.get("scale"), dict)
                 and STRANDED in e["scale"].get("domain", []))
    colour = dict(zip(scale["domain"], scale["range"]))
    assert len(set(colour.values())) == len(colour)
    rows = dataset_with(chart, "row", "failed_end")
    assert {r["row"] for r in rows if r["failed_end"]} == {"w-0"}
    assert "✕ failed" in subtitle(chart)


def test_many_pods_become_one_bar_per_owner():
    rows = [pod(f"j{j}-{i}", f"j{j}", "Succeeded", 60 * j, 60 * j + 30, 60 * j + 3600, stranded=10 * i)
            for j in range(8) for i in range(10)]
    chart = charts.timeline(table(*rows))
    assert len(rows) > MAX_ROWS
    seg = segments(chart)
    assert {r for r, _ in seg} == {f"j{j}" for j in range(8)}
    # the longest wait of the gang, drawn from its first start
    start = 30 / 60
    assert seg[("j0", STRANDED)] == pytest.approx((start, start + 90 / 60))
    assert any("one bar per owner" in s for s in subtitle(chart))
    by_pod = segments(charts.timeline(table(*rows), by="pod"))
    assert len({r for r, _ in by_pod}) == 80


def test_jobs_table_and_bad_input():
    jobs = pd.DataFrame([
        {"namespace": "default", "name": "a", "state": "Complete", "queue": "team", "gpus": 8,
         "admitted_at": 0.0, "started_at": 60.0, "finished_at": 3660.0},
        {"namespace": "default", "name": "b", "state": "Pending", "queue": "team", "gpus": 8,
         "admitted_at": NAN, "started_at": NAN, "finished_at": NAN}])
    chart = charts.timeline(jobs)
    seg = segments(chart)
    assert seg[("a", "admitted, not started")] == (0, 1) and seg[("a", "Complete")] == (1, 61)
    assert not any(r == "b" for r, _ in seg)
    assert subtitle(chart) == ["2 jobs; 1 never admitted (no bar)"]
    with pytest.raises(gpu_lab.GpuLabError, match="timeline\\(\\): the table needs columns"):
        charts.timeline(pd.DataFrame({"pod": ["x"]}))
    with pytest.raises(gpu_lab.GpuLabError, match="give lab.timeline\\(\\), lab.jobs\\(\\)"):
        charts.timeline("pods.csv")
    empty = dataset_with(charts.timeline(table()), "line")
    assert [r["line"] for r in empty] == ["0 pods; 0.00 GPU-hours stranded", "no pod was created or admitted yet"]
    with pytest.raises(gpu_lab.GpuLabError, match='by must be "pod" or "owner"'):
        charts.timeline(table(pod("x", None, "Running", 0, 0, NAN)), by="node")


def test_a_simulation_draws_to_its_end():
    from gpu_lab.viz.export import to_svg

    docs = [
        {"apiVersion": "gpulab.dev/v1alpha1", "kind": "NodePool", "metadata": {"name": "a100"},
         "spec": {"count": 1, "gpu": {"model": "A100-80GB", "count": 8}}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "inference",
                                                         "annotations": {"gpulab.dev/duration": "2h"}},
         "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 2}}}]}},
        {"apiVersion": "batch/v1", "kind": "Job",
         "metadata": {"name": "train", "annotations": {"gpulab.dev/rendezvous": "true"}},
         "spec": {"parallelism": 8, "completions": 8, "template": {
             "metadata": {"annotations": {"gpulab.dev/duration": "1h"}},
             "spec": {"restartPolicy": "Never", "containers": [
                 {"name": "w", "image": "t", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}}},
    ]
    run = gpu_lab.simulate(docs, until="6h")
    chart = charts.timeline(run)
    seg = segments(chart)
    stranded = [k for k in seg if k[1] == STRANDED]
    assert len(stranded) == 6 and all(seg[k] == (0, 2) for k in stranded)
    assert subtitle(chart)[0] == f"9 pods; {run.metrics['gpu_hours_stranded']:.2f} GPU-hours stranded"
    assert to_svg(chart).startswith("<svg")
