"""Scale-up: pending pods, binpacking onto new nodes, maxCount, events, and the expanders."""

import pytest
from scalekit import GI, cpu_group, events, gpu_group, node, pod, scaler, ups

from gpu_lab.sim.autoscaler import NodeGroup, ScaleUp

H100 = gpu_group("h100", gpus=8, price=55.0)


# -- new nodes for pending pods ---------------------------------------------------------------


def test_pending_gpu_pod_gets_a_node_after_the_provisioning_delay():
    s = scaler(H100)
    acts = s.reconcile(100, [], [pod("train-0", gpus=8, owner="Job")])
    assert ups(acts) == [ScaleUp("h100", 1, ("h100-0",), 400.0, "TriggeredScaleUp",
                                 "pod triggered scale-up: [{h100 0->1 (max: 4)}]", ("default/train-0",))]
    (ev,) = events(acts)
    assert (ev.involved, ev.reason, ev.message, ev.source) == (
        "Pod default/train-0", "TriggeredScaleUp", "pod triggered scale-up: [{h100 0->1 (max: 4)}]",
        "cluster-autoscaler")
    assert s.next_wakeup() == 400


def test_pods_waiting_for_an_upcoming_node_do_not_scale_up_again():
    s = scaler(H100)
    pending = [pod("train-0", gpus=8, owner="Job")]
    s.reconcile(0, [], pending)
    assert s.reconcile(10, [], pending) == []
    assert s.reconcile(300, [node("h100-0", H100, pending[0], created_at=300)]) == []


def test_binpacking_counts_nodes():
    s = scaler(H100)
    acts = s.reconcile(0, [], [pod(f"w{i}", gpus=3) for i in range(5)])  # two per 8-GPU node
    (up,) = ups(acts)
    assert (up.count, up.nodes) == (3, ("h100-0", "h100-1", "h100-2"))
    assert up.message == "pod triggered scale-up: [{h100 0->3 (max: 4)}]"


def test_new_names_follow_existing_nodes_and_are_never_reused():
    s = scaler(H100)
    s.reconcile(0, [node("h100-0", H100, pod("a", gpus=8)), node("h100-1", H100, pod("b", gpus=8))],
                [pod("c", gpus=8)])
    assert s.upcoming[0].nodes == ("h100-2",)
    # h100-2 came and went; the next node is h100-3
    s.reconcile(300, [node("h100-0", H100, pod("a", gpus=8)), node("h100-2", H100, pod("c", gpus=8))])
    acts = s.reconcile(900, [node("h100-0", H100, pod("a", gpus=8))], [pod("d", gpus=8)])
    assert ups(acts)[0].nodes == ("h100-3",)


def test_capped_at_max_count():
    g = gpu_group("h100", max_count=2)
    s = scaler(g)
    acts = s.reconcile(0, [node("h100-0", g, pod("x", gpus=8))], [pod(f"p{i}", gpus=8) for i in range(3)])
    (up,) = ups(acts)
    assert up.message == "pod triggered scale-up: [{h100 1->2 (max: 2)}]"
    left = events(acts, "NotTriggerScaleUp")
    assert len(left) == 2
    assert {e.message for e in left} == {"pod didn't trigger scale-up: 1 max node group size reached"}


def test_max_nodes_total():
    s = scaler(H100, cpu_group(), max_nodes_total=1)
    acts = s.reconcile(0, [node("h100-0", H100, pod("x", gpus=8))], [pod("p", gpus=8)])
    assert ups(acts) == []
    assert [e.message for e in events(acts)] == ["pod didn't trigger scale-up: max total nodes in cluster reached"]


def test_reasons_are_counted_per_group():
    a100 = gpu_group("a100", max_count=1)

    def fits(p, group):
        return True if group.name == "a100" else "node(s) didn't match Pod's node affinity/selector"

    s = scaler(H100, a100, cpu_group(), fits=fits)
    acts = s.reconcile(0, [node("a100-0", a100, pod("x", gpus=8))], [pod("p", gpus=1)])
    assert [e.message for e in events(acts)] == [
        "pod didn't trigger scale-up: 1 Insufficient nvidia.com/gpu, 1 max node group size reached, "
        "1 node(s) didn't match Pod's node affinity/selector"]


