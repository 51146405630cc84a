"""The node agent's MIG manager on the real control plane: relabelling a node's
``nvidia.com/mig.config`` repartitions its GPUs as on the simulator (the same model,
``kubelet.reconfigure``), with the state labels NVIDIA's MIG manager writes and the real
kubelet's device-manager rule for the resources the restarted plugin stops serving.

The first tests need no cluster; the rest share one private lab (skipped without the
control-plane binaries, failing instead under ``CI=true``)."""

from __future__ import annotations

import threading

import pytest
from realcluster import shared_lab

import gpu_lab
from gpu_lab.kube import CancellableWatch
from gpu_lab.kubelet import migmanager
from gpu_lab.kubelet import podlifecycle as pl
from gpu_lab.model.nodepool import MIG_CONFIG_LABEL, MIG_STATE_LABEL

NODE = "infer-0"
POOL = """
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: infer}
spec:
  count: 1
  gpu: {model: H100-80GB, count: 2}
  cpu: "32"
  memory: 256Gi
  devicePlugin: {version: v1, flags: {migStrategy: mixed}}
  mig: {config: all-balanced}
"""
EMBED = "".join(f"""---
apiVersion: v1
kind: Pod
metadata: {{name: embed-{i}}}
spec:
  containers:
  - name: tei
    image: tei
    resources: {{requests: {{cpu: "2"}}, limits: {{nvidia.com/mig-1g.10gb: 1}}}}
""" for i in range(3))
BIG = """
apiVersion: v1
kind: Pod
metadata: {name: big}
spec:
  containers:
  - {name: c, image: app, resources: {limits: {nvidia.com/mig-3g.40gb: 1}}}
"""


def test_label_changes_are_a_merge_patch():
    assert migmanager.changes({"a": "1", "b": "2", "c": "3"}, {"a": "1", "b": "9", "d": "4"}) == \
        {"b": "9", "c": None, "d": "4"}


def test_evicted_status_is_the_kubelets():
    status = pl.evicted_status("evicted from n to apply nvidia.com/mig.config=x")
    assert (status["phase"], status["reason"]) == ("Failed", "Evicted")
    target = next(c for c in status["conditions"] if c["type"] == "DisruptionTarget")
    assert (target["status"], target["reason"]) == ("True", "TerminationByKubelet")


# ------------------------------------------------------------------ the real control plane
@pytest.fixture(scope="module")
def local(request):
    yield from shared_lab(request, "the MIG manager tests")


def _states(session, seen: list[str], stop: threading.Event) -> threading.Thread:
    """Collect every value the node's state label takes, from a watch (so a short
    ``pending`` is not missed)."""
    watcher = CancellableWatch(session.client)
    rv = session.client.list("Node")["metadata"]["resourceVersion"]

    def follow():
        while not stop.is_set():
            for ev in watcher.stream("Node", resource_version=rv, timeout_seconds=5):
                value = ((ev.object.get("metadata") or {}).get("labels") or {}).get(MIG_STATE_LABEL)
                if ev.object["metadata"]["name"] == NODE and (not seen or seen[-1] != value):
                    seen.append(value)
                if stop.is_set():
                    break

    t = threading.Thread(target=follow, daemon=True)
    t.start()
    t.watcher = watcher  # type: ignore[attr-defined]
    return t


def _gpu_labels(labels: dict) -> dict:
    return {k: v for k, v in labels.items() if k.startswith("nvidia.com/")}


