"""Explanations of a scheduling decision: node x filter plugin, node x score plugin.

Like kube-scheduler-simulator's result annotations: every filter plugin's
verdict on every node (the first rejecting plugin is the one the real
scheduler reports), each score plugin's raw, normalised and weighted score,
the total, and the chosen node.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

PASSED = "passed"
NOT_EVALUATED = "not evaluated"


def batched_note(node: str) -> str:
    """What explain says, on every backend, of a pod placed on OpportunisticBatching's node
    hint (``sim/batch.py``): the real scheduler logs the hint and no scores."""
    return (f"opportunistic batching: the previous pod's ranking hinted {node}, which passed the "
            "filters, so the scheduler checked no other node and skipped scoring")


def _names(nodes: list[str]) -> str:
    return " and ".join(nodes) if len(nodes) <= 2 else ", ".join(nodes[:-1]) + " and " + nodes[-1]


@dataclass
class Explanation:
    pod: str
    node: str | None
    message: str
    profile: str
    filters: pd.DataFrame  # index node; one column per filter plugin; "passed" / reason
    scores: pd.DataFrame  # index node (feasible only); plugin columns + total
    notes: list[str] = field(default_factory=list)

    @property
    def chosen(self) -> str | None:
        return self.node

    def tie(self) -> list[str]:
        """The nodes that share the best total with the chosen one (itself first); empty when
        the chosen node scored strictly highest. kube-scheduler picks among these at random
        (``selectHost``); the sim's pick is seeded, so a lesson reads the same every run."""
        table = self.scores
        if self.node is None or table.empty or ("total", "") not in table.columns \
                or self.node not in table.index:
            return []
        totals = table[("total", "")]
        best = totals.max()
        if totals[self.node] != best:
            return []
        tied = [str(n) for n, t in totals.items() if t == best]
        return [self.node] + [n for n in tied if n != self.node] if len(tied) > 1 else []

    def uniform_plugins(self) -> list[str]:
        """Score plugins that gave every scored node the same weighted points: they add to
        every total alike and had no say in the choice (empty with fewer than two nodes)."""
        table = self.scores
        if table.empty or len(table.index) < 2:
            return []
        return [p for p in dict.fromkeys(c[0] for c in table.columns)
                if p != "total" and (p, "weighted") in table.columns
                and table[(p, "weighted")].nunique() == 1]

    def summary(self) -> str:
        lines = [f"pod {self.pod} (profile {self.profile})"]
        if self.node:
            lines.append(f"  -> bound to {self.node}")
        else:
            lines.append(f"  -> pending: {self.message}")
        lines.extend(f"  {n}" for n in self.notes)
        tied = self.tie()
        if tied:
            total = int(self.scores.loc[self.node, ("total", "")])
            lines.append(f"  tie between {_names(tied)} at {total}: broken by the scheduler's "
                         "random pick (seeded on the sim)")
        same = self.uniform_plugins()
        if same:
            lines.append(f"  same score on every node (no say in the choice): {', '.join(same)}")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        nodes = []
        for name, row in self.filters.iterrows():
            entry: dict[str, Any] = {"name": name, "filters": {k: v for k, v in row.items() if k != "result"},
                                     "result": row.get("result")}
            if name in self.scores.index:
                srow = self.scores.loc[name]
                plug: dict[str, dict[str, int]] = {}
                for col, val in srow.items():
                    if isinstance(col, tuple) and col[0] != "total":
                        plug.setdefault(col[0], {})[col[1]] = int(val)
                entry["scores"] = plug
                entry["total"] = int(srow[("total", "")]) if ("total", "") in srow.index else None
            nodes.append(entry)
        return {"pod": self.pod, "node": self.node, "message": self.message, "profile": self.profile,
                "notes": self.notes, "nodes": nodes}

    def __str__(self) -> str:
        parts = [self.summary()]
        if not self.filters.empty:  # a pod the scheduler never tried has no tables
            parts += ["", "Filter:", self.filters.to_string()]
        if not self.scores.empty:
            kinds = " / ".join(dict.fromkeys(c[1] for c in self.scores.columns if c[1]))
            parts += ["", f"Score ({kinds}):", self.scores.to_string()]
        return "\n".join(parts)

    def _repr_html_(self) -> str:
        html = f"<p><b>{self.summary().splitlines()[0]}</b><br>{'<br>'.join(self.summary().splitlines()[1:])}</p>"
        if not self.filters.empty:
            html += "<h4>Filter</h4>" + self.filters.to_html()
        if not self.scores.empty:
            html += "<h4>Score</h4>" + self.scores.to_html()
        return html


