import pytest
from vizkit import dataset_with

import gpu_lab

charts, gpus = gpu_lab.charts, gpu_lab.gpus


def test_placement_bars_span_their_memory_slices():
    p = gpus.validate_mig_layout("A100-40GB", ["3g.20gb", "2g.10gb", "1g.5gb", "1g.5gb"])
    rows = dataset_with(charts.mig_layout(p), "gpu", "start", "end", "profile")
    inst = sorted((r["start"], r["end"], r["profile"]) for r in rows if r["profile"] != "free")
    assert inst == sorted((s.start, s.start + s.size, s.profile) for s in p.slots)
    free = sorted(r["start"] for r in rows if r["profile"] == "free")
    assert free == list(p.free_memory_slices)
    # every slice 0..7 is covered exactly once
    covered = sorted(i for r in rows for i in range(r["start"], r["end"]))
    assert covered == list(range(8))


def test_labelled_rows_and_profile_names_with_model():
    chart = charts.mig_layout({"balanced": ["3g.20gb", "2g.10gb", "1g.5gb"], "full": ["7g.40gb"]},
                              model="A100-40GB")
    rows = dataset_with(chart, "gpu", "profile")
    assert {r["gpu"] for r in rows} == {"balanced", "full"}
    assert [(r["start"], r["end"]) for r in rows if r["gpu"] == "full"] == [(0, 8)]
    assert "A100-40GB" in chart.to_dict()["title"]["text"]
    with pytest.raises(gpu_lab.GpuLabError):
        charts.mig_layout(["4g.20gb", "4g.20gb"], model="A100-40GB")
    with pytest.raises(gpu_lab.GpuLabError, match="model="):
        charts.mig_layout(["3g.20gb"])


def test_mig_plan_rows_with_services_and_a_whole_gpu():
    plan = gpus.plan_mig([gpus.Service("chat", 30, replicas=3), gpus.Service("emb", 8, replicas=4),
                          gpus.Service("big", 79.5)], "H100-80GB")
    rows = dataset_with(charts.mig_layout(plan), "gpu", "profile", "who")
    assert {r["gpu"] for r in rows} == {f"GPU {g.index}" for g in plan.gpus}
    whole = [g for g in plan.gpus if g.placement is None]
    assert len(whole) == 1
    bar = [r for r in rows if r["gpu"] == f"GPU {whole[0].index}"]
    assert len(bar) == 1 and (bar[0]["start"], bar[0]["end"]) == (0, 8)
    assert bar[0]["profile"] == "whole GPU" and bar[0]["who"] == "big#0"
    held = sorted(r["who"] for r in rows if r["who"] and r["profile"] != "whole GPU")
    assert held == sorted([f"chat#{i}" for i in range(3)] + [f"emb#{i}" for i in range(4)])
    for r in rows:
        if r["who"].startswith("chat"):
            assert r["profile"] == plan.profile_of["chat"]


def test_mig_profiles_show_every_allowed_start():
    chart = charts.mig_profiles("A100-40GB")
    rows = dataset_with(chart, "profile", "start", "end")
    for p in gpus.mig_profiles("A100-40GB"):
        mine = sorted((r["start"], r["end"]) for r in rows if r["profile"] == p.name)
        assert mine == [(s, s + p.memory_slices) for s in p.starts]
    four = [(r["start"], r["end"]) for r in rows if r["profile"] == "4g.20gb"]
    three = [(r["start"], r["end"]) for r in rows if r["profile"] == "3g.20gb"]
    assert four == [(0, 4)] and (4, 8) in three  # why 4g + 3g fit and 4g + 4g do not
    assert any("4g.20gb + 3g.20gb fit" in s for s in chart.to_dict()["title"]["subtitle"])