@pytest.mark.controlplane
def test_relabel_repartitions_as_on_the_sim(local):
    local.reset()
    sim = gpu_lab.connect("sim")
    for lab in (local, sim):
        lab.apply(POOL + EMBED)
        lab.schedule()
    assert set(local.pods()["phase"]) == {"Running"}

    # pods hold the GPUs: the same one-line refusal, and nothing is labelled
    wanted = {MIG_CONFIG_LABEL: "all-3g.40gb"}
    refusals = []
    for lab in (local, sim):
        with pytest.raises(gpu_lab.GpuLabError) as err:
            lab.label_node(NODE, wanted)
        refusals.append(str(err.value))
    assert refusals[0] == refusals[1]
    assert "embed-0" in refusals[0] and "evict=True" in refusals[0]
    assert local.describe_node(NODE).labels[MIG_CONFIG_LABEL] == "all-balanced"

    # a config the GPUs cannot take: the same line, nothing labelled
    bad = []
    for lab in (local, sim):
        with pytest.raises(gpu_lab.GpuLabError) as err:
            lab.label_node(NODE, {MIG_CONFIG_LABEL: "all-9g.99gb"}, evict=True)
        bad.append(str(err.value))
    assert bad[0] == bad[1] and bad[0].startswith(f'node "{NODE}": {MIG_CONFIG_LABEL}=all-9g.99gb: ')
    assert local.describe_node(NODE).labels[MIG_STATE_LABEL] == "success"

    seen: list[str] = []
    stop = threading.Event()
    watch = _states(local, seen, stop)
    try:
        evicted = local.label_node(NODE, wanted, evict=True)
    finally:
        stop.set()
        watch.watcher.cancel()  # type: ignore[attr-defined]
    assert evicted == sim.label_node(NODE, wanted, evict=True) == [f"default/embed-{i}" for i in range(3)]
    assert seen[-2:] == ["pending", "success"]

    # the evicted pods, as the sim leaves them
    rows = {lab.backend: lab.pods().set_index("name") for lab in (local, sim)}
    for i in range(3):
        on_local, on_sim = rows["local"].loc[f"embed-{i}"], rows["sim"].loc[f"embed-{i}"]
        assert (on_local["phase"], on_local["reason"], on_local["message"]) == \
            (on_sim["phase"], on_sim["reason"], on_sim["message"]) == \
            ("Failed", "Evicted", f"evicted from {NODE} to apply {MIG_CONFIG_LABEL}=all-3g.40gb")

    # labels: GPU Feature Discovery's for the new layout, the state, and the device plugin's
    # deploy label back to what it was (absent)
    d_local, d_sim = local.describe_node(NODE), sim.describe_node(NODE)
    assert _gpu_labels(d_local.labels) == _gpu_labels(d_sim.labels)
    assert d_local.labels[MIG_STATE_LABEL] == "success"
    assert migmanager.DEVICE_PLUGIN_DEPLOY_LABEL not in d_local.labels

    # what the node advertises, on both: the new layout at once; the names the plugin stopped
    # serving at allocatable 0 with their capacity kept for the kubelet's 5-minute grace
    # period, then at 0
    gpu_resources = sorted(r for r in d_sim.capacity if r.startswith("nvidia.com/"))

    def advertised(d) -> list[tuple[str, str]]:
        return [(str(d.capacity[r]), str(d.allocatable[r])) for r in gpu_resources]

    assert d_local.allocatable["nvidia.com/mig-3g.40gb"] == d_sim.allocatable["nvidia.com/mig-3g.40gb"] == "4"
    for gone in ("nvidia.com/mig-1g.10gb", "nvidia.com/mig-2g.20gb"):
        assert d_local.allocatable[gone] == str(d_sim.allocatable[gone]) == "0"
        assert d_local.capacity[gone] != "0"
    assert advertised(d_local) == advertised(d_sim)
    for lab in (local, sim):
        lab.advance(301)
    d_local, d_sim = local.describe_node(NODE), sim.describe_node(NODE)
    assert advertised(d_local) == advertised(d_sim)
    assert d_local.capacity["nvidia.com/mig-1g.10gb"] == "0"

    # the new slices take a pod that asks for them
    for lab in (local, sim):
        lab.apply(BIG)
    assert local.schedule().set_index("name").loc["big", "node"] == NODE


@pytest.mark.controlplane
def test_kubectl_label_alone_runs_the_mig_manager(local):
    """No session call: a label patch on the Node (kubectl label) is what the agent follows."""
    local.reset()
    local.apply(POOL)
    seen: list[str] = []
    stop = threading.Event()
    watch = _states(local, seen, stop)
    try:
        local.client.patch("Node", NODE, {"metadata": {"labels": {MIG_CONFIG_LABEL: "all-1g.10gb"}}})
        local._wait(lambda: local.describe_node(NODE).allocatable.get("nvidia.com/mig-1g.10gb") == "14"
                    and seen[-1:] == ["success"], "the MIG manager")
        # a config no H100 takes: failed, nothing else changes
        local.client.patch("Node", NODE, {"metadata": {"labels": {MIG_CONFIG_LABEL: "all-9g.99gb"}}})
        local._wait(lambda: seen[-1:] == ["failed"], "the MIG manager to fail")
        # back to the layout the GPUs have: success at once, nothing restarts
        starts = local._agent_for(NODE).node(NODE).plugin.starts
        assert local.label_node(NODE, {MIG_CONFIG_LABEL: "all-1g.10gb"}) == []
        local._wait(lambda: seen[-1:] == ["success"], "the state label")
    finally:
        stop.set()
        watch.watcher.cancel()  # type: ignore[attr-defined]
    assert seen == ["success", "pending", "success", "failed", "success"]
    assert local._agent_for(NODE).node(NODE).plugin.starts == starts
    assert local.describe_node(NODE).allocatable["nvidia.com/mig-1g.10gb"] == "14"
