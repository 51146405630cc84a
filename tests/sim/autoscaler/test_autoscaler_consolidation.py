"""Karpenter-style consolidation: consolidateAfter, empty and underutilized nodes, replace, blocks, budgets."""

from scalekit import GI, cordons, downs, events, gpu_group, node, pod, removed, scaler, ups

from gpu_lab.sim.autoscaler import NodeGroup

H100 = gpu_group("h100", price=55.0)
L4 = NodeGroup("l4", 8, 0, 240, {"cpu": 48_000, "memory": 192 * GI, "pods": 110, "nvidia.com/gpu": 4}, 4.6)
STATIC = NodeGroup("static", 1, 0, 0, dict(H100.allocatable))


def karpenter(*groups, **spec):
    spec.setdefault("consolidate_after", 300.0)
    return scaler(*groups, mode="Consolidation", **spec)


def static(name, *pods):
    return node(name, STATIC, *pods, pool="static")


def test_empty_node_goes_consolidate_after_its_ready_time():
    s = karpenter(H100)
    nodes = [node("h100-0", H100, created_at=100)]
    assert s.reconcile(100, nodes) == []
    assert s.next_wakeup() == 400
    assert s.status()["h100-0"].reason == "NotConsolidatable"
    acts = s.reconcile(400, nodes)
    (down,) = downs(acts)
    assert (down.node, down.reason, down.message, down.evict) == (
        "h100-0", "Empty/Delete", "Disrupting Node: Empty/Delete", ())
    assert [(e.involved, e.reason, e.message, e.source) for e in events(acts)] == [
        ("Node h100-0", "DisruptionTerminating", "Disrupting Node: Empty/Delete", "karpenter")]


def test_the_clock_restarts_at_the_last_pod_event():
    s = karpenter(H100)
    s.reconcile(0, [node("h100-0", H100, pod("t", gpus=8))])
    s.reconcile(100, [node("h100-0", H100)])  # the pod left at 100
    assert s.next_wakeup() == 400
    assert downs(s.reconcile(399, [node("h100-0", H100)])) == []
    assert removed(s.reconcile(400, [node("h100-0", H100)])) == ["h100-0"]


def test_an_engine_given_last_pod_event_wins():
    s = karpenter(H100)
    n = node("h100-0", H100)
    n.last_pod_event = 1000
    s.reconcile(1100, [n])
    assert s.next_wakeup() == 1300


def test_when_empty_leaves_underutilized_nodes():
    s = karpenter(H100, consolidation_policy="WhenEmpty")
    nodes = [node("h100-0", H100, pod("t", gpus=1)), static("spare-0")]
    assert downs(s.reconcile(0, nodes)) == downs(s.reconcile(3600, nodes)) == []


def test_underutilized_node_whose_pods_fit_elsewhere_is_deleted():
    s = karpenter(H100)
    nodes = [node("h100-0", H100, pod("t", gpus=1)), static("spare-0", pod("s", gpus=4))]
    s.reconcile(0, nodes)
    (down,) = downs(s.reconcile(300, nodes))
    assert (down.reason, down.evict) == ("Underutilized/Delete", ("default/t",))


def test_no_threshold_a_busy_node_goes_too_if_its_pods_fit():
    # CA would keep a node at 6 of 8 GPUs; Karpenter only asks whether the pods fit elsewhere
    s = karpenter(H100)
    nodes = [node("h100-0", H100, pod("t", gpus=6)), static("spare-0")]
    s.reconcile(0, nodes)
    assert removed(s.reconcile(300, nodes)) == ["h100-0"]


def test_several_nodes_at_once_while_their_pods_fit():
    s = karpenter(H100, budgets=("100%",))
    nodes = [node(f"h100-{i}", H100, pod(f"t{i}", gpus=3)) for i in range(3)] + [static("spare-0", pod("s", gpus=2))]
    s.reconcile(0, nodes)
    # 6 GPUs free on spare-0, 5 on each h100: the 3-GPU pods of two nodes fit on what stays, the third's not
    assert removed(s.reconcile(300, nodes)) == ["h100-0", "h100-1"]
    assert s.status()["h100-2"].reason == "Unconsolidatable"


