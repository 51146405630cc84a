"""GangScheduling: all-or-nothing placement of a PodGroup's pods (plugins/gangscheduling).

kube-scheduler v1.37.2 runs it (in the default profile once the GenericWorkload gate is
on) at three points, and the simulator models each:

1. PreEnqueue: a pod whose PodGroup does not exist, or whose gang has fewer than
   ``minCount`` members, never enters the scheduling queue: it stays Pending with no
   PodScheduled condition and no event (the scheduler says nothing), until the group or
   more members appear.
2. PlacementFeasible, in the pod group's scheduling cycle: the queue hands the scheduler
   all queued members at once; after each member is tried (filters and scores, its node
   reserved in the snapshot, no per-pod preemption) the plugin asks whether ``minCount``
   can still be met: ``scheduled + remaining < minCount`` ends the cycle (the group is
   Unschedulable and nothing binds), ``scheduled < minCount`` carries on, otherwise the
   group succeeds and the members that fit go on to bind.
3. Permit: each member is assumed and waits until the group has ``minCount`` members bound
   or assumed; then every waiting member is allowed. A member still waiting after five
   minutes (``permitTimeoutDuration``, not configurable) is rejected.

A basic PodGroup counts as ``minCount: 1``. The messages are the scheduler's own.
"""

from __future__ import annotations

from typing import Any

from ...model.podgroup import pod_group_name
from ..framework import UNRESOLVABLE, UNSCHEDULABLE, WAIT, CycleContext, Plugin, Status
from ..podgroups import PERMIT_TIMEOUT_S

WAITING_FOR_GROUP = 'waiting for pods\'s pod group "{}" to appear in scheduling queue'
WAITING_FOR_MEMBERS = "waiting for minCount pods from a gang to appear in scheduling queue"
WAITING_AT_PERMIT = "waiting for minCount pods from a gang to be scheduled"
CANNOT_BE_SATISFIED = "minCount ({}) cannot be satisfied: {} scheduled, {} remaining"
NOT_YET_SATISFIED = "minCount ({}) is not yet satisfied: {} scheduled, {} remaining"


class GangScheduling(Plugin):
    name = "GangScheduling"

    def _groups(self):
        return self.handle.pod_groups

    def pre_enqueue(self, pod) -> Status | None:
        name = pod_group_name(pod)
        if name is None or self.handle is None:
            return None
        groups = self._groups()
        group = groups.get(pod.namespace, name)
        if group is None:
            return Status(UNRESOLVABLE, (WAITING_FOR_GROUP.format(name),), self.name)
        if not group.gang:
            return None
        if groups.state(group.key).all_pods < group.min_count:
            return Status(UNRESOLVABLE, (WAITING_FOR_MEMBERS,), self.name)
        return None

    def placement_feasible(self, group: Any, remaining: int, scheduled: int) -> Status | None:
        min_count = group.min_count if group.gang else 1
        if remaining + scheduled < min_count:
            return Status(UNSCHEDULABLE, (CANNOT_BE_SATISFIED.format(min_count, scheduled, remaining),), self.name)
        if scheduled < min_count:
            return Status(WAIT, (NOT_YET_SATISFIED.format(min_count, scheduled, remaining),), self.name)
        return None

    def permit(self, ctx: CycleContext, node: str) -> tuple[Status | None, float]:
        name = pod_group_name(ctx.pod)
        if name is None or self.handle is None:
            return None, 0.0
        groups = self._groups()
        group = groups.get(ctx.pod.namespace, name)
        if group is None or not group.gang:
            return None, 0.0
        state = groups.state(group.key)
        if state.scheduled < group.min_count:
            return Status(WAIT, (WAITING_AT_PERMIT,), self.name), PERMIT_TIMEOUT_S
        # Quorum: this pod goes on, and so does every member waiting at Permit.
        for key in state.waiting:
            waiting = groups.waiting_pods.get(key)
            if waiting is not None:
                waiting.allow(self.name)
        return None, 0.0
