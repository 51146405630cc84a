"""A pod group's preemption: DefaultPreemption's PodGroupPostFilter (framework/preemption/
podgrouppreemption.go, kube-scheduler v1.37.2).

The domain is the whole cluster. Every bound pod of lower priority than the group (the
PodGroup's ``spec.priority``, from its priorityClassName) is a potential victim; with none
the answer is "No preemption victims found for incoming preemptor". Otherwise all of them
are removed from the snapshot and the group's algorithm runs once more: if the group still
cannot be placed, that verdict is the answer. If it can, victims are put back one by one,
those a PodDisruptionBudget protects first (``FilterVictimsWithPDBViolation``, as in
DefaultPreemption), each list most important first (higher priority, then earlier start),
keeping each one every member of the group can still live with on its proposed node; the
rest are evicted and the members are nominated to their proposed nodes.

Simplifications, said here so nobody relies on them: a victim is one pod (Kubernetes
treats a victim that belongs to a gang as its whole group), and a group's own ``preemptionPolicy`` (gate PodGroupPreemptionPolicy,
alpha, off) is not read: as with the gate off, the group is not eligible to preempt when any
of its unscheduled members has ``preemptionPolicy: Never`` (``resolvePreemptionPolicy``),
which is checked before anything else.
"""

from __future__ import annotations

from typing import Any

from ...model.disruptionbudget import violating
from ..framework import (
    SUCCESS,
    UNRESOLVABLE,
    UNSCHEDULABLE,
    CycleContext,
    PostFilterResult,
    Status,
    run_filter_plugins,
)
from ..util import more_important_key

PREFIX = "pod group preemption: "
NO_VICTIMS = "No preemption victims found for incoming preemptor"
FOUND = "found a placement for podgroup, preempting {} victims"
NOT_ELIGIBLE = "not eligible due to preemptionPolicy=Never."


def preempt_for_group(plugin: Any, group: Any, run_group: Any, members: list) -> PostFilterResult:
    """``PodGroupEvaluator.Preempt``, worded as ``DefaultPreemption.PodGroupPostFilter``;
    ``members`` are the group's unscheduled pods (the preemptor's)."""
    if any(p.preemption_policy == "Never" for p in members):
        return PostFilterResult(status=Status(UNSCHEDULABLE, (PREFIX + NOT_ELIGIBLE,), plugin.name))
    snap = plugin.handle.snapshot
    victims = [p for pods in snap.pods_on for p in pods if p.priority < group.priority]
    if not victims:
        return PostFilterResult(status=Status(UNRESOLVABLE, (PREFIX + NO_VICTIMS,), plugin.name))
    home = {v.key: snap.pod_node[v.key] for v in victims}
    for v in victims:
        snap.remove_pod(v)
    try:
        status, attempts = run_group()
        if status.code != SUCCESS:
            return PostFilterResult(status=Status(status.code, (PREFIX + status.message(),), plugin.name))
        assignments = [(a.pod, snap.index[a.node]) for a in attempts if a.node is not None]
        evicted = []
        read = getattr(plugin.handle, "disruption_budgets", None)
        bad, good = violating(sorted(victims, key=more_important_key), list(read() if callable(read) else []))
        for v in [p for p, _ in bad] + good:  # the PDB-protected victims are reprieved first
            snap.add_pod(v, home[v.key])
            if not _members_fit(plugin, snap, assignments):
                snap.remove_pod(v)
                evicted.append(v)
    finally:
        for v in victims:
            if v.key not in snap.pod_node:
                snap.add_pod(v, home[v.key])
    res = PostFilterResult(victims=sorted(evicted, key=more_important_key),
                           status=Status(SUCCESS, (PREFIX + FOUND.format(len(evicted)),), plugin.name))
    res.nominated_pods = {pod.key: i for pod, i in assignments}
    return res


def _members_fit(plugin: Any, snap: Any, assignments: list) -> bool:
    """Every member still passes the filters on its proposed node, members before it assumed."""
    profiles = plugin.handle.config
    added = []
    try:
        for pod, i in assignments:
            ctx = CycleContext(pod=pod, snapshot=snap, profile=profiles.profile_for(pod.scheduler_name))
            if run_filter_plugins(ctx, i) is not None:
                return False
            snap.add_pod(pod, i)
            added.append(pod)
        return True
    finally:
        for pod in reversed(added):
            snap.remove_pod(pod)
