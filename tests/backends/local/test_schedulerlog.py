"""Reading the real kube-scheduler's scores from its log (lines as v1.37.2 writes them with
``--vmodule=schedule_one=10``), and turning them into explain's tables."""

from __future__ import annotations

import pandas as pd

from gpu_lab.backends.account import ONLY_THE_SIM_HAS_TABLES
from gpu_lab.backends.local import schedulerlog
from gpu_lab.sim.explain import Explanation

POD = "default/infer-586f6ccc66-nvqd6"
LOG = f'''\
I1201 12:10:39.901000   31713 leaderelection.go:257] "some other file" pod="{POD}"
I1201 12:10:40.010000   31713 schedule_one.go:101] "About to try and schedule pod" pod="{POD}"
I1201 12:10:40.010100   31713 schedule_one.go:1194] "Unable to schedule pod; no fit; waiting" pod="{POD}" err="0/2 nodes are available: 2 Insufficient nvidia.com/gpu. preemption: 0/2 nodes are available: 2 No preemption victims found for incoming pod."
I1201 12:10:40.078054   31713 schedule_one.go:101] "About to try and schedule pod" pod="{POD}"
I1201 12:10:40.079808   31713 schedule_one.go:984] "Plugin scored node for pod" pod="{POD}" plugin="TaintToleration" node="h100-0" score=300
I1201 12:10:40.079831   31713 schedule_one.go:984] "Plugin scored node for pod" pod="{POD}" plugin="NodeResourcesFit" node="h100-0" score=17
I1201 12:10:40.079839   31713 schedule_one.go:984] "Plugin scored node for pod" pod="{POD}" plugin="PodTopologySpread" node="h100-0" score=200
I1201 12:10:40.079841   31713 schedule_one.go:984] "Plugin scored node for pod" pod="{POD}" plugin="ImageLocality" node="h100-0" score=0
I1201 12:10:40.079850   31713 schedule_one.go:984] "Plugin scored node for pod" pod="{POD}" plugin="TaintToleration" node="h100-1" score=300
I1201 12:10:40.079852   31713 schedule_one.go:984] "Plugin scored node for pod" pod="{POD}" plugin="NodeResourcesFit" node="h100-1" score=35
I1201 12:10:40.079866   31713 schedule_one.go:984] "Plugin scored node for pod" pod="{POD}" plugin="PodTopologySpread" node="h100-1" score=132
I1201 12:10:40.079869   31713 schedule_one.go:984] "Plugin scored node for pod" pod="{POD}" plugin="ImageLocality" node="h100-1" score=0
I1201 12:10:40.079900   31713 schedule_one.go:101] "About to try and schedule pod" pod="default/other"
I1201 12:10:40.079936   31713 schedule_one.go:1052] "Calculated node's final score for pod" pod="{POD}" node="h100-0" score=517
I1201 12:10:40.079940   31713 schedule_one.go:1052] "Calculated node's final score for pod" pod="{POD}" node="h100-1" score=467
I1201 12:10:40.081000   31713 schedule_one.go:483] "Successfully bound pod to node" pod="{POD}" node="h100-0" evaluatedNodes=3 feasibleNodes=2
'''
WEIGHTS = {"TaintToleration": 3, "NodeResourcesFit": 1, "PodTopologySpread": 2, "ImageLocality": 1}


def test_a_line_is_read_with_go_quoting():
    msg, kv = schedulerlog.parse_line(
        'I1201 12:10:40.010100   31713 schedule_one.go:1194] "Unable to schedule pod; no fit; waiting" '
        'pod="ns/p" err="0/1 nodes: \\"x\\" y" n=3')
    assert msg == schedulerlog.NO_FIT
    assert kv == {"pod": "ns/p", "err": '0/1 nodes: "x" y', "n": "3"}
    assert schedulerlog.parse_line('I1201 12:10:40.0 1 framework.go:514] "x" pod="a/b"') is None


