"""The Session contract: every backend answers every call, or says in one line that it cannot."""

from __future__ import annotations

from pathlib import Path

import pytest
from fleets import H100_POOL
from realcluster import run_lesson_on, shared_lab

import gpu_lab
from gpu_lab.backends.base import CONTRACT, Session
from gpu_lab.backends.kind.session import KindSession
from gpu_lab.backends.kubeconfig.session import KubeconfigSession
from gpu_lab.backends.local.session import LocalSession
from gpu_lab.backends.sim import SimSession

POOL = H100_POOL + """
---
apiVersion: v1
kind: Pod
metadata: {name: train}
spec:
  tolerations: [{key: nvidia.com/gpu, operator: Exists}]
  containers:
  - {name: c, image: x, resources: {requests: {cpu: "8", memory: 64Gi}, limits: {nvidia.com/gpu: 2}}}
"""


@pytest.mark.parametrize("cls", [SimSession, LocalSession, KubeconfigSession, KindSession])
def test_every_backend_has_every_call(cls):
    for name in CONTRACT:
        assert hasattr(cls, name), f"{cls.__name__} lacks {name}"
    assert not cls.__abstractmethods__


class _Toy(Session):
    """A backend that serves only the abstract minimum: the rest must say so clearly."""

    backend = "toy"

    def apply(self, src):
        return []

    def schedule(self):
        return self.pods()

    def _pod_rows(self):
        return []

    def _node_rows(self):
        return []

    def explain(self, pod):
        raise NotImplementedError

    def reset(self):
        pass


@pytest.mark.parametrize("call, args", [
    ("kill_plugin", ("n",)), ("restart_plugin", ("n",)), ("fail_device", ("n", 0)), ("heal_device", ("n", 0)),
    ("label_node", ("n", {"a": "b"})),
    ("cordon", ("n",)), ("advance", (60,)), ("delete", ("p",)), ("events", ()), ("kubectl", ("get pods",)),
])
def test_a_call_a_backend_cannot_serve_is_one_clear_line(call, args):
    with pytest.raises(gpu_lab.NotSupported, match=f'^{call}: not on the "toy" backend: ') as err:
        getattr(_Toy(), call)(*args)
    assert "\n" not in str(err.value)
    assert isinstance(err.value, gpu_lab.GpuLabError)


def test_describe_node_reads_like_kubectl():
    lab = gpu_lab.connect("sim", deterministic=True)
    lab.apply(POOL)
    lab.schedule()
    node = lab.pods().set_index("name").loc["train", "node"]
    d = lab.describe_node(node)
    assert d.capacity["nvidia.com/gpu"] == d.allocatable["nvidia.com/gpu"] == "8"
    assert d.capacity["memory"] == "1Ti" and d.capacity["cpu"] == "96"
    assert d.allocated["nvidia.com/gpu"] == "2" and d.allocated["cpu"] == "8"
    assert list(d.pods["name"]) == ["train"]
    assert d.taints == ["nvidia.com/gpu=present:NoSchedule"]
    text = str(d)
    assert f"Name:               {node}" in text
    assert "Taints:             nvidia.com/gpu=present:NoSchedule" in text
    assert "  nvidia.com/gpu:     8" in text
    assert "  cpu                         8 (8%)" in text  # 8 of 96 cores, as kubectl rounds
    assert "  nvidia.com/gpu              2" in text
    assert "Non-terminated Pods:  (1 in total)" in text
    lab.kill_plugin(node)
    d = lab.describe_node(node)
    assert (d.capacity["nvidia.com/gpu"], d.allocatable["nvidia.com/gpu"]) == ("8", "0")


def test_describe_node_errors_are_one_line():
    lab = gpu_lab.connect("sim")
    with pytest.raises(gpu_lab.GpuLabError, match='^nodes "nope" not found$'):
        lab.describe_node("nope")
    with pytest.raises(gpu_lab.GpuLabError, match="^describe_node: node must be its name"):
        lab.describe_node(None)
    with pytest.raises(gpu_lab.GpuLabError, match="pod must be"):
        lab.explain(None)


def test_node_tables_carry_capacity_beside_allocatable():
    lab = gpu_lab.connect("sim")
    lab.apply(POOL)
    lab.kill_plugin("h100-0")
    row = lab.nodes().set_index("name").loc["h100-0"]
    assert (row["nvidia.com/gpu capacity"], row["nvidia.com/gpu allocatable"]) == (8, 0)
    assert row["cpu_capacity"] == 96 and row["memory_capacity_gib"] == 1024


def test_sim_clock_is_now():
    lab = gpu_lab.connect("sim")
    assert lab.now == 0
    lab.advance(90)
    assert lab.now == 90


