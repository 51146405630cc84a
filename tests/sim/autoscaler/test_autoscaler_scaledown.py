"""Scale-down as cluster-autoscaler does it: the GPU rule, pods that block, timers, cooldown, bounds."""

import pytest
from scalekit import cpu_group, downs, events, gpu_group, node, pod, removed, scaler, ups

from gpu_lab.errors import GpuLabError
from gpu_lab.sim.autoscaler import NodeGroup

GPU = gpu_group()  # 8 x GPU, min 0, max 4
SYSTEM = cpu_group(min_count=1)  # a CPU pool kept at one node: never a candidate, always a destination
STATIC = NodeGroup("static", 1, 0, 0, dict(GPU.allocatable))  # nodes of a pool the autoscaler does not manage


def static(name, *pods):
    return node(name, STATIC, *pods, pool="static")


# -- the classic lesson: a GPU node is judged by its GPUs ----------------------------------------


def test_gpu_node_with_one_small_cpu_pod_goes_after_ten_minutes():
    s = scaler(GPU, SYSTEM)
    nodes = [node("h100-0", GPU, pod("web", cpu_m=500)), node("cpu-0", SYSTEM)]
    assert downs(s.reconcile(0, nodes)) == []
    assert s.unneeded() == {"h100-0": 0.0}
    st = s.status()["h100-0"]
    assert (st.reason, st.utilization.resource, st.utilization.value, st.unneeded_since) == (
        "NotUnneededLongEnough", "nvidia.com/gpu", 0.0, 0.0)
    assert s.status()["cpu-0"].reason == "NodeGroupMinSizeReached"
    assert s.next_wakeup() == 600
    assert downs(s.reconcile(599, nodes)) == []
    assert s.status()["h100-0"].reason == "NotUnneededLongEnough"
    acts = s.reconcile(600, nodes)
    (down,) = downs(acts)
    assert (down.node, down.pool, down.reason, down.evict) == ("h100-0", "h100", "ScaleDown", ("default/web",))
    assert down.message == ("Scale-down: removing node h100-0, utilization: {nvidia.com/gpu 0}, "
                            "pods to reschedule: default/web")
    assert [(e.involved, e.reason, e.message) for e in events(acts)] == [
        ("ConfigMap kube-system/cluster-autoscaler-status", "ScaleDown", down.message),
        ("Node h100-0", "ScaleDown", "marked the node as toBeDeleted/unschedulable"),
        ("Pod default/web", "ScaleDown", "deleting pod for node scale down"),
    ]


def test_same_pod_with_nowhere_to_go_keeps_the_node():
    s = scaler(GPU)
    nodes = [node("h100-0", GPU, pod("web", cpu_m=500))]
    for t in (0, 600, 3600):
        assert downs(s.reconcile(t, nodes)) == []
    st = s.status()["h100-0"]
    assert st.reason == "NoPlaceToMovePods"
    assert st.message == "Node h100-0 is not suitable for removal: failed to find place for default/web"
    assert s.next_wakeup() is None


def test_one_gpu_of_eight_is_unneeded_and_moves_when_another_node_has_room():
    s = scaler(GPU)
    nodes = [node("h100-0", GPU, pod("train", gpus=1, owner="Job")), static("spare-0", pod("half", gpus=4))]
    s.reconcile(0, nodes)
    assert s.status()["h100-0"].utilization.value == 0.125
    assert removed(s.reconcile(600, nodes)) == ["h100-0"]


def test_one_gpu_of_eight_stays_while_the_pod_cannot_move():
    s = scaler(GPU)
    nodes = [node("h100-0", GPU, pod("train", gpus=1, owner="Job")), static("spare-0", pod("full", gpus=8))]
    assert downs(s.reconcile(0, nodes)) == downs(s.reconcile(600, nodes)) == []
    assert s.status()["h100-0"].reason == "NoPlaceToMovePods"


@pytest.mark.parametrize(("gpus", "reason"), [(1, "NotUnneededLongEnough"), (3, "NotUnneededLongEnough"),
                                              (4, "NotUnderutilized"),
                                              (8, "NotUnderutilized")])
