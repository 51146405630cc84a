"""Differential fidelity: run one scenario on the simulator and on a real backend, compare.

What must agree (the issue's contract): which pods are pending (per workload, since
controllers name pods at random), the multiset of what each node ends up holding (exact
node names when a scenario says ties cannot happen), the scheduler's message for
every pending pod, which pods were preempted (per workload), and the per-plugin weighted scores of every bound pod where more than
one node was scored (the real ones read from kube-scheduler's log). Ties are replayed:
where the real scheduler chose among equal totals, or among preemption candidates equal on
every criterion, the sim takes the same node when it finds the same tie, so both continue
from the same state (``replaying``). A scenario may run actions between schedules (kill or restart a
node's device plugin), so the classic plugin-crash fault is compared too.

Scenario files live in ``tests/fidelity/scenarios``; an optional header document
``{kind: FidelityCase, exact: true, actions: [...]}`` configures the run.
"""

from __future__ import annotations

import re
from collections import Counter, deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .backends.base import Session
from .errors import GpuLabError
from .model.documents import load_documents
from .model.scenario import parse_scenario
from .names import TERMINAL_PHASES
from .sim import scheduler
from .sim.plugins.defaultpreemption import FOUND, preemption_tie_break

CASE_KIND = "FidelityCase"
COMPARED_RESOURCES = ("cpu", "memory", "pods")


@dataclass
class Case:
    name: str
    documents: list[dict]
    exact: bool = False  # node names must match, not only the multiset
    # [{killPlugin: node} | {restartPlugin: node} | {apply: docs} | {advance: seconds or null}
    #  | {delete: pod} | {cordon: node} | {label: {node: name, labels: {key: value}, evict: bool}}]
    actions: list[dict] = field(default_factory=list)

    @classmethod
    def load(cls, path: Path) -> Case:
        docs = load_documents(path)
        header = next((d for d in docs if d.get("kind") == CASE_KIND), {})
        body = [d for d in docs if d.get("kind") != CASE_KIND]
        return cls(path.stem, body, bool(header.get("exact")), list(header.get("actions") or []))


@dataclass
class Outcome:
    pending: Counter  # group -> number of pending pods
    usage: dict[str, tuple]  # node -> what its pods request (compared resources + nvidia.com/*)
    messages: dict[str, set[str]]  # group -> pending messages
    scores: dict[str, Counter] = field(default_factory=dict)  # group -> its pods' score tables
    preempted: Counter = field(default_factory=Counter)  # group -> pods the scheduler preempted
    # creations the API server refused (quota, LimitRange): (group, message), an apply's or a controller's
    refused: set[tuple[str, str]] = field(default_factory=set)

    def usage_multiset(self) -> Counter:
        return Counter(self.usage.values())


def _groups(documents: list[dict]) -> list[str]:
    sc = parse_scenario(documents)
    return sorted({w["name"] if isinstance(w, dict) and "name" in w else w.get("metadata", {}).get("name")
                   for w in sc.workloads}, key=len, reverse=True)


def group_of(pod_name: str, workloads: list[str]) -> str:
    """The workload a pod belongs to (longest name prefix), else the pod itself."""
    return next((w for w in workloads if pod_name.startswith(w + "-")), pod_name)


#: the status reason the sim gives a pod it preempted (the victim stays, Failed)
PREEMPTED_REASON = "PreemptionByScheduler"


def preemption_victims(session: Session) -> set[tuple[str, str]]:
    """(identity, pod name) of every pod the scheduler has preempted in this session. A
    real scheduler deletes its victims (a controller replaces its own), so a real backend
    reads the victims' ``Preempted`` events, which outlive them and earlier runs in the
    same lab (compare with a set taken before); the sim keeps each victim, Failed."""
    sim = getattr(session, "_sim", None)
    if sim is not None:
        pods = session.pods()
        out = {(f"{r.namespace}/{r.name}", r.name) for r in pods[pods["reason"] == PREEMPTED_REASON].itertuples()}
        # a victim deleted since (a StatefulSet remakes its pod under the same name) was still preempted
        gone = sim.cluster.gone
        out |= {(f"{rec.pod.key}#{i}", rec.pod.name) for i, rec in enumerate(gone) if rec.reason == PREEMPTED_REASON}
        return out
    client = getattr(session, "client", None)
    if client is None:  # a real backend before its cluster exists (kind before the first apply)
        return set()
    return {(e["involvedObject"].get("uid", ""), e["involvedObject"].get("name", ""))
            for e in client.list("Event")["items"]
            if e.get("reason") == "Preempted" and (e.get("involvedObject") or {}).get("kind") == "Pod"}