# ------------------------------------------------------------------ the real control plane
@pytest.fixture(scope="module")
def local(request):
    yield from shared_lab(request, "the real-cluster tests")


@pytest.mark.controlplane
def test_local_serves_the_node_calls(local):
    local.reset()
    local.apply(POOL)
    pods = local.schedule().set_index("name")
    node = pods.loc["train", "node"]
    other = "h100-1" if node == "h100-0" else "h100-0"
    d = local.describe_node(node)
    assert d.allocated["nvidia.com/gpu"] == "2" and d.capacity["nvidia.com/gpu"] == "8"
    assert local.label_node(other, {"team": "research"}) == []
    assert local.describe_node(other).labels["team"] == "research"
    # a new MIG config is the node agent's MIG manager's (test_mig_manager_local.py); while
    # a pod holds the node's GPUs it is refused, in the sim's words
    with pytest.raises(gpu_lab.GpuLabError, match=f'^node "{node}": cannot change MIG config to '
                       '"all-1g.10gb" while pods hold its GPUs: default/train '):
        local.label_node(node, {"nvidia.com/mig.config": "all-1g.10gb"})
    local.cordon(other)
    assert local.nodes().set_index("name").loc[other, "unschedulable"]
    local.cordon(other, False)
    assert not local.nodes().set_index("name").loc[other, "unschedulable"]
    local.delete("default/train")
    assert "train" not in set(local.pods()["name"])
    # wrong arguments: the same one-line answers as on the sim, before any request
    for call, bad in (("advance", ("1h",)), ("cordon", (None,)), ("explain", (None,)),
                      ("label_node", (other, {"bad key!": "x"}))):
        with pytest.raises(gpu_lab.GpuLabError) as on_local:
            getattr(local, call)(*bad)
        sim = gpu_lab.connect("sim")
        sim.apply(POOL)
        with pytest.raises(gpu_lab.GpuLabError) as on_sim:
            getattr(sim, call)(*bad)
        assert str(on_local.value) == str(on_sim.value)


@pytest.mark.controlplane
def test_local_advance_runs_out_the_plugin_grace_period(local):
    local.reset()
    local.apply(POOL)
    local.schedule()
    local.kill_plugin("h100-1")
    d = local.describe_node("h100-1")
    assert (d.capacity["nvidia.com/gpu"], d.allocatable["nvidia.com/gpu"]) == ("8", "0")
    before = local.now
    local.advance(301)  # the kubelet keeps capacity for 5 minutes after the plugin stops
    assert local.now - before >= 301
    assert local.describe_node("h100-1").capacity["nvidia.com/gpu"] == "0"
    local.restart_plugin("h100-1")
    assert local.describe_node("h100-1").capacity["nvidia.com/gpu"] == "8"


LESSONS = Path(__file__).parents[2] / "lessons"


#: the lessons whose behaviour differs on the real control plane: the plugin's outage and
#: grace period (01), the MIG manager's relabel (02), the API server's quota admission and
#: the controllers' FailedCreate (11), the plugin restarted with pods running (12), the fake
#: plugin's GetPreferredAllocation over gRPC and the node agent's Topology Manager (13). Lesson 00 (apply, schedule, explain) has nothing of its
#: own there: its placements and messages are the fidelity suite's, and explain on local
#: (the real scheduler's message and scores) is compared with the sim's in test_fidelity.py.
ON_LOCAL = ["01_device_plugin.ipynb", "02_mig.ipynb", "11_sharing_gpus.ipynb", "12_gpu_node_stack.ipynb",
            "13_topology.ipynb"]


@pytest.fixture
def lesson_lab(request):
    yield from shared_lab(request, "the lessons on the real control plane", timeout=120)


@pytest.mark.controlplane
@pytest.mark.parametrize("lesson", ON_LOCAL)
def test_lesson_runs_unchanged_on_local(lesson, lesson_lab, monkeypatch):
    """The lesson says: change the BACKEND line to run the same cells on the real control
    plane. Do exactly that, and nothing else: its ``connect("local")`` finds the run's shared
    lab (the default lab of its home) running, as a learner's finds the lab `make lab` or
    `gpu-lab up` started, and the next test gets it emptied."""
    run_lesson_on(LESSONS / lesson, "local", lesson_lab.cluster.dir.parents[1], monkeypatch,
                  lesson_lab.reset)


def test_empty_tables_keep_their_columns():
    lab = gpu_lab.connect("sim")
    assert {"name", "cpu_capacity", "taints"} <= set(lab.nodes().columns)
    assert {"name", "node", "phase", "message"} <= set(lab.pods().columns)
