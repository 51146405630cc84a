"""Kueue on both backends: the simulator's model of Kueue v0.17.0 against the real Kueue
manager (``gpu-lab up --with kueue``), scenario by scenario.

Each scenario in kueue/ runs on the sim (apply, schedule, the clock past the last
``gpulab.dev/submit-at`` and every timed pod) and on a local lab that runs Kueue (the same
calls; ``apply`` creates the queued Jobs one a second in file order, which is what their
submit-at annotations say to the sim). From ``lab.jobs()`` both must agree on which Jobs
Kueue admitted and in which order, and on every Job's state, queue, GPUs and Kueue's
message. ``REAL`` is what real Kueue decided: the sim is held to it without a control
plane; the local backend is held to it, and to the sim, with one. In CI (CI=true) the
local half fails when the control plane or Kueue is not built; elsewhere it skips.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

import pandas as pd
import pytest
import yaml
from realcluster import require_kueue

import gpu_lab
from gpu_lab.backends.local import kueue
from gpu_lab.backends.local.cluster import LocalCluster
from gpu_lab.backends.local.kueueobjects import check as check_kueue_objects
from gpu_lab.backends.sim import JOB_COLUMNS
from gpu_lab.errors import GpuLabError

HERE = Path(__file__).parent / "kueue"
CASES = sorted(HERE.glob("*.yaml"))
LAB = "kueue-diff"

#: Kueue's words (pkg/scheduler/flavorassigner, pkg/controller/core/workload_controller.go)
SHORT = ("couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
         "in flavor h100, {} more needed")

#: What real Kueue v0.17.0 decided, per scenario: the Jobs it admitted, in order, and
#: per Job (state, queue, GPUs, message) as ``lab.jobs()`` shows them.
REAL = {
    "quota_admits_one_of_two": (["train-1"], {
        "train-1": ("Running", "team-a", 8, ""),
        "train-2": ("Suspended", "team-a", 8, SHORT.format(8))}),
    "strict_fifo_blocks_behind_the_head": (["running"], {
        "running": ("Running", "team-a", 4, ""),
        "big": ("Suspended", "team-a", 8, SHORT.format(4)),
        "small": ("Suspended", "team-a", 2, "")}),  # never tried: no condition, no message
    "best_effort_fifo_lets_the_small_one_through": (["running", "small"], {
        "running": ("Running", "team-a", 4, ""),
        "big": ("Suspended", "team-a", 8, SHORT.format(4)),
        "small": ("Running", "team-a", 2, "")}),
    "cohort_borrows_unused_quota": (["a-1", "a-2"], {
        "a-1": ("Running", "team-a", 4, ""),
        "a-2": ("Running", "team-a", 4, ""),  # 4 GPUs borrowed from team-b-cq
        "b-1": ("Suspended", "team-b", 4, SHORT.format(4))}),
    "localqueue_names_a_missing_clusterqueue": (["ok"], {
        "ok": ("Running", "team-a", 4, ""),
        "orphan-job": ("Suspended", "orphan", 1, "ClusterQueue no-such-cq doesn't exist")}),
    "job_names_a_missing_localqueue": (["train-1"], {
        "train-1": ("Running", "team-a", 8, ""),
        "train-2": ("Suspended", "no-such-lq", 8, "LocalQueue no-such-lq doesn't exist")}),
    "priority_preempts_within_the_cluster_queue": (["high-job"], {
        "low-job": ("Suspended", "team-a", 8, SHORT.format(8)),
        "high-job": ("Running", "team-a", 8, "")}),
    "job_without_a_queue_label_is_not_kueues": (["a"], {
        "a": ("Running", "team-a", 4, ""),
        "free": ("Running", None, 4, ""),
        "b": ("Suspended", "team-a", 4, SHORT.format(4))}),
    "completed_job_frees_its_quota": (["train-1", "train-2"], {
        "train-1": ("Complete", "team-a", 8, ""),
        "train-2": ("Running", "team-a", 8, "")}),
}

#: scenarios where the sim is known to disagree with real Kueue, and why
SIM_BUGS: dict[str, str] = {}


def verdict(jobs: pd.DataFrame) -> tuple[list[str], dict[str, tuple]]:
    """The Jobs Kueue admitted, in admission order (ties: creation order), and per Job its
    state, queue, GPUs and message."""
    admitted = jobs[(jobs["state"] != "Suspended") & jobs["queue"].notna()]
    order = list(admitted.sort_values("admitted_at", kind="stable")["name"])
    rows = {r.name: (r.state, None if pd.isna(r.queue) else r.queue, int(r.gpus), r.message or "")
            for r in jobs.itertuples()}
    return order, rows


def submit_times(path: Path) -> list[float]:
    from gpu_lab.model.duration import parse_duration

    docs = [d for d in yaml.safe_load_all(path.read_text()) if d and d.get("kind") == "Job"]
    return [parse_duration(((d["metadata"].get("annotations") or {})
                            .get("gpulab.dev/submit-at", "0s")), "submit-at") for d in docs]


def run(lab, path: Path) -> pd.DataFrame:
    """The same calls on either backend: apply, schedule, then the clock past the last
    submission (the sim's; local creates them as it goes) and to the end of timed pods."""
    lab.apply(path)
    lab.schedule()
    if lab.backend == "sim":
        lab.advance(max(submit_times(path)) + 1)
    lab.advance(None)
    return lab.jobs()


def known_bug(name: str, agrees: bool) -> None:
    """A scenario in SIM_BUGS is an expected failure until the sim is fixed, then a reminder."""
    if name in SIM_BUGS:
        if agrees:
            pytest.fail(f"{name} now agrees with real Kueue: remove it from SIM_BUGS")
        pytest.xfail(SIM_BUGS[name])


# =========================================================================== no cluster


def test_every_scenario_has_real_kueues_verdict():
    assert sorted(REAL) == sorted(p.stem for p in CASES)
    assert set(SIM_BUGS) <= set(REAL)


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_the_sim_decides_as_real_kueue(path):
    got = verdict(run(gpu_lab.connect("sim", seed=0), path))
    known_bug(path.stem, got == REAL[path.stem])
    assert got == REAL[path.stem]


def test_kueue_objects_are_refused_where_kueue_does_not_run(tmp_path):
    plain = LocalCluster("plain", root=tmp_path)  # never started: its state says no Kueue
    docs = yaml.safe_load_all((HERE / "quota_admits_one_of_two.yaml").read_text())
    kq = [d for d in docs if d["apiVersion"].startswith("kueue.x-k8s.io/")]
    with pytest.raises(GpuLabError) as err:
        check_kueue_objects(plain, kq)
    assert str(err.value) == (
        'no matches for kind "ResourceFlavor" in version "kueue.x-k8s.io/v1beta2": this lab does '
        "not run Kueue; `gpu-lab up --name plain --with kueue` starts it")
    assert check_kueue_objects(plain, []) == []


# =========================================================================== a real lab


@pytest.fixture(scope="module")
def local(tmp_path_factory):
    require_kueue("the Kueue differential tests")
    root = tmp_path_factory.mktemp("kueue-lab")
    lab = LocalCluster(LAB, root=root)
    try:
        lab.up(progress=None)
        kueue.enable(lab, kueue.KueueSettings(), progress=None, build=False)
        session = gpu_lab.connect("local", name=LAB, root=root, timeout=90)
        yield session
        session.close()
    finally:
        lab.down(progress=None, purge=True)


@pytest.mark.controlplane
@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_the_sim_agrees_with_real_kueue(path, local):
    local.reset()
    started = time.monotonic()
    jobs = run(local, path)
    assert time.monotonic() - started < 20, "apply, schedule and advance must not hang"
    assert list(jobs.columns) == JOB_COLUMNS
    real = verdict(jobs)
    assert real == REAL[path.stem]
    admitted = jobs[jobs["state"] != "Suspended"]
    assert admitted["admitted_at"].map(math.isfinite).all()
    assert jobs[jobs["state"] == "Suspended"]["admitted_at"].isna().all()
    sim = verdict(run(gpu_lab.connect("sim", seed=0), path))
    known_bug(path.stem, sim == real)
    assert sim == real


@pytest.mark.controlplane
def test_a_kueue_configuration_must_be_the_one_the_lab_runs(local):
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
              "waitForPodsReady": {"timeout": "5m"}}
    assert local.apply([config]) == []  # what `gpu-lab up --with kueue` runs by default
    config["waitForPodsReady"] = {"timeout": "10m", "blockAdmission": True}
    with pytest.raises(GpuLabError) as err:
        local.apply([config])
    assert str(err.value) == (
        "Configuration: waitForPodsReady timeout 10m0s, blockAdmission true is not what this "
        "lab's Kueue runs with (waitForPodsReady timeout 5m, blockAdmission false); Kueue reads "
        f"it when it starts: `gpu-lab up --name {LAB} --with kueue --kueue-pods-ready-timeout "
        "10m0s` restarts it with that timeout")
