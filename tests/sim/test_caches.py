"""The simulator's caches and shortcuts change how fast it decides, never what.

Each shortcut is checked against the plain computation it replaces: shared pod
memos, cached node-object filter masks, node-local scores kept per score key and
refreshed node by node, the window walk, and the collector pause.
"""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from simkit import ctx, node, pod, snapshot

import gpu_lab
from gpu_lab.bench import node_pools, workload
from gpu_lab.collector import collector_paused
from gpu_lab.model.parse import parse_pod
from gpu_lab.sim import cache as cache_module
from gpu_lab.sim.scheduler import Scheduler, feasible_window


def _placements(lab) -> list[tuple]:
    df = lab.pods()
    return sorted(zip(df["namespace"], df["name"], df["node"].fillna(""), df["message"].fillna("")))


def _run(docs, *, seed=0, record=False, prepare=None):
    lab = gpu_lab.connect("sim", seed=seed, record=record)
    if prepare:
        prepare(lab)
    lab.apply(docs)
    lab.schedule()
    return _placements(lab)


MOST_ALLOCATED_GPU = {
    "apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
    "profiles": [{"pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {
        "type": "MostAllocated", "resources": [{"name": "nvidia.com/gpu", "weight": 5}, {"name": "cpu", "weight": 1}]}}}]}],
}


# ----------------------------------------------------------------- pod memo
def _manifest(name, labels=None, ns="default", cpu="1"):
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns, "labels": labels or {}},
            "spec": {"containers": [{"name": "c", "image": "x", "resources": {"requests": {"cpu": cpu}}}]}}


def test_pods_from_equal_manifests_share_one_memo():
    a = parse_pod(_manifest("a", {"app": "web"}))
    b = parse_pod(_manifest("b", {"app": "web"}))
    assert a.memo is b.memo


@pytest.mark.parametrize("other", [
    _manifest("b", {"app": "db"}),            # labels feed spreading and affinity
    _manifest("b", {"app": "web"}, ns="ml"),   # namespace feeds affinity terms
    _manifest("b", {"app": "web"}, cpu="2"),   # the spec feeds everything else
])
def test_pods_that_differ_in_what_plugins_read_keep_their_own_memo(other):
    a = parse_pod(_manifest("a", {"app": "web"}))
    assert a.memo is not parse_pod(other).memo


# ------------------------------------------------- node-object filter masks
def test_static_filter_masks_follow_node_changes():
    lab = gpu_lab.connect("sim", seed=0, deterministic=True)
    lab.apply([node_doc("a"), node_doc("b")])
    lab.apply([pod_doc("p1", {"tier": "gold"})])
    lab.schedule()
    assert lab.pods().set_index("name").loc["p1", "node"] is None  # nobody is gold yet
    lab.label_node("b", {"tier": "gold"})  # the cached mask must not survive the relabel
    assert lab.pods().set_index("name").loc["p1", "node"] == "b"
    lab.cordon("b")
    # The same selector, with and without a toleration of the cordon: two masks, not one.
    tolerant = pod_doc("p2", {"tier": "gold"})
    tolerant["spec"]["tolerations"] = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]
    lab.apply([tolerant])
    lab.schedule()
    lab.apply([pod_doc("p3", {"tier": "gold"})])
    placed = lab.schedule().set_index("name")["node"]
    assert placed["p2"] == "b" and placed["p3"] is None