def test_the_latest_attempt_is_the_pods_account():
    attempts = schedulerlog.attempts(LOG.splitlines(keepends=True))
    a = attempts[POD]
    assert a.error is None  # the earlier, failed attempt is not mixed in
    assert a.node == "h100-0" and (a.evaluated, a.feasible) == (3, 2)
    assert a.scores["h100-1"] == {"TaintToleration": 300, "NodeResourcesFit": 35,
                                  "PodTopologySpread": 132, "ImageLocality": 0}
    assert a.totals == {"h100-0": 517, "h100-1": 467}
    assert attempts["default/other"].scores == {}


def test_read_takes_the_rotated_part_first(tmp_path):
    log = tmp_path / "kube-scheduler.log"
    lines = LOG.splitlines(keepends=True)
    (tmp_path / "kube-scheduler.log.1").write_text("".join(lines[:5]))
    log.write_text("".join(lines[5:]))
    assert schedulerlog.read(log)[POD].totals == {"h100-0": 517, "h100-1": 467}
    assert schedulerlog.read(tmp_path / "missing.log") == {}


def test_weights_come_from_the_completed_profile():
    profile = {"schedulerName": "packer", "plugins": {
        "multiPoint": {"enabled": [{"name": "TaintToleration", "weight": 3},
                                   {"name": "VolumeBinding", "weight": 0},
                                   {"name": "ImageLocality", "weight": 1}]},
        "score": {"disabled": [{"name": "ImageLocality"}],
                  "enabled": [{"name": "NodeResourcesFit", "weight": 5}]}}}
    config = {"profiles": [{"schedulerName": "default-scheduler"}, profile]}
    assert schedulerlog.profile_weights(config, "packer") == {
        "TaintToleration": 3, "VolumeBinding": 1, "NodeResourcesFit": 5}
    assert schedulerlog.profile_weights(config, "missing") == {}


def _account(node=None):
    return Explanation(POD, node, "", "default-scheduler", pd.DataFrame(), pd.DataFrame(),
                       ["PodScheduled=True", ONLY_THE_SIM_HAS_TABLES])


def test_explained_gives_the_sims_shape():
    a = schedulerlog.attempts(LOG.splitlines())[POD]
    e = schedulerlog.explained(_account("h100-0"), a, WEIGHTS, ["h100-0", "h100-1", "h100-2"])
    d = e.to_dict()
    by = {n["name"]: n for n in d["nodes"]}
    assert by["h100-2"]["result"] == "infeasible" and "scores" not in by["h100-2"]
    assert by["h100-0"]["result"] == "feasible"
    assert by["h100-1"]["scores"]["PodTopologySpread"] == {"normalized": 66, "weighted": 132}
    assert by["h100-0"]["scores"]["TaintToleration"] == {"normalized": 100, "weighted": 300}
    assert by["h100-0"]["total"] == 517
    assert list(e.scores.index) == ["h100-0", "h100-1"]  # best first, as the sim's
    assert ONLY_THE_SIM_HAS_TABLES not in e.notes and e.notes[-1] == schedulerlog.FROM_THE_LOG


def test_one_feasible_node_is_bound_without_scores():
    a = schedulerlog.Attempt(POD, node="h100-1", evaluated=2, feasible=1)
    e = schedulerlog.explained(_account("h100-1"), a, WEIGHTS, ["h100-0", "h100-1"])
    assert e.scores.empty
    assert dict(e.filters["result"]) == {"h100-0": "infeasible", "h100-1": "feasible"}
    assert "only one feasible node: the scheduler skips scoring" in e.notes


def test_a_pod_never_scored_keeps_the_account():
    account = _account()
    a = schedulerlog.Attempt(POD, error="0/2 nodes are available")
    assert schedulerlog.explained(account, a, WEIGHTS, ["h100-0"]) is account
    assert schedulerlog.explained(account, None, WEIGHTS, ["h100-0"]) is account


