"""gpu_lab.simulate and `gpu-lab simulate`: the clock run to the end, jobs and totals."""

import json

import pytest

import gpu_lab
from gpu_lab.cli import main

from .kit import pod, pool, rendezvous


def scenario():
    return [pool(gpus=8), pod("inference", gpus=2, duration="2h"), rendezvous("train", 8, duration="1h")]


def test_totals_are_integrals_over_the_window():
    r = gpu_lab.simulate(scenario(), until="6h")
    m = r.metrics
    # 2 GPUs for 2 h, 6 stranded workers for 2 h, then 8 training for 1 h
    assert m["gpu_hours_allocated"] == 2 * 2 + 6 * 2 + 8 * 1
    assert m["gpu_hours_stranded"] == 12
    assert m["node_hours"] == 6 and m["makespan_s"] == 3 * 3600
    price = gpu_lab.gpus.get_model("A100-SXM4-80GB").price_per_hour * 8
    assert m["cost_usd"] == pytest.approx(price * 6, abs=0.01)
    assert m["jobs_complete"] == 1 and m["jobs_pending"] == 0
    series = r.series
    assert list(series["time"]) == [0, 7200, 10800]
    assert list(series["gpus_stranded"]) == [6, 0, 0]


def test_makespan_is_none_when_something_never_finished():
    r = gpu_lab.simulate(scenario(), until="90m")
    assert r.metrics["makespan_s"] is None and r.metrics["jobs_pending"] == 1
    assert "never" in repr(r)


def test_cli_json_has_jobs_and_metrics(capsys, tmp_path):
    import yaml

    path = tmp_path / "train.yaml"
    path.write_text(yaml.safe_dump_all(scenario()))
    assert main(["simulate", str(path), "--json", "--until", "12h"]) == 0
    doc = json.loads(capsys.readouterr().out)
    job = doc["jobs"][0]
    assert job["name"] == "train" and job["state"] == "Complete" and job["finished_at"] == 10800
    assert set(doc["metrics"]) >= {"gpu_hours_allocated", "gpu_hours_stranded", "node_hours", "cost_usd",
                                   "makespan_s"}
    assert doc["until_s"] == 43200


@pytest.mark.parametrize("until,message", [("-1h", 'invalid duration "-1h"'), ("0s", "must be more than 0"),
                                           ("soon", 'invalid duration "soon"')])
def test_bad_until_is_one_line(until, message, capsys, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("apiVersion: v1\nkind: Namespace\nmetadata: {name: a}\n")
    assert main(["simulate", str(path), f"--until={until}"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --until: ") and message in err and err.count("\n") == 1


def test_backends_without_a_clock_say_so():
    with pytest.raises(gpu_lab.NotSupported, match='simulate: not on the "kubeconfig" backend'):
        gpu_lab.simulate(scenario(), backend="kubeconfig")


def test_bench_trace_runs_a_small_day_and_reports_it(capsys):
    assert main(["bench", "--trace", "--jobs", "60", "--nodes", "16", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["jobs"] == 60 and r["jobs_complete"] + r["jobs_unfinished"] == 60
    assert 0 < r["peak_nodes"] <= 16 and r["gpu_hours_allocated"] > 0 and r["cost_usd"] > 0
