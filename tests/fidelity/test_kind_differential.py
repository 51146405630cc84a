"""Fidelity on kind: scenarios of the fidelity suite run on a real kind cluster (real kubelets,
our plugin registered with each) and on the simulator, which is given the same cluster.

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

import uuid
from pathlib import Path

import pytest
from realcluster import require_kind

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

pytestmark = pytest.mark.kind

HERE = Path(__file__).parent
#: GPU scenarios a kind cluster can run as written: whole GPUs, MIG mixed, time-slicing,
#: taints, preemption, and two where a pod has two nodes to choose from, so scores decide
#: (a PreferNoSchedule taint, a preferred node affinity)
SCORED_CASES = ("prefer_no_schedule_taint", "preferred_affinity_family")
KIND_CASES = ("insufficient_gpu", "mig_mixed_all_balanced", "time_slicing_oversubscribes",
              "taints_keep_gpu_nodes_for_gpu_pods", "priority_preempts", *SCORED_CASES)
NODE_KINDS = ("Node", "NodePool")


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    require_kind()
    root = tmp_path_factory.mktemp("kind")
    names: list[str] = []
    yield root, names
    from gpu_lab.backends.kind import KindCluster

    for name in names:
        KindCluster(name, root).down(progress=None, purge=True)


@pytest.mark.parametrize("name", KIND_CASES)
def test_sim_agrees_with_the_real_scheduler_on_kind(name, home):
    root, names = home
    case = Case.load(HERE / "scenarios" / f"{name}.yaml")
    cluster = f"fk-{uuid.uuid4().hex[:6]}"
    names.append(cluster)
    lab = gpu_lab.connect("kind", name=cluster, root=root)
    try:
        nodes = [d for d in case.documents if d.get("kind") in NODE_KINDS]
        # the cluster first, so that run_case reads this cluster's events before its apply
        # (which then reuses the cluster: the same nodes)
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
        lab.close()
        lab.cluster.down(progress=None, purge=True)
    diff = differences(case, sim, real)
    assert not diff, "\n".join(diff)
    assert real.pending or real.usage
    if name in SCORED_CASES:  # the scores were there to compare
        assert real.scores and real.scores == sim.scores
