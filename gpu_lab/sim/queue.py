"""The scheduling queue: which pending pods a pass tries, in which order, and which wait.

kube-scheduler's activeQ pops pods by priority, then creation order; a pod found
unschedulable waits in unschedulablePods until an event may help it: a pod bound that the
rejecting plugins' queueing hints say may help (``queueinghints.py``: InterPodAffinity and
PodTopologySpread failures) or room made by preemption (for all).
PreEnqueue keeps pods out altogether: DynamicResources while a pod's ResourceClaims do not
exist, GangScheduling while its PodGroup lacks members. Members of a PodGroup are queued
for their group's cycle; one assumed on a node waits at Permit until its gang is complete,
and is rejected when the plugin's timeout runs out (``PermitTimer``).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

from ..model.duration import go_duration_string
from ..model.objects import Pod
from ..model.podgroup import pod_group_name
from . import queueinghints as hints
from .cluster import Cluster, PodRecord
from .dra import backend as dra
from .podgroups import PodGroupState
from .profile import Profile
from .scheduler import Attempt


class ActiveQueue:
    """One pass over the queue: activeQ as a heap, and the pods found unschedulable in it.

    The pass ends when activeQ is empty, or after a budget of pops (a pod moved back and
    forth by preemption cannot loop for ever)."""

    def __init__(self, recs: list[PodRecord], waiting: list[PodRecord] = ()) -> None:  # type: ignore[assignment]
        self._heap = [(-r.pod.priority, r.pod.created, r.pod.key) for r in recs]
        heapq.heapify(self._heap)
        self._budget = 20 * (len(self._heap) + len(waiting) + 10)
        # ``waiting``: pods still unschedulable from earlier passes (no event since has
        # helped them); the events of this pass move them as they move its own failures
        self._unschedulable: list[PodRecord] = list(waiting)
        self._waiting_on_pods: list[PodRecord] = [
            r for r in waiting if r.unschedulable_plugins & hints.ASSIGNED_POD_ADD]  # a bound pod may help

    def pop(self) -> str | None:
        """The next pod's key, or None when the pass is over."""
        if not self._heap or self._budget <= 0:
            return None
        self._budget -= 1
        return heapq.heappop(self._heap)[2]

    def push(self, rec: PodRecord) -> None:
        heapq.heappush(self._heap, (-rec.pod.priority, rec.pod.created, rec.pod.key))

    def unschedulable(self, rec: PodRecord, *, pod_added_may_help: bool = False) -> None:
        self._unschedulable.append(rec)
        if pod_added_may_help and rec.unschedulable_plugins & hints.ASSIGNED_POD_ADD:
            self._waiting_on_pods.append(rec)

    def move_all_to_active(self) -> None:
        """Room was made (victims deleted): everyone waiting gets another try."""
        for u in self._unschedulable:
            self.push(u)
        self._unschedulable, self._waiting_on_pods = [], []

    def assigned_pod_added(self, added: Pod, profile_for: Callable[[str], Profile | None]) -> None:
        """``added`` was bound: the pods whose rejecting plugins' queueing hints say it may
        help get another try (queueinghints.py); the rest keep waiting."""
        if not self._waiting_on_pods:
            return
        helped = [u for u in self._waiting_on_pods
                  if hints.assigned_pod_added(u.unschedulable_plugins, u.pod, added,
                                              profile_for(u.pod.scheduler_name))]
        for u in helped:
            self._waiting_on_pods.remove(u)
            self._unschedulable.remove(u)
            self.push(u)


@dataclass
class GangQueue:
    """One pass over the queue when pods name PodGroups: the pending pods kept out of it
    (PreEnqueue said no, or they wait at Permit), each queued member's group, each group's
    queued members in queue order, and the groups whose cycle already ran in this pass."""

    gated: set[str] = field(default_factory=set)
    group_of: dict[str, str] = field(default_factory=dict)
    members: dict[str, list[PodRecord]] = field(default_factory=dict)
    tried: set[str] = field(default_factory=set)


class PermitTimer:
    """The target of a Permit timeout's "wake" event: the pass over the queue that follows
    every clock step rejects the members whose wait ran out."""

    def wake(self, key: str) -> None:
        return None


PERMIT_TIMER = PermitTimer()


#: podMaxInUnschedulablePodsDuration: a pod this long in unschedulablePods is retried anyway
FLUSH_AFTER_S = 300.0


