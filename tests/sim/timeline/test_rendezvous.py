"""Rendezvous Jobs: no progress until every worker runs; the GPUs held meanwhile are stranded."""

import pytest

import gpu_lab

from .kit import pod, pool, priority_class, rendezvous


def metrics(lab):
    return lab._sim.recorder.totals()


def test_six_of_eight_workers_hold_gpus_for_nothing():
    lab = gpu_lab.connect("sim")
    lab.apply([pool(gpus=8), pod("inference", gpus=2, duration="2h"), rendezvous("train", 8, duration="1h")])
    lab.schedule()
    t = lab.timeline()
    assert ((t["owner"] == "train") & (t["phase"] == "Running")).sum() == 6
    lab.advance(None)
    t = lab.timeline().set_index("pod")
    workers = t[t["owner"] == "train"]
    # six waited 2 h for the last two, then all eight trained for 1 h
    assert sorted(workers["stranded_s"]) == [0, 0] + [7200] * 6
    assert set(workers["finished_at"]) == {3 * 3600}
    assert metrics(lab)["gpu_hours_stranded"] == 12.0


def test_two_jobs_deadlock_when_a_later_one_takes_the_freed_gpus():
    lab = gpu_lab.connect("sim")
    lab.apply([pool(gpus=8), priority_class("team-b", 100, never=True),
               pod("blocker", gpus=4, duration="10m"), rendezvous("a", 8)])
    lab.schedule()
    lab.apply([rendezvous("b", 8, priority_class="team-b")])
    lab.advance(3600)
    t = lab.timeline()
    running = t[t["phase"] == "Running"].groupby("owner").size().to_dict()
    assert running == {"a": 4, "b": 4}
    assert (t.loc[t["phase"] == "Running", "stranded_s"] > 0).all()
    assert lab._sim.controllers.rendezvous.stranded_gpus == 8


def test_a_rendezvous_timeout_fails_the_waiting_workers_and_the_job_retries():
    lab = gpu_lab.connect("sim")
    lab.apply([pool(gpus=8), pod("inference", gpus=4, duration="15m"),
               rendezvous("train", 8, duration="1h", backoff_limit=20,
                          annotations={"gpulab.dev/rendezvous-timeout": "10m"})])
    lab.advance(600)
    t = lab.timeline()
    failed = t[(t["owner"] == "train") & (t["phase"] == "Failed")]
    assert len(failed) == 4 and set(failed["reason"]) == {"Error"}
    assert set(failed["finished_at"]) == {600}
    lab.advance(None)
    j = lab.jobs().iloc[0]
    assert j["state"] == "Complete" and j["failed"] == 4


def test_a_bad_rendezvous_annotation_is_refused():
    lab = gpu_lab.connect("sim")
    with pytest.raises(gpu_lab.GpuLabError, match='annotation gpulab.dev/rendezvous-timeout: invalid duration "ten"'):
        lab.apply([pool(), rendezvous("t", 2, annotations={"gpulab.dev/rendezvous-timeout": "ten"})])
    with pytest.raises(gpu_lab.GpuLabError, match='gpulab.dev/rendezvous: must be "true" or "false", not "yes"'):
        lab.apply([pool(), rendezvous("t", 2, annotations={"gpulab.dev/rendezvous": "yes"})])
    assert lab.nodes().empty