def test_half_the_gpus_is_not_below_the_threshold(gpus, reason):
    s = scaler(GPU)
    s.reconcile(0, [node("h100-0", GPU, pod("t", gpus=gpus)), static("spare-0")])
    assert s.status()["h100-0"].reason == reason


def test_not_underutilized_message():
    s = scaler(GPU)
    s.reconcile(0, [node("h100-0", GPU, pod("t", gpus=4))])
    assert s.status()["h100-0"].message == (
        "Node h100-0 unremovable: nvidia.com/gpu requested (50% of allocatable) is above the scale-down "
        "utilization threshold")


def test_gpu_threshold_is_its_own_flag():
    s = scaler(GPU, scale_down_gpu_utilization_threshold=0.1, scale_down_utilization_threshold=0.9)
    s.reconcile(0, [node("h100-0", GPU, pod("t", gpus=1)), static("spare-0")])
    assert s.status()["h100-0"].reason == "NotUnderutilized"


def test_cpu_node_uses_cpu_and_memory():
    g = cpu_group(cpu=10, mem_gi=10)
    s = scaler(g)
    s.reconcile(0, [node("cpu-0", g, pod("a", cpu_m=6000)), node("cpu-1", g, pod("b", cpu_m=1000, mem_mi=4 * 1024)),
                    static("spare-0")])
    assert s.status()["cpu-0"].reason == "NotUnderutilized"
    assert "cpu-1" in s.unneeded()
    assert s.status()["cpu-1"].utilization.resource == "memory"


# -- pods that block --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("blocker", "message"),
    [
        (pod("solo", owner=None), "default/solo is not replicated"),
        (pod("mpi", owner="MPIJob"), "default/mpi is not replicated"),
        (pod("coredns", ns="kube-system"),
         "non-daemonset, non-mirrored, non-pdb-assigned kube-system pod present: coredns"),
        (pod("web", annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "false"}),
         "pod annotated as not safe to evict present: web"),
    ],
)
def test_blocking_pods_keep_an_idle_gpu_node(blocker, message):
    s = scaler(GPU, SYSTEM)
    nodes = [node("h100-0", GPU, blocker), node("cpu-0", SYSTEM)]
    assert downs(s.reconcile(0, nodes)) == downs(s.reconcile(3600, nodes)) == []
    st = s.status()["h100-0"]
    assert (st.reason, st.message) == ("BlockedByPod", f"Node h100-0 cannot be removed: {message}")


@pytest.mark.parametrize(
    ("blocker", "flag"),
    [
        (pod("mpi", owner="MPIJob"), {"skip_nodes_with_custom_controller_pods": False}),
        (pod("coredns", ns="kube-system"), {"skip_nodes_with_system_pods": False}),
        (pod("solo", owner=None, annotations={"cluster-autoscaler.kubernetes.io/safe-to-evict": "true"}), {}),
    ],
)
def test_flags_and_safe_to_evict_true_release_them(blocker, flag):
    s = scaler(GPU, SYSTEM, **flag)
    nodes = [node("h100-0", GPU, blocker), node("cpu-0", SYSTEM)]
    s.reconcile(0, nodes)
    assert removed(s.reconcile(600, nodes)) == ["h100-0"]


def test_daemonset_pods_neither_block_nor_move():
    s = scaler(GPU)
    nodes = [node("h100-0", GPU, pod("dcgm-exporter", owner="DaemonSet"), pod("nvidia-device-plugin", owner="DaemonSet"))]
    s.reconcile(0, nodes)
    (down,) = downs(s.reconcile(600, nodes))
    assert (down.reason, down.evict, down.message) == ("ScaleDownEmpty", (), 'Scale-down: removing empty node "h100-0"')


def test_scale_down_disabled_annotation():
    s = scaler(GPU)
    nodes = [node("h100-0", GPU, annotations={"cluster-autoscaler.kubernetes.io/scale-down-disabled": "true"})]
    assert downs(s.reconcile(0, nodes)) == downs(s.reconcile(3600, nodes)) == []
    assert s.status()["h100-0"].reason == "ScaleDownDisabledAnnotation"


