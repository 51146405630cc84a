from vizkit import dataset_with, pod, pool, session

import gpu_lab

charts = gpu_lab.charts


def test_free_vs_largest_job_hand_checked():
    # three 8-GPU nodes; pods of 6, 5 and 7 GPUs land one per node: free 2 + 3 + 1 = 6,
    # and no node has more than 3 free, so a 4-GPU job cannot run.
    spread = session(pool("h100", "H100-80GB", 8, count=3),
                     pod("a", 6, node="h100-0"), pod("b", 5, node="h100-1"),
                     pod("c", 7, node="h100-2"))
    # the same 18 GPUs packed 8, 8, 2: free 0 + 0 + 6, and a 6-GPU job still fits
    packed = session(pool("h100", "H100-80GB", 8, count=3),
                     pod("a", 8, node="h100-0"), pod("b", 8, node="h100-1"),
                     pod("c", 2, node="h100-2"))
    chart = charts.fragmentation({"spread": spread, "packed": packed})
    rows = dataset_with(chart, "option", "measure", "gpus")
    got = {(r["option"], r["measure"]): r["gpus"] for r in rows}
    assert got == {("spread", "free in total"): 6, ("spread", "largest job that fits"): 3,
                   ("packed", "free in total"): 6, ("packed", "largest job that fits"): 6}


def test_cordoned_nodes_do_not_count():
    lab = session(pool("h100", "H100-80GB", 8, count=2), pod("a", 2, node="h100-0"))
    lab.cordon("h100-1")
    rows = dataset_with(charts.fragmentation(lab), "option", "measure", "gpus")
    assert {r["measure"]: r["gpus"] for r in rows} == {"free in total": 6,
                                                      "largest job that fits": 6}
    assert {r["option"] for r in rows} == {"cluster"}
