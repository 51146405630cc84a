"""Run one seed's scenario on the real scheduler and on the sim, and compare as the fidelity
suite does (``gpu_lab.fidelity``): pending pods, what each node holds, pending messages,
preemption victims and per-plugin scores, with the real scheduler's tie-breaks replayed on
the sim. A difference is excused only by an entry of ``known_differences.yaml`` whose
pattern matches it and whose condition the scenario meets; nothing else is loosened.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from .. import connect
from ..backends.base import Session
from ..fidelity import (
    Case,
    ReplayMismatch,
    aspect,
    differences,
    real_choices,
    replaying,
    run_case,
    workloads_of,
)
from .generate import documents, scenario

KNOWN = Path(__file__).with_name("known_differences.yaml")


@dataclass(frozen=True)
class Known:
    """A known cause: a difference matching ``match`` in a scenario whose YAML matches
    ``when`` (every scenario when empty) is explained by ``why``. Narrower still: with
    ``scores_only``, only in a seed where every difference is a score table's (placement,
    pending pods, messages and victims all agree); with ``affinity_groups_only``, only a
    difference about a workload with a required pod affinity or one such an affinity
    selects (``affinity_groups``); with ``guarded_groups_only``, only one about a workload
    a PodDisruptionBudget guards (``guarded_groups``)."""

    name: str
    match: str
    why: str
    when: str = ""
    scores_only: bool = False
    affinity_groups_only: bool = False
    guarded_groups_only: bool = False

    def excuses(self, difference: str, text: str, placement_agrees: bool = True,
                affinity: set[str] | frozenset[str] = frozenset(),
                guarded: set[str] | frozenset[str] = frozenset()) -> bool:
        group = difference.split(":", 1)[0]
        return (bool(re.search(self.match, difference))
                and (not self.when or bool(re.search(self.when, text, re.M)))
                and (placement_agrees or not self.scores_only)
                and (not self.affinity_groups_only or group in affinity)
                and (not self.guarded_groups_only or group in guarded))


def affinity_groups(case: Case) -> set[str]:
    """The workloads with a required pod affinity, and those whose pods it selects (the
    generator labels every workload's pods ``app: <name>``)."""
    out: set[str] = set()
    for doc in case.documents + [d for a in case.actions for d in a.get("apply") or []]:
        spec = doc.get("spec") or {}
        pod = spec if doc.get("kind") == "Pod" else (spec.get("template") or {}).get("spec") or {}
        terms = (((pod.get("affinity") or {}).get("podAffinity") or {})
                 .get("requiredDuringSchedulingIgnoredDuringExecution") or [])
        if terms:
            out.add(doc["metadata"]["name"])
            out |= {app for t in terms if (app := ((t.get("labelSelector") or {}).get("matchLabels") or {}).get("app"))}
    return out


def guarded_groups(case: Case) -> set[str]:
    """The workloads a PodDisruptionBudget selects (by the ``app`` label the generator gives
    every workload's pods)."""
    return {app for doc in _all_documents(case) if doc.get("kind") == "PodDisruptionBudget"
            if (app := ((doc.get("spec") or {}).get("selector") or {}).get("matchLabels", {}).get("app"))}


def _all_documents(case: Case) -> list[dict]:
    return case.documents + [d for a in case.actions for d in a.get("apply") or []]


def known_differences(path: Path = KNOWN) -> list[Known]:
    if not path.exists():
        return []
    raw = yaml.safe_load(path.read_text()) or {}
    return [Known(name, str(v["match"]), " ".join(str(v["why"]).split()), str(v.get("when") or ""),
                  bool(v.get("scores_only", False)), bool(v.get("affinity_groups_only", False)),
                  bool(v.get("guarded_groups_only", False)))
            for name, v in raw.items()]


@dataclass
class Result:
    seed: int
    differences: list[str] = field(default_factory=list)  # not excused
    excused: list[tuple[str, str]] = field(default_factory=list)  # (difference, known cause)
    error: str | None = None  # a backend refused or timed out (not a known cause)
    seconds: float = 0.0

    @property
    def agrees(self) -> bool:
        return not self.differences and self.error is None

    def to_dict(self) -> dict:
        return {"seed": self.seed, "agrees": self.agrees, "differences": self.differences,
                "excused": [{"difference": d, "known": k} for d, k in self.excused],
                "error": self.error, "seconds": round(self.seconds, 1)}


def scenario_text(seed: int) -> str:
    """The seed's scenario as a multi-document YAML file (a fidelity scenario as it stands)."""
    return yaml.safe_dump_all(documents(scenario(seed)), sort_keys=False)


def run_seed(seed: int, real: Session, known: list[Known] | None = None) -> Result:
    """Empty ``real`` (a local lab), run the seed on it, then on a fresh sim replaying its ties."""

    started = time.monotonic()
    known = known_differences() if known is None else known
    case = scenario(seed)
    result = Result(seed)
    mismatch: list[str] = []
    try:
        real.reset()
        got = run_case(case, real)
        workloads = workloads_of(case)
        try:
            with replaying(real_choices(real, workloads), workloads):
                model = run_case(case, connect("sim", seed=0))
        except ReplayMismatch as err:  # raised once the run is over: its outcome is compared too
            mismatch = [str(err)]
    except Exception as err:  # noqa: BLE001 - reported per seed, the run goes on
        found = [f"error: {type(err).__name__}: {err}"]
    else:
        found = mismatch + differences(case, model, got)
    text = scenario_text(seed)
    placement_agrees = all(aspect(d) == "scores" for d in found)
    affinity, guarded = affinity_groups(case), guarded_groups(case)
    for d in found:
        cause = next((k for k in known if k.excuses(d, text, placement_agrees, affinity, guarded)), None)
        if cause is not None:
            result.excused.append((d, cause.name))
        elif d.startswith("error: "):
            result.error = d.removeprefix("error: ")
        else:
            result.differences.append(d)
    result.seconds = time.monotonic() - started
    return result
