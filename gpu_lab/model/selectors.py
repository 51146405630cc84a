"""Label selectors and node selector terms, matched the way apimachinery does.

``LabelSelector`` is ``metav1.LabelSelector`` (matchLabels + matchExpressions
with In, NotIn, Exists, DoesNotExist); ``NodeSelectorTerm`` is the node-affinity
form, which adds Gt/Lt and matchFields on ``metadata.name``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str
    values: tuple[str, ...] = ()

    def matches(self, labels: dict[str, str]) -> bool:
        op, present = self.operator, self.key in labels
        if op == "In":
            return present and labels[self.key] in self.values
        if op == "NotIn":
            return not present or labels[self.key] not in self.values
        if op == "Exists":
            return present
        if op == "DoesNotExist":
            return not present
        if op in ("Gt", "Lt"):
            if not present or len(self.values) != 1:
                return False
            try:
                have, want = int(labels[self.key]), int(self.values[0])
            except ValueError:
                return False
            return have > want if op == "Gt" else have < want
        return False


@dataclass(frozen=True)
class LabelSelector:
    """A parsed ``metav1.LabelSelector``; hashable so results can be cached by it."""

    requirements: tuple[Requirement, ...]
    nothing: bool = False  # a nil selector in the contexts where nil selects nothing

    @classmethod
    def parse(cls, raw: dict[str, Any] | None) -> LabelSelector:
        if raw is None:
            return cls((), nothing=True)
        reqs = [Requirement(k, "In", (str(v),)) for k, v in sorted((raw.get("matchLabels") or {}).items())]
        for e in raw.get("matchExpressions") or []:
            reqs.append(Requirement(e["key"], e["operator"], tuple(str(v) for v in e.get("values") or ())))
        return cls(tuple(reqs))

    def matches(self, labels: dict[str, str]) -> bool:
        if self.nothing:
            return False
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.nothing and not self.requirements


@dataclass(frozen=True)
class NodeSelectorTerm:
    match_expressions: tuple[Requirement, ...]
    match_fields: tuple[Requirement, ...]

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> NodeSelectorTerm:
        def reqs(items):
            return tuple(Requirement(e["key"], e["operator"], tuple(str(v) for v in e.get("values") or ()))
                         for e in items or [])
        return cls(reqs(raw.get("matchExpressions")), reqs(raw.get("matchFields")))

    def matches(self, node_name: str, labels: dict[str, str]) -> bool:
        # An empty term matches nothing (nodeaffinity helper semantics).
        if not self.match_expressions and not self.match_fields:
            return False
        if not all(r.matches(labels) for r in self.match_expressions):
            return False
        fields = {"metadata.name": node_name}
        return all(r.matches(fields) for r in self.match_fields)


def node_selector_matches(terms: list[NodeSelectorTerm], node_name: str, labels: dict[str, str]) -> bool:
    """Terms are ORed; within a term requirements are ANDed."""
    return any(t.matches(node_name, labels) for t in terms)
