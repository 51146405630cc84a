"""``Session.describe_node``: what ``kubectl describe node`` shows, from the shared rows.

Built from the same ``NodeRow``/``PodRow`` every backend already reports, so the text
is identical on the simulator and on a real cluster. It keeps the sections an on-call
engineer reads for GPU trouble: Labels (NVIDIA's), Taints, Unschedulable, Capacity,
Allocatable (a gap between them is a dead device plugin), the non-terminated pods and
Allocated resources. Limits are left out: gpu-lab tracks requests, and for extended
resources such as ``nvidia.com/gpu`` Kubernetes requires requests to equal limits.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ..model.quantity import format_quantity
from ..names import TERMINAL_PHASES
from .tables import NodeRow, PodRow

# kubectl prints percentages for these (of allocatable); extended resources get a bare count.
_PERCENT = ("cpu", "memory", "ephemeral-storage")


def _quantities(values: dict[str, int]) -> dict[str, str]:
    return {k: format_quantity(k, v) for k, v in sorted(values.items())}


@dataclass
class NodeDescription:
    name: str
    labels: dict[str, str]
    taints: list[str]
    unschedulable: bool
    capacity: dict[str, str]  # Kubernetes quantities, as kubectl prints them
    allocatable: dict[str, str]
    allocated: dict[str, str]  # summed requests of the node's non-terminated pods
    pods: pd.DataFrame = field(repr=False)  # namespace, name, phase, requests
    _allocated_raw: dict[str, int] = field(default_factory=dict, repr=False)
    _allocatable_raw: dict[str, int] = field(default_factory=dict, repr=False)

    def __str__(self) -> str:
        w = 20
        lines = [f"{'Name:':{w}}{self.name}"]
        labels = [f"{k}={v}" for k, v in sorted(self.labels.items())] or ["<none>"]
        lines.append(f"{'Labels:':{w}}{labels[0]}")
        lines += [" " * w + lab for lab in labels[1:]]
        taints = self.taints or ["<none>"]
        lines.append(f"{'Taints:':{w}}{taints[0]}")
        lines += [" " * w + t for t in taints[1:]]
        lines.append(f"{'Unschedulable:':{w}}{str(self.unschedulable).lower()}")
        for title, values in (("Capacity:", self.capacity), ("Allocatable:", self.allocatable)):
            lines.append(title)
            lines += [f"  {k + ':':<{w}}{v}" for k, v in values.items()]
        lines.append(f"Non-terminated Pods:  ({len(self.pods)} in total)")
        if len(self.pods):
            lines.append(f"  {'Namespace':<16}{'Name':<28}Requests")
            lines.append(f"  {'---------':<16}{'----':<28}--------")
            for _, p in self.pods.iterrows():
                req = ", ".join(f"{k}: {v}" for k, v in sorted(p["requests"].items())) or "-"
                lines.append(f"  {p['namespace']:<16}{p['name']:<28}{req}")
        lines.append("Allocated resources:")
        lines.append(f"  {'Resource':<28}Requests")
        lines.append(f"  {'--------':<28}--------")
        for r in sorted(set(self._allocatable_raw) | set(self._allocated_raw)):
            if r == "pods":
                continue
            used = self._allocated_raw.get(r, 0)
            text = format_quantity(r, used)
            alloc = self._allocatable_raw.get(r, 0)
            if r in _PERCENT:
                text += f" ({int(used * 100 / alloc) if alloc else 0}%)"
            lines.append(f"  {r:<28}{text}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def _repr_pretty_(self, p, cycle) -> None:  # IPython shows it as kubectl would
        p.text(str(self))


def describe(node: NodeRow, pods: list[PodRow]) -> NodeDescription:
    held = [p for p in pods if p.node == node.name and p.phase not in TERMINAL_PHASES]
    allocated: dict[str, int] = {}
    for p in held:
        for k, v in p.requests.items():
            allocated[k] = allocated.get(k, 0) + v
    for r in ("cpu", "memory"):
        allocated.setdefault(r, 0)
    table = pd.DataFrame(
        [{"namespace": p.namespace, "name": p.name, "phase": p.phase,
          "requests": _quantities(p.requests)} for p in held],
        columns=["namespace", "name", "phase", "requests"])
    taints = [f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}" for t in node.taints]
    return NodeDescription(node.name, dict(node.labels), taints, node.unschedulable,
                           _quantities(node.capacity), _quantities(node.allocatable),
                           _quantities(allocated), table, allocated, dict(node.allocatable))
