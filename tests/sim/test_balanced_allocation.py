"""NodeResourcesBalancedAllocation, worked by hand from balanced_allocation.go."""

import numpy as np
import simkit as k

from gpu_lab.sim.framework import SKIP
from gpu_lab.sim.plugins.noderesources.balanced_allocation import BalancedAllocation


def test_balance_unchanged_scores_75():
    # before: 2/8 cpu, 8/32 mem -> std 0; after: 3/8, 12/32 -> std 0; 50 + (50+100-100)/2 = 75
    snap = k.snapshot(k.node("a", cpu=8, mem_gi=32))
    k.bind(snap, k.pod("x", cpu_m=2000, mem_mi=8 * 1024), "a")
    c = k.ctx(k.pod("p", cpu_m=1000, mem_mi=4 * 1024), snap)
    assert BalancedAllocation().score(c, np.array([0])).tolist() == [75]


def test_unbalancing_pod_scores_lower():
    # before 0.25/0.25 (100); after cpu 6/8=0.75, mem 0.25 -> std 0.25 -> 75
    # 50 + (50 + 75 - 100) / 2 = 62
    snap = k.snapshot(k.node("a", cpu=8, mem_gi=32))
    k.bind(snap, k.pod("x", cpu_m=2000, mem_mi=8 * 1024), "a")
    c = k.ctx(k.pod("p", cpu_m=4000), snap)
    assert BalancedAllocation().score(c, np.array([0])).tolist() == [62]


def test_best_effort_pod_is_skipped():
    snap = k.snapshot(k.node("a"))
    c = k.ctx(k.pod("be"), snap)
    st = BalancedAllocation().pre_score(c, np.array([0]))
    assert st is not None and st.code == SKIP