def test_pods_of_earlier_unneeded_nodes_are_already_placed():
    # spare-0 has 4 free GPUs: either node's 3-GPU pod fits there, not both
    s = scaler(GPU)
    nodes = [node("h100-0", GPU, pod("a", gpus=3)), node("h100-1", GPU, pod("b", gpus=3)),
             static("spare-0", pod("s", gpus=4))]
    s.reconcile(0, nodes)
    assert s.unneeded() == {"h100-0": 0}
    assert s.status()["h100-1"].reason == "NoPlaceToMovePods"


def test_reschedule_callback_decides_and_names_the_pod():
    seen = []

    def can_reschedule(pods, without):
        seen.append(([p.key for p in pods], sorted(without)))
        return "default/web"

    s = scaler(GPU, SYSTEM, can_reschedule=can_reschedule)
    s.reconcile(0, [node("h100-0", GPU, pod("web")), node("cpu-0", SYSTEM)])
    assert seen == [(["default/web"], ["h100-0"])]
    assert s.status()["h100-0"].message.endswith("failed to find place for default/web")


# -- timers, cooldown and bounds --------------------------------------------------------------


def test_timer_restarts_when_the_node_is_needed_again():
    s = scaler(GPU)
    idle = [node("h100-0", GPU)]
    s.reconcile(0, idle)
    s.reconcile(300, [node("h100-0", GPU, pod("t", gpus=8))])
    assert s.unneeded() == {}
    s.reconcile(400, idle)
    assert s.unneeded() == {"h100-0": 400}
    assert downs(s.reconcile(600, idle)) == []
    assert s.next_wakeup() == 1000
    assert removed(s.reconcile(1000, idle)) == ["h100-0"]


def test_no_scale_down_within_delay_after_add():
    s = scaler(GPU, cpu_group())
    idle = [node("h100-0", GPU)]
    s.reconcile(0, idle)
    acts = s.reconcile(500, idle, [pod("etl", cpu_m=8000)])
    assert [u.nodes for u in ups(acts)] == [("cpu-0",)]
    assert downs(acts) == []  # no scale-down in a loop that scaled up
    assert s.next_wakeup() == 620  # the new node
    with_cpu = [*idle, node("cpu-0", cpu_group(), pod("etl", cpu_m=8000), created_at=620)]
    assert downs(s.reconcile(620, with_cpu)) == []
    assert s.status()["h100-0"].reason == "ScaleDownInCooldown"
    assert s.next_wakeup() == 1100  # 500 + scaleDownDelayAfterAdd
    assert removed(s.reconcile(1100, with_cpu)) == ["h100-0"]


def test_delay_after_add_can_be_zero():
    s = scaler(GPU, cpu_group(), scale_down_delay_after_add=0)
    idle = [node("h100-0", GPU)]
    s.reconcile(0, idle)
    s.reconcile(500, idle, [pod("etl", cpu_m=8000)])
    assert removed(s.reconcile(600, idle)) == ["h100-0"]


def test_delay_after_delete():
    s = scaler(GPU, scale_down_delay_after_delete=300)
    nodes = [node("h100-0", GPU), node("h100-1", GPU)]
    s.reconcile(0, nodes)
    assert removed(s.reconcile(600, nodes)) == ["h100-0", "h100-1"]  # one pass deletes both empties
    s.reconcile(700, [node("h100-2", GPU, created_at=650)])
    assert s.next_wakeup() == 1300  # unneeded since 700 for 10m; the delete cooldown ended at 900


def test_never_below_min_count():
    g = gpu_group(min_count=1)
    s = scaler(g)
    nodes = [node("h100-0", g), node("h100-1", g)]
    s.reconcile(0, nodes)
    assert removed(s.reconcile(600, nodes)) == ["h100-0"]
    assert s.status()["h100-1"].reason == "NodeGroupMinSizeReached"
    s.reconcile(610, [nodes[1]])
    assert s.status()["h100-1"].message == "Skipping h100-1 - node group min size reached (current: 1, min: 1)"
    assert s.next_wakeup() is None


def test_empty_nodes_ten_at_a_time_then_the_next_scan():
    g = gpu_group(max_count=20)
    s = scaler(g)
    nodes = [node(f"h100-{i:02d}", g) for i in range(12)]
    s.reconcile(0, nodes)
    first = removed(s.reconcile(600, nodes))
    assert len(first) == 10
    assert s.next_wakeup() == 610  # --scan-interval
    left = [n for n in nodes if n.name not in first]
    assert len(removed(s.reconcile(610, left))) == 2


