"""Past ``RECORD_CELLS`` the sim keeps no cycle's arrays: explain replays the session's calls
and keeps only the asked pod's. The answer is the one a session that kept everything gives."""

from __future__ import annotations

import pytest

import gpu_lab
from gpu_lab.bench import node_pools, workload
from gpu_lab.sim import cluster as cluster_module


def _explained(lab, key):
    e = lab.explain(key)
    return e.node, e.message, e.filters, e.scores, e.notes


def _session(steps, budget, monkeypatch):
    monkeypatch.setattr(cluster_module, "RECORD_CELLS", budget)
    lab = gpu_lab.connect("sim", seed=3)
    for step in steps:
        step(lab)
    return lab


def _steps():
    docs = node_pools(30) + workload(240)
    return [
        lambda lab: lab.apply(docs[:-40]),
        lambda lab: lab.schedule(),
        lambda lab: lab.cordon(lab.nodes()["name"].iloc[0]),
        lambda lab: lab.delete(lab.pods().dropna(subset=["node"])["name"].iloc[3]),
        lambda lab: lab.apply(docs[-40:]),
        lambda lab: lab.advance(60),
    ]


def test_a_replayed_explanation_is_the_kept_one(monkeypatch):
    kept = _session(_steps(), 10**12, monkeypatch)
    replayed = _session(_steps(), 2_000, monkeypatch)
    assert not kept._sim.cluster.dropped and replayed._sim.cluster.dropped
    pods = kept.pods()
    keys = [f"{ns}/{n}" for ns, n in zip(pods["namespace"], pods["name"])]
    dropped = [k for k in keys if replayed._sim.cluster.records[k].attempt is None]
    assert len(dropped) > 100  # most pods' cycles came after the budget ran out
    assert list(pods["node"].fillna("")) == list(replayed.pods()["node"].fillna(""))  # same decisions
    pending = [k for k in dropped if kept._sim.cluster.records[k].node is None]
    assert pending  # the workload asks for more than fits: a pending pod's reasons are replayed too
    for key in dropped[:: max(1, len(dropped) // 12)] + pending[:3]:
        a, b = _explained(kept, key), _explained(replayed, key)
        assert a[:2] == b[:2] and a[2].equals(b[2]) and a[3].equals(b[3]) and a[4] == b[4], key


def test_a_replay_that_disagrees_says_so_in_one_line(monkeypatch):
    lab = _session(_steps()[:2], 2_000, monkeypatch)
    key = next(k for k, r in lab._sim.cluster.records.items() if r.attempt is None and r.attempts)
    lab._calls.pop()  # the schedule() call forgotten: the replay cannot place the pod
    with pytest.raises(gpu_lab.GpuLabError, match="did not reproduce the pod's scheduling"):
        lab.explain(key)


def test_applied_documents_are_kept_as_they_were_applied():
    # marshal for what YAML gives, pickle for a caller's own mapping types; later changes
    # to the caller's objects do not reach the replay
    from collections import OrderedDict

    from gpu_lab.backends.sim import _frozen, _thawed

    docs = node_pools(2) + workload(5)
    blob = _frozen(docs)
    docs[0]["metadata"]["name"] = "changed"
    assert blob[:1] == b"m" and _thawed(blob) == node_pools(2) + workload(5)
    own = [OrderedDict(d) for d in workload(3)]
    assert _frozen(own)[:1] == b"p" and _thawed(_frozen(own)) == own
