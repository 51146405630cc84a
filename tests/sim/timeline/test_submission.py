"""gpulab.dev/submit-at: objects created later on the simulated clock."""

import math

import pytest

import gpu_lab

from .kit import job, pod, pool


def test_a_pod_appears_at_its_submit_time():
    lab = gpu_lab.connect("sim")
    lab.apply([pool(), pod("now"), pod("later", annotations={"gpulab.dev/submit-at": "30m"})])
    assert list(lab.schedule()["name"]) == ["now"]
    lab.advance(1799)
    assert "later" not in set(lab.pods()["name"])
    lab.advance(1)
    pods = lab.pods().set_index("name")
    assert pods.loc["later", "phase"] == "Running"
    t = lab.timeline().set_index("pod")
    assert t.loc["later", "created_at"] == 1800 and t.loc["later", "started_at"] == 1800


def test_a_job_submitted_later_queues_behind_earlier_pods():
    lab = gpu_lab.connect("sim")
    lab.apply([pool(gpus=2), job("first", 2, duration="10m"),
               job("second", 2, duration="10m", annotations={"gpulab.dev/submit-at": "1m"})])
    lab.advance(None)
    jobs = lab.jobs().set_index("name")
    assert jobs.loc["first", "finished_at"] == 600
    assert jobs.loc["second", "admitted_at"] == 60
    assert jobs.loc["second", "started_at"] == 600 and jobs.loc["second", "finished_at"] == 1200
    assert list(jobs["state"]) == ["Complete", "Complete"]


@pytest.mark.parametrize("value", ["-5m", "soon", "5 minutes"])
def test_a_bad_submit_time_is_one_line_and_applies_nothing(value):
    lab = gpu_lab.connect("sim")
    with pytest.raises(gpu_lab.GpuLabError, match=f'annotation gpulab.dev/submit-at: invalid duration "{value}"'):
        lab.apply([pool(), pod("a"), pod("b", annotations={"gpulab.dev/submit-at": value})])
    assert lab.pods().empty and lab.nodes().empty


def test_timeline_shows_times_in_seconds_and_nan_when_not_yet():
    lab = gpu_lab.connect("sim")
    lab.apply([pool(gpus=1), pod("a", duration="1h"), pod("b", duration="1h")])
    lab.advance(60)
    t = lab.timeline().set_index("pod")
    assert t.loc["a", "started_at"] == 0 and math.isnan(t.loc["a", "finished_at"])
    assert math.isnan(t.loc["b", "started_at"])
