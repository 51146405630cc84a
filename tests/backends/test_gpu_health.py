"""A GPU fails on a node (an Xid error): ``fail_device`` / ``heal_device``.

The device plugin reports the GPU's devices Unhealthy; the kubelet counts them out of
allocatable, keeps capacity, and evicts nothing. The same calls on the sim and on the real
control plane (the fake plugin's control file, the node agent's device manager, the real
scheduler) must leave the same nodes and pods: the differential test at the end.
"""

from __future__ import annotations

import pytest
from fleets import A100_MIXED_MIG, H100_POOL, T4_TIME_SLICED, TOLERATE, sized
from realcluster import shared_lab

import gpu_lab
from gpu_lab.gpus.labels import gpu_uuids
from gpu_lab.kubelet import gpuhealth


def gpu_pod(name: str, gpus: int, node: str = "h100-0") -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"tolerations": TOLERATE, "nodeSelector": {"kubernetes.io/hostname": node},
                     "containers": [{"name": "c", "image": "x",
                                     "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}


def gpus(lab, node: str = "h100-0") -> tuple[int, int]:
    row = lab.nodes().set_index("name").loc[node]
    return int(row["nvidia.com/gpu capacity"]), int(row["nvidia.com/gpu allocatable"])


def placed(lab) -> dict[str, tuple]:
    return {r.name: (r.node if isinstance(r.node, str) else None, r.phase)
            for r in lab.pods().itertuples()}


def outage(lab) -> list:
    """The story every backend must tell alike; returns what was seen at each step."""
    seen = []
    lab.apply(H100_POOL)
    lab.apply([gpu_pod("serve", 2)])
    lab.schedule()
    held = lab.pods().set_index("name").loc["serve", "devices"]["nvidia.com/gpu"]
    seen.append(("serve holds", sorted(held)))
    # a GPU fails under the running pod: it keeps running, allocatable drops by one
    failed = min(gpu_uuids("h100-0", 8).index(d) for d in held)
    seen.append(("failed GPU", failed))
    lab.fail_device("h100-0", failed, reason="Xid 79")
    seen.append(("after fail", gpus(lab), placed(lab)))
    # the scheduler sees 7 - 2 = 5 free; the kubelet has 6 healthy free GPUs: one is lost twice
    lab.apply([gpu_pod("six", 6), gpu_pod("five", 5)])
    lab.schedule()
    seen.append(("six and five", placed(lab)))
    lab.restart_plugin("h100-0")  # the restarted plugin still reports GPU 0 unhealthy
    seen.append(("after restart", gpus(lab)))
    lab.delete("default/five")
    lab.heal_device("h100-0", failed)
    lab.schedule()
    seen.append(("after heal", gpus(lab), placed(lab)))
    return seen


# ------------------------------------------------------------------ the simulator
def test_the_outage_on_the_sim():
    lab = gpu_lab.connect("sim", seed=0)
    seen = outage(lab)
    uuids = gpu_uuids("h100-0", 8)
    assert seen[0] == ("serve holds", sorted(uuids[:2]))   # the lowest GPUs first, as NVIDIA's plugin prefers
    assert seen[1] == ("failed GPU", 0)
    assert seen[2] == ("after fail", (8, 7), {"serve": ("h100-0", "Running")})
    assert seen[3] == ("six and five", {"serve": ("h100-0", "Running"), "six": (None, "Pending"),
                                        "five": ("h100-0", "Running")})
    assert seen[4] == ("after restart", (8, 7))
    assert seen[5] == ("after heal", (8, 8), {"serve": ("h100-0", "Running"), "six": ("h100-0", "Running")})


def test_a_pending_pod_says_insufficient_and_explain_replays_the_failure():
    lab = gpu_lab.connect("sim", seed=0)
    lab.apply(H100_POOL)
    lab.fail_device("h100-0", 5, reason="Xid 48 (double-bit ECC error)")
    lab.apply([gpu_pod("eight", 8)])
    pods = lab.schedule().set_index("name")
    assert pods.loc["eight", "message"].startswith("0/2 nodes are available: 1 Insufficient nvidia.com/gpu, "
                                                   "1 node(s) didn't match Pod's node affinity/selector.")
    assert "Insufficient nvidia.com/gpu" in str(lab.explain("eight"))
    assert lab.describe_node("h100-0").allocatable["nvidia.com/gpu"] == "7"
    assert "  nvidia.com/gpu:     7" in str(lab.kubectl("describe node h100-0"))


def test_failing_a_shared_or_mig_gpu_takes_all_its_devices():
    lab = gpu_lab.connect("sim")
    two_t4 = sized(T4_TIME_SLICED, "16", "64Gi").replace("{model: T4, count: 1}", "{model: T4, count: 2}")
    assert "count: 2}" in two_t4
    lab.apply(two_t4 + "---" + sized(A100_MIXED_MIG, "32", "256Gi"))
    lab.fail_device("t4-0", 1)
    t4 = lab.nodes().set_index("name").loc["t4-0"]
    assert (t4["nvidia.com/gpu capacity"], t4["nvidia.com/gpu allocatable"]) == (8, 4)  # 4 replicas gone
    before = lab.describe_node("a100-0").allocatable
    lab.fail_device("a100-0", 0)
    after = lab.describe_node("a100-0").allocatable
    mig = [r for r in before if r.startswith("nvidia.com/mig-")]
    assert mig and all(int(after[r]) == int(before[r]) // 2 for r in mig)  # GPU 0's half of each
    lab.heal_device("a100-0", 0)
    assert lab.describe_node("a100-0").allocatable == before


def test_wrong_arguments_are_one_line():
    lab = gpu_lab.connect("sim")
    lab.apply(H100_POOL + """
---
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: cpu}
spec: {count: 1, cpu: "8", memory: 32Gi}
""")
    cases = {
        ("h100-0", 8): 'fail_device: node "h100-0" has 8 GPUs (indices 0-7): there is no GPU 8',
        ("h100-0", -1): 'fail_device: node "h100-0" has 8 GPUs (indices 0-7): there is no GPU -1',
        ("h100-0", "0"): "fail_device: index must be a GPU's index on the node (an int), got '0'",
        ("cpu-0", 0): 'fail_device: node "cpu-0" has no GPUs',
        ("nope", 0): 'nodes "nope" not found',
    }
    for call_args, message in cases.items():
        with pytest.raises(gpu_lab.GpuLabError) as err:
            lab.fail_device(*call_args)
        assert str(err.value) == message
    with pytest.raises(gpu_lab.GpuLabError, match="^fail_device: reason must be a non-empty string"):
        lab.fail_device("h100-0", 0, reason="")
    with pytest.raises(gpu_lab.GpuLabError, match="^fail_device: reason must be one line"):
        lab.fail_device("h100-0", 0, reason="a\nb")
    assert gpus(lab) == (8, 8)  # nothing half-done


# ------------------------------------------------------------------ the real control plane
@pytest.fixture(scope="module")
def local(request):
    yield from shared_lab(request, "the GPU-health differential")


@pytest.mark.controlplane
def test_the_outage_is_the_same_on_the_real_control_plane(local):
    on_sim = outage(gpu_lab.connect("sim", seed=0))
    on_local = outage(local)
    assert on_local == on_sim
    # the fake plugin logged the reason, as NVIDIA's logs the Xid
    logs = [p for p in local.cluster.dir.rglob("device-plugin.log") if p.parent.name == "h100-0"]
    assert logs, "no device-plugin.log for h100-0 under the lab's folder"
    text = "".join(p.read_text() for p in logs)
    gpu = on_local[1][1]
    assert f"{gpu_uuids('h100-0', 8)[gpu]}: GPU {gpu}: Xid 79; marking its 1 device(s) unhealthy" in text


def test_the_plugins_control_file_reads_back_only_this_nodes_gpus():
    text = gpuhealth.health_file("h100-0", 8, {2: "Xid 79", 5: "Xid 48 (double-bit ECC)"})
    uuids = gpu_uuids("h100-0", 8)
    assert f"{uuids[2]} Unhealthy  # GPU 2: Xid 79\n" in text
    assert gpuhealth.failed_in(text, "h100-0", 8) == {2: "Xid 79", 5: "Xid 48 (double-bit ECC)"}
    # a machine that played another node before: its lines name no GPU of this one
    assert gpuhealth.failed_in(text, "h100-1", 8) == {}
    assert gpuhealth.failed_in(gpuhealth.health_file("h100-0", 8, {}), "h100-0", 8) == {}