def build_explanation(attempt, filter_verdicts: Mapping[str, Mapping[int, str]] | None) -> Explanation:
    """Turn a recorded ``Attempt`` into tables."""
    names = attempt.node_names
    profile = attempt.profile
    notes: list[str] = []
    evaluated = set(int(i) for i in (attempt.evaluated if attempt.evaluated is not None else []))
    feasible = [int(i) for i in (attempt.feasible if attempt.feasible is not None else [])]
    rows = {}
    verdicts = filter_verdicts or {}
    for i, name in enumerate(names):
        row = {}
        for plugin, per_node in verdicts.items():
            row[plugin] = per_node.get(i, PASSED) if i in evaluated or not evaluated else NOT_EVALUATED
        if i in attempt.failed_by:
            row["result"] = f"rejected by {attempt.failed_by[i].plugin}: {attempt.failed_by[i].message()}"
        elif i in feasible:
            row["result"] = "feasible"
        elif attempt.diagnosis is not None and attempt.diagnosis.pre_filter_msg:
            row["result"] = f"rejected at PreFilter: {attempt.diagnosis.pre_filter_msg}"
        else:
            row["result"] = NOT_EVALUATED
        rows[name] = row
    filters = pd.DataFrame.from_dict(rows, orient="index")
    filters.index.name = "node"

    score_rows: dict[str, dict] = {}
    for k, i in enumerate(feasible):
        r: dict = {}
        for plugin, ps in attempt.scores.items():
            r[(plugin, "raw")] = int(ps.raw[k])
            r[(plugin, "normalized")] = int(ps.normalized[k])
            r[(plugin, "weighted")] = int(ps.normalized[k]) * ps.weight
        if attempt.total is not None:
            r[("total", "")] = int(attempt.total[k])
        score_rows[names[i]] = r
    scores = pd.DataFrame.from_dict(score_rows, orient="index")
    if not scores.empty:
        scores.columns = pd.MultiIndex.from_tuples(scores.columns)
        scores.index.name = "node"
        if ("total", "") in scores.columns:
            scores = scores.sort_values(("total", ""), ascending=False, kind="stable")
    if attempt.via_nominated_node:
        notes.append("placed on its nominated node (set by an earlier preemption) without scoring")
    elif attempt.batch_hint is not None and attempt.node == attempt.batch_hint:
        notes.append(batched_note(attempt.batch_hint))
    elif len(feasible) == 1 and attempt.node:
        notes.append("only one feasible node: the scheduler skips scoring")
    if attempt.skipped_score_plugins:
        notes.append("score plugins skipped at PreScore: " + ", ".join(attempt.skipped_score_plugins))
    tried_one = attempt.via_nominated_node or attempt.batch_hint is not None  # not percentageOfNodesToScore
    if attempt.evaluated is not None and 0 < len(evaluated) < len(names) and not tried_one:
        notes.append(
            f"percentageOfNodesToScore: the filter stopped after {len(evaluated)} of {len(names)} nodes "
            f"({len(feasible)} feasible)"
        )
    pf = attempt.post_filter
    if pf is not None and pf.nominated_node is not None:
        notes.append(
            f"preemption: nominated {names[pf.nominated_node]}, evicting "
            + ", ".join(v.key for v in pf.victims)
        )
    return Explanation(attempt.pod.key, attempt.node, attempt.message, profile, filters, scores, notes)
