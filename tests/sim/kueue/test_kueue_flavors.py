"""Flavor assignment: flavors are tried in the ClusterQueue's order, a workload's node selector
and tolerations must match the flavor, and every reason met on the way is reported."""

from gpu_lab.sim.kueue import Admit, Kueue, parse_kueue
from gpu_lab.sim.kueue.workload import WorkloadSpec

from .kit import admitted, cluster_queue, flavor, job, local_queue, pending, submit_all

GPU = "nvidia.com/gpu"


def two_flavors(a100=8, h100=8, **cq):
    return Kueue(parse_kueue([
        flavor("a100", {"gpu": "a100"}), flavor("h100", {"gpu": "h100"}),
        cluster_queue("team", [("a100", {GPU: a100}), ("h100", {GPU: h100})], **cq), local_queue("q", "team")]))


def flavors_of(decisions):
    return {d.key.split("/")[1]: d.flavors[GPU] for d in decisions if isinstance(d, Admit)}


def test_the_first_flavor_with_room_is_taken_in_order():
    k = two_flavors()
    submit_all(k, job("a", 6), job("b", 6, created=1), job("c", 2, created=2))
    assert flavors_of(k.schedule(2)) == {"a": "a100", "b": "h100", "c": "a100"}


def test_reasons_from_every_flavor_tried_are_sorted_into_one_message():
    k = two_flavors(a100=4, h100=6)
    submit_all(k, job("a", 4), job("b", 6, created=1), job("c", 4, created=2))
    d = k.schedule(2)
    assert pending(d) == {"c": "couldn't assign flavors to pod set main: insufficient unused quota for "
                               "nvidia.com/gpu in flavor a100, 4 more needed, insufficient unused quota for "
                               "nvidia.com/gpu in flavor h100, 4 more needed"}


def test_a_node_selector_picks_the_matching_flavor():
    k = two_flavors()
    spec = job("wants-h100", 2, node_selector={"gpu": "h100"})
    submit_all(k, spec)
    assert flavors_of(k.schedule(0)) == {"wants-h100": "h100"}


def test_a_node_selector_matching_no_flavor():
    k = two_flavors()
    submit_all(k, job("wants-l4", 2, node_selector={"gpu": "l4"}))
    assert pending(k.schedule(0)) == {"wants-l4": "couldn't assign flavors to pod set main: flavor a100 doesn't "
                                                  "match node affinity, flavor h100 doesn't match node affinity"}


def test_node_selector_keys_no_flavor_uses_are_ignored():
    k = two_flavors()
    submit_all(k, job("zone", 2, node_selector={"topology.kubernetes.io/zone": "a"}))
    assert flavors_of(k.schedule(0)) == {"zone": "a100"}


def test_required_node_affinity_on_flavor_label_keys():
    k = two_flavors()
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "gpu", "operator": "NotIn", "values": ["a100"]}]}]}}}
    submit_all(k, job("not-a100", 2, affinity=affinity))
    assert flavors_of(k.schedule(0)) == {"not-a100": "h100"}


def test_an_untolerated_flavor_taint_is_reported_as_go_prints_the_taint():
    from gpu_lab.model.objects import Toleration
    cfg = parse_kueue([flavor("spot", {"gpu": "a100"}, taints=[{"key": "spot", "value": "true",
                                                                 "effect": "NoSchedule"}]),
                       cluster_queue("team", [("spot", {GPU: 8})]), local_queue("q", "team")])
    k = Kueue(cfg)
    submit_all(k, job("plain", 1), job("tolerant", 1, created=1,
                                       tolerations=(Toleration("spot", "Equal", "true", "NoSchedule"),)))
    d = k.schedule(1)
    assert pending(d) == {"plain": "couldn't assign flavors to pod set main: untolerated taint "
                                   "{spot true NoSchedule <nil>} in flavor spot"}
    assert admitted(d) == ["tolerant"]


def test_a_flavors_own_toleration_covers_its_taint():
    cfg = parse_kueue([flavor("spot", taints=[{"key": "spot", "effect": "NoSchedule"}],
                              tolerations=[{"key": "spot", "operator": "Exists", "effect": "NoSchedule"}]),
                       cluster_queue("team", [("spot", {GPU: 8})]), local_queue("q", "team")])
    k = Kueue(cfg)
    submit_all(k, job("a", 1))
    assert admitted(k.schedule(0)) == ["a"]


def test_resources_of_one_group_share_the_flavor():
    cfg = parse_kueue([flavor("a100"), flavor("h100"),
                       cluster_queue("team", [("a100", {GPU: 8, "cpu": 2}), ("h100", {GPU: 8, "cpu": 64})],
                                     resources=(GPU, "cpu")),
                       local_queue("q", "team")])
    k = Kueue(cfg)
    submit_all(k, WorkloadSpec("default", "a", "q", 1, {GPU: 1, "cpu": 8000}, job="a"))
    (d,) = [x for x in k.schedule(0) if isinstance(x, Admit)]
    assert d.flavors == {GPU: "h100", "cpu": "h100"}


def test_when_can_borrow_try_next_flavor_prefers_a_flavor_without_borrowing():
    def cohort(fungibility):
        return Kueue(parse_kueue([
            flavor("a100"), flavor("h100"),
            cluster_queue("team", [("a100", {GPU: 4}), ("h100", {GPU: 8})], cohort="lab",
                          flavorFungibility=fungibility),
            cluster_queue("other", [("a100", {GPU: 8}), ("h100", {GPU: 0})], cohort="lab"),
            local_queue("q", "team")]))
    k = cohort({"whenCanBorrow": "MayStopSearch"})
    submit_all(k, job("six", 6))
    assert flavors_of(k.schedule(0)) == {"six": "a100"}  # stops at a100, borrowing 2
    k = cohort({"whenCanBorrow": "TryNextFlavor"})
    submit_all(k, job("six", 6))
    assert flavors_of(k.schedule(0)) == {"six": "h100"}  # h100 fits without borrowing
