"""Preemption ties in the differential harness (gpu_lab.fidelity.replaying): the real
scheduler's pick among preemption candidates is replayed on the sim only when the sim finds
those candidates equal on every criterion of pickOneNodeForPreemption; otherwise the
comparison fails (ReplayMismatch). Simulator only: the control-plane half is the fidelity
scenario preemption_tie_either_node and fuzz seed 117."""

from __future__ import annotations

from collections import deque
from pathlib import Path

import pytest

import gpu_lab
from gpu_lab.fidelity import Case, RealChoices, ReplayMismatch, replaying, run_case, workloads_of
from gpu_lab.model.objects import Pod
from gpu_lab.sim.plugins.defaultpreemption import DefaultPreemption

TIE = Path(__file__).parent / "scenarios" / "preemption_tie_either_node.yaml"


def victim(name: str, priority: int = 10, created: int = 0) -> Pod:
    return Pod(namespace="default", name=name, priority=priority, created=created)


def test_victims_started_in_the_same_second_tie():
    a, b = victim("a", created=1), victim("b", created=2)
    candidates = [(0, [a]), (1, [b])]
    # status.startTime has whole seconds: 3.2 s and 3.9 s are the same second
    assert DefaultPreemption.best_candidates(candidates, {a.key: 3.2, b.key: 3.9}) == [0, 1]
    # a later second wins (the latest start of the highest-priority victims)
    assert DefaultPreemption.best_candidates(candidates, {a.key: 5.0, b.key: 3.9}) == [0]
    # among equals the sim's own pick is repeatable: the victim created last
    assert DefaultPreemption.pick_one(candidates, {a.key: 3.2, b.key: 3.9}) == 1


def test_an_earlier_criterion_breaks_no_tie():
    low, lower = victim("low", priority=10), victim("lower", priority=5)
    assert DefaultPreemption.best_candidates([(0, [low]), (1, [lower])]) == [1]


def _tie_case(real_pick: str, *, lower_second: bool = False) -> tuple[Case, RealChoices]:
    case = Case.load(TIE)
    if lower_second:  # `second` matters less than `first`: no tie any more
        case.documents.append({"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                               "metadata": {"name": "lower"}, "value": 5})
        second = next(d for d in case.documents if d["metadata"].get("name") == "second")
        second["spec"]["priorityClassName"] = "lower"
    # `first` lands on l40s-0 (a score tie, replayed too); `second` then fits only l40s-1
    return case, RealChoices(nodes={"first": deque(["l40s-0"])},
                             preemptions={"urgent": deque([real_pick])})


@pytest.mark.parametrize(("real_pick", "evicted"), [("l40s-0", "first"), ("l40s-1", "second")])
def test_the_real_pick_among_equal_candidates_is_replayed(real_pick, evicted):
    case, choices = _tie_case(real_pick)
    sim = gpu_lab.connect("sim", seed=0)
    with replaying(choices, workloads_of(case)):
        out = run_case(case, sim)
    assert dict(out.preempted) == {evicted: 1}
    pods = sim.pods().set_index("name")
    assert pods.loc["urgent", "node"] == real_pick


def test_a_real_pick_the_sim_ranks_lower_fails():
    case, choices = _tie_case("l40s-0", lower_second=True)  # the real scheduler "took" first's node
    sim = gpu_lab.connect("sim", seed=0)
    mismatch = r"preempted on l40s-0; the sim's equally good candidates were \['l40s-1'\]"
    with pytest.raises(ReplayMismatch, match=mismatch), replaying(choices, workloads_of(case)):
        run_case(case, sim)
    # the sim kept its own pick: the lower-priority pod went
    pods = sim.pods().set_index("name")
    assert pods.loc["second", "reason"] == "PreemptionByScheduler"
    assert pods.loc["first", "phase"] == "Running"
