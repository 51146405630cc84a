"""Native gang scheduling on the real control plane: GenericWorkload on kube-apiserver,
kube-controller-manager and kube-scheduler, scheduling.k8s.io/v1beta1 served, and the
default profile's GangScheduling placing a PodGroup's pods all-or-nothing.

One lab (3 nodes of 2 L4s: 6 GPUs) in a private home, reset between cases. The messages are
kube-scheduler v1.37.2's; tests/sim/test_gangscheduling.py holds the simulator to the same.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from realcluster import shared_lab

from gpu_lab.backends.local.components import APISERVER, SCHEDULER
from gpu_lab.model.podgroup import API_VERSION

pytestmark = pytest.mark.controlplane
SCENARIOS = Path(__file__).resolve().parents[2] / "fidelity" / "scenarios"
INSUFFICIENT = "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
NO_VICTIMS = "pod group preemption: No preemption victims found for incoming preemptor"


@pytest.fixture(scope="module")
def lab(request):
    yield from shared_lab(request, "the gang scheduling tests")


@pytest.fixture
def fresh(lab):
    lab.reset()
    return lab


def by_name(pods):
    return pods.set_index("name").sort_index()


def test_the_lab_serves_the_workload_api_and_gates_every_component(lab):
    kinds = {r["kind"] for r in lab.client._discover(API_VERSION)}  # noqa: SLF001
    assert {"Workload", "PodGroup"} <= kinds
    for component in (APISERVER, SCHEDULER):
        argv = lab.cluster._argv(component, lab.cluster.state.load())  # noqa: SLF001
        assert "--feature-gates=GenericWorkload=true" in argv
    assert "--runtime-config=scheduling.k8s.io/v1beta1=true" in lab.cluster._argv(  # noqa: SLF001
        APISERVER, lab.cluster.state.load())  # noqa: SLF001


def of_job(pods, job: str):
    return pods[pods.index.str.startswith(job + "-")]


def test_a_gang_of_eight_on_six_gpus_binds_nothing(fresh):
    fresh.apply(SCENARIOS / "gang_all_or_nothing.yaml")
    pods = by_name(fresh.schedule())
    assert len(pods) == 8 and (pods["phase"] == "Pending").all() and pods["node"].isna().all()
    verdict = "minCount (8) cannot be satisfied: 6 scheduled, 1 remaining"
    # which member gets which message follows kube-scheduler's queue order: compare the lot
    assert sorted(pods["message"]) == sorted([f"pod group is unschedulable, {verdict}, {NO_VICTIMS}"] * 6 + [
        INSUFFICIENT, verdict])
    group = fresh.client.get("PodGroup", "train", namespace="default", api_version=API_VERSION)
    cond = group["status"]["conditions"][0]
    assert (cond["type"], cond["status"], cond["reason"], cond["message"]) == (
        "PodGroupInitiallyScheduled", "False", "Unschedulable", f"{verdict}, {NO_VICTIMS}")


def test_the_same_pods_without_a_gang_six_run_and_two_wait(fresh):
    fresh.apply(SCENARIOS / "gang_none_six_of_eight.yaml")
    pods = by_name(fresh.schedule())
    assert (pods["phase"] == "Running").sum() == 6
    assert list(pods[pods["phase"] == "Pending"]["message"]) == [
        INSUFFICIENT + " preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."] * 2


def test_two_gangs_of_four_one_runs_the_other_waits_holding_nothing(fresh):
    fresh.apply(SCENARIOS / "gang_two_gangs_no_deadlock.yaml")
    pods = by_name(fresh.schedule())
    alpha, beta = of_job(pods, "alpha"), of_job(pods, "beta")
    assert len(alpha) == len(beta) == 4 and (alpha["phase"] == "Running").all()
    assert (beta["phase"] == "Pending").all() and beta["node"].isna().all()
    verdict = "minCount (4) cannot be satisfied: 2 scheduled, 1 remaining"
    assert sorted(beta["message"]) == sorted([f"pod group is unschedulable, {verdict}, {NO_VICTIMS}"] * 2 + [
        INSUFFICIENT, verdict])


def member(name: str) -> str:
    return (f"apiVersion: v1\nkind: Pod\nmetadata: {{name: {name}}}\nspec:\n"
            "  schedulingGroup: {podGroupName: train}\n"
            "  containers: [{name: w, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]\n")


def test_too_few_members_wait_silently_and_schedule_settles_until_the_rest_arrive(fresh):
    fresh.apply("apiVersion: gpulab.dev/v1alpha1\nkind: NodePool\nmetadata: {name: l4}\n"
                "spec: {count: 1, gpu: {model: L4, count: 2}}\n---\n"
                "apiVersion: scheduling.k8s.io/v1beta1\nkind: PodGroup\nmetadata: {name: train}\n"
                "spec: {schedulingPolicy: {gang: {minCount: 2}}}\n---\n" + member("train-0"))
    pods = by_name(fresh.schedule())  # returns: PreEnqueue keeps the pod out, and says nothing
    assert list(pods["phase"]) == ["Pending"] and list(pods["message"]) == [""]
    fresh.apply(member("train-1"))
    assert (by_name(fresh.schedule())["phase"] == "Running").all()
