"""OpportunisticBatching (batch.go): signatures, node hints, the heap's ties, explain's note."""

from __future__ import annotations

import pandas as pd
import simkit as k

from gpu_lab.backends.local import schedulerlog
from gpu_lab.sim import batch
from gpu_lab.sim.batch import ScoredNode, heap_init, heap_remove, sign_pod
from gpu_lab.sim.explain import Explanation, batched_note, build_explanation

API = "kubescheduler.config.k8s.io/v1"


def config(*plugin_config, extenders=None, **profile):
    """A profile without the system-default topology spread (so pods can be signed)."""
    pcs = [{"name": "PodTopologySpread", "args": {"defaultingType": "List"}}, *plugin_config]
    raw = {"apiVersion": API, "kind": "KubeSchedulerConfiguration",
           "profiles": [{"schedulerName": "default-scheduler", "pluginConfig": pcs, **profile}]}
    if extenders is not None:
        raw["extenders"] = extenders
    return raw


PACK = config({"name": "NodeResourcesFit", "args": {"scoringStrategy": {
    "type": "MostAllocated", "resources": [{"name": "nvidia.com/gpu", "weight": 1}]}}})
# Every node scores the same for a pod without GPUs: ties everywhere.
FLAT = config({"name": "NodeResourcesFit", "args": {"scoringStrategy": {
    "type": "MostAllocated", "resources": [{"name": "nvidia.com/gpu", "weight": 1}]}}},
    plugins={"score": {"disabled": [{"name": "NodeResourcesBalancedAllocation"}]}})


def replica(i, gpus=2, **kw):
    kw.setdefault("labels", {"app": "infer"})
    p = k.pod(f"infer-{i}", cpu_m=1000, mem_mi=1024, gpus=gpus, created=i, owner_kind="ReplicaSet", **kw)
    p.raw = {"spec": {"containers": [{"name": "c", "image": "vllm/vllm-openai:v0.6.0"}]}}
    return p


def signature(p, cfg=PACK):
    s = k.scheduler(k.snapshot(k.node("a")), cfg)
    return sign_pod(s, p, s.config.profile_for(p.scheduler_name))


def run(sched, snap, pods, first_cycle=1):
    """Each pod in its own consecutive cycle, bound where it went."""
    out = []
    for n, p in enumerate(pods):
        a = sched.schedule_one(p, cycle=first_cycle + n)
        if a.node is not None:
            k.bind(snap, p, a.node)
        out.append(a)
    return out


# ------------------------------------------------------------------ signatures
def test_the_default_profile_signs_no_pod():
    # defaultingType System: PodTopologySpread has default constraints
    assert signature(replica(0), None) is None


def test_look_alike_replicas_share_a_signature_under_a_list_profile():
    assert signature(replica(0)) is not None
    assert signature(replica(0)) == signature(replica(1))
    assert signature(replica(0)) != signature(replica(1, gpus=1))  # requests
    assert signature(replica(0)) != signature(replica(1, labels={"app": "other"}))  # InterPodAffinity: labels
    other_image = replica(1)
    other_image.raw = {"spec": {"containers": [{"name": "c", "image": "vllm/vllm-openai"}]}}
    assert signature(replica(0)) != signature(other_image)  # ImageLocality: image names