def test_a_pod_too_big_for_every_group():
    s = scaler(H100, gpu_group("a100"))
    acts = s.reconcile(0, [], [pod("huge", gpus=16)])
    assert [(e.reason, e.message) for e in events(acts)] == [
        ("NotTriggerScaleUp", "pod didn't trigger scale-up: 2 Insufficient nvidia.com/gpu")]


def test_repeated_events_are_folded():
    s = scaler(H100)
    assert len(events(s.reconcile(0, [], [pod("huge", gpus=16)]))) == 1
    assert events(s.reconcile(10, [], [pod("huge", gpus=16)])) == []


def test_several_groups_grow_in_one_call():
    def fits(p, group):
        return group.name == p.name.split("-")[0]

    s = scaler(H100, cpu_group(), fits=fits)
    acts = s.reconcile(0, [], [pod("h100-job", gpus=8), pod("cpu-job", cpu_m=4000)])
    assert sorted((u.pool, u.count) for u in ups(acts)) == [("cpu", 1), ("h100", 1)]


# -- expanders --------------------------------------------------------------------------------

L4 = NodeGroup("l4", 8, 0, 300, {"cpu": 48_000, "memory": 192 * GI, "pods": 110, "nvidia.com/gpu": 4}, 30.0)
A100 = NodeGroup("a100", 8, 0, 300, {"cpu": 96_000, "memory": 1152 * GI, "pods": 110, "nvidia.com/gpu": 8}, 32.0)
PODS = [pod(f"w{i}", cpu_m=2000, mem_mi=8 * 1024, gpus=1) for i in range(8)]


def chosen(pending=PODS, fits=None, **spec):
    s = scaler(H100, L4, A100, fits=fits, **spec)
    return [(u.pool, u.count) for u in ups(s.reconcile(0, [], pending))]


def test_least_waste_is_the_default_and_ignores_gpus():
    # h100: 1 node wastes 0.917 cpu + 0.969 memory; l4: 2 nodes waste 0.833 + 0.833; a100: 0.833 + 0.944
    assert chosen() == [("l4", 2)]


def test_price_per_pod():
    # h100 55/8 pods, l4 2 x 30/8, a100 32/8
    assert chosen(expander=("price",)) == [("a100", 1)]


def test_least_nodes_then_price():
    assert chosen(expander=("least-nodes", "price")) == [("a100", 1)]


def test_least_nodes_ties_broken_at_random_but_reproducibly():
    picks = {chosen(expander=("least-nodes",), seed=seed)[0] for seed in range(20)}
    assert picks == {("h100", 1), ("a100", 1)}
    assert chosen(expander=("least-nodes",), seed=3) == chosen(expander=("least-nodes",), seed=3)


def test_most_pods():
    def fits(p, group):
        return group.name == "h100" or p.name != "picky"

    pending = [pod("picky", gpus=1), pod("easy", gpus=1)]
    assert chosen(pending, fits, expander=("most-pods",)) == [("h100", 1)]


def test_priority():
    assert chosen(expander=("priority",), priorities={10: (".*",), 50: ("^h100$",)}) == [("h100", 1)]


def test_priority_then_least_waste():
    assert chosen(expander=("priority", "least-waste"), priorities={10: ("l4", "a100")}) == [("l4", 2)]


def test_priority_without_a_match_keeps_every_option():
    assert chosen(expander=("priority", "price"), priorities={10: ("^t4$",)}) == [("a100", 1)]


def test_random_picks_among_all():
    picks = {chosen(expander=("random",), seed=seed)[0][0] for seed in range(30)}
    assert picks == {"h100", "l4", "a100"}


def test_unpriced_groups_go_last_under_price():
    free = NodeGroup("free", 8, 0, 300, dict(A100.allocatable), None)
    s = scaler(free, A100, expander=("price",))
    assert ups(s.reconcile(0, [], PODS))[0].pool == "a100"


@pytest.mark.parametrize("expander", [("least-waste",), ("most-pods",), ("least-nodes",), ("price",), ("random",)])
def test_one_option_needs_no_expander(expander):
    s = scaler(H100, expander=expander)
    assert [u.pool for u in ups(s.reconcile(0, [], [pod("t", gpus=8)]))] == ["h100"]
