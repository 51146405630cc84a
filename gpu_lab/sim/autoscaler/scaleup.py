"""Scale-up: pending pods that fit no node now get new nodes, cluster-autoscaler's way.

Pods that fit on nodes already on their way wait for them (CA injects upcoming
nodes into its snapshot first). For the rest, every autoscaled group not at
``maxCount`` is an option: the binpacking estimator says how many of its nodes
the pods need and which pods they would hold. The expander picks one option;
its nodes are requested and Ready after the group's ``provisioningDelay``. The
pods it leaves are offered again, so several groups may grow in one call where
CA would take one scan (10 s) per group. Pods no group can help get CA's
``NotTriggerScaleUp`` event with the reason each group gave, counted.

In Consolidation mode the same estimate runs, the cheapest option wins (Karpenter
launches the cheapest instance type that fits) and the events are Karpenter's.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ...model.autoscaler import AutoscalerSpec
from .actions import Event, ScaleUp
from .estimator import Estimate, Fits, estimate, fresh
from .expander import choose
from .state import NodeGroup, PodState

MAX_GROUP = "max node group size reached"  # CA's MaxLimitReachedReason
MAX_TOTAL = "max total nodes in cluster reached"  # CA's ScaleUpLimitedByMaxNodesTotal message


@dataclass
class Upcoming:
    """Nodes requested and not Ready yet."""

    pool: str
    nodes: tuple[str, ...]
    ready_at: float


def plan_scale_up(now: float, spec: AutoscalerSpec, groups: Mapping[str, NodeGroup],
                  sizes: Mapping[str, int], upcoming: Sequence[Upcoming], pending: Sequence[PodState],
                  fits: Fits, rng: random.Random, name_node) -> tuple[list[ScaleUp], list[Event]]:
    """(scale-ups to request, events for pods no group helps). ``sizes`` counts each group's
    Ready nodes; ``name_node(pool)`` returns the next new node's name."""
    karpenter = spec.mode == "Consolidation"
    waiting = _fill_upcoming(pending, groups, upcoming, fits)
    left = [p for p in pending if p not in waiting]
    target = {g: sizes.get(g, 0) + sum(len(u.nodes) for u in upcoming if u.pool == g) for g in groups}
    ups: list[ScaleUp] = []
    events: list[Event] = []
    reasons: dict[PodState, dict[str, str]] = {}
    while left:
        options: list[Estimate] = []
        total_room = spec.max_nodes_total - sum(target.values()) if spec.max_nodes_total else None
        for name in sorted(groups):
            group = groups[name]
            room = group.max_count - target[name]
            limited = MAX_GROUP
            if total_room is not None and total_room < room:
                room, limited = total_room, MAX_TOTAL
            if room <= 0:
                for pod in left:
                    reasons.setdefault(pod, {})[name] = limited
                continue
            est = estimate(left, group, room, fits)
            for pod, why in est.rejected.items():
                reasons.setdefault(pod, {})[name] = why
            for pod in left:
                if pod not in est.rejected and pod not in est.placed:
                    reasons.setdefault(pod, {})[name] = limited
            if est.nodes:
                options.append(est)
        if not options:
            break
        best = choose(options, ("price",) if karpenter else spec.expander, spec.priorities, rng)
        group = best.group
        names = tuple(name_node(group.name) for _ in range(best.nodes))
        before = target[group.name]
        target[group.name] += best.nodes
        pods = sorted(best.placed, key=lambda p: p.key)
        if karpenter:
            message = f"created nodeclaim(s) {', '.join(names)} for {len(pods)} pod(s) (nodepool {group.name})"
            events += [Event(f"Pod {p.key}", "Nominated",
                             f"Pod should schedule on: nodeclaim/{names[best.placed[p]]}", source="karpenter")
                       for p in pods]
        else:
            message = f"pod triggered scale-up: [{{{group.name} {before}->{target[group.name]} (max: {group.max_count})}}]"
            events += [Event(f"Pod {p.key}", "TriggeredScaleUp", message) for p in pods]
        ups.append(ScaleUp(group.name, best.nodes, names, now + group.provisioning_delay,
                           "TriggeredScaleUp", message, tuple(p.key for p in pods)))
        left = [p for p in left if p not in best.placed]
        for pod in best.placed:
            reasons.pop(pod, None)
    for pod in left:
        events.append(_no_scale_up(pod, reasons.get(pod, {}), karpenter))
    return ups, events


def _fill_upcoming(pending: Sequence[PodState], groups: Mapping[str, NodeGroup],
                   upcoming: Sequence[Upcoming], fits: Fits) -> set[PodState]:
    """The pending pods that fit on nodes already requested (they wait for them)."""
    waiting: set[PodState] = set()
    for pool in sorted({u.pool for u in upcoming}):
        group = groups.get(pool)
        if group is None:
            continue
        # CA injects upcoming nodes as copies of the template, daemon pods and all
        frees = [fresh(group) for u in upcoming if u.pool == pool for _ in u.nodes]
        est = estimate([p for p in pending if p not in waiting], group, 0, fits, frees=frees)
        waiting.update(est.placed)
    return waiting


def _no_scale_up(pod: PodState, why: Mapping[str, str], karpenter: bool) -> Event:
    if karpenter:
        if not why:
            msg = "Failed to schedule pod, no nodepool can be scaled"
        else:
            parts = []
            for pool in sorted(why):
                if why[pool] in (MAX_GROUP, MAX_TOTAL):
                    parts.append(f'all available instance types exceed limits for nodepool "{pool}"')
                else:
                    parts.append(f'incompatible with nodepool "{pool}", {why[pool]}')
            msg = "Failed to schedule pod, " + "; ".join(parts)
        return Event(f"Pod {pod.key}", "FailedScheduling", msg, "Warning", "karpenter")
    if MAX_TOTAL in why.values():
        detail = MAX_TOTAL
    else:  # CA counts each reason over the node groups; Go's map order, made stable here
        counts = Counter(why.values())
        detail = ", ".join(f"{n} {reason}" for reason, n in sorted(counts.items()))
    return Event(f"Pod {pod.key}", "NotTriggerScaleUp", f"pod didn't trigger scale-up: {detail}")
