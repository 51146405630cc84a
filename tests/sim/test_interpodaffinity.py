"""InterPodAffinity on worked examples; expected numbers follow filtering.go and scoring.go.

Score: a topology map (key -> value -> sum of weights) built from every (term, existing pod)
match; a node scores the sum over its labels; NormalizeScore:
int64(100 * float64(s - min) / float64(max - min)), all 0 when max == min.
"""

import numpy as np
import pytest
import simkit as k

from gpu_lab.errors import GpuLabError
from gpu_lab.sim.framework import SKIP, UNRESOLVABLE, UNSCHEDULABLE, CycleContext
from gpu_lab.sim.plugins.interpodaffinity import InterPodAffinity

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
AFF = "node(s) didn't match pod affinity rules"
ANTI = "node(s) didn't match pod anti-affinity rules"
EXISTING = "node(s) didn't satisfy existing pods anti-affinity rules"


def zoned(name, zone=None, **kw):
    return k.node(name, labels={ZONE: zone} if zone else {}, **kw)


def term(key, match, **extra):
    t = {"topologyKey": key, "labelSelector": {"matchLabels": dict(match)}}
    t.update(extra)
    return t


def required(kind, *terms):
    return {kind: {"requiredDuringSchedulingIgnoredDuringExecution": list(terms)}}