def test_a_pod_group_members_scores_start_an_attempt_without_an_about_to_try_line():
    score = 'I1201 12:10:40.0 1 schedule_one.go:984] "Plugin scored node for pod" pod="default/w-0" plugin="NodeResourcesFit" node="{}" score={}'
    final = 'I1201 12:10:40.0 1 schedule_one.go:1052] "Calculated node\'s final score for pod" pod="default/w-0" node="{}" score={}'
    lines = [score.format("n0", 10), score.format("n1", 20), final.format("n0", 10), final.format("n1", 20),
             score.format("n0", 30), final.format("n0", 30)]
    first, second = schedulerlog.history(lines)
    assert first.totals == {"n0": 10, "n1": 20} and second.scores == {"n0": {"NodeResourcesFit": 30}}


def test_a_batched_pod_says_so():
    lines = [
        f'I1201 12:10:40.0 1 schedule_one.go:101] "About to try and schedule pod" pod="{POD}"',
        f'I1201 12:10:40.0 1 batch.go:99] "OpportunisticBatch provided node hint" profile="default-scheduler" '
        f'pod="{POD}" cycleCount=5 hint="h100-1" remainingNodes=1',
        f'I1201 12:10:40.0 1 schedule_one.go:483] "Successfully bound pod to node" pod="{POD}" node="h100-1" '
        'evaluatedNodes=1 feasibleNodes=1',
    ]
    a = schedulerlog.attempts(lines)[POD]
    assert a.hint == "h100-1" and a.scores == {}
    e = schedulerlog.explained(_account("h100-1"), a, WEIGHTS, ["h100-0", "h100-1"])
    assert any(n.startswith("opportunistic batching: the previous pod's ranking hinted h100-1") for n in e.notes)
    assert dict(e.filters["result"]) == {"h100-0": "not evaluated", "h100-1": "feasible"}  # the hint alone


def test_history_since_a_mark_survives_a_rotation(tmp_path):
    log = tmp_path / "kube-scheduler.log"
    lines = LOG.splitlines(keepends=True)
    log.write_text("".join(lines[:3]))
    mark = schedulerlog.log_mark(log)
    with log.open("a") as fh:
        fh.write("".join(lines[3:8]))
    log.rename(tmp_path / "kube-scheduler.log.1")  # the scheduler restarts: rotation
    log.write_text("".join(lines[8:]))
    assert [a.pod for a in schedulerlog.history_since(log, mark)] == [POD, "default/other"]
    assert schedulerlog.history_since(log, mark)[0].totals == {"h100-0": 517, "h100-1": 467}
    assert [a.pod for a in schedulerlog.history_since(log, schedulerlog.log_mark(log))] == []


def test_backoff_ends_after_the_last_attempt_doubling_per_attempt():
    a = [schedulerlog.Attempt("ns/p", at=100.0), schedulerlog.Attempt("ns/q", at=101.0),
         schedulerlog.Attempt("ns/p", at=102.0), schedulerlog.Attempt("ns/p", at=103.0)]
    # third attempt: 1 s doubled twice, in the 1 s window after the one it ends in
    assert schedulerlog.backoff_ends(a, {"ns/p"}) == 103.0 + 4.0 + 1.0
    assert schedulerlog.backoff_ends([schedulerlog.Attempt("ns/q", at=101.4)], {"ns/q"}) == 103.0
    assert schedulerlog.backoff_ends(a * 10, {"ns/p"}) == 114.0  # at most 10 s
    assert schedulerlog.backoff_ends(a, {"ns/r"}) == 0.0
    line = f'I1201 12:10:40.500000 1 schedule_one.go:101] "About to try and schedule pod" pod="{POD}"'
    at = schedulerlog.history([line])[0].at
    import datetime as dt
    assert dt.datetime.fromtimestamp(at).strftime("%m%d %H:%M:%S.%f") == "1201 12:10:40.500000"
