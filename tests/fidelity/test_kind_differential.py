"""Fidelity on kind: scenarios of the fidelity suite run on a real kind cluster (real kubelets,
our plugin registered with each) and on the simulator, which is given the same cluster.

Every case runs on the session's kind cluster (``shared_kind`` in conftest.py), reshaped to
the case's nodes: the other workers' kubelets are stopped and their Nodes deleted, so the API
server knows only the case's nodes and kind's control plane, as on a cluster made for it.
A kind node's CPU and memory are the Docker host's and kind adds a control-plane node, so the
simulator does not run the scenario's NodePools: it runs ``fidelity.mirror_documents`` (every
Node as the API server has it, and every pod already bound outside gpu-lab's namespace), then
the scenario's workloads. Agreement is required, as in the local suite, on pending pods, what
each node holds, preempted pods, every pending pod's message and the per-plugin weighted scores
of every bound pod that had more than one node to choose from: kubeadm's kube-scheduler runs
with the local backend's ``--vmodule``, so explain on kind reads its own scores from its log.
Ties are replayed as in the local suite (the sim takes the node the real scheduler took among
equal totals). Scenarios that need scheduler profiles, pod groups, a simulated clock or
killing a plugin process run on the local suite only.
"""

from __future__ import annotations

from pathlib import Path

import pytest

import gpu_lab
from gpu_lab.fidelity import (
    Case,
    differences,
    mirror_documents,
    real_choices,
    replaying,
    run_case,
    workloads_of,
)

pytestmark = [pytest.mark.kind, pytest.mark.xdist_group("kind")]

HERE = Path(__file__).parent
#: GPU scenarios a kind cluster can run as written: whole GPUs, MIG mixed, time-slicing,
#: taints, preemption, and two where a pod has two nodes to choose from, so scores decide
#: (a PreferNoSchedule taint, a preferred node affinity)
SCORED_CASES = ("prefer_no_schedule_taint", "preferred_affinity_family")
KIND_CASES = ("insufficient_gpu", "mig_mixed_all_balanced", "time_slicing_oversubscribes",
              "taints_keep_gpu_nodes_for_gpu_pods", "priority_preempts", *SCORED_CASES)
NODE_KINDS = ("Node", "NodePool")


@pytest.fixture(scope="module")
def lab(shared_kind):
    shared_kind.reset()
    yield shared_kind
    shared_kind.reset()


@pytest.mark.parametrize("name", KIND_CASES)
def test_sim_agrees_with_the_real_scheduler_on_kind(name, lab):
    case = Case.load(HERE / "scenarios" / f"{name}.yaml")
    try:
        nodes = [d for d in case.documents if d.get("kind") in NODE_KINDS]
        # the cluster first (reshaped to the case's nodes), so that run_case reads this case's
        # events before its apply (which then reuses the cluster as it is: the same nodes)
        lab.apply(nodes)
        real = run_case(case, lab)
        mirror = mirror_documents(lab.client, lab.namespace)
        workloads = [d for d in case.documents if d.get("kind") not in NODE_KINDS]
        sim_case = Case(case.name, mirror + workloads, case.exact, case.actions)
        groups = workloads_of(case)
        with replaying(real_choices(lab, groups), groups):
            sim = run_case(sim_case, gpu_lab.connect("sim", seed=0))
        assert nodes and len([d for d in mirror if d["kind"] == "Node"]) == len(lab.client.list("Node")["items"])
    finally:
        lab.reset()
    diff = differences(case, sim, real)
    assert not diff, "\n".join(diff)
    assert real.pending or real.usage
    if name in SCORED_CASES:  # the scores were there to compare
        assert real.scores and real.scores == sim.scores