def test_one_drain_at_a_time():
    s = scaler(GPU)
    nodes = [node(f"h100-{i}", GPU, pod(f"w{i}")) for i in range(3)] + [static("spare-0")]
    s.reconcile(0, nodes)
    assert removed(s.reconcile(600, nodes)) == ["h100-0"]
    assert s.next_wakeup() == 610
    moved = [nodes[1], nodes[2], static("spare-0", pod("w0"))]
    assert removed(s.reconcile(610, moved)) == ["h100-1"]


def test_pools_without_autoscaling_are_never_removed():
    s = scaler(GPU)
    s.reconcile(0, [static("spare-0")])
    assert downs(s.reconcile(3600, [static("spare-0")])) == []
    assert s.status()["spare-0"].reason == "NotAutoscaled"


def test_scale_down_disabled_by_flag():
    s = scaler(GPU, scale_down_enabled=False)
    s.reconcile(0, [node("h100-0", GPU)])
    assert downs(s.reconcile(3600, [node("h100-0", GPU)])) == []


def test_custom_unneeded_time():
    s = scaler(GPU, scale_down_unneeded_time=120)
    s.reconcile(0, [node("h100-0", GPU)])
    assert s.next_wakeup() == 120
    assert removed(s.reconcile(120, [node("h100-0", GPU)])) == ["h100-0"]


def test_next_wakeup_is_never_in_the_past():
    g = gpu_group(min_count=1)
    s = scaler(g)
    s.reconcile(0, [node("h100-0", g)])
    assert s.next_wakeup() is None  # the only node is the minimum: nothing will happen by itself
    s2 = scaler(GPU)
    s2.reconcile(5000, [node("h100-0", GPU, pod("t", gpus=8))])
    assert s2.next_wakeup() is None


# -- the engine's fast path and CA's per-loop bounds ------------------------------------------


def test_timer_wake_ups_need_no_new_simulation():
    calls = []

    def can_reschedule(pods, without):
        calls.append(sorted(without))
        return True

    s = scaler(GPU, SYSTEM, can_reschedule=can_reschedule)
    nodes = [node("h100-0", GPU, pod("web")), node("cpu-0", SYSTEM)]
    s.reconcile(0, nodes)
    assert downs(s.reconcile(300, nodes, changed=False)) == []
    assert removed(s.reconcile(600, nodes, changed=False)) == ["h100-0"]
    assert calls == [["h100-0"]]


def test_after_a_removal_the_next_call_simulates_again():
    s = scaler(GPU)
    s.reconcile(0, [node("h100-0", GPU), node("h100-1", GPU, pod("t", gpus=8)), static("spare-0")])
    nodes = [node("h100-0", GPU), node("h100-1", GPU, pod("t", gpus=1)), static("spare-0")]
    s.reconcile(100, nodes)
    assert s.unneeded() == {"h100-0": 0, "h100-1": 100}
    assert removed(s.reconcile(600, nodes)) == ["h100-0"]
    # spare-0 filled up meanwhile; a promise of "no change" is not trusted right after a removal
    s.reconcile(610, [nodes[1], static("spare-0", pod("s", gpus=8))], changed=False)
    assert s.status()["h100-1"].reason == "NoPlaceToMovePods"


def test_unneeded_nodes_found_per_loop_are_bounded():
    g = gpu_group(max_count=100)
    s = scaler(g, max_scale_down_parallelism=2)
    nodes = [node(f"h100-{i:02d}", g) for i in range(10)]
    s.reconcile(0, nodes)
    assert sorted(s.unneeded()) == ["h100-00", "h100-01", "h100-02", "h100-03"]  # 0 + 2 x 2
    assert s.status()["h100-04"].reason == "NotEvaluated"
    s.reconcile(10, nodes)
    assert len(s.unneeded()) == 8
    s.reconcile(20, nodes)
    assert len(s.unneeded()) == 10
    assert s.unneeded()["h100-00"] == 0 and s.unneeded()["h100-09"] == 20


def test_a_group_given_twice_is_an_error():
    with pytest.raises(GpuLabError, match='Autoscaler "default": node group "h100" is given twice'):
        scaler(GPU, gpu_group())