def test_replace_with_a_cheaper_node():
    s = karpenter(H100, L4)
    nodes = [node("h100-0", H100, pod("t", gpus=2, cpu_m=8000, mem_mi=32 * 1024))]
    s.reconcile(0, nodes)
    acts = s.reconcile(300, nodes)
    assert [(c.node, c.reason) for c in cordons(acts)] == [("h100-0", "Underutilized/Replace")]
    (up,) = ups(acts)
    assert (up.pool, up.nodes, up.ready_at, up.reason, up.pods) == (
        "l4", ("l4-0",), 540.0, "Underutilized/Replace", ("default/t",))
    assert downs(acts) == []
    assert s.next_wakeup() == 540
    assert s.reconcile(400, nodes) == []  # still waiting; no second replacement
    acts = s.reconcile(540, [*nodes, node("l4-0", L4, created_at=540)])
    (down,) = downs(acts)
    assert (down.node, down.reason, down.evict) == ("h100-0", "Underutilized/Replace", ("default/t",))


def test_no_replacement_when_nothing_cheaper_fits():
    s = karpenter(H100, L4)
    nodes = [node("h100-0", H100, pod("t", gpus=6))]  # l4 nodes have 4 GPUs
    s.reconcile(0, nodes)
    assert s.reconcile(300, nodes) == []
    assert s.status()["h100-0"].reason == "Unconsolidatable"


def test_do_not_disrupt_blocks():
    s = karpenter(H100)
    keep = pod("t", gpus=1, annotations={"karpenter.sh/do-not-disrupt": "true"})
    nodes = [node("h100-0", H100, keep), static("spare-0")]
    s.reconcile(0, nodes)
    acts = s.reconcile(300, nodes)
    assert downs(acts) == []
    assert [(e.reason, e.message) for e in events(acts)] == [
        ("DisruptionBlocked", 'Pod has "karpenter.sh/do-not-disrupt" annotation (Pod=default/t)')]
    assert s.status()["h100-0"].message == (
        'Cannot disrupt Node: Pod has "karpenter.sh/do-not-disrupt" annotation (Pod=default/t)')


def test_do_not_disrupt_on_the_node():
    s = karpenter(H100)
    nodes = [node("h100-0", H100, annotations={"karpenter.sh/do-not-disrupt": "true"})]
    s.reconcile(0, nodes)
    assert downs(s.reconcile(300, nodes)) == []


def test_never():
    s = karpenter(H100, consolidate_after=None)
    s.reconcile(0, [node("h100-0", H100)])
    assert s.next_wakeup() is None
    assert downs(s.reconcile(86400, [node("h100-0", H100)])) == []


def test_default_budget_is_ten_percent_rounded_up():
    g = gpu_group("h100", max_count=20)
    s = karpenter(g)
    nodes = [node(f"h100-{i:02d}", g) for i in range(12)]
    s.reconcile(0, nodes)
    assert len(removed(s.reconcile(300, nodes))) == 2  # ceil(12 x 10%)


def test_budget_of_zero_blocks():
    s = karpenter(H100, budgets=("0",))
    s.reconcile(0, [node("h100-0", H100)])
    assert downs(s.reconcile(300, [node("h100-0", H100)])) == []
    assert s.status()["h100-0"].message == "No allowed disruptions due to blocking budget"


def test_min_count_kept():
    g = gpu_group("h100", min_count=1)
    s = karpenter(g, budgets=("100%",))
    nodes = [node("h100-0", g), node("h100-1", g)]
    s.reconcile(0, nodes)
    assert removed(s.reconcile(300, nodes)) == ["h100-0"]
    assert s.status()["h100-1"].reason == "NodeGroupMinSizeReached"


def test_scale_up_picks_the_cheapest_and_says_so_as_karpenter():
    s = karpenter(H100, L4)
    acts = s.reconcile(0, [], [pod("infer", gpus=1)])
    (up,) = ups(acts)
    assert (up.pool, up.nodes) == ("l4", ("l4-0",))
    assert [(e.reason, e.message, e.source) for e in events(acts)] == [
        ("Nominated", "Pod should schedule on: nodeclaim/l4-0", "karpenter")]


def test_karpenter_failed_scheduling_words():
    s = karpenter(gpu_group("h100", max_count=0), L4)
    acts = s.reconcile(0, [], [pod("big", gpus=8)])
    assert [(e.type, e.reason, e.message) for e in events(acts)] == [
        ("Warning", "FailedScheduling", 'Failed to schedule pod, all available instance types exceed limits for '
                                        'nodepool "h100"; incompatible with nodepool "l4", Insufficient nvidia.com/gpu')]
