"""The differential fuzz (gpu_lab.fuzz): random valid scenarios on the sim and on the real
kube-scheduler, compared as the fidelity suite compares.

CI runs a fixed set of seeds that agree and a few fresh ones each run (derived from the
time, shown in the test ids: ``gpu-lab fuzz --seed N`` replays one). A difference fails
unless ``gpu_lab/fuzz/known_differences.yaml`` explains it.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from collections import Counter

import pytest
import yaml
from realcluster import shared_lab

import gpu_lab
from gpu_lab.fidelity import Case, _refusal, run_case
from gpu_lab.fuzz import known_differences, run_seed, scenario, scenario_text
from gpu_lab.fuzz.compare import affinity_groups, guarded_groups
from gpu_lab.fuzz.generate import MAX_NODES, MAX_PODS, _contested
from gpu_lab.model.creationorder import POD_MAKERS, creation_order
from gpu_lab.model.scenario import parse_scenario

#: seeds that agreed on sim and local, with no known difference, in two runs after the generator
#: last changed (it gained StatefulSets, DaemonSets, Services, PodDisruptionBudgets, ResourceQuotas
#: and LimitRanges: a seed that draws none of them is the scenario it was before, so 2, 3, 4, 7, 15, 18
#: and 117 are the earlier list's). Among them: quotas 0, 1, 8, 12; LimitRanges 9, 11, 14; a Service
#: 5; PodDisruptionBudgets 22, 39; DaemonSets 11, 16, 38; StatefulSets 22, 23 (OrderedReady)
#: and 107 (Parallel, with a quota). Regression seeds of the fixes they found: 16 (a daemon pod's
#: PreFilterResult), 107 (a Parallel StatefulSet's slow start), 24 (an OrderedReady StatefulSet
#: only last in its batch), 117 (a preemption tie replayed). Change the generator and this list
#: must be chosen again. Seed 10 left the list: its low-priority pod's required pod affinity
#: selects a pod that the batch's high-priority pods preempt, and kube-scheduler counts a
#: terminating pod for InterPodAffinity by design (kubernetes/kubernetes#87621, #111793), so the
#: real outcome depends on whether the node agent has finished the victim's deletion when the
#: affinity pod's cycle runs: it agreed in earlier runs and, on a loaded machine (a CI run), the
#: real scheduler placed the pod beside the terminating victim.
FIXED = [0, 1, 2, 3, 4, 5, 7, 8, 9, 11, 12, 14, 15, 16, 18, 22, 23, 24, 38, 39, 107, 117]
#: fresh seeds per run, so CI keeps meeting scenarios nobody has seen: from the clock, or in a
#: parallel run from the run's id, which every xdist worker shares (each collects the same ids)
_RUN = os.environ.get("PYTEST_XDIST_TESTRUNUID")
_BASE = int(_RUN, 16) % 1_000_000 if _RUN else int(time.time()) % 1_000_000
FRESH = [_BASE * 10 + i for i in range(3)]


def _all_documents(case) -> list[dict]:
    return case.documents + [d for a in case.actions for d in a.get("apply") or []]


def test_a_seed_always_gives_the_same_scenario():
    assert scenario_text(7) == scenario_text(7)
    assert scenario_text(7) != scenario_text(8)
    # and in another process (no hash-order or global-state dependence)
    other = subprocess.run([sys.executable, "-c", "from gpu_lab.fuzz import scenario_text; print(scenario_text(7), end='')"],
                           capture_output=True, text=True, check=True).stdout
    assert other == scenario_text(7)


def test_every_seed_gives_a_small_valid_scenario():
    for seed in range(300):
        sc = parse_scenario(_all_documents(scenario(seed)))  # raises on anything the sim refuses
        assert 1 <= len(sc.nodes) <= MAX_NODES and 1 <= len(sc.pods) <= MAX_PODS, seed


def test_the_generator_covers_what_the_format_expresses():
    seen: Counter = Counter()
    for seed in range(300):
        text = yaml.safe_dump_all(_all_documents(scenario(seed)))
        for feature in ("migStrategy: single", "migStrategy: mixed", "timeSlicing", "renameByDefault",
                        "taints", "tolerations", "nodeSelector", "nodeAffinity", "podAffinity",
                        "podAntiAffinity", "topologySpreadConstraints", "preemptionPolicy: Never",
                        "kind: Pod", "kind: Deployment", "kind: Job", "MostAllocated",
                        "RequestedToCapacityRatio", "defaultingType: List", "nvidia.com/mig-",
                        "topology.kubernetes.io/zone", "ScheduleAnyway", "DoNotSchedule",
                        "kind: StatefulSet", "podManagementPolicy: Parallel", "kind: DaemonSet",
                        "kind: Service", "kind: PodDisruptionBudget", "minAvailable", "maxUnavailable",
                        "kind: ResourceQuota", "requests.nvidia.com/", "pods: '", "kind: LimitRange"):
            seen[feature] += feature in text
        seen["a later batch"] += bool(scenario(seed).actions)
        seen["an OrderedReady StatefulSet"] += any(d["kind"] == "StatefulSet" and "podManagementPolicy" not in d["spec"]
                                                   for d in _all_documents(scenario(seed)))
    assert all(seen.values()), [f for f, n in seen.items() if not n]
    for kind in ("StatefulSet", "DaemonSet", "Service", "PodDisruptionBudget", "ResourceQuota", "LimitRange"):
        assert 20 <= seen[f"kind: {kind}"] <= 75, (kind, seen[f"kind: {kind}"])  # roughly one seed in seven


def test_an_ordered_ready_statefulset_is_the_last_pod_maker_of_its_batch():
    # its next pod waits for the one before to run: nothing of its batch may come after it
    ordered = 0
    for seed in range(300):
        case = scenario(seed)
        pods = parse_scenario(_all_documents(case)).pods
        for docs in [case.documents] + [a["apply"] for a in case.actions]:
            makers = [d for d in creation_order(docs, pods) if d["kind"] in POD_MAKERS]
            for d in makers[:-1]:
                assert not (d["kind"] == "StatefulSet" and "podManagementPolicy" not in d["spec"]), seed
            ordered += bool(makers) and makers[-1]["kind"] == "StatefulSet" and "podManagementPolicy" not in makers[-1]["spec"]
    assert ordered


def test_a_quota_never_refuses_the_first_batch():
    # a refused bare pod refuses the whole apply; the generator keeps the quota above what
    # the first batch's bare pods take, in the order they are created
    quotas = 0
    for seed in range(300):
        case = scenario(seed)
        if not any(d["kind"] == "ResourceQuota" for d in case.documents):
            continue
        quotas += 1
        run_case(Case(case.name, case.documents), gpu_lab.connect("sim", seed=0))  # raises if refused
    assert quotas > 20


def _quota_of(seed: int) -> dict:
    """The quota ``seed`` drew before the rule: what the generator made of it with the rule off."""
    import gpu_lab.fuzz.generate as generate
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(generate, "_contested", lambda case: False)
        return next(d for d in scenario(seed).documents if d["kind"] == "ResourceQuota")


def test_no_quota_is_freed_by_a_preemption_while_a_controller_waits_on_it():
    # which refused controller retries first is a race of backoffs (seed 7695960 drew one);
    # 342 and 846 drew such a quota too: the generator leaves it out, and keeps the rest
    for seed in (342, 846, 7695960):
        case = scenario(seed)
        assert not any(d["kind"] == "ResourceQuota" for d in case.documents), seed
        assert not _contested(case), seed
        assert _contested(Case(case.name, case.documents + [_quota_of(seed)], actions=case.actions)), seed
    kept = [s for s in range(60) if any(d["kind"] == "ResourceQuota" for d in scenario(s).documents)]
    assert kept and not any(_contested(scenario(s)) for s in kept)


def test_seeds_run_on_the_simulator():
    for seed in range(40):
        out = run_case(scenario(seed), gpu_lab.connect("sim", seed=0))
        assert out.usage or out.pending, seed


def test_a_scores_only_cause_excuses_no_placement_difference():
    known = {k.name: k for k in known_differences()}
    race = known["requeue_races_the_next_controller_pod"]
    scores = "infer4: scores differ:\n  sim only:  []\n  real only: []"
    affinity = affinity_groups(scenario(54))
    assert affinity == {"infer4", "batch0"}  # infer4's required pod affinity selects batch0's pods
    assert race.excuses(scores, scenario_text(54), True, affinity)
    assert not race.excuses(scores, scenario_text(54), False, affinity)  # placement differs too
    assert not race.excuses(scores.replace("infer4", "batch3"), scenario_text(54), True, affinity)
    assert not race.excuses("pending differs: sim {'infer4': 1} vs real {}", scenario_text(54), True, affinity)
    assert "podAffinity" not in scenario_text(0)
    assert not race.excuses(scores, scenario_text(0), True, affinity)  # no required pod affinity


def test_the_pdb_status_race_excuses_only_a_guarded_workloads_scores():
    lag = {k.name: k for k in known_differences()}["pdb_status_lags_a_preemption"]
    case, text = scenario(160), scenario_text(160)
    guarded = guarded_groups(case)
    assert guarded == {"web1"}  # the PodDisruptionBudget's selector
    scores = "web1: scores differ:\n  sim only:  []\n  real only: []"
    assert lag.excuses(scores, text, True, set(), guarded)
    assert not lag.excuses(scores, text, False, set(), guarded)  # placement differs too
    assert not lag.excuses(scores.replace("web1", "etl2"), text, True, set(), guarded)  # not guarded
    assert not lag.excuses("preempted differs: sim {'web1': 2} vs real {'web1': 1}", text, True, set(), guarded)
    assert not lag.excuses(scores, scenario_text(0), True, set(), guarded)  # no PodDisruptionBudget


def test_an_aggregated_refusal_is_the_same_refusal():
    # seed 96: the ReplicaSet's eleventh FailedCreate came reworded by client-go's event aggregator
    m = 'Error creating: pods "web0-5f7d8-abcde" is forbidden: exceeded quota: q, requested: pods=1'
    want = 'Error creating: pods "web0" is forbidden: exceeded quota: q, requested: pods=1'
    assert _refusal("(combined from similar events): " + m, ["web0"]) == _refusal(m, ["web0"]) == want
    assert _refusal(m.replace("quota: q", "quota: r"), ["web0"]) != want  # the refusal itself is compared


def test_known_differences_say_why():
    for k in known_differences():
        re.compile(k.match)
        re.compile(k.when)
        assert len(k.why) > 40, f"{k.name}: say why"


@pytest.fixture(scope="module")
def local_session(request):
    yield from shared_lab(request, "the differential fuzz")


@pytest.mark.controlplane
@pytest.mark.parametrize("seed", FIXED + FRESH,
                         ids=[f"seed-{s}" for s in FIXED] + [f"fresh-seed-{s}" for s in FRESH])
def test_sim_agrees_with_the_real_scheduler_on_random_scenarios(seed, local_session):
    print(f"seed {seed}: replay with `gpu-lab fuzz --seed {seed}`")
    r = run_seed(seed, local_session)
    assert r.agrees, (f"seed {seed} (replay: gpu-lab fuzz --seed {seed}; scenario: gpu-lab fuzz --seed {seed} --show)\n"
                      + "\n".join([r.error] if r.error else r.differences))
