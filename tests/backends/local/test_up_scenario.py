"""`gpu-lab up --scenario`: the real scheduler places a GPU pod on a simulated H100 node,
the fake plugin hands it device IDs, and `gpu-lab down` leaves nothing running."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from realcluster import require_controlplane

SCENARIO = Path(__file__).parents[3] / "lessons" / "scenarios" / "first_cluster.yaml"


def _gpu_lab(env, *args):
    return subprocess.run([sys.executable, "-m", "gpu_lab.cli", *args], env=env, capture_output=True,
                          text=True, timeout=180)


@pytest.mark.controlplane
def test_up_with_a_scenario_then_down(tmp_path):
    require_controlplane("the real-cluster tests")
    env = {**os.environ, "GPU_LAB_HOME": str(tmp_path)}
    up = _gpu_lab(env, "up", "--name", "t", "--scenario", str(SCENARIO))
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        assert "node agent: 4 node(s) ready" in up.stdout
        from gpu_lab.backends.local.session import LocalSession

        lab = LocalSession("t", tmp_path)
        pods = lab.schedule().set_index("name")
        assert pods.loc["train-0", "node"] in ("h100-0", "h100-1")
        ids = pods.loc["train-0", "devices"]["nvidia.com/gpu"]
        assert len(ids) == 4 and all(i.startswith("GPU-") for i in ids)
        # the same IDs the simulator hands out for that node
        import gpu_lab

        sim = gpu_lab.connect("sim")
        sim.apply(SCENARIO)
        sim_ids = {i for n in sim._sim.cluster.snapshot.nodes if n.name == pods.loc["train-0", "node"]
                   for i in n.devices["nvidia.com/gpu"]}
        assert set(ids) <= sim_ids
        assert pods.loc["forgot-toleration", "message"].startswith("0/4 nodes are available: ")
    finally:
        down = _gpu_lab(env, "down", "--name", "t")
    assert down.returncode == 0, down.stderr
    assert "node agent stopped" in down.stdout
    left = subprocess.run(["pgrep", "-f", str(tmp_path)], capture_output=True, text=True).stdout.strip()
    assert left == "", f"processes left behind: {left}"
