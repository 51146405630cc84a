"""PodTopologySpread on worked examples; every expected number is derived from the Go code.

Filter (filtering.go): skew = matchNum(domain) + selfMatch - globalMin, rejected when > maxSkew.
Score (scoring.go): per constraint cnt * ln(#domains + 2) + (maxSkew - 1), math.Round'ed,
then NormalizeScore 100 * (max + min - s) / max (int64 division).
"""

import math

import numpy as np
import pytest
import simkit as k

from gpu_lab.errors import GpuLabError
from gpu_lab.sim.framework import SKIP, UNRESOLVABLE, UNSCHEDULABLE, CycleContext
from gpu_lab.sim.plugins.podtopologyspread import (
    ERR_REASON_CONSTRAINTS_NOT_MATCH,
    ERR_REASON_NODE_LABEL_NOT_MATCH,
    PodTopologySpread,
    go_round,
)

ZONE = "topology.kubernetes.io/zone"
HOST = "kubernetes.io/hostname"
WEB = {"app": "web"}


def zoned(name, zone=None, **kw):
    labels = dict(kw.pop("labels", {}))
    if zone is not None:
        labels[ZONE] = zone
    return k.node(name, labels=labels, **kw)


def spread(key=ZONE, skew=1, when="DoNotSchedule", selector=None, **extra):
    c = {"maxSkew": skew, "topologyKey": key, "whenUnsatisfiable": when,
         "labelSelector": {"matchLabels": dict(WEB if selector is None else selector)}}
    c.update(extra)
    return c


def cctx(p, snap, nominated=None):
    return CycleContext(pod=p, snapshot=snap, profile=None, nominated=nominated or {})


def bind_n(snap, node_name, n, labels=WEB, ns="default", prefix=None, **kw):
    for j in range(n):
        snap.add_pod(k.pod(f"{prefix or node_name}-{j}", labels=labels, ns=ns, **kw), snap.index[node_name])


def mask_by_name(pl, c):
    m = pl.filter(c)
    return {n: bool(m[i]) for n, i in c.snapshot.index.items()}


# ---------------------------------------------------------------- filter
def test_skew_and_missing_label():
    snap = k.snapshot(zoned("a", "z1"), zoned("b", "z1"), zoned("c", "z2"), zoned("d"))
    bind_n(snap, "a", 2)
    bind_n(snap, "c", 1)
    pl = PodTopologySpread()
    c = cctx(k.pod("new", labels=WEB, topology_spread_constraints=[spread()]), snap)
    assert pl.pre_filter(c) is None
    # z1 = 2, z2 = 1 (d has no zone: not a domain); min = 1; selfMatch = 1
    # a, b: 2 + 1 - 1 = 2 > 1 -> rejected; c: 1 + 1 - 1 = 1 <= 1 -> fits
    assert mask_by_name(pl, c) == {"a": False, "b": False, "c": True, "d": False}
    st = pl.filter_status(c, snap.index["a"])
    assert st.code == UNSCHEDULABLE and st.reasons == ("node(s) didn't match pod topology spread constraints",)
    st = pl.filter_status(c, snap.index["d"])
    assert st.code == UNRESOLVABLE
    assert st.reasons == ("node(s) didn't match pod topology spread constraints (missing required label)",)
    assert ERR_REASON_NODE_LABEL_NOT_MATCH == ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"


def test_min_domains_treats_global_minimum_as_zero():
    snap = k.snapshot(zoned("a", "z1"), zoned("b", "z1"), zoned("c", "z2"), zoned("d"))
    bind_n(snap, "a", 2)
    bind_n(snap, "c", 1)
    pl = PodTopologySpread()
    # 2 domains < minDomains 3 -> global minimum 0; c: 1 + 1 - 0 = 2 > 1
    c = cctx(k.pod("new", labels=WEB, topology_spread_constraints=[spread(minDomains=3)]), snap)
    pl.pre_filter(c)
    assert not pl.filter(c).any()
    # maxSkew 2: c: 2 <= 2 fits, a: 2 + 1 - 0 = 3 > 2
    c = cctx(k.pod("new", labels=WEB, topology_spread_constraints=[spread(skew=2, minDomains=3)]), snap)
    pl.pre_filter(c)
    assert mask_by_name(pl, c) == {"a": False, "b": False, "c": True, "d": False}


