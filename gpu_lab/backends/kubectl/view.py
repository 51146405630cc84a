"""What the sim's kubectl reads: pods, nodes and Events as the API objects would say them,
with times in seconds on the session's clock (``now``) and ``epoch`` the wall-clock second
the clock's zero stands for (for describe's dates and the Events' names)."""

from __future__ import annotations

from dataclasses import dataclass, field

from ...model.objects import Taint
from .duration import human_duration


@dataclass
class KPod:
    namespace: str
    name: str
    phase: str  # Pending, Running, Succeeded, Failed
    reason: str  # status.reason, or the PodScheduled condition's (SchedulingGated)
    node: str | None
    nominated: str | None
    created: float
    containers: int
    requests: dict[str, int]  # internal units (cpu milli, bytes)
    limits: dict[str, int]


@dataclass
class KNode:
    name: str
    labels: dict[str, str]
    annotations: dict[str, str]
    taints: list[Taint]
    unschedulable: bool
    capacity: dict[str, int]
    allocatable: dict[str, int]
    created: float
    info: dict[str, str]  # status.nodeInfo
    addresses: list[tuple[str, str]]  # (type, address)


@dataclass
class KEvent:
    namespace: str
    kind: str
    name: str
    type: str
    reason: str
    message: str
    first: float
    last: float
    count: int
    source: str  # the component that recorded it (describe's From)


@dataclass
class View:
    now: float
    epoch: float
    pods: list[KPod] = field(default_factory=list)
    nodes: list[KNode] = field(default_factory=list)
    events: list[KEvent] = field(default_factory=list)

    def age(self, t: float) -> str:
        return human_duration(self.now - t)