def test_what_makes_a_pod_unsignable():
    spread = replica(0, topology_spread_constraints=[{"maxSkew": 1, "topologyKey": "kubernetes.io/hostname",
                                                      "whenUnsatisfiable": "ScheduleAnyway"}])
    anti = replica(0, affinity={"podAntiAffinity": {}})
    claims = replica(0)
    claims.raw = {"spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]}}
    listed = config({"name": "PodTopologySpread", "args": {"defaultingType": "List", "defaultConstraints": [
        {"maxSkew": 1, "topologyKey": "kubernetes.io/hostname", "whenUnsatisfiable": "ScheduleAnyway"}]}})
    assert [signature(p) for p in (spread, anti, claims)] == [None, None, None]
    assert signature(replica(0), listed) is None  # default constraints of the profile's own
    assert signature(replica(0), config(extenders=[{"urlPrefix": "http://x"}])) is None


def test_args_and_disabled_plugins_drop_fragments():
    ignore = config({"name": "InterPodAffinity", "args": {"ignorePreferredTermsOfExistingPods": True}})
    assert signature(replica(0), ignore) == signature(replica(1, labels={"app": "other"}), ignore)
    no_images = config(plugins={"multiPoint": {"disabled": [{"name": "ImageLocality"}]}})
    other_image = replica(1)
    other_image.raw = {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}
    assert signature(replica(0), no_images) == signature(other_image, no_images)


def test_node_affinity_is_signed_up_to_order():
    def with_values(*values):
        term = {"matchExpressions": [{"key": "gpu", "operator": "In", "values": list(values)}]}
        return replica(0, affinity={"nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [term]}}})
    assert signature(with_values("a100", "h100")) == signature(with_values("h100", "a100"))
    assert signature(with_values("a100")) != signature(with_values("h100"))


# ------------------------------------------------------------------ hints
def test_replicas_after_the_first_go_to_the_hint_unscored():
    snap = k.snapshot(k.node("h100-0", cpu=96, gpus=8), k.node("h100-1", cpu=96, gpus=8))
    s = k.scheduler(snap, PACK)
    first, *rest = run(s, snap, [replica(i) for i in range(4)])
    assert first.batch_hint is None and len(first.feasible) == 2 and first.scores
    for a in rest:
        assert a.batch_hint == a.node == first.node  # rescored, the packed node stays the best
        assert a.scores == {} and a.feasible.tolist() == a.evaluated.tolist() == [snap.index[first.node]]
    assert s.batching.batches[s.config.profile_for("default-scheduler").token].batched_pods == 3


def test_without_a_queue_cycle_or_in_a_later_cycle_there_is_no_hint():
    snap = k.snapshot(k.node("h100-0", cpu=96, gpus=8), k.node("h100-1", cpu=96, gpus=8))
    s = k.scheduler(snap, PACK)
    run(s, snap, [replica(0)], first_cycle=1)
    assert s.schedule_one(replica(1)).batch_hint is None  # a what-if outside the queue
    assert run(s, snap, [replica(2)], first_cycle=3)[0].batch_hint is None  # cycle 2 was another pod's


def test_a_pod_with_another_signature_in_between_flushes_the_state():
    snap = k.snapshot(k.node("h100-0", cpu=96, gpus=8), k.node("h100-1", cpu=96, gpus=8))
    s = k.scheduler(snap, PACK)
    a = run(s, snap, [replica(0), replica(1, gpus=1), replica(2)])
    assert [x.batch_hint for x in a] == [None, None, None]
    assert all(x.scores for x in a)


def test_a_nominated_pod_gets_no_hint():
    snap = k.snapshot(k.node("h100-0", cpu=96, gpus=8), k.node("h100-1", cpu=96, gpus=8))
    s = k.scheduler(snap, PACK)
    first = run(s, snap, [replica(0)])[0]
    other = "h100-1" if first.node == "h100-0" else "h100-0"
    p = replica(1)
    s.nominate(p, snap.index[other])
    a = s.schedule_one(p, cycle=2)
    assert a.batch_hint is None and a.via_nominated_node and a.node == other


def test_when_the_last_node_is_full_the_hint_is_the_next_kept_node():
    # one replica fills a node: the next ones take the previous ranking's next nodes, unscored
    snap = k.snapshot(*(k.node(f"n{i}", cpu=96, gpus=8) for i in range(3)))
    s = k.scheduler(snap, PACK)
    a = run(s, snap, [replica(i, gpus=8) for i in range(3)])
    assert a[0].scores and [x.batch_hint for x in a[1:]] == [x.node for x in a[1:]]
    assert sorted(x.node for x in a) == ["n0", "n1", "n2"]


def test_a_hint_that_no_longer_fits_means_a_full_cycle():
    snap = k.snapshot(*(k.node(f"n{i}", cpu=96, gpus=8) for i in range(3)))
    s = k.scheduler(snap, PACK)
    run(s, snap, [replica(0, gpus=8)])
    state = s.batching.batches[s.config.profile_for("default-scheduler").token].state
    head, spare = state.nodes[0].name, state.nodes[1].name
    k.bind(snap, k.pod("other", gpus=4), head)  # something else takes half of the kept head
    a = s.schedule_one(replica(1, gpus=8), cycle=2)
    # the hint (the head) fails Filter: every node is filtered, and only the spare one fits
    assert a.batch_hint is None and a.node == spare and a.evaluated.tolist() != [snap.index[head]]
    assert s.batching.batches[s.config.profile_for("default-scheduler").token].state is None  # one fit: no list


def test_a_failed_cycle_in_between_leaves_the_state_unused():
    snap = k.snapshot(*(k.node(f"n{i}", cpu=96, gpus=8) for i in range(3)))
    s = k.scheduler(snap, PACK)
    run(s, snap, [replica(0, gpus=4)])
    assert s.schedule_one(replica(1, gpus=16), cycle=2).node is None  # fits nowhere
    b = s.schedule_one(replica(2, gpus=4), cycle=3)
    assert b.batch_hint is None and b.scores


def test_equal_totals_go_the_way_the_heap_sends_them():
    # two nodes that always tie: the last chosen node, put back after the kept one, loses the
    # tie, so look-alike pods alternate (the sim's own tie-break would pick at random)
    snap = k.snapshot(k.node("a", cpu=96), k.node("b", cpu=96))
    s = k.scheduler(snap, FLAT)
    a = run(s, snap, [replica(i, gpus=0) for i in range(4)])
    assert [x.node for x in a] == ["a", "b", "a", "b"]
    assert [x.batch_hint for x in a] == [None, "b", "a", "b"]


def test_a_new_pass_starts_without_state():
    snap = k.snapshot(k.node("h100-0", cpu=96, gpus=8), k.node("h100-1", cpu=96, gpus=8))
    s = k.scheduler(snap, PACK)
    run(s, snap, [replica(0)])
    s.batching.expire()
    assert run(s, snap, [replica(1)], first_cycle=2)[0].batch_hint is None


def test_go_heap_semantics():
    def nodes(*totals):
        return [ScoredNode(f"n{i}", {}, t) for i, t in enumerate(totals)]
    assert heap_remove(heap_init(nodes(5, 5)), 0).name == "n0"  # a tie never swaps
    assert heap_remove(heap_init(nodes(1, 1, 9, 9)), 0).name == "n3"  # the leaf climbs past n1
    h = heap_init(nodes(3, 7, 5, 9))
    assert [heap_remove(h, 0).total for _ in range(4)] == [9, 7, 5, 3]


def test_the_gate_off_means_no_batching(monkeypatch):
    monkeypatch.setattr(batch, "ENABLED", False)
    snap = k.snapshot(k.node("h100-0", cpu=96, gpus=8), k.node("h100-1", cpu=96, gpus=8))
    a = run(k.scheduler(snap, PACK), snap, [replica(i) for i in range(3)])
    assert [x.batch_hint for x in a] == [None, None, None] and all(x.scores for x in a)


# ------------------------------------------------------------------ explain
def test_explain_says_what_the_real_schedulers_explain_says():
    snap = k.snapshot(k.node("h100-0", cpu=96, gpus=8), k.node("h100-1", cpu=96, gpus=8))
    s = k.scheduler(snap, PACK)
    a = run(s, snap, [replica(0), replica(1)])[1]
    sim = build_explanation(a, a.filter_verdicts)
    assert batched_note(a.node) in sim.notes
    assert not any(n.startswith(("only one feasible", "percentageOfNodesToScore")) for n in sim.notes)
    assert sim.scores.empty
    other = next(n for n in snap.names if n != a.node)
    assert sim.filters.loc[a.node, "result"] == "feasible"
    assert sim.filters.loc[other, "result"] == "not evaluated"
    # the local backend's reading of batch.go's hint line and the bind line of the same pod
    logged = schedulerlog.Attempt("default/infer-1", node=a.node, evaluated=1, feasible=1, hint=a.node)
    account = Explanation("default/infer-1", a.node, "", "default-scheduler", pd.DataFrame(), pd.DataFrame())
    real = schedulerlog.explained(account, logged, {}, snap.names)
    assert batched_note(a.node) in real.notes and real.scores.empty
    assert dict(real.filters["result"]) == dict(sim.filters["result"])