def test_node_affinity_policy_honor_and_ignore():
    snap = k.snapshot(zoned("a", "z1", labels={"disk": "ssd"}), zoned("b", "z2", labels={"disk": "hdd"}),
                      zoned("c", "z2", labels={"disk": "ssd"}))
    bind_n(snap, "a", 1)
    bind_n(snap, "b", 3)
    bind_n(snap, "c", 1)
    pl = PodTopologySpread()
    # Honor (default): b fails the pod's nodeSelector, its 3 pods don't count: z1 = 1, z2 = 1, min 1;
    # c: 1 + 1 - 1 = 1 fits
    honor = k.pod("new", labels=WEB, node_selector={"disk": "ssd"}, topology_spread_constraints=[spread()])
    c = cctx(honor, snap)
    pl.pre_filter(c)
    assert mask_by_name(pl, c)["c"] is True
    # Ignore: z2 = 4, min 1; c: 4 + 1 - 1 = 4 > 1
    ignore = k.pod("new", labels=WEB, node_selector={"disk": "ssd"},
                   topology_spread_constraints=[spread(nodeAffinityPolicy="Ignore")])
    c = cctx(ignore, snap)
    pl.pre_filter(c)
    assert mask_by_name(pl, c) == {"a": True, "b": False, "c": False}


def test_node_taints_policy_honor_drops_tainted_empty_domain():
    snap = k.snapshot(zoned("a", "z1"), zoned("b", "z2", taints=[("gpu", "yes", "NoSchedule")]))
    bind_n(snap, "a", 2)
    pl = PodTopologySpread()
    # Ignore (default): z1 = 2, z2 = 0, min 0; a: 2 + 1 - 0 = 3 > 1
    c = cctx(k.pod("new", labels=WEB, topology_spread_constraints=[spread()]), snap)
    pl.pre_filter(c)
    assert mask_by_name(pl, c) == {"a": False, "b": True}
    # Honor: b's untolerated taint removes z2; min = 2; a: 2 + 1 - 2 = 1 fits
    c = cctx(k.pod("new", labels=WEB, topology_spread_constraints=[spread(nodeTaintsPolicy="Honor")]), snap)
    pl.pre_filter(c)
    assert mask_by_name(pl, c)["a"] is True
    # ... unless the pod tolerates the taint
    tol = [{"key": "gpu", "operator": "Exists"}]
    c = cctx(k.pod("new", labels=WEB, tolerations=tol,
                   topology_spread_constraints=[spread(nodeTaintsPolicy="Honor")]), snap)
    pl.pre_filter(c)
    assert mask_by_name(pl, c)["a"] is False


def test_match_label_keys_spreads_each_revision_separately():
    snap = k.snapshot(zoned("a", "z1"), zoned("c", "z2"))
    bind_n(snap, "a", 3, labels={"app": "web", "pod-template-hash": "old"})
    bind_n(snap, "c", 1, labels={"app": "web", "pod-template-hash": "new"}, prefix="c-new")
    pl = PodTopologySpread()
    labels = {"app": "web", "pod-template-hash": "new"}
    # selector app=web,pod-template-hash=new: z1 = 0, z2 = 1, min 0; a: 0+1-0 = 1 fits; c: 1+1-0 = 2
    c = cctx(k.pod("new", labels=labels,
                   topology_spread_constraints=[spread(matchLabelKeys=["pod-template-hash"])]), snap)
    pl.pre_filter(c)
    assert mask_by_name(pl, c) == {"a": True, "c": False}
    # without matchLabelKeys: z1 = 3, z2 = 1, min 1; a: 3+1-1 = 3 > 1; c: 1+1-1 = 1 fits
    c = cctx(k.pod("new", labels=labels, topology_spread_constraints=[spread()]), snap)
    pl.pre_filter(c)
    assert mask_by_name(pl, c) == {"a": False, "c": True}


def test_other_namespaces_and_empty_selector_count_nothing():
    snap = k.snapshot(zoned("a", "z1"), zoned("c", "z2"))
    bind_n(snap, "a", 5, ns="other")
    pl = PodTopologySpread()
    c = cctx(k.pod("new", labels=WEB, topology_spread_constraints=[spread()]), snap)
    pl.pre_filter(c)
    assert pl.filter(c).all()  # pods in "other" don't count: 0 + 1 - 0 everywhere
    bind_n(snap, "a", 5)
    # labelSelector {}: countPodsMatchSelector returns 0 for an empty selector, selfMatch is 1
    c = cctx(k.pod("new", labels=WEB, topology_spread_constraints=[spread(selector={})]), snap)
    pl.pre_filter(c)
    assert pl.filter(c).all()


