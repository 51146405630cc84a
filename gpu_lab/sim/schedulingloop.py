"""kube-scheduler's loop around its algorithm: pop a pod, run its cycle, bind it or handle the failure.

``Scheduler.schedule_one`` decides (``schedulePod``); this loop does what ``ScheduleOne``
does with the answer: binds the pod (``Binder``), or records why it is pending, carries
out a preemption (victims evicted, the preemptor nominated, lower-priority nominations on
that node dropped) and moves waiting pods back to activeQ when an event may help them.
Pod groups get one cycle per group; the members that fit go through Permit, where
GangScheduling holds them, with their nodes reserved, until the gang is complete.
"""

from __future__ import annotations

from ..names import stable_uid
from .binder import Binder
from .cluster import Cluster, PodRecord
from .events import SCHEDULED, truncate
from .plugins.defaultpreemption import lower_priority_nominated
from .podgroups import WaitingPod
from .queue import PERMIT_TIMER, ActiveQueue, GangQueue, SchedulingQueue
from .scheduler import Attempt


class SchedulingLoop:
    def __init__(self, cluster: Cluster, queue: SchedulingQueue, binder: Binder) -> None:
        self.cluster, self.queue, self.binder = cluster, queue, binder

    def run(self) -> None:
        """One pass over the queue: every pending pod gets its cycle (more than one when room is made)."""
        c, queue = self.cluster, self.queue
        c.scheduler.batching.expire()  # OpportunisticBatching's state is 500 ms old at most
        pending, waiting = [], []
        for r in queue.pending():
            if not queue.worth_trying(r):
                waiting.append(r)  # in unschedulablePods: an event of this pass may move it
            elif not queue.dra_gated(r):
                pending.append(r)
        gangs = queue.pod_group_queue(pending)  # None: no pod names a PodGroup (the usual case)
        if gangs is not None:
            pending = [r for r in pending if r.pod.key not in gangs.gated]
            waiting = []  # a gang's members are kept whole (worth_trying): none wait here
        active = ActiveQueue(pending, waiting)
        while (key := active.pop()) is not None:
            rec = c.records[key]
            if rec.phase != "Pending" or rec.node is not None:
                continue
            if gangs is not None and key in gangs.group_of:
                group_key = gangs.group_of[key]
                if group_key in gangs.tried:
                    continue  # the group's cycle took this member already
                gangs.tried.add(group_key)
                bound, failed, preempted = self._schedule_pod_group(gangs, group_key)
                for u in failed:
                    active.unschedulable(u)
                if preempted:  # room was made: everyone waiting gets another try, the group too
                    active.move_all_to_active()
                    gangs.tried.discard(group_key)
                else:
                    for pod in bound:
                        active.assigned_pod_added(pod, c.scheduler.config.profile_for)
                continue
            keep = c.scheduler.record = c.keeps(key)
            attempt = c.scheduler.schedule_one(rec.pod, cycle=c.scheduler.next_cycle())
            rec.attempts += 1
            queue.tried(c, rec)
            rec.attempt = attempt.compact() if keep else None
            if keep:
                c.kept_cells += attempt.cells()
            elif c.record:
                c.dropped = True
            if attempt.node is not None:
                self._bind(rec, attempt.node)
                active.assigned_pod_added(rec.pod, c.scheduler.config.profile_for)
                continue
            if self._handle_failure(rec, attempt):
                # Deleting pods frees room: everyone waiting gets another try.
                active.move_all_to_active()
                active.push(rec)
            else:
                active.unschedulable(rec, pod_added_may_help=True)

    def _bind(self, rec: PodRecord, node: str) -> None:
        """The binding cycle: the default binder's ``Scheduled`` event once the API server took
        the binding (the kubelet may still reject the pod after it), then the bind."""
        pod = rec.pod
        self.cluster.api_events.record(pod.namespace, "Pod", pod.name, "Normal", "Scheduled",
                                       SCHEDULED.format(pod.namespace, pod.name, node), self.cluster.now)
        self.binder.bind(rec, node)

    def _failed(self, rec: PodRecord) -> None:
        """handleSchedulingFailure's ``FailedScheduling`` event, in the pod's condition message."""
        pod = rec.pod
        self.cluster.api_events.record(pod.namespace, "Pod", pod.name, "Warning", "FailedScheduling", truncate(rec.message),
                                       self.cluster.now)

    def _handle_failure(self, rec: PodRecord, attempt: Attempt) -> bool:
        """Record why the pod is pending and carry out its preemption, if PostFilter nominated
        a node: its victims are evicted. Returns whether any were (room was made)."""
        c = self.cluster
        rec.message = attempt.message
        self._failed(rec)
        rec.unschedulable_plugins = set(attempt.diagnosis.unschedulable_plugins) if attempt.diagnosis else set()
        pf = attempt.post_filter
        if pf is not None and pf.nominated_node is None and pf.nominating_mode == "Override":
            c.scheduler.forget_nomination(rec.pod)
            rec.nominated_node = None
        if pf is None or pf.nominated_node is None:
            return False
        node_name = c.snapshot.nodes[pf.nominated_node].name
        for victim in pf.victims:
            self.binder.evict(victim, rec.pod)
        # Lower-priority pods nominated to that node lose their claim (the preemption executor).
        for other in lower_priority_nominated(c.scheduler.nominated, rec.pod.priority, pf.nominated_node):
            c.scheduler.forget_nomination(other)
            c.records[other.key].nominated_node = None
        c.scheduler.nominate(rec.pod, pf.nominated_node)
        rec.nominated_node = node_name
        return True

    # ----------------------------------------------- pod groups (native gang scheduling)
    def _schedule_pod_group(self, gangs: GangQueue, key: str) -> tuple[list, list[PodRecord], bool]:
        """One pod group scheduling cycle; its members that fit go through Permit to bind.
        Returns (the members placed when any bound, members left unschedulable, victims evicted)."""
        c = self.cluster
        groups = c.scheduler.pod_groups
        group = groups.groups[key]
        members = gangs.members[key]
        c.scheduler.record = c.record  # a group's cycle keeps its explanations whole (groups are small)
        result = c.scheduler.schedule_pod_group(group, [r.pod for r in members], groups.state(key).scheduled,
                                                cycle=c.scheduler.next_cycle())
        by_key = {r.pod.key: r for r in members}
        for rec in members:
            rec.attempts += 1
            SchedulingQueue.tried(c, rec)
        if c.record:
            for a in result.attempts:
                by_key[a.pod.key].attempt = a.compact()
            for rec in members[len(result.attempts):]:
                rec.attempt = Attempt(pod=rec.pod, profile=rec.pod.scheduler_name,
                                      message=result.messages[rec.pod.key], node_names=c.snapshot.names)
        c.pod_group_conditions[key] = result.condition
        any_bound = False
        for a in result.scheduled:
            any_bound = self.permit(by_key[a.pod.key], a.node, key) or any_bound
        bound = [a.pod for a in result.scheduled] if any_bound else []
        failed = []
        for pod_key, message in result.messages.items():
            rec = by_key[pod_key]
            rec.message = message
            self._failed(rec)
            a = rec.attempt
            rec.unschedulable_plugins = (set(a.diagnosis.unschedulable_plugins)
                                         if a is not None and a.diagnosis is not None and a.node is None
                                         else {"GangScheduling"})
            if a is not None and a.node is not None:  # it fit, but its group did not: not bound
                a.node, a.message = None, message
            failed.append(rec)
        post = result.post_filter
        if post is None or not post.victims:
            return bound, failed, False
        preemptor = members[0].pod
        by = f"podgroup {stable_uid(*key.split('/', 1), 'PodGroup')}"  # the sim's PodGroups have no uid of their own
        for victim in post.victims:
            self.binder.evict(victim, preemptor, by)
        for pod_key, i in post.nominated_pods.items():
            c.scheduler.nominate(by_key[pod_key].pod, i)
            by_key[pod_key].nominated_node = c.snapshot.nodes[i].name
        return bound, failed, True

    def permit(self, rec: PodRecord, node: str, group_key: str) -> bool:
        """Assume the member on ``node`` and run Permit: bind it (and every member Permit
        released) now, or hold it with its resources reserved. Returns whether any bound."""
        c = self.cluster
        groups = c.scheduler.pod_groups
        state = groups.state(group_key)
        c.snapshot.add_pod(rec.pod, c.snapshot.index[node])  # assumed
        state.scheduled += 1
        status, waits = c.scheduler.run_permit(rec.pod, node)
        if status is not None and status.code == "Wait":
            timeout = min(waits.values())
            plugin = min(waits, key=waits.__getitem__)
            groups.waiting_pods[rec.pod.key] = WaitingPod(rec.pod, node, c.now + timeout, plugin, timeout)
            state.waiting.append(rec.pod.key)
            c.events.push(c.now + timeout, "wake", (PERMIT_TIMER, rec.pod.key))
            return False
        c.snapshot.remove_pod(rec.pod)
        if status is not None:  # rejected at Permit: unreserved, back to the queue
            state.scheduled -= 1
            rec.message = status.message()
            self._failed(rec)
            return False
        released = [w for w in groups.waiting_pods.values() if w.allowed]
        for w in released:
            del groups.waiting_pods[w.pod.key]
            state.waiting.remove(w.pod.key)
            c.snapshot.remove_pod(w.pod)
        self._bind(rec, node)
        for w in released:
            self._bind(c.records[w.pod.key], w.node)
        return True