def failed_creates(session: Session) -> set[tuple[str, str, str]]:
    """(id, owner name, message) of every FailedCreate a controller reported in this session
    (a real backend's events outlive reset: compare with a set taken before)."""
    sim = getattr(session, "_sim", None)
    if sim is not None:
        return {(str(i), name, msg) for i, (_, _, name, msg) in enumerate(sim.apiserver.policies.failed_creates)}
    client = getattr(session, "client", None)
    if client is None:  # a real backend before its cluster exists (kind before the first apply)
        return set()
    return {(e["metadata"].get("uid", ""), (e.get("involvedObject") or {}).get("name", ""), e.get("message", ""))
            for e in client.list("Event")["items"] if e.get("reason") == "FailedCreate"}


#: client-go's EventAggregator (tools/record/events_cache.go) rewords a controller's event once
#: one object has had 10 distinct messages in 10 minutes: a ReplicaSet retrying a create quota
#: refuses, each time under a new generated pod name, gets there after as many retries, which
#: is timing. The message after it is the refusal itself.
COMBINED = "(combined from similar events): "


def _refusal(message: str, workloads: list[str]) -> str:
    """A refusal with the refused pod's generated name replaced by its group (and without the
    event aggregator's prefix)."""
    return re.sub(r'pods "([^"]+)"', lambda m: f'pods "{group_of(m[1], workloads)}"', message.removeprefix(COMBINED))


def outcome(session: Session, workloads: list[str], victims_before: set | frozenset = frozenset(),
            refused: set | frozenset = frozenset(), creates_before: set | frozenset = frozenset()) -> Outcome:
    pods = session.pods()
    pending: Counter = Counter()
    messages: dict[str, set[str]] = {}
    for _, row in pods[pods["phase"] == "Pending"].iterrows():
        g = group_of(row["name"], workloads)
        pending[g] += 1
        messages.setdefault(g, set()).add(row["message"])
    usage = {}
    for n in session.to_dict()["nodes"]:
        req = n["requested"]
        usage[n["name"]] = tuple(sorted((k, str(v)) for k, v in req.items()
                                        if (k in COMPARED_RESOURCES or k.startswith("nvidia.com/")) and str(v) != "0"))
    preempted = Counter(group_of(name, workloads) for key, name in preemption_victims(session) - victims_before)
    refusals = {(g, _refusal(m, workloads)) for g, m in refused} | {
        (group_of(owner, workloads), _refusal(m, workloads)) for _, owner, m in failed_creates(session) - creates_before}
    return Outcome(pending, usage, messages, score_tables(session, pods, workloads), preempted, refusals)


def score_tables(session: Session, pods, workloads: list[str]) -> dict[str, Counter]:
    """group -> Counter of the score tables of its bound pods' latest attempts, where more
    than one node was scored. A table is each scored node's per-plugin weighted scores
    (zeros dropped: a plugin the sim does not model adds 0 on the real side) and total, as
    a sorted tuple: node names are left out because controllers name pods at random and
    equal-scoring nodes are a tie either scheduler may break either way; where nodes end
    up is compared by usage. A preempted pod is left out: the real scheduler deletes it,
    the sim keeps it (Failed); victims are compared by count."""
    tables: dict[str, Counter] = {}
    bound = pods["node"].notna() & (pods["node"] != "") & (pods["reason"] != PREEMPTED_REASON)
    for _, row in pods[bound].iterrows():
        nodes = session.explain(f"{row['namespace']}/{row['name']}").to_dict()["nodes"]
        scored = [n for n in nodes if n.get("scores")]
        if len(scored) < 2:
            continue
        table = tuple(sorted(
            (tuple(sorted((plugin, v["weighted"]) for plugin, v in n["scores"].items() if v.get("weighted"))),
             n.get("total")) for n in scored))
        tables.setdefault(group_of(row["name"], workloads), Counter())[table] += 1
    return tables


def workloads_of(case: Case) -> list[str]:
    return _groups(case.documents + [d for a in case.actions for d in _docs(a.get("apply"))])