def test_nominated_pod_counts_in_the_first_pass():
    snap = k.snapshot(zoned("a", "z1"), zoned("c", "z2"))
    bind_n(snap, "a", 1)
    bind_n(snap, "c", 1)
    pl = PodTopologySpread()
    p = k.pod("new", labels=WEB, topology_spread_constraints=[spread()])
    c = cctx(p, snap)
    pl.pre_filter(c)
    assert pl.filter(c).all()  # z1 = z2 = 1: 1 + 1 - 1 = 1
    # a pod nominated to c adds 1 to z2 for that node's check: 2 + 1 - 1 = 2 > 1
    nominated = {snap.index["c"]: [k.pod("nom", labels=WEB, priority=10)]}
    c = cctx(p, snap, nominated)
    pl.pre_filter(c)
    assert mask_by_name(pl, c) == {"a": True, "c": False}
    assert pl.filter_status(c, snap.index["c"]).reasons == (ERR_REASON_CONSTRAINTS_NOT_MATCH,)


def test_pre_filter_skips_without_hard_constraints():
    snap = k.snapshot(zoned("a", "z1"))
    pl = PodTopologySpread()
    rs_pod = k.pod("rs-1", labels=WEB, owner_kind="ReplicaSet", owner_name="web-123")
    # the system defaults are ScheduleAnyway only
    assert pl.pre_filter(cctx(rs_pod, snap)).code == SKIP
    soft = k.pod("soft", labels=WEB, topology_spread_constraints=[spread(when="ScheduleAnyway")])
    assert pl.pre_filter(cctx(soft, snap)).code == SKIP


