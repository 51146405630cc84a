"""A device-plugin restart (an upgrade, a crash) while GPU pods run.

Running pods keep their devices: the kubelet remembers who holds what (on a real kubelet in
``device-plugins/kubelet_internal_checkpoint``, read in the kind test), not the plugin. While
the plugin is away allocatable is 0 and new GPU pods pend; once it registers again they land,
on the GPUs nobody holds. The same story on the sim and on the real control plane.
"""

from __future__ import annotations

import pytest
from fleets import H100_POOL, TOLERATE
from realcluster import shared_lab

import gpu_lab


def gpu_pod(name: str, gpus: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"tolerations": TOLERATE, "nodeSelector": {"kubernetes.io/hostname": "h100-0"},
                     "containers": [{"name": "c", "image": "x",
                                     "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}


def state(lab) -> dict:
    pods = lab.pods().set_index("name")
    node = lab.nodes().set_index("name").loc["h100-0"]
    return {"gpus": (int(node["nvidia.com/gpu capacity"]), int(node["nvidia.com/gpu allocatable"])),
            "pods": {n: (r["node"] if isinstance(r["node"], str) else None, r["phase"],
                         sorted((r["devices"] or {}).get("nvidia.com/gpu", [])))
                     for n, r in pods.iterrows()},
            "pending": {n: r["message"].split(" preemption:")[0] for n, r in pods.iterrows()
                        if not isinstance(r["node"], str)}}


def upgrade(lab) -> list[dict]:
    lab.apply(H100_POOL)
    lab.apply([gpu_pod("serve", 3)])
    lab.schedule()
    seen = [state(lab)]
    lab.kill_plugin("h100-0")          # the old plugin's pod is gone
    lab.apply([gpu_pod("late", 2)])
    lab.schedule()
    seen.append(state(lab))
    lab.restart_plugin("h100-0")       # the new one registers
    lab.schedule()
    seen.append(state(lab))
    return seen


def test_a_restart_on_the_sim_keeps_running_pods_devices():
    before, away, back = upgrade(gpu_lab.connect("sim", seed=0))
    serve = before["pods"]["serve"]
    assert before["gpus"] == (8, 8) and serve[:2] == ("h100-0", "Running") and len(serve[2]) == 3
    assert away["gpus"] == (8, 0)
    assert away["pods"]["serve"] == serve                      # untouched while the plugin is away
    assert away["pending"] == {"late": "0/2 nodes are available: 1 Insufficient nvidia.com/gpu, "
                                       "1 node(s) didn't match Pod's node affinity/selector."}
    assert back["gpus"] == (8, 8) and back["pods"]["serve"] == serve
    late = back["pods"]["late"]
    assert late[:2] == ("h100-0", "Running") and not set(late[2]) & set(serve[2])


@pytest.fixture(scope="module")
def local(request):
    yield from shared_lab(request, "the plugin-restart differential")


@pytest.mark.controlplane
def test_a_restart_is_the_same_on_the_real_control_plane(local):
    assert upgrade(local) == upgrade(gpu_lab.connect("sim", seed=0))