@dataclass
class RealChoices:
    """Where the real scheduler broke a tie, per group (workload), in order: the node it
    took at each attempt where it scored more than one node (None where that attempt did
    not bind), and the node it nominated at each preemption."""

    nodes: dict[str, deque] = field(default_factory=dict)
    preemptions: dict[str, deque] = field(default_factory=dict)


#: the real scheduler's PostFilter message when it preempts (framework/preemption, SelectCandidate)
_PREEMPTED_ON = re.compile(re.escape(FOUND.split("{}")[0]) + r"(\S+), preempting")


def real_choices(session: Session, workloads: list[str]) -> RealChoices:
    """What the real scheduler chose at each point where the sim may find a tie, read from
    its log (``_scheduling_history``)."""
    out = RealChoices()
    for a in session._scheduling_history():  # type: ignore[attr-defined]
        group = group_of(a.pod.split("/", 1)[1], workloads)
        if len(a.scores) > 1:
            out.nodes.setdefault(group, deque()).append(a.node)
        m = _PREEMPTED_ON.search(a.error or "")
        if m:
            out.preemptions.setdefault(group, deque()).append(m.group(1))
    return out


class ReplayMismatch(AssertionError):
    """The real scheduler preempted on a node the sim does not count among its equally good
    candidates: a difference in how candidates are ranked, not a tie."""


@contextmanager
def replaying(choices: RealChoices, workloads: list[str]):
    """Run the sim following the real scheduler wherever both see a tie, so the comparison
    follows one tie-break history instead of failing on a coin toss:

    - at each selectHost, the node the real scheduler took at the same point of the same
      workload, when it is among the sim's best totals (a node that is not is not taken, so
      a scoring difference still shows);
    - at each preemption, the node the real scheduler nominated at the same point of the
      same workload, when it is among the candidates the sim finds equal on every criterion
      of pickOneNodeForPreemption (kube-scheduler then takes the first of a Go map's
      iteration: random). One that is not is a difference: ``ReplayMismatch`` on exit."""
    queues = {g: deque(q) for g, q in choices.nodes.items()}
    preemptions = {g: deque(q) for g, q in choices.preemptions.items()}
    mismatches: list[str] = []

    def choose(pod, best: list[str]) -> str | None:
        q = queues.get(group_of(pod.name, workloads))
        return q.popleft() if q else None

    def choose_victims_node(pod, tied: list[str]) -> str | None:
        q = preemptions.get(group_of(pod.name, workloads))
        chosen = q.popleft() if q else None
        if chosen is not None and chosen not in tied:
            mismatches.append(f"{pod.key}: the real scheduler preempted on {chosen}; the sim's equally "
                              f"good candidates were {tied}")
        return chosen

    token = scheduler.tie_break.set(choose)
    ptoken = preemption_tie_break.set(choose_victims_node)
    try:
        yield
    finally:
        preemption_tie_break.reset(ptoken)
        scheduler.tie_break.reset(token)
    if mismatches:
        raise ReplayMismatch("preemption node differs:\n  " + "\n  ".join(mismatches))


def run_case(case: Case, session: Session) -> Outcome:
    before, creates_before = preemption_victims(session), failed_creates(session)
    refused: set[tuple[str, str]] = set()
    session.apply(case.documents)
    session.schedule()
    for action in case.actions:
        if "killPlugin" in action:
            session.kill_plugin(action["killPlugin"])
        elif "restartPlugin" in action:
            session.restart_plugin(action["restartPlugin"])
        elif "apply" in action:
            try:
                session.apply(action["apply"])
            except GpuLabError as err:  # refused in the API server's words (quota, LimitRange)
                refused.add(("apply", str(err)))
        elif "advance" in action:  # seconds, or null: until the last timed pod ends
            session.advance(action["advance"])
        elif "delete" in action:
            session.delete(action["delete"])
        elif "cordon" in action:
            session.cordon(action["cordon"])
        elif "label" in action:  # {label: {node: NAME, labels: {key: value or null}, evict: bool}}
            session.label_node(action["label"]["node"], action["label"]["labels"],
                               evict=bool(action["label"].get("evict")))
        else:
            raise ValueError(f"unknown fidelity action {sorted(action)}")
        session.schedule()
    return outcome(session, workloads_of(case), before, refused, creates_before)


