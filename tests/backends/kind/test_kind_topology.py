"""The Topology Manager on a real kubelet: ``topologyManagerPolicy: single-numa-node`` on a
kind worker, our plugin reporting two NUMA nodes (GPUs 0-3 and 4-7) in ``ListAndWatch``.

The real scheduler binds a 5-GPU pod (it knows nothing of NUMA) and the real kubelet refuses
it with ``TopologyAffinityError``, as the sim's kubelet model does; a 4-GPU pod is admitted
on one NUMA node. One caveat the sim has not: the kind host has one NUMA node, so its kubelet
can never align to NUMA node 1 (a hint for node 1 alone is cut by the machine's own nodes);
the cases here do not depend on it.
"""

from __future__ import annotations

import subprocess
import time

import pytest

import gpu_lab
from gpu_lab.gpus.labels import gpu_uuids

pytestmark = [pytest.mark.kind, pytest.mark.xdist_group("kind")]

SCENARIO = """
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: numa}
spec:
  count: 1
  gpu: {model: H100-80GB, count: 8}
  cpu: "2"
  memory: 8Gi
  topologyManagerPolicy: single-numa-node
"""


def gpu_pod(name: str, gpus: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"nodeSelector": {"kubernetes.io/hostname": "numa-0"}, "restartPolicy": "Never",
                     "containers": [{"name": "c", "image": "x",
                                     "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}


@pytest.fixture(scope="module")
def lab(shared_kind):
    shared_kind.reset()
    shared_kind.apply(SCENARIO)
    yield shared_kind
    shared_kind.reset()


def outcome(lab) -> dict[str, tuple]:
    out = {}
    for r in lab.pods().itertuples():
        held = (r.devices or {}).get("nvidia.com/gpu", []) if isinstance(r.devices, dict) else []
        out[r.name] = (r.phase, r.reason or "", sorted(gpu_uuids("numa-0", 8).index(d) for d in held))
    return out


def test_the_real_kubelet_refuses_what_no_numa_node_holds(lab):
    container = lab.cluster.containers_of_nodes()["numa-0"]
    config = subprocess.run(["docker", "exec", container, "cat", "/var/lib/kubelet/config.yaml"],
                            capture_output=True, text=True, timeout=30, check=True).stdout
    assert "topologyManagerPolicy: single-numa-node" in config.splitlines()
    twin = gpu_lab.connect("sim", deterministic=True)
    twin.apply(SCENARIO)
    for name, gpus in (("five", 5), ("four", 4)):
        for session in (lab, twin):
            session.apply([gpu_pod(name, gpus)])
        deadline = time.monotonic() + 120
        while lab.schedule().set_index("name").loc[name, "phase"] == "Pending":
            assert time.monotonic() < deadline, f"{name} still Pending on kind"
            time.sleep(0.5)
        twin.schedule()
    want = {"four": ("Running", "", [0, 1, 2, 3]), "five": ("Failed", "TopologyAffinityError", [])}
    assert outcome(twin) == want
    assert outcome(lab) == want
    five = lab.client.get("Pod", "five", namespace=lab.namespace)
    assert five["spec"]["nodeName"] == "numa-0"  # the scheduler bound it; the node refused it
    assert five["status"]["message"] == "Pod was rejected: Resources cannot be allocated with Topology locality"
