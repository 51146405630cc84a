"""The differential fidelity suite: every scenario on the simulator and on the real scheduler.

Agreement is required on the pending pods, on what each node ends up holding and on the
scheduler's message for every pending pod. A disagreement fails unless the scenario is
listed in known_differences.yaml with the reason.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from realcluster import shared_lab

import gpu_lab
from gpu_lab.fidelity import (
    ASPECTS,
    Case,
    aspect,
    differences,
    known_differences,
    real_choices,
    replaying,
    run_case,
    workloads_of,
)

HERE = Path(__file__).parent
CASES = sorted((HERE / "scenarios").glob("*.yaml"))
KNOWN = known_differences(HERE / "known_differences.yaml")


def test_there_are_at_least_30_scenarios():
    assert len(CASES) >= 30


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_scenario_runs_on_the_simulator(path):
    case = Case.load(path)
    out = run_case(case, gpu_lab.connect("sim", seed=0))
    assert out.usage or out.pending  # something was placed or is waiting


def test_known_differences_name_real_scenarios_and_say_why():
    for name, whys in KNOWN.items():
        assert (HERE / "scenarios" / f"{name}.yaml").exists(), name
        for what, why in whys.items():
            assert what in ASPECTS, f"{name}: {what} is not one of {ASPECTS}"
            assert len(why) > 20, f"{name}: say why"


@pytest.fixture(scope="module")
def local_session(request):
    yield from shared_lab(request, "the real-cluster tests")


@pytest.mark.controlplane
@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_sim_agrees_with_the_real_scheduler(path, local_session):
    case = Case.load(path)
    local_session.reset()
    real = run_case(case, local_session)
    workloads = workloads_of(case)
    with replaying(real_choices(local_session, workloads), workloads):
        sim = run_case(case, gpu_lab.connect("sim", seed=0))
    diff = differences(case, sim, real)
    known = KNOWN.get(case.name, {})
    assert not [d for d in diff if aspect(d) not in known], "\n".join(diff)
    agreeing = sorted(a for a in known if not any(aspect(d) == a for d in diff))
    if agreeing:
        pytest.fail(f"{case.name}: {', '.join(agreeing)} listed as a known difference but now agree: remove it")
    if known:
        pytest.xfail("; ".join(sorted(set(known.values()))))


@pytest.mark.controlplane
def test_real_explanation_of_a_pending_pod_matches_the_simulator(local_session):
    """explain() on the real backend: PodScheduled=False, the FailedScheduling event, and
    the same message the simulator gives (which also shows per-plugin tables)."""
    case = Case.load(HERE / "scenarios" / "insufficient_gpu.yaml")
    local_session.reset()
    run_case(case, local_session)
    sim = gpu_lab.connect("sim", seed=0)
    run_case(case, sim)
    real = local_session.explain("default/too-big")
    assert real.node is None and real.notes[0].startswith("PodScheduled=False (Unschedulable)")
    assert any(n.startswith("FailedScheduling: 0/2 nodes are available") for n in real.notes)
    assert real.message == sim.explain("default/too-big").message
    # rejected before scoring: the account has no tables, and says where they come from
    assert real.filters.empty and real.scores.empty and "its log" in real.notes[-1]


TWO_SIZES = """
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: big}
spec: {count: 1, gpu: {model: A100-80GB, count: 8}, cpu: "128", memory: 1024Gi}
---
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: small}
spec: {count: 1, gpu: {model: L4, count: 1}, cpu: "16", memory: 64Gi}
---
apiVersion: v1
kind: Pod
metadata: {name: web}
spec:
  containers:
  - {name: c, image: app, resources: {requests: {cpu: "4", memory: 8Gi}}}
"""


@pytest.mark.controlplane
def test_real_scores_of_a_bound_pod_are_the_schedulers_own_and_match_the_simulator(local_session):
    """explain() on local carries kube-scheduler's per-plugin weighted scores for every
    node it scored (read from its log), in the sim's shape, and they equal the sim's."""
    local_session.reset()
    local_session.apply(TWO_SIZES)
    local_session.schedule()
    sim = gpu_lab.connect("sim", seed=0)
    sim.apply(TWO_SIZES)
    sim.schedule()
    real, model = local_session.explain("web").to_dict(), sim.explain("web").to_dict()
    assert real["node"] == model["node"] == "big-0"

    def weighted(d):
        return {n["name"]: ({p: v["weighted"] for p, v in n["scores"].items() if v["weighted"]}, n["total"])
                for n in d["nodes"] if n.get("scores")}

    assert set(weighted(real)) == {"big-0", "small-0"}
    assert weighted(real) == weighted(model)
    big = next(n for n in real["nodes"] if n["name"] == "big-0")
    assert big["result"] == "feasible"
    assert big["scores"]["TaintToleration"]["weighted"] == 3 * big["scores"]["TaintToleration"]["normalized"]
