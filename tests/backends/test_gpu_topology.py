"""Inside a node: which GPUs a pod gets (NUMA), and what the Topology Manager refuses.

On an eight-GPU, two-socket node the device plugin's ``GetPreferredAllocation`` keeps a
request on one NUMA node when one can hold it, and leaves the fuller node whole; with the
kubelet's ``topologyManagerPolicy: single-numa-node`` a pod the scheduler bound is refused
on the node when no single NUMA node can hold its GPUs (``TopologyAffinityError``: the
scheduler knows nothing of NUMA). The same story on the sim and on the real control plane
(the fake plugin's answer over gRPC, the node agent's admission) must end alike.
"""

from __future__ import annotations

import pytest
from realcluster import shared_lab

import gpu_lab
from gpu_lab.gpus.labels import gpu_uuids

POOLS = """
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: numa}
spec:
  count: 1
  gpu: {model: H100-80GB, count: 8}
  cpu: "96"
  memory: 1024Gi
  topologyManagerPolicy: single-numa-node
---
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: plain}
spec:
  count: 1
  gpu: {model: H100-80GB, count: 8}
  cpu: "96"
  memory: 1024Gi
"""


def gpu_pod(name: str, gpus: int, node: str) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": node}, "restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "x",
                                     "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}


def story(lab) -> dict[str, tuple]:
    """Pod -> (node, phase, reason, the GPU indices it holds)."""
    lab.apply(POOLS)
    for wave in ([("one", 1, "numa-0"), ("p-one", 1, "plain-0")],
                 [("four", 4, "numa-0"), ("p-four", 4, "plain-0")],
                 [("two", 2, "numa-0")]):
        lab.apply([gpu_pod(*w) for w in wave])
        lab.schedule()
    lab.delete("default/four")
    lab.apply([gpu_pod("five", 5, "numa-0"), gpu_pod("p-three", 3, "plain-0")])
    lab.schedule()
    lab.apply([gpu_pod("three", 3, "numa-0")])
    lab.schedule()
    out = {}
    for r in lab.pods().itertuples():
        node = r.node if isinstance(r.node, str) else None
        held = (r.devices or {}).get("nvidia.com/gpu", []) if isinstance(r.devices, dict) else []
        uuids = gpu_uuids(node, 8) if node else []
        out[r.name] = (node, r.phase, r.reason or "", sorted(uuids.index(d) for d in held))
    return out


EXPECTED = {
    "one": ("numa-0", "Running", "", [0]),
    "p-one": ("plain-0", "Running", "", [0]),
    "p-four": ("plain-0", "Running", "", [4, 5, 6, 7]),  # node 0 has three left: node 1 whole
    "two": ("numa-0", "Running", "", [1, 2]),  # from the broken node; node 1's four stay together
    "five": ("numa-0", "Failed", "TopologyAffinityError", []),  # bound by the scheduler, refused
    "p-three": ("plain-0", "Running", "", [1, 2, 3]),  # no policy: the plugin still prefers one node
    "three": ("numa-0", "Running", "", [4, 5, 6]),
}


def test_the_story_on_the_sim():
    lab = gpu_lab.connect("sim", seed=0)
    assert story(lab) == EXPECTED
    five = lab.pods().set_index("name").loc["five"]
    assert five["message"] == "Pod was rejected: Resources cannot be allocated with Topology locality"


@pytest.fixture(scope="module")
def local(request):
    yield from shared_lab(request, "the GPU-topology differential")


@pytest.mark.controlplane
def test_the_story_is_the_same_on_the_real_control_plane(local):
    assert story(local) == EXPECTED
    # the real scheduler bound "five": the refusal came from the node, with the kubelet's event
    events = local.events()
    refused = events[(events["object"] == "Pod/five") & (events["reason"] == "TopologyAffinityError")]
    assert list(refused["message"]) == ["Resources cannot be allocated with Topology locality"]
    assert not events[(events["object"] == "Pod/five") & (events["reason"] == "Scheduled")].empty
    # and the kubelet side asked the plugin: its GetPreferredAllocation answers are in its log
    logs = [p for p in local.cluster.dir.rglob("device-plugin.log") if p.parent.name == "plain-0"]
    text = "".join(p.read_text() for p in logs)
    u = gpu_uuids("plain-0", 8)
    assert f"preferred allocation nvidia.com/gpu: 4 of {','.join(u[1:])} -> {','.join(u[4:])}" in text


def test_a_restarted_plugin_reports_the_numa_nodes_again_on_the_sim():
    """The first ListAndWatch after a restart carries each device's topology, as before it."""
    lab = gpu_lab.connect("sim", seed=0)
    lab.apply(POOLS)
    lab.apply([gpu_pod("one", 1, "plain-0")])
    lab.schedule()
    lab.kill_plugin("plain-0")
    lab.restart_plugin("plain-0")
    lab.apply([gpu_pod("four", 4, "plain-0")])
    lab.schedule()
    held = lab.pods().set_index("name").loc["four", "devices"]["nvidia.com/gpu"]
    assert sorted(gpu_uuids("plain-0", 8).index(d) for d in held) == [4, 5, 6, 7]
