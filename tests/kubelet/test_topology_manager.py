"""The kubelet's Topology Manager for devices: hints, the four policies, and what admission does."""

import pytest

import gpu_lab
from gpu_lab.deviceplugin.config import parse_config
from gpu_lab.kubelet.admission import admit_devices
from gpu_lab.kubelet.devicemanager import DeviceManager
from gpu_lab.kubelet.topologymanager import Hint, admit, device_hints

GPU = "nvidia.com/gpu"
IDS = [f"GPU-{i}" for i in range(8)]
NUMA = {d: i // 4 for i, d in enumerate(IDS)}  # 4 + 4, as an 8-GPU two-socket server
BOTH = frozenset({0, 1})


def hints(free, request):
    return device_hints(NUMA, free, request)


def test_hints_prefer_the_fewest_numa_nodes_that_could_ever_hold_the_request():
    assert hints(IDS, 4) == [Hint(frozenset({0}), True), Hint(frozenset({1}), True), Hint(BOTH, False)]
    assert hints(IDS, 5) == [Hint(BOTH, True)]  # no single node has five GPUs at all
    # two free on each node: three fit only across both, and that is not preferred
    assert hints(["GPU-2", "GPU-3", "GPU-6", "GPU-7"], 3) == [Hint(BOTH, False)]
    assert hints(["GPU-0"], 2) == []  # too few free anywhere: no hint at all
    assert device_hints({"GPU-0": None}, ["GPU-0"], 1) is None  # no topology: no preference


@pytest.mark.parametrize("policy, free, wanted, expected", [
    ("none", IDS, 5, (True, None)),
    ("best-effort", IDS, 5, (True, None)),
    ("restricted", IDS, 5, (True, None)),  # preferred: five need both nodes anyway
    ("single-numa-node", IDS, 5, (False, None)),
    ("single-numa-node", IDS, 4, (True, frozenset({0}))),
    ("single-numa-node", IDS[1:], 4, (True, frozenset({1}))),
    ("restricted", ["GPU-2", "GPU-3", "GPU-6", "GPU-7"], 3, (False, None)),
    ("best-effort", ["GPU-2", "GPU-3", "GPU-6", "GPU-7"], 3, (True, None)),
    ("single-numa-node", ["GPU-2", "GPU-3", "GPU-6", "GPU-7"], 3, (False, None)),
])
def test_the_four_policies(policy, free, wanted, expected):
    assert admit(policy, [hints(free, wanted)], BOTH) == expected


def test_admission_rejects_with_the_kubelets_words_and_aligns_what_it_admits():
    dm = DeviceManager({GPU: IDS}, numa=NUMA)
    dm.allocate("ns/a", "c", GPU, 1)  # GPU-0
    got = admit_devices(dm, "ns/b", [("c", GPU, 5)], parse_config(None), topology_policy="single-numa-node")
    assert got.failure == ("TopologyAffinityError",
                           "Pod was rejected: Resources cannot be allocated with Topology locality")
    assert dm.pods.allocations("ns/b") == {}  # nothing half-allocated
    got = admit_devices(dm, "ns/c", [("c", GPU, 2)], parse_config(None), topology_policy="single-numa-node")
    assert got.devices == {"c": {GPU: ["GPU-1", "GPU-2"]}}
    got = admit_devices(dm, "ns/d", [("c", GPU, 4)], parse_config(None), topology_policy="single-numa-node")
    assert got.devices == {"c": {GPU: IDS[4:]}}


def test_the_node_pool_fields_are_checked_in_one_line_each():
    lab = gpu_lab.connect("sim")
    with pytest.raises(gpu_lab.GpuLabError) as err:
        lab.apply("""
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: h100}
spec:
  count: 1
  gpu: {model: H100-80GB, count: 8, numaNodes: 9}
  cpu: "96"
  memory: 1024Gi
  topologyManagerPolicy: single-numa
""")
    assert str(err.value) == (
        'NodePool "h100" is invalid: [spec.gpu.numaNodes: Invalid value: 9: must be between 1 and 8 '
        "(the Topology Manager's limit), spec.topologyManagerPolicy: Unsupported value: 'single-numa': "
        'supported values: "best-effort", "none", "restricted", "single-numa-node"]')
    assert lab.nodes().empty
