"""``events()`` on the real control plane against the sim's: the same Events, in the same words.

Two fidelity scenarios run on both backends: a quota refusing a ReplicaSet's fourth pod
(the controller's ``FailedCreate``) and a preemption (the executor's ``Preempted`` on each
victim, the binder's ``Scheduled``). Controllers name pods at random and uids differ, so
objects and messages are compared with generated names replaced by their workload and the
preemptor's uid by its name. A real ReplicaSet retries a refused create under new names
(more FailedCreate Events than the sim's one, the 11th on reworded by client-go's
aggregator), so refusals are compared as a set, without the aggregator's prefix.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path

import pytest
from realcluster import shared_lab

import gpu_lab
from gpu_lab.fidelity import COMBINED, Case, group_of, run_case, workloads_of

pytestmark = pytest.mark.controlplane

SCENARIOS = Path(__file__).parents[2] / "fidelity" / "scenarios"
UID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
POD_NAME = re.compile(r'(pods "|assigned [^/]+/)([^" ]+)')


@pytest.fixture(scope="module")
def lab(request):
    yield from shared_lab(request, "the events tests")


def _uids(session) -> dict[str, str]:
    """uid -> pod name, of every pod the session shows."""
    sim = getattr(session, "_sim", None)
    if sim is not None:
        return {r.pod.uid: r.pod.name for r in sim.cluster.records.values()}
    return {p["metadata"]["uid"]: p["metadata"]["name"] for p in session.client.list("Pod")["items"]}


def _compared(session, case: Case) -> tuple[Counter, set]:
    """(Counter of Scheduled and Preempted rows, set of FailedCreate rows), as
    (Kind/workload, reason, message) with generated names and uids replaced."""
    workloads, uids = workloads_of(case), _uids(session)
    placed, refused = Counter(), set()
    for r in session.events().itertuples():
        kind, name = r.object.split("/", 1)
        # client-go's aggregator rewords a controller's 11th distinct message (fidelity.COMBINED)
        message = POD_NAME.sub(lambda m: m[1] + group_of(m[2], workloads), r.message.removeprefix(COMBINED))
        message = UID.sub(lambda m: uids.get(m[0], "?"), message)
        row = (f"{kind}/{group_of(name, workloads)}", r.reason, message)
        if r.reason == "FailedCreate":
            refused.add(row)
        elif r.reason in ("Scheduled", "Preempted"):
            placed[row] += 1
    return placed, refused


def _reason(rows: Counter, reason: str) -> Counter:
    return Counter({row: n for row, n in rows.items() if row[1] == reason})


def _run(lab, name: str):
    case = Case.load(SCENARIOS / f"{name}.yaml")
    sim = gpu_lab.connect("sim")
    run_case(case, sim)
    lab.reset()
    run_case(case, lab)
    return case, sim


def test_preemption_events_are_the_real_ones(lab):
    case, sim = _run(lab, "preemption_evicts_low")
    want = _compared(sim, case)
    assert want[0] == Counter({("Pod/batch-a", "Scheduled", "Successfully assigned default/batch-a to h100-0"): 1,
                               ("Pod/batch-b", "Scheduled", "Successfully assigned default/batch-b to h100-0"): 1,
                               ("Pod/batch-a", "Preempted", "Preempted by pod urgent on node h100-0"): 1,
                               ("Pod/batch-b", "Preempted", "Preempted by pod urgent on node h100-0"): 1,
                               ("Pod/urgent", "Scheduled", "Successfully assigned default/urgent to h100-0"): 1})
    got = _compared(lab, case)
    # Each victim's Preempted Event, in the same words. The real scheduler's preemption is
    # asynchronous: when the API server is slow (a loaded machine), the preemptor can be retried
    # before its last victim's deletion is seen and preempt it again, a second Event
    # (kubernetes/kubernetes#134249, #141694). So Preempted rows are compared as a set, the
    # bindings by count.
    assert {row for row in got[0] if row[1] == "Preempted"} == {row for row in want[0] if row[1] == "Preempted"}
    assert _reason(got[0], "Scheduled") == _reason(want[0], "Scheduled") and got[1] == want[1]
    warning = lab.events(name="urgent")
    assert list(warning["reason"])[:1] == ["FailedScheduling"]
    assert list(warning["type"])[:1] == list(sim.events(name="urgent")["type"])[:1] == ["Warning"]
    # the victims' Events outlive them on the API server, not the reset
    lab.reset()
    assert not lab.events()["reason"].isin(["Scheduled", "Preempted"]).any()


def test_quota_refusal_is_the_replicasets_failedcreate(lab):
    case, sim = _run(lab, "quota_leaves_replicas_uncreated")
    want = _compared(sim, case)
    assert {(obj, reason) for obj, reason, _ in want[1]} == {("ReplicaSet/serve", "FailedCreate")}
    assert want[0] == Counter({("Pod/serve", "Scheduled", "Successfully assigned team-a/serve to l4-0"): 3})
    deadline = time.monotonic() + 20  # the controller-manager writes its Events on its own time
    got = _compared(lab, case)
    while not got[1] and time.monotonic() < deadline:
        time.sleep(0.5)
        got = _compared(lab, case)
    assert got == want
    rs = lab.events(kind="ReplicaSet", namespace="team-a")
    failed = rs[rs["reason"] == "FailedCreate"]
    assert len(failed) >= 1 and set(failed["type"]) == {"Warning"}