class SchedulingQueue:
    """The pending pods of a cluster, as each pass over the queue sees them."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster

    def pending(self) -> list[PodRecord]:
        """Pods waiting for a node: not bound, no spec.nodeName, no scheduling gate."""
        return [r for r in self.cluster.pending.values() if r.phase == "Pending" and r.node is None
                and not r.pod.node_name and not r.pod.raw.get("spec", {}).get("schedulingGates")]

    def worth_trying(self, rec: PodRecord) -> bool:
        """Whether a pass tries ``rec``: a new pod, yes; one found unschedulable earlier only
        when an event since may help it (queueinghints.py), or once it has waited five
        minutes (the queue's periodic flush). A pod's own message describes its last
        attempt, as on a real cluster, instead of being refreshed by every pass."""
        c = self.cluster
        if rec.attempts == 0 or not rec.unschedulable_plugins or rec.nominated_node is not None:
            return True
        if pod_group_name(rec.pod) or "GangScheduling" in rec.unschedulable_plugins:
            return True  # its group's membership decides; kept whole
        if c.wakeups > rec.tried_wakeups or c.now - rec.tried_at >= FLUSH_AFTER_S:
            return True
        if rec.unschedulable_plugins & hints.ASSIGNED_POD_ADD:
            profile = c.scheduler.config.profile_for(rec.pod.scheduler_name)
            return any(hints.assigned_pod_added(rec.unschedulable_plugins, rec.pod, added, profile)
                       for added in c.bound[rec.tried_bound:])
        return False

    @staticmethod
    def tried(c: Cluster, rec: PodRecord) -> None:
        """Note where the cluster stood when ``rec`` was tried."""
        rec.tried_at, rec.tried_wakeups, rec.tried_bound = c.now, c.wakeups, len(c.bound)

    def dra_gated(self, rec: PodRecord) -> bool:
        """DynamicResources' PreEnqueue: a pod whose ResourceClaims do not exist stays out of the
        queue, silent (no PodScheduled condition), as for a gated gang member."""
        c = self.cluster
        why = dra.not_queued(c.snapshot, rec.pod)
        if why is not None and c.record:
            rec.attempt = Attempt(pod=rec.pod, profile=rec.pod.scheduler_name, node_names=c.snapshot.names,
                                  message=f"not queued (PreEnqueue DynamicResources): {why}")
        return why is not None

    def pod_group_queue(self, pending: list[PodRecord]) -> GangQueue | None:
        """Counts every group's members for the scheduler, expires Permit waits, and runs
        PreEnqueue on pending members: those it turns away stay out of the queue, silent (no
        message), as a real pod blocked at PreEnqueue has no PodScheduled condition.
        None when no pod names a PodGroup (the usual case)."""
        c = self.cluster
        groups = c.scheduler.pod_groups
        groups.groups = c.pod_groups
        if not groups.groups and not groups.waiting_pods and not any(
                pod_group_name(r.pod) for r in pending):
            return None
        self.expire_permit_waits()
        states: dict[str, PodGroupState] = {}
        for rec in c.records.values():
            name = pod_group_name(rec.pod)
            if name is None or rec.phase not in ("Pending", "Running"):
                continue
            st = states.setdefault(f"{rec.pod.namespace}/{name}", PodGroupState())
            st.all_pods += 1
            if rec.pod.key in groups.waiting_pods:
                st.scheduled += 1
                st.waiting.append(rec.pod.key)
            elif rec.node is not None:
                st.scheduled += 1
        groups.states = states
        queue = GangQueue()
        for rec in pending:
            if rec.pod.key in groups.waiting_pods:
                queue.gated.add(rec.pod.key)
                continue
            member = groups.group_of(rec.pod)
            if member is None:
                continue  # not a member: scheduled on its own
            gated = c.scheduler.pre_enqueue(rec.pod)
            if gated is not None or member[1] is None:  # the queue holds a group's pods for it
                queue.gated.add(rec.pod.key)
            if gated is not None:
                rec.unschedulable_plugins = {gated.plugin}
                if c.record:
                    rec.attempt = Attempt(pod=rec.pod, profile=rec.pod.scheduler_name,
                                          message=f"not queued (PreEnqueue {gated.plugin}): {gated.message()}",
                                          node_names=c.snapshot.names)
            if rec.pod.key in queue.gated:
                continue
            queue.group_of[rec.pod.key] = member[0]
            queue.members.setdefault(member[0], []).append(rec)
        for recs in queue.members.values():
            recs.sort(key=lambda r: (-r.pod.priority, r.pod.created, r.pod.key))
        return queue

    def expire_permit_waits(self) -> None:
        """Members whose wait at Permit ran out are rejected, their nodes freed."""
        c = self.cluster
        groups = c.scheduler.pod_groups
        for key, w in list(groups.waiting_pods.items()):
            if w.deadline > c.now:
                continue
            del groups.waiting_pods[key]
            c.snapshot.remove_pod(w.pod)
            rec = c.records.get(key)
            if rec is not None:
                rec.message = (f"rejected due to timeout after waiting {go_duration_string(w.timeout_s)} "
                               f"at plugin {w.plugin}")