def node_doc(name):
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
            "status": {"capacity": {"cpu": "8", "memory": "32Gi", "pods": "110"},
                       "allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}}}


def pod_doc(name, selector):
    m = _manifest(name)
    m["spec"]["nodeSelector"] = selector
    return m


# ------------------------------------------------------ node-local scores
@pytest.mark.parametrize("config", [None, MOST_ALLOCATED_GPU], ids=["default", "most-allocated-gpu"])
def test_kept_scores_place_every_pod_as_scoring_afresh_does(config, monkeypatch):
    docs = ([config] if config else []) + node_pools(60) + workload(700, seed=5)
    afresh = _run(docs, prepare=lambda lab: setattr(lab._sim.cluster.scheduler.cache, "keep_scores", False))
    assert _run(docs) == afresh
    monkeypatch.setattr(cache_module, "SCORE_ONE_BY_ONE", 0)  # numpy refresh only
    assert _run(docs) == afresh
    monkeypatch.setattr(cache_module, "SCORE_ONE_BY_ONE", 10**6)  # node by node only
    assert _run(docs) == afresh


def test_recording_explanations_does_not_change_decisions():
    docs = node_pools(50) + workload(500, seed=3)
    assert _run(docs, record=True) == _run(docs, record=False)


_sizes = st.integers(min_value=0, max_value=4)


@settings(max_examples=60, deadline=None)
@given(cpus=st.lists(st.integers(0, 64), min_size=1, max_size=6),
       mems=st.lists(st.integers(0, 4096), min_size=1, max_size=6),
       used=st.lists(st.tuples(st.integers(0, 80_000), st.integers(0, 5000)), min_size=6, max_size=6),
       req=st.tuples(st.integers(0, 9000), st.integers(0, 9000)),
       gpus=st.lists(_sizes, min_size=6, max_size=6),
       strategy=st.sampled_from(["LeastAllocated", "MostAllocated"]))
def test_one_node_at_a_time_equals_all_at_once(cpus, mems, used, req, gpus, strategy):
    """score_each (kube-scheduler's per-node arithmetic) == score (numpy over many nodes)."""
    k = min(len(cpus), len(mems))
    nodes = [node(f"n{i}", cpu=cpus[i], mem_gi=mems[i], gpus=gpus[i]) for i in range(k)]
    snap = snapshot(*nodes)
    for i, (c, m) in enumerate(used[:k]):  # load that may exceed what the node has
        snap.add_pod(pod(f"u{i}", cpu_m=c, mem_mi=m), i)
    p = pod("p", cpu_m=req[0] or None, mem_mi=req[1] or None, gpus=gpus[0])
    config = {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
              "profiles": [{"pluginConfig": [{"name": "NodeResourcesFit", "args": {"scoringStrategy": {
                  "type": strategy, "resources": [{"name": "cpu", "weight": 2}, {"name": "memory", "weight": 1},
                                                  {"name": "nvidia.com/gpu", "weight": 3}]}}}]}]}
    for cfg in (None, config):
        c = ctx(p, snap, cfg)
        everyone = list(range(k))
        for name in ("NodeResourcesFit", "NodeResourcesBalancedAllocation"):
            pl = c.profile.plugins[name]
            each = pl.score_each(c, everyone)
            if each is not None:
                assert each == pl.score(c, np.arange(k)).tolist()


def test_balanced_allocation_per_node_matches_numpy_for_terabyte_nodes():
    snap = snapshot(node("big", cpu=192, mem_gi=2048), node("small", cpu=4, mem_gi=8))
    snap.add_pod(pod("u", cpu_m=333, mem_mi=700_001), 0)
    p = pod("p", cpu_m=1234, mem_mi=5 * 1024)
    c = ctx(p, snap)
    pl = c.profile.plugins["NodeResourcesBalancedAllocation"]
    assert pl.score_each(c, [0, 1]) == pl.score(c, np.arange(2)).tolist()


# ---------------------------------------------------------- the window
def _walk(passes: np.ndarray, start: int, to_find: int) -> tuple[list[int], int]:
    """The walk itself, node by node: the definition feasible_window must match."""
    n, kept = len(passes), []
    total = int(passes.sum())
    for step in range(n):
        i = (start + step) % n
        if passes[i]:
            kept.append(i)
            if total > to_find and len(kept) == to_find:
                return kept, step + 1
    return kept, n


@settings(max_examples=200, deadline=None)
@given(bits=st.lists(st.booleans(), min_size=1, max_size=60), start=st.integers(0, 59), to_find=st.integers(1, 70))
def test_feasible_window_is_the_round_robin_walk(bits, start, to_find):
    passes = np.array(bits, dtype=bool)
    start %= len(passes)
    got, processed = feasible_window(passes, start, to_find)
    assert (got.tolist(), processed) == _walk(passes, start, to_find)


# ------------------------------------------------------------ collector
def test_a_scheduling_run_leaves_no_reference_cycles():
    lab = gpu_lab.connect("sim", seed=0, record=False)
    lab.apply(node_pools(40) + workload(400, seed=1))
    gc.collect()
    lab.schedule()
    assert gc.collect() == 0  # everything the run dropped went by reference counting


def test_collector_pause_restores_the_previous_state():
    assert gc.isenabled()
    with collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()
    finally:
        gc.enable()



# ------------------------------------------------ scores the same everywhere
def _tainted_pair():
    docs = [node_doc("a"), node_doc("b")]
    docs[0]["spec"] = {"taints": [{"key": "spot", "value": "yes", "effect": "PreferNoSchedule"}]}
    return docs


@pytest.mark.parametrize("record", [False, True])
def test_prefer_no_schedule_still_steers_pods_when_not_recording(record):
    lab = gpu_lab.connect("sim", seed=0, record=record)
    lab.apply(_tainted_pair() + [_manifest(f"p{i}") for i in range(3)])
    assert set(lab.schedule()["node"]) == {"b"}


def test_taint_toleration_is_left_out_only_where_it_gives_every_node_the_same_score():
    plain = snapshot(node("a"), node("b"))
    tainted = snapshot(node("a", taints=[("spot", "yes", "PreferNoSchedule")]), node("b"))
    p = pod("p", cpu_m=100)
    tolerant = pod("q", cpu_m=100, tolerations=[{"key": "spot", "operator": "Exists"}])
    same = [ctx(x, s).profile.plugins["TaintToleration"].same_everywhere(ctx(x, s))
            for x, s in ((p, plain), (p, tainted), (tolerant, tainted))]
    assert same == [True, False, True]


# ----------------------------------------------------- recorded explanations
GOLDEN = sorted(p for p in (Path(__file__).parent.parent / "scenarios").glob("*.yaml")
                if not p.name.endswith(".expected.yaml"))


def test_recorded_verdicts_word_every_node_as_filter_status_does(monkeypatch):
    """explain()'s per-node filter table is built from filter_statuses (many nodes at once);
    it must say, node by node, exactly what filter_status says."""
    record = Scheduler._record_filters
    compared = []

    def record_and_compare(self, ctx, profile, skipped, attempt, plugins=None, masks=None):
        record(self, ctx, profile, skipped, attempt, plugins, masks)
        for pl, m in zip(*self._filter_masks(ctx, profile, skipped)):
            one_by_one = {int(i): pl.filter_status(ctx, int(i)).message() for i in np.flatnonzero(~m)}
            assert attempt.filter_verdicts[pl.name] == one_by_one, pl.name
            compared.append(len(one_by_one))

    monkeypatch.setattr(Scheduler, "_record_filters", record_and_compare)
    for path in GOLDEN:
        lab = gpu_lab.connect("sim", seed=0, record=True)
        lab.apply(path)
        lab.schedule()
    _run(node_pools(30) + workload(300, seed=2), record=True)
    assert sum(compared) > 1000  # it really compared rejected nodes


def test_kept_scores_and_masks_follow_nodes_added_and_plugins_killed_mid_session():
    def session(cache: bool) -> list[tuple]:
        lab = gpu_lab.connect("sim", seed=1, record=False)
        lab._sim.cluster.scheduler.cache.keep_scores = cache
        lab.apply(node_pools(20) + workload(150, seed=7))
        lab.schedule()
        pools = node_pools(40)
        for pool in pools:  # a second batch of nodes in new pools, while pods are bound
            pool["metadata"]["name"] += "-b"
        lab.apply(pools + [dict(p, metadata={**p["metadata"], "name": p["metadata"]["name"] + "-b"})
                           for p in workload(150, seed=8)])
        lab.schedule()
        lab.kill_plugin("h100-b-0")
        lab.apply([dict(p, metadata={**p["metadata"], "name": p["metadata"]["name"] + "-c"})
                   for p in workload(100, seed=9)])
        lab.schedule()
        return _placements(lab)

    assert session(True) == session(False)


def _wide_copy(a):
    """The attempt with its own full-width arrays (compact() changes what it keeps in place)."""
    import copy

    from gpu_lab.sim.scheduler import PluginScores
    from gpu_lab.sim.verdicts import NodeStatuses, NodeVerdicts

    w = copy.copy(a)
    for name in ("evaluated", "feasible", "total"):
        value = getattr(a, name)
        setattr(w, name, None if value is None else value.copy())
    w.scores = {k: PluginScores(ps.raw.copy(), ps.normalized.copy(), ps.weight) for k, ps in a.scores.items()}
    if a.diagnosis is not None:
        w.diagnosis = copy.copy(a.diagnosis)
        w.diagnosis.groups = [(st, idx.copy()) for st, idx in a.diagnosis.groups]
    if isinstance(a.failed_by, NodeStatuses):
        w.failed_by = NodeStatuses(list(w.diagnosis.groups))
    w.filter_verdicts = {k: NodeVerdicts([(st, idx.copy()) for st, idx in v._groups])
                         for k, v in (a.filter_verdicts or {}).items()}
    return w


def test_a_kept_attempt_explains_the_same_in_narrow_arrays():
    # Attempt.compact() narrows what is kept for explain: the tables read back are the same
    # numbers as the full-width arrays' (bench workload: taints, selectors, affinity, GPUs)
    from gpu_lab.sim import scheduler as scheduler_module
    from gpu_lab.sim.explain import build_explanation

    lab = gpu_lab.connect("sim", seed=0)
    lab.apply(node_pools(40) + workload(300))
    kept = []
    real_compact = scheduler_module.Attempt.compact

    def keep_both(self):
        kept.append(_wide_copy(self))
        real = real_compact(self)
        kept[-1] = (kept[-1], real)
        return real

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(scheduler_module.Attempt, "compact", keep_both)
        lab._sim.run_queue()
    assert len(kept) >= 300
    narrowed = 0
    for wide, narrow in kept:
        assert wide.feasible is None or wide.feasible.dtype == np.int64
        a, b = build_explanation(wide, wide.filter_verdicts), build_explanation(narrow, narrow.filter_verdicts)
        assert a.filters.equals(b.filters) and a.scores.equals(b.scores) and a.notes == b.notes, wide.pod.key
        narrowed += any(ps.normalized.dtype == np.int8 for ps in narrow.scores.values())
        assert all(ps.normalized.dtype.itemsize <= 2 for ps in narrow.scores.values())
    assert narrowed > 100
