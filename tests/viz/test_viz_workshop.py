import pandas as pd
import pytest
from vizkit import dataset_with, subtitle, walk

import gpu_lab

charts = gpu_lab.charts

ROWS = [
    {"participant": 1, "namespace": "participant-1", "running": 1, "pending": 1,
     "gpus_requested": 2, "gpu_quota": 2, "pods": "a(Running, 1 gpu), b(Pending, 1 gpu)"},
    {"participant": 2, "namespace": "participant-2", "running": 0, "pending": 0,
     "gpus_requested": 0, "gpu_quota": 2, "pods": ""},
    {"participant": 3, "namespace": "participant-3", "running": 3, "pending": 0,
     "gpus_requested": 3, "gpu_quota": 1, "pods": "x, y, z"},  # the quota was lowered later
]


def test_one_bar_per_participant_with_its_quota():
    chart = charts.workshop(pd.DataFrame(ROWS))
    data = dataset_with(chart, "participant", "gpus_requested", "gpu_quota")
    assert [r["participant"] for r in data] == ["participant-1", "participant-2", "participant-3"]
    assert [r["gpus_requested"] for r in data] == [2, 0, 3]
    assert [r["state"] for r in data] == ["requested", "requested", "over quota"]
    assert data[0]["label"] == "1 running, 1 pending"
    marks = {m.get("mark", {}).get("type") if isinstance(m.get("mark"), dict) else m.get("mark")
             for m in walk(chart.to_dict()) if "mark" in m}
    assert {"bar", "tick", "text"} <= marks
    assert subtitle(chart) == ["3 participant(s) · 5 of 5 quota GPU(s) requested · "
                               "4 pod(s) running, 1 pending"]


def test_json_rows_of_the_cli_work_too():
    chart = charts.workshop(ROWS[:1])
    assert dataset_with(chart, "participant")[0]["gpu_quota"] == 2
    from gpu_lab.viz.export import to_svg

    assert "<svg" in to_svg(chart)


def test_empty_and_wrong_tables():
    empty = charts.workshop(pd.DataFrame(columns=["namespace", "running", "pending",
                                                  "gpus_requested", "gpu_quota"]))
    assert "no participants" in str(empty.to_dict())
    with pytest.raises(gpu_lab.GpuLabError, match="missing gpu_quota"):
        charts.workshop([{"namespace": "p", "running": 0, "pending": 0, "gpus_requested": 0}])