def preferred(kind, *weighted):
    return {kind: {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": w, "podAffinityTerm": t} for w, t in weighted]}}


def cctx(p, snap, nominated=None):
    return CycleContext(pod=p, snapshot=snap, profile=None, nominated=nominated or {})


def put(snap, node_name, name, labels, ns="default", affinity=None):
    snap.add_pod(k.pod(name, labels=labels, ns=ns, affinity=affinity), snap.index[node_name])


def run_filter(pl, p, snap, nominated=None):
    c = cctx(p, snap, nominated)
    st = pl.pre_filter(c)
    assert st is None, st
    m = pl.filter(c)
    return c, {n: bool(m[i]) for n, i in snap.index.items()}


def reason(pl, c, name):
    st = pl.filter_status(c, c.snapshot.index[name])
    return st.code, st.reasons[0]


# ---------------------------------------------------------------- filter
def test_required_anti_affinity_one_per_host():
    snap = k.snapshot(k.node("a"), k.node("b"), k.node("c"))
    put(snap, "a", "web-0", {"app": "web"})
    pl = InterPodAffinity()
    p = k.pod("web-1", labels={"app": "web"}, affinity=required("podAntiAffinity", term(HOST, {"app": "web"})))
    c, got = run_filter(pl, p, snap)
    assert got == {"a": False, "b": True, "c": True}
    assert reason(pl, c, "a") == (UNSCHEDULABLE, ANTI)


def test_existing_pods_anti_affinity_repels_the_whole_zone():
    snap = k.snapshot(zoned("a", "z1"), zoned("b", "z1"), zoned("c", "z2"))
    put(snap, "b", "db-0", {"app": "db"}, affinity=required("podAntiAffinity", term(ZONE, {"app": "web"})))
    pl = InterPodAffinity()
    c, got = run_filter(pl, k.pod("web-0", labels={"app": "web"}), snap)
    assert got == {"a": False, "b": False, "c": True}
    assert reason(pl, c, "a") == (UNSCHEDULABLE, EXISTING)
    # a pod the term doesn't select: nothing to check, PreFilter skips
    assert pl.pre_filter(cctx(k.pod("api-0", labels={"app": "api"}), snap)).code == SKIP


def test_required_affinity_follows_the_zone_and_needs_the_key():
    snap = k.snapshot(zoned("a", "z1"), zoned("c", "z2"), zoned("d", "z2"), zoned("e"))
    put(snap, "c", "cache-0", {"app": "cache"})
    pl = InterPodAffinity()
    p = k.pod("web-0", labels={"app": "web"}, affinity=required("podAffinity", term(ZONE, {"app": "cache"})))
    c, got = run_filter(pl, p, snap)
    assert got == {"a": False, "c": True, "d": True, "e": False}
    assert reason(pl, c, "a") == (UNRESOLVABLE, AFF)
    assert reason(pl, c, "e") == (UNRESOLVABLE, AFF)


def test_first_pod_of_a_self_affine_group_may_go_anywhere_with_the_key():
    snap = k.snapshot(zoned("a", "z1"), zoned("c", "z2"), zoned("e"))
    pl = InterPodAffinity()
    aff = required("podAffinity", term(ZONE, {"app": "web"}))
    _, got = run_filter(pl, k.pod("web-0", labels={"app": "web"}, affinity=aff), snap)
    assert got == {"a": True, "c": True, "e": False}
    # a pod that doesn't match its own term has no such escape
    _, got = run_filter(pl, k.pod("api-0", labels={"app": "api"}, affinity=aff), snap)
    assert got == {"a": False, "c": False, "e": False}
    # once a matching pod exists, only its zone qualifies
    put(snap, "c", "web-x", {"app": "web"})
    _, got = run_filter(pl, k.pod("web-1", labels={"app": "web"}, affinity=aff), snap)
    assert got == {"a": False, "c": True, "e": False}


def test_affinity_terms_need_one_pod_matching_all_of_them():
    snap = k.snapshot(zoned("a", "z1"), zoned("b", "z1"), zoned("c", "z2"))
    put(snap, "a", "cache", {"app": "cache"})
    put(snap, "a", "hot", {"tier": "hot"})
    pl = InterPodAffinity()
    aff = required("podAffinity", term(ZONE, {"app": "cache"}), term(HOST, {"tier": "hot"}))
    p = k.pod("web", labels={"app": "web"}, affinity=aff)
    _, got = run_filter(pl, p, snap)
    assert got == {"a": False, "b": False, "c": False}  # no single pod matches both terms
    put(snap, "b", "both", {"app": "cache", "tier": "hot"})
    # (zone, z1) and (hostname, b) are now counted: only b has both
    _, got = run_filter(pl, p, snap)
    assert got == {"a": False, "b": True, "c": False}


@pytest.mark.parametrize("extra,fits", [
    ({}, False),  # the pod's own namespace only
    ({"namespaces": ["other"]}, True),
    ({"namespaceSelector": {}}, True),  # all namespaces
    ({"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "other"}}}, True),
    ({"namespaceSelector": {"matchLabels": {"team": "x"}}}, False),
])
def test_namespaces_of_a_term(extra, fits):
    snap = k.snapshot(zoned("a", "z1"), zoned("c", "z2"))
    put(snap, "c", "cache-0", {"app": "cache"}, ns="other")
    pl = InterPodAffinity()
    p = k.pod("web", labels={"app": "web"}, affinity=required("podAffinity", term(ZONE, {"app": "cache"}, **extra)))
    _, got = run_filter(pl, p, snap)
    assert got == {"a": False, "c": fits}


def test_match_label_keys_are_merged_like_the_api_server_does():
    snap = k.snapshot(k.node("a"), k.node("b"))
    put(snap, "a", "web-old", {"app": "web", "pod-template-hash": "old"})
    pl = InterPodAffinity()
    anti = required("podAntiAffinity", term(HOST, {"app": "web"}, matchLabelKeys=["pod-template-hash"]))
    p = k.pod("web-new", labels={"app": "web", "pod-template-hash": "new"}, affinity=anti)
    _, got = run_filter(pl, p, snap)
    assert got == {"a": True, "b": True}  # only the same revision repels
    anti = required("podAntiAffinity", term(HOST, {"app": "web"}, mismatchLabelKeys=["pod-template-hash"]))
    p = k.pod("web-new", labels={"app": "web", "pod-template-hash": "new"}, affinity=anti)
    _, got = run_filter(pl, p, snap)
    assert got == {"a": False, "b": True}  # other revisions repel


def test_nominated_pod_counts_for_anti_affinity():
    snap = k.snapshot(k.node("a"), k.node("b"))
    pl = InterPodAffinity()
    p = k.pod("web-1", labels={"app": "web"}, affinity=required("podAntiAffinity", term(HOST, {"app": "web"})))
    _, got = run_filter(pl, p, snap)
    assert got == {"a": True, "b": True}
    nominated = {snap.index["b"]: [k.pod("web-0", labels={"app": "web"}, priority=5)]}
    c, got = run_filter(pl, p, snap, nominated)
    assert got == {"a": True, "b": False}
    assert reason(pl, c, "b") == (UNSCHEDULABLE, ANTI)


def test_pre_filter_skips_and_index_follows_deletes():
    snap = k.snapshot(k.node("a"), k.node("b"))
    pl = InterPodAffinity()
    plain = k.pod("plain", labels={"app": "web"})
    assert pl.pre_filter(cctx(plain, snap)).code == SKIP
    guard = k.pod("guard", labels={"app": "guard"}, affinity=required("podAntiAffinity", term(HOST, {"app": "web"})))
    snap.add_pod(guard, snap.index["a"])
    _, got = run_filter(pl, plain, snap)
    assert got == {"a": False, "b": True}
    snap.remove_pod(guard)
    assert pl.pre_filter(cctx(plain, snap)).code == SKIP
    # the index survives node list changes
    snap.add_pod(guard, snap.index["b"])
    snap.set_nodes([k.node("a"), k.node("b"), k.node("c")])
    _, got = run_filter(pl, plain, snap)
    assert got == {"a": True, "b": False, "c": True}


def test_hard_pod_affinity_weight_is_validated():
    with pytest.raises(GpuLabError) as err:
        InterPodAffinity({"hardPodAffinityWeight": 101})
    assert str(err.value) == "InterPodAffinityArgs: hardPodAffinityWeight: Invalid value: 101: not in valid range [0, 100]"


# ----------------------------------------------------------------- score
def four_nodes():
    return k.snapshot(zoned("a", "z1"), zoned("b", "z1"), zoned("c", "z2"), zoned("d", "z2"))


def scores(pl, p, snap):
    c = cctx(p, snap)
    feasible = np.array([snap.index[n] for n in "abcd"])
    st = pl.pre_score(c, feasible)
    if st is not None:
        return st.code, None
    raw = pl.score(c, feasible)
    return raw.tolist(), pl.normalize_score(c, raw).tolist()


def test_incoming_preferred_terms():
    snap = four_nodes()
    put(snap, "a", "cache", {"app": "cache"})
    put(snap, "b", "web-0", {"app": "web"})
    put(snap, "c", "web-1", {"app": "web"})
    aff = {**preferred("podAffinity", (80, term(ZONE, {"app": "cache"}))),
           **preferred("podAntiAffinity", (20, term(HOST, {"app": "web"})))}
    # zone: z1 += 80 (cache on a); hostname: b -= 20, c -= 20
    # a 80, b 80 - 20 = 60, c -20, d 0; min -20, max 80, diff 100
    # a 100*(100/100) = 100, b 100*(80/100) = 80, c 0, d 100*(20/100) = 20
    raw, norm = scores(InterPodAffinity(), k.pod("web-2", labels={"app": "web"}, affinity=aff), snap)
    assert raw == [80, 60, -20, 0]
    assert norm == [100, 80, 0, 20]


def test_existing_pods_terms_and_hard_pod_affinity_weight():
    snap = four_nodes()
    put(snap, "a", "x", {"app": "x"}, affinity=required("podAffinity", term(ZONE, {"app": "web"})))
    put(snap, "c", "y", {"app": "y"}, affinity=preferred("podAntiAffinity", (50, term(ZONE, {"app": "web"}))))
    put(snap, "d", "z", {"app": "z"}, affinity=preferred("podAffinity", (10, term(HOST, {"app": "web"}))))
    p = k.pod("web", labels={"app": "web"})
    # zone: z1 += 1 (x's required term, hardPodAffinityWeight 1), z2 -= 50 (y); hostname: d += 10 (z)
    # a 1, b 1, c -50, d -40; diff 51: 100, 100, 0, int(100 * 10/51) = 19
    assert scores(InterPodAffinity(), p, snap) == ([1, 1, -50, -40], [100, 100, 0, 19])
    # hardPodAffinityWeight 0 ignores x: 0, 0, -50, -40; diff 50: 100, 100, 0, 20
    assert scores(InterPodAffinity({"hardPodAffinityWeight": 0}), p, snap) == ([0, 0, -50, -40], [100, 100, 0, 20])


def test_float_truncation_in_normalize():
    snap = four_nodes()
    put(snap, "a", "m", {"app": "m"})
    put(snap, "c", "n", {"app": "n"})
    aff = preferred("podAffinity", (100, term(HOST, {"app": "m"})), (29, term(HOST, {"app": "n"})))
    # a 100, c 29, b = d = 0; 100 * (29/100) = 28.999999999999996 in float64 -> 28
    assert scores(InterPodAffinity(), k.pod("p", labels={"app": "p"}, affinity=aff), snap) == (
        [100, 0, 29, 0], [100, 0, 28, 0])


def test_pre_score_skip_and_cancelling_weights():
    snap = four_nodes()
    pl = InterPodAffinity()
    put(snap, "a", "x", {"app": "x"})
    assert scores(pl, k.pod("p", labels={"app": "p"}), snap) == (SKIP, None)  # no terms anywhere
    no_match = preferred("podAffinity", (10, term(ZONE, {"app": "nothing-like-this"})))
    assert scores(pl, k.pod("p", labels={"app": "p"}, affinity=no_match), snap) == (SKIP, None)
    ignoring = InterPodAffinity({"ignorePreferredTermsOfExistingPods": True})
    put(snap, "b", "y", {"app": "y"}, affinity=preferred("podAffinity", (10, term(ZONE, {"app": "p"}))))
    assert scores(ignoring, k.pod("p", labels={"app": "p"}), snap) == (SKIP, None)
    assert scores(pl, k.pod("p", labels={"app": "p"}), snap) == ([10, 10, 0, 0], [100, 100, 0, 0])
    # +10 and -10 for the same zone: the map is not empty, every score is 0
    both = {**preferred("podAffinity", (10, term(ZONE, {"app": "x"}))),
            **preferred("podAntiAffinity", (10, term(ZONE, {"app": "x"})))}
    assert scores(pl, k.pod("q", labels={"app": "q"}, affinity=both), snap) == ([0, 0, 0, 0], [0, 0, 0, 0])


# ------------------------------------------------------------ full cycle
def test_cycle_anti_affinity_leaves_third_replica_pending():
    snap = k.snapshot(k.node("a"), k.node("b"))
    sched = k.scheduler(snap)
    anti = required("podAntiAffinity", term(HOST, {"app": "web"}))
    nodes = []
    for j in range(3):
        p = k.pod(f"web-{j}", cpu_m=100, labels={"app": "web"}, affinity=anti)
        a = sched.schedule_one(p)
        if a.node:
            k.bind(snap, p, a.node)
        nodes.append(a.node)
    assert sorted(nodes[:2]) == ["a", "b"] and nodes[2] is None
    assert a.message.startswith("0/2 nodes are available: 2 node(s) didn't match pod anti-affinity rules.")


def test_cycle_preferred_affinity_picks_the_cache_zone():
    snap = k.snapshot(zoned("a", "z1"), zoned("c", "z2"))
    put(snap, "c", "cache", {"app": "cache"})
    aff = preferred("podAffinity", (100, term(ZONE, {"app": "cache"})))
    a = k.scheduler(snap).schedule_one(k.pod("web", cpu_m=100, labels={"app": "web"}, affinity=aff))
    assert a.node == "c"
    got = a.scores["InterPodAffinity"].normalized
    assert {snap.nodes[int(i)].name: int(s) for i, s in zip(a.feasible, got, strict=True)} == {"a": 0, "c": 100}