def mirror_documents(client, namespace: str) -> list[dict]:
    """The cluster a real backend ran on, as documents the simulator takes: every Node as the
    API server has it (labels, taints, cordon, capacity and allocatable the kubelet reported)
    and every pod bound outside ``namespace`` (control-plane static pods, the device plugin's
    DaemonSet pods) pinned to its node with its requests. Used where the real cluster is not
    the scenario's (kind: the nodes' CPU and memory are the Docker host's, plus kind's
    control-plane node), so both schedulers start from the same cluster."""
    docs: list[dict] = []
    for n in client.list("Node")["items"]:
        meta, spec, status = n["metadata"], n.get("spec") or {}, n.get("status") or {}
        docs.append({"apiVersion": "v1", "kind": "Node",
                     "metadata": {"name": meta["name"], "labels": dict(meta.get("labels") or {})},
                     "spec": {k: spec[k] for k in ("taints", "unschedulable") if k in spec},
                     "status": {"capacity": dict(status.get("capacity") or {}),
                                "allocatable": dict(status.get("allocatable") or {})}})
    for p in client.list("Pod")["items"]:
        meta, spec, status = p["metadata"], p.get("spec") or {}, p.get("status") or {}
        if meta.get("namespace") == namespace or not spec.get("nodeName") or \
                status.get("phase") in TERMINAL_PHASES:
            continue
        containers = [{"name": c["name"], "image": "mirror",
                       **({"resources": c["resources"]} if c.get("resources") else {})}
                      for c in spec.get("containers") or []]
        docs.append({"apiVersion": "v1", "kind": "Pod",
                     "metadata": {"name": meta["name"], "namespace": meta["namespace"]},
                     "spec": {"nodeName": spec["nodeName"], "containers": containers,
                              **({"priorityClassName": spec["priorityClassName"]}
                                 if spec.get("priorityClassName") else {})}})
    namespaces = sorted({d["metadata"]["namespace"] for d in docs if d["kind"] == "Pod"}
                        - {"default", "kube-system"})
    return [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}} for ns in namespaces] + docs


def _docs(value: Any) -> list[dict]:
    if not value:
        return []
    return value if isinstance(value, list) else [value]


def differences(case: Case, sim: Outcome, real: Outcome) -> list[str]:
    out = []
    if sim.pending != real.pending:
        out.append(f"pending differs: sim {dict(sim.pending)} vs real {dict(real.pending)}")
    if sim.preempted != real.preempted:
        out.append(f"preempted differs: sim {dict(sim.preempted)} vs real {dict(real.preempted)}")
    if sim.refused != real.refused:
        out.append(f"refused creations differ: sim {sorted(sim.refused)} vs real {sorted(real.refused)}")
    if case.exact:
        if sim.usage != real.usage:
            out.append(f"node usage differs: sim {sim.usage} vs real {real.usage}")
    elif sim.usage_multiset() != real.usage_multiset():
        out.append(f"node usage multiset differs: sim {sorted(sim.usage.values())} vs real {sorted(real.usage.values())}")
    for g in sorted(set(sim.messages) | set(real.messages)):
        if sim.messages.get(g) != real.messages.get(g):
            out.append(f"{g}: message differs:\n  sim:  {sorted(sim.messages.get(g, []))}\n  real: {sorted(real.messages.get(g, []))}")
    for g in sorted(set(sim.scores) | set(real.scores)):
        s, r = sim.scores.get(g, Counter()), real.scores.get(g, Counter())
        if s != r:
            out.append(f"{g}: scores differ:\n  sim only:  {sorted((s - r).elements())}\n"
                       f"  real only: {sorted((r - s).elements())}")
    return out


#: what a difference is about: where pods went and what they were told, or the scores
ASPECTS = ("placement", "scores")


def aspect(difference: str) -> str:
    return "scores" if ": scores differ:" in difference else "placement"


def known_differences(path: Path) -> dict[str, dict[str, str]]:
    """``known_differences.yaml``: scenario name -> {aspect: why sim and real may differ
    there}. A plain string excuses every aspect; a mapping names them (``scores: why``), so
    a scenario whose placement agrees keeps being held to it."""
    if not path.exists():
        return {}
    out = {}
    for name, why in (yaml.safe_load(path.read_text()) or {}).items():
        out[name] = ({str(k): str(v) for k, v in why.items()} if isinstance(why, dict)
                     else dict.fromkeys(ASPECTS, str(why)))
    return out