def test_list_defaulting_applies_hard_default_constraints_to_replicaset_pods():
    args = {"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]}
    pl = PodTopologySpread(args)
    snap = k.snapshot(zoned("a", "z1"), zoned("c", "z2"))
    bind_n(snap, "a", 2, owner_kind="ReplicaSet")
    rs_pod = k.pod("rs-new", labels=WEB, owner_kind="ReplicaSet", owner_name="web-123")
    c = cctx(rs_pod, snap)
    assert pl.pre_filter(c) is None
    # default selector = the ReplicaSet's (= the pod's labels): z1 = 2, z2 = 0; a: 2 + 1 - 0 = 3 > 1
    assert mask_by_name(pl, c) == {"a": False, "c": True}
    job_pod = k.pod("job-0", labels=WEB, owner_kind="Job", owner_name="train")
    assert pl.pre_filter(cctx(job_pod, snap)).code == SKIP  # Jobs aren't in DefaultSelector's list


@pytest.mark.parametrize("args,message", [
    ({"defaultingType": "System", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]},
     'PodTopologySpreadArgs: defaultingType: Invalid value: "System": when .defaultConstraints are not empty'),
    ({"defaultingType": "Sometimes"},
     'PodTopologySpreadArgs: defaultingType: Unsupported value: "Sometimes": supported values: "System", "List"'),
    ({"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 0, "topologyKey": ZONE, "whenUnsatisfiable": "DoNotSchedule"}]},
     "PodTopologySpreadArgs: defaultConstraints[0].maxSkew: Invalid value: 0: not in valid range (0, inf)"),
])
def test_args_validation(args, message):
    with pytest.raises(GpuLabError) as err:
        PodTopologySpread(args)
    assert str(err.value) == message


# ----------------------------------------------------------------- score
def test_score_zone_and_hostname_constraints():
    snap = k.snapshot(zoned("a", "z1"), zoned("b", "z1"), zoned("c", "z2"), zoned("d"))
    bind_n(snap, "a", 2)
    bind_n(snap, "b", 1)
    pl = PodTopologySpread()
    p = k.pod("new", labels=WEB, topology_spread_constraints=[
        spread(ZONE, 1, "ScheduleAnyway"), spread(HOST, 2, "ScheduleAnyway")])
    c = cctx(p, snap)
    feasible = np.array([snap.index[n] for n in "abcd"])
    assert pl.pre_score(c, feasible) is None
    raw = pl.score(c, feasible)
    # d lacks the zone key -> ignored (score 0, normalized 0).
    # zone weight ln(2 domains + 2) = ln 4; hostname weight ln(4 feasible - 1 ignored + 2) = ln 5
    # zone counts z1 = 3, z2 = 0
    # a: 3 ln4 + 0  +  2 ln5 + 1 = 8.3778 -> 8
    # b: 3 ln4 + 0  +  1 ln5 + 1 = 6.7683 -> 7
    # c: 0 + 0      +  0 + 1     = 1
    assert math.isclose(3 * math.log(4) + 2 * math.log(5) + 1, 8.377758908227872)
    assert raw.tolist() == [8, 7, 1, 0]
    # min 1, max 8: a 100*(9-8)/8 = 12, b 100*(9-7)/8 = 25, c 100*(9-1)/8 = 100, d 0
    assert pl.normalize_score(c, raw).tolist() == [12, 25, 100, 0]


def test_system_default_spreading_for_replicaset_pods():
    snap = k.snapshot(zoned("a", "z1"), zoned("b", "z1"), zoned("c", "z2"), zoned("d"))
    for name, n in (("a", 1), ("c", 2), ("d", 1)):
        bind_n(snap, name, n, owner_kind="ReplicaSet", owner_name="web-123")
    pl = PodTopologySpread()
    p = k.pod("web-new", labels=WEB, owner_kind="ReplicaSet", owner_name="web-123")
    c = cctx(p, snap)
    feasible = np.array([snap.index[n] for n in "abcd"])
    assert pl.pre_score(c, feasible) is None
    # hostname maxSkew 3: weight ln(4 + 2) = ln 6, +2 each; zone maxSkew 5: +4 each.
    # System defaulting: nodes without a zone are not ignored; d sits in domain "" (3 domains: ln 5)
    # and gets no zone term. zone counts: z1 = 1, z2 = 2.
    # a: (1 ln6 + 2) + (1 ln5 + 4) = 9.401 -> 9
    # b: (0 + 2)     + (1 ln5 + 4) = 7.609 -> 8
    # c: (2 ln6 + 2) + (2 ln5 + 4) = 12.802 -> 13
    # d: (1 ln6 + 2)               = 3.792 -> 4
    raw = pl.score(c, feasible)
    assert raw.tolist() == [9, 8, 13, 4]
    # min 4, max 13: 100*(17-9)/13 = 61, 900/13 = 69, 400/13 = 30, 1300/13 = 100
    assert pl.normalize_score(c, raw).tolist() == [61, 69, 30, 100]


def test_pre_score_skips():
    snap = k.snapshot(zoned("a", "z1"), zoned("b", "z2"))
    pl = PodTopologySpread()
    feasible = np.arange(2)
    for p in (
        k.pod("bare", labels=WEB),  # no owner: no default selector
        k.pod("job-0", labels=WEB, owner_kind="Job", owner_name="train"),  # Job: not in the list
        k.pod("rs-nolabels", owner_kind="ReplicaSet", owner_name="x"),  # empty selector
        # own DoNotSchedule constraints only: defaults are not applied
        k.pod("hard", labels=WEB, owner_kind="ReplicaSet", owner_name="x", topology_spread_constraints=[spread()]),
    ):
        assert pl.pre_score(cctx(p, snap), feasible).code == SKIP, p.name
    assert PodTopologySpread({"defaultingType": "List"}).pre_score(
        cctx(k.pod("rs", labels=WEB, owner_kind="ReplicaSet"), snap), feasible).code == SKIP


def test_all_equal_scores_normalize_to_max():
    snap = k.snapshot(zoned("a", "z1"), zoned("b", "z2"))
    pl = PodTopologySpread()
    p = k.pod("new", labels=WEB, topology_spread_constraints=[spread(when="ScheduleAnyway")])
    c = cctx(p, snap)
    pl.pre_score(c, np.arange(2))
    raw = pl.score(c, np.arange(2))
    assert raw.tolist() == [0, 0]  # 0 * ln4 + (1 - 1)
    assert pl.normalize_score(c, raw).tolist() == [100, 100]  # maxScore == 0


def test_go_round_is_half_away_from_zero():
    assert go_round(np.array([0.5, 1.5, 2.5, 2.4999, 6.5])).tolist() == [1, 2, 3, 2, 7]


# ------------------------------------------------------------ full cycle
def test_cycle_spreads_replicas_across_zones():
    snap = k.snapshot(zoned("a1", "z1"), zoned("a2", "z1"), zoned("b1", "z2"), zoned("b2", "z2"))
    sched = k.scheduler(snap)
    placed = []
    for j in range(4):
        p = k.pod(f"web-{j}", cpu_m=100, labels=WEB, topology_spread_constraints=[spread()])
        a = sched.schedule_one(p)
        assert a.node is not None, a.message
        k.bind(snap, p, a.node)
        placed.append(snap.nodes[snap.index[a.node]].labels[ZONE])
    assert sorted(placed) == ["z1", "z1", "z2", "z2"]


def test_cycle_reports_spread_reason():
    snap = k.snapshot(zoned("a", "z1"), zoned("b", "z2"), zoned("c"))
    bind_n(snap, "a", 1)
    # the pod may only go to z1 (nodeSelector), but z2 still counts (nodeAffinityPolicy: Ignore):
    # a: 1 + 1 - 0 = 2 > 1
    p = k.pod("new", labels=WEB, node_selector={ZONE: "z1"},
              topology_spread_constraints=[spread(nodeAffinityPolicy="Ignore")])
    a = k.scheduler(snap).schedule_one(p)
    assert a.node is None
    assert a.message.startswith(
        "0/3 nodes are available: 1 node(s) didn't match pod topology spread constraints, "
        "2 node(s) didn't match Pod's node affinity/selector."
    )
