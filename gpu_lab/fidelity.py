"""Differential fidelity: run one scenario on the simulator and on a real backend, compare.

What must agree (the issue's contract): which pods are pending (per workload, since
controllers name pods at random), the multiset of what each node ends up holding (exact
node names when a scenario says ties cannot happen), and the scheduler's message for
every pending pod. A scenario may run actions between schedules (kill or restart a
node's device plugin), so the classic plugin-crash fault is compared too.

Scenario files live in ``tests/fidelity/scenarios``; an optional header document
``{kind: FidelityCase, exact: true, actions: [...]}`` configures the run.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .backends.base import Session
from .model.scenario import load_documents, parse_scenario

CASE_KIND = "FidelityCase"
COMPARED_RESOURCES = ("cpu", "memory", "pods")


@dataclass
class Case:
    name: str
    documents: list[dict]
    exact: bool = False  # node names must match, not only the multiset
    actions: list[dict] = field(default_factory=list)  # [{killPlugin: node} | {restartPlugin: node} | {apply: docs}]

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

    def usage_multiset(self) -> Counter:
        return Counter(self.usage.values())


def _groups(documents: list[dict]) -> list[str]:
    sc = parse_scenario(documents)
    return sorted({w["name"] if isinstance(w, dict) and "name" in w else w.get("metadata", {}).get("name")
                   for w in sc.workloads}, key=len, reverse=True)


def group_of(pod_name: str, workloads: list[str]) -> str:
    """The workload a pod belongs to (longest name prefix), else the pod itself."""
    return next((w for w in workloads if pod_name.startswith(w + "-")), pod_name)


def outcome(session: Session, workloads: list[str]) -> Outcome:
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
    return Outcome(pending, usage, messages)


def run_case(case: Case, session: Session) -> Outcome:
    session.apply(case.documents)
    session.schedule()
    for action in case.actions:
        if "killPlugin" in action:
            session.kill_plugin(action["killPlugin"])
        elif "restartPlugin" in action:
            session.restart_plugin(action["restartPlugin"])
        elif "apply" in action:
            session.apply(action["apply"])
        session.schedule()
    return outcome(session, _groups(case.documents + [d for a in case.actions for d in _docs(a.get("apply"))]))


def _docs(value: Any) -> list[dict]:
    if not value:
        return []
    return value if isinstance(value, list) else [value]


def differences(case: Case, sim: Outcome, real: Outcome) -> list[str]:
    out = []
    if sim.pending != real.pending:
        out.append(f"pending differs: sim {dict(sim.pending)} vs real {dict(real.pending)}")
    if case.exact:
        if sim.usage != real.usage:
            out.append(f"node usage differs: sim {sim.usage} vs real {real.usage}")
    elif sim.usage_multiset() != real.usage_multiset():
        out.append(f"node usage multiset differs: sim {sorted(sim.usage.values())} vs real {sorted(real.usage.values())}")
    for g in sorted(set(sim.messages) | set(real.messages)):
        if sim.messages.get(g) != real.messages.get(g):
            out.append(f"{g}: message differs:\n  sim:  {sorted(sim.messages.get(g, []))}\n  real: {sorted(real.messages.get(g, []))}")
    return out


def known_differences(path: Path) -> dict[str, str]:
    """``known_differences.yaml``: scenario name -> why sim and real may differ there."""
    if not path.exists():
        return {}
    return {k: str(v) for k, v in (yaml.safe_load(path.read_text()) or {}).items()}
