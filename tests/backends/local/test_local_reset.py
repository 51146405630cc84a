"""``reset()`` on the local backend leaves no node agent of an old node alive: a scenario
that recreates a node under the same name (a lesson that builds a fresh lab per case,
lesson 04) gets exactly that scenario's capacity and allocatable, as on the sim, and no
agent or device plugin of the deleted nodes goes on writing to the new Node.

The lab is private to this module ($GPU_LAB_HOME untouched) and deleted at the end."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from realcluster import shared_lab

import gpu_lab
from gpu_lab import processes as procs
from gpu_lab.kube import ApiError
from gpu_lab.kubelet import agentprocess
from gpu_lab.kubelet.statusreporter import not_ours

pytestmark = pytest.mark.controlplane
REPO = Path(__file__).resolve().parents[3]

ROUNDS = 3
#: the old agents' status loop ticks every 0.1 s: a stale one would overwrite the new
#: Node's status well within this
STALE_WRITE_S = 1.5
PLUGIN_MODULE = "gpu_lab.kubelet.pluginprocess"


def _pool(count: int, gpus: int) -> str:
    return ("apiVersion: gpulab.dev/v1alpha1\nkind: NodePool\nmetadata: {name: t4}\n"
            f"spec: {{count: {count}, gpu: {{model: T4, count: {gpus}}}}}\n")


#: the reported sequence: same pool name, so the same node names (t4-0, t4-1) each time
SEQUENCE = [_pool(2, 8), _pool(2, 1), _pool(1, 1)]


@pytest.fixture(scope="module")
def lab(request):
    yield from shared_lab(request, "the local reset tests")


def _figures(session) -> dict[str, tuple[dict[str, int], dict[str, int]]]:
    return {r.name: (dict(r.capacity), dict(r.allocatable)) for r in session._node_rows()}


def _sim_figures(scenario: str) -> dict[str, tuple[dict[str, int], dict[str, int]]]:
    sim = gpu_lab.connect("sim")
    sim.apply(scenario)
    return _figures(sim)


def _plugin_processes(lab_dir: Path) -> list[tuple[int, str]]:
    """(pid, node) of every live device-plugin process of this lab's nodes."""
    out = []
    for entry in Path("/proc").iterdir():
        argv = procs.cmdline(int(entry.name)) if entry.name.isdigit() else None
        if argv and PLUGIN_MODULE in argv and "--node-name" in argv and any(
                a.startswith(str(lab_dir)) for a in argv):
            out.append((int(entry.name), argv[argv.index("--node-name") + 1]))
    return out


def _live_agents(cluster) -> list[dict]:
    return [doc for doc in agentprocess.agent_states(cluster)
            if agentprocess.assess(doc)[0] != "stopped"]


def _check(session, scenario: str, want: dict) -> None:
    nodes = set(want)
    got = _figures(session)
    assert got == want, f"after reset and apply of {scenario!r}"
    # no agent of a deleted node is left: each node is played by exactly one live agent,
    # and each runs exactly one device-plugin process
    agents = _live_agents(session.cluster)
    played = sorted(n for doc in agents for n in doc.get("nodes") or {})
    assert played == sorted(nodes), f"live agents play {played}, want {sorted(nodes)}"
    plugins = _plugin_processes(session.cluster.dir)
    assert sorted(n for _, n in plugins) == sorted(nodes), f"device plugins running: {plugins}"
    tracked = {info.get("plugin_pid") for doc in agents for info in (doc.get("nodes") or {}).values()}
    assert {pid for pid, _ in plugins} <= tracked, f"untracked plugins: {plugins}, tracked {tracked}"
    # and none writes the Node afterwards: a stale status loop would within a few ticks
    time.sleep(STALE_WRITE_S)
    assert _figures(session) == want, f"a while after reset and apply of {scenario!r}"


def test_reset_then_same_node_names_get_the_new_scenarios_figures(lab):
    wanted = [_sim_figures(s) for s in SEQUENCE]
    for _ in range(ROUNDS):
        for scenario, want in zip(SEQUENCE, wanted, strict=True):
            lab.reset()
            lab.apply(scenario)
            _check(lab, scenario, want)
    lab.reset()
    assert not _live_agents(lab.cluster) and not _plugin_processes(lab.cluster.dir)


def test_a_fresh_session_per_case_stops_the_agents_of_the_last_one(lab):
    """Lesson 04's way: each case connects anew and resets; the earlier sessions are never
    closed, so their agents must not outlive the reset."""
    wanted = [_sim_figures(s) for s in SEQUENCE]
    sessions = []
    try:
        for _ in range(ROUNDS):
            for scenario, want in zip(SEQUENCE, wanted, strict=True):
                case = gpu_lab.connect("local", name=lab.cluster.name, root=lab.cluster.dir.parents[1],
                                       timeout=lab.timeout)
                sessions.append(case)
                case.reset()
                case.apply(scenario)
                _check(case, scenario, want)
    finally:
        for s in sessions:
            s.close()
    lab.reset()
    assert not _live_agents(lab.cluster) and not _plugin_processes(lab.cluster.dir)


def test_an_agent_of_another_process_lets_go_of_the_nodes_reset_deletes(lab, tmp_path):
    """A node agent this process cannot stop (another kernel's): once reset deletes its
    Nodes it stops their plugins and never writes them again, and reset waits for that."""
    lab.reset()
    scenario = tmp_path / "eight.yaml"
    scenario.write_text(SEQUENCE[0])
    env = {**os.environ, "PYTHONPATH": str(REPO), "GRPC_VERBOSITY": "ERROR"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "gpu_lab.kubelet.agent", "--kubeconfig", str(lab.cluster.kubeconfig()),
         "--scenario", str(scenario), "--work-dir", str(agentprocess.work_dir(lab.cluster))],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stderr is not None
    try:
        line = proc.stdout.readline()
        assert "node agent: 2 node(s) ready" in line, line + proc.stderr.read()
        assert sorted(n for _, n in _plugin_processes(lab.cluster.dir)) == ["t4-0", "t4-1"]
        lab.reset()
        assert proc.poll() is None  # still running, playing nothing
        assert [doc["nodes"] for doc in _live_agents(lab.cluster)] == [{}]
        assert not _plugin_processes(lab.cluster.dir)
        want = _sim_figures(SEQUENCE[1])
        lab.apply(SEQUENCE[1])
        _check(lab, SEQUENCE[1], want)
        # what keeps a late write of an old agent off the new Node: its uid is refused
        with pytest.raises(ApiError) as refused:
            lab.client.patch("Node", "t4-0", {"metadata": {"uid": "00000000-0000-0000-0000-000000000000"},
                                              "status": {"capacity": {"nvidia.com/gpu": "8"}}},
                             subresource="status")
        assert not_ours(refused.value), refused.value
        assert _figures(lab) == want
    finally:
        proc.terminate()
        proc.wait(15)
    lab.reset()
