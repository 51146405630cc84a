"""NodeName, NodeUnschedulable, TaintToleration and NodeAffinity on worked examples."""

import numpy as np
import simkit as k

from gpu_lab.sim.framework import SKIP, UNRESOLVABLE
from gpu_lab.sim.plugins.nodeaffinity import NodeAffinity
from gpu_lab.sim.plugins.nodename import NodeName
from gpu_lab.sim.plugins.nodeunschedulable import NodeUnschedulable
from gpu_lab.sim.plugins.tainttoleration import TaintToleration

GPU_TAINT = ("nvidia.com/gpu", "present", "NoSchedule")
GPU_TOL = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def test_node_name_only_matches_its_node():
    snap = k.snapshot(k.node("a"), k.node("b"))
    c = k.ctx(k.pod("p", node_name="b"), snap)
    assert NodeName().filter(c).tolist() == [False, True]
    assert NodeName().filter_status(c, 0).reasons == ("node(s) didn't match the requested node name",)


def test_cordoned_node_rejects_unless_tolerated():
    snap = k.snapshot(k.node("a", unschedulable=True), k.node("b"))
    assert NodeUnschedulable().filter(k.ctx(k.pod("p"), snap)).tolist() == [False, True]
    tol = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
    assert NodeUnschedulable().filter(k.ctx(k.pod("q", tolerations=[tol]), snap)).tolist() == [True, True]


def test_gpu_taint_keeps_plain_pods_off():
    snap = k.snapshot(k.node("gpu", gpus=8, taints=[GPU_TAINT]), k.node("cpu"))
    tt = TaintToleration()
    plain = k.ctx(k.pod("web"), snap)
    assert tt.filter(plain).tolist() == [False, True]
    st = tt.filter_status(plain, 0)
    assert st.reasons == ("node(s) had untolerated taint(s)",) and st.code == UNRESOLVABLE
    assert tt.filter(k.ctx(k.pod("train", tolerations=[GPU_TOL]), snap)).tolist() == [True, True]


def test_prefer_no_schedule_counts_and_reverse_normalizes():
    soft = ("spot", "true", "PreferNoSchedule")
    snap = k.snapshot(k.node("a", taints=[soft, ("x", "1", "PreferNoSchedule")]), k.node("b", taints=[soft]),
                      k.node("c"))
    tt = TaintToleration()
    c = k.ctx(k.pod("p"), snap)
    raw = tt.score(c, np.arange(3))
    assert raw.tolist() == [2, 1, 0]
    # reverse: 100 - s*100/max
    assert tt.normalize_score(c, raw).tolist() == [0, 50, 100]


def test_node_selector_and_required_affinity():
    snap = k.snapshot(k.node("h", labels={"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}),
                      k.node("l", labels={"nvidia.com/gpu.product": "NVIDIA-L4"}), k.node("c"))
    na = NodeAffinity()
    sel = k.ctx(k.pod("p", node_selector={"nvidia.com/gpu.product": "NVIDIA-L4"}), snap)
    assert na.filter(sel).tolist() == [False, True, False]
    assert na.filter_status(sel, 0).reasons == ("node(s) didn't match Pod's node affinity/selector",)
    aff = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "Exists"}]}]}}}
    assert na.filter(k.ctx(k.pod("q", affinity=aff), snap)).tolist() == [True, True, False]


def test_no_affinity_skips_prefilter_and_prescore():
    snap = k.snapshot(k.node("a"))
    c = k.ctx(k.pod("p"), snap)
    assert NodeAffinity().pre_filter(c).code == SKIP
    assert NodeAffinity().pre_score(c, np.array([0])).code == SKIP


def test_preferred_affinity_sums_weights_then_normalizes():
    snap = k.snapshot(k.node("a", labels={"tier": "gold", "zone": "1"}), k.node("b", labels={"tier": "gold"}),
                      k.node("c"))
    aff = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [
        {"weight": 30, "preference": {"matchExpressions": [{"key": "tier", "operator": "In", "values": ["gold"]}]}},
        {"weight": 10, "preference": {"matchExpressions": [{"key": "zone", "operator": "Exists"}]}}]}}
    na = NodeAffinity()
    c = k.ctx(k.pod("p", affinity=aff), snap)
    raw = na.score(c, np.arange(3))
    assert raw.tolist() == [40, 30, 0]
    assert na.normalize_score(c, raw).tolist() == [100, 75, 0]


def test_conflicting_name_pins_are_rejected_at_prefilter():
    aff = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["a"]},
                         {"key": "metadata.name", "operator": "In", "values": ["b"]}]}]}}}
    snap = k.snapshot(k.node("a"), k.node("b"))
    st = NodeAffinity().pre_filter(k.ctx(k.pod("p", affinity=aff), snap))
    assert st.code == UNRESOLVABLE and st.reasons == ("pod affinity terms conflict",)
