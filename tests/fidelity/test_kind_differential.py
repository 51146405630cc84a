"""Fidelity on kind: scenarios of the fidelity suite run on a real kind cluster (real kubelets,
our plugin registered with each) and on the simulator, which is given the same cluster.

A kind node's CPU and memory are the Docker host's and kind adds a control-plane node, so the
simulator does not run the scenario's NodePools: it runs ``fidelity.mirror_documents`` (every
Node as the API server has it, and every pod already bound outside gpu-lab's namespace), then
the scenario's workloads. Agreement is required, as in the local suite, on pending pods, what
each node holds, preempted pods and every pending pod's message. Scores are not compared:
kubeadm's kube-scheduler logs no per-plugin scores at its default verbosity (the local backend
compares them). Scenarios that need scheduler profiles, pod groups, a simulated clock or
killing a plugin process run on the local suite only.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from realcluster import require_kind

import gpu_lab
from gpu_lab.fidelity import Case, aspect, differences, mirror_documents, run_case

pytestmark = pytest.mark.kind

HERE = Path(__file__).parent
#: GPU scenarios a kind cluster can run as written: whole GPUs, MIG mixed, time-slicing,
#: taints, preemption
KIND_CASES = ("insufficient_gpu", "mig_mixed_all_balanced", "time_slicing_oversubscribes",
              "taints_keep_gpu_nodes_for_gpu_pods", "priority_preempts")
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
        real = run_case(case, lab)
        nodes = [d for d in case.documents if d.get("kind") in NODE_KINDS]
        mirror = mirror_documents(lab.client, lab.namespace)
        workloads = [d for d in case.documents if d.get("kind") not in NODE_KINDS]
        sim_case = Case(case.name, mirror + workloads, case.exact, case.actions)
        sim = run_case(sim_case, gpu_lab.connect("sim", seed=0))
        assert nodes and len([d for d in mirror if d["kind"] == "Node"]) == len(lab.client.list("Node")["items"])
    finally:
        lab.reset()
        lab.close()
        lab.cluster.down(progress=None, purge=True)
    diff = [d for d in differences(case, sim, real) if aspect(d) != "scores"]
    assert not diff, "\n".join(diff)
    assert real.pending or real.usage
