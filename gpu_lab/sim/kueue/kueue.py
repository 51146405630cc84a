"""``Kueue``: the admission model's state and the calls a clock-driven engine makes on it.

What is modelled where: the scheduler's cycle in ``scheduler``; here the parts of Kueue's
controllers that move a workload between states (pkg/controller/core/workload_controller.go,
pkg/controller/jobframework/reconciler.go): the condition a workload gets when its
LocalQueue or ClusterQueue is missing or inactive, admission, eviction and the release of
quota once the Job is stopped, the PodsReady timeout and its requeue backoff, finishing.
"""

from __future__ import annotations

import functools
import math
from typing import Any

from ...errors import GpuLabError
from ...model.kueue.objects import EVICTION_TIMESTAMP, STOP_NONE, ClusterQueue, KueueConfig
from ...model.kueue.quantities import quantity_string
from . import messages as m
from . import preemption
from . import scheduler as sched
from .decisions import Admit, Decision, Evict, Pending
from .flavorassigner import Assignment
from .queue import Queue
from .quota import Snapshot
from .workload import Admission, Workload, WorkloadSpec

MAX_CYCLES = 100_000


class Kueue:
    """Kueue v0.17.0 admission over one ``KueueConfig``; times are the caller's seconds."""

    def __init__(self, config: KueueConfig):
        self.config = config
        self.wfpr = config.wait_for_pods_ready
        self.stamp = self.wfpr.requeuing_timestamp if self.wfpr else EVICTION_TIMESTAMP
        self.snap = Snapshot(config.cluster_queues)
        self.queues = {name: Queue(cq, self.stamp) for name, cq in config.cluster_queues.items()}
        self.by_key: dict[str, Workload] = {}
        self._by_job: dict[str, str] = {}
        self.version = 0
        self.blocked: sched.Entry | None = None
        # what the scheduler worked out at one version: (version, nominations, preemption candidates)
        self.nominations: tuple[int, dict, dict] = (-1, {}, {})
        self._decisions: list[Decision] = []
        self._shown: dict[str, tuple[str, str]] = {}
        self._submitted = 0
        self._backing_off: set[str] = set()  # keys waiting out a requeue backoff
        self._namespace_ok: dict[tuple[str, str], bool] = {}
        self._deadlines: dict[str, float] = {}  # key -> PodsReady deadline of admitted workloads
        self._active = {name: self._cq_condition(cq)[0] == m.CQ_READY[0]
                        for name, cq in config.cluster_queues.items()}

    # ------------------------------------------------------------------ the caller's events

    def submit(self, spec: WorkloadSpec, now: float) -> None:
        """A Job was created (or became managed): its Workload appears and is queued."""
        if spec.key in self.by_key:
            raise GpuLabError(f'workloads.kueue.x-k8s.io "{spec.name}" already exists')
        wl = Workload(spec, seq=self._submitted)
        self._submitted += 1
        self.by_key[spec.key] = wl
        self._by_job[spec.job_key] = spec.key
        if self.wfpr:
            wl.set(m.PODS_READY, False, m.WAIT_FOR_START, m.PODS_NOT_READY_MESSAGE, now)
        self._enqueue(wl, now)

    def schedule(self, now: float) -> list[Decision]:
        """Run Kueue's controllers and scheduler at ``now``: PodsReady timeouts, finished
        backoffs, then scheduling cycles until nothing changes. Returns what the caller must
        do (``Admit``, ``Evict``) and the new pending messages (``Pending``)."""
        self._timeouts(now)
        self._backoffs(now)
        if self.blocked is not None:
            if self.admission_blocked():
                return self._flush()
            e, self.blocked = self.blocked, None
            if self.by_key.get(e.wl.key) is e.wl and not e.wl.has_quota and not e.wl.finished:
                self.admit(e.wl, e.cq, e.assignment, now)
        for _ in range(MAX_CYCLES):
            if self.blocked is not None or not sched.cycle(self, now):
                break
        return self._flush()

    def stopped(self, key: str, now: float) -> None:
        """The evicted workload's Job has no active pods any more: Kueue clears its admission,
        releases its quota and requeues it (jobframework reconciler, "handle eviction")."""
        wl = self._get(key)
        ev = wl.condition(m.EVICTED)
        if ev is None or ev.status != "True" or wl.admission is None or wl.finished:
            return
        wl.set(m.REQUEUED, ev.reason == m.EVICTED_BY_PREEMPTION, ev.reason, ev.message, now)
        self._unset_quota(wl, m.PENDING, ev.message, now)
        if self.wfpr:
            wl.set(m.PODS_READY, False, m.WAIT_FOR_START, m.PODS_NOT_READY_MESSAGE, now)
        self._release(wl, now)
        wl.admission = None
        if wl.active and wl.is_true(m.REQUEUED):
            self._enqueue(wl, now)
        elif self._in_backoff(wl):
            self._backing_off.add(wl.key)

    def pods_ready(self, key: str, now: float, ready: bool = True) -> None:
        """All the admitted Job's pods are ready or succeeded (``ready``), or one failed after
        they were (``ready=False``): the PodsReady condition, kept when waitForPodsReady is on."""
        wl = self._get(key)
        if not self.wfpr or not wl.admitted:
            return
        c = wl.condition(m.PODS_READY)
        if ready:
            recovered = c is not None and c.reason in (m.WAIT_FOR_RECOVERY, m.RECOVERED)
            wl.set(m.PODS_READY, True, m.RECOVERED if recovered else m.STARTED, m.PODS_READY_MESSAGE, now)
        elif c is not None and (c.status == "True" or c.reason == m.WAIT_FOR_RECOVERY):
            wl.set(m.PODS_READY, False, m.WAIT_FOR_RECOVERY, m.PODS_RECOVERING_MESSAGE, now)
        else:
            wl.set(m.PODS_READY, False, m.WAIT_FOR_START, m.PODS_NOT_READY_MESSAGE, now)
        # no version bump: readiness changes no admission decision, only whether a blocked
        # scheduler (blockAdmission) may go on, which ``schedule`` checks first
        self._track(wl)

    def finish(self, key: str, now: float, succeeded: bool = True, message: str | None = None) -> None:
        """The Job completed or failed: the Workload is Finished and its quota released."""
        wl = self._get(key)
        if wl.finished:
            return
        text = message or (m.JOB_COMPLETE_MESSAGE if succeeded else m.JOB_FAILED_MESSAGE)
        wl.set(m.FINISHED, True, m.FINISHED_SUCCEEDED if succeeded else m.FINISHED_FAILED, text, now)
        wl.finished_at = now
        self._deadlines.pop(wl.key, None)
        self._dequeue(wl)
        if wl.admission is not None and self._holds_quota(wl):
            self._release(wl, now)
        self.version += 1

    def delete(self, key: str, now: float) -> None:
        """The Job (and so its Workload) was deleted."""
        wl = self._get(key)
        self._dequeue(wl)
        if wl.admission is not None and self._holds_quota(wl):
            self._release(wl, now)
        del self.by_key[wl.key]
        self._backing_off.discard(wl.key)
        self._deadlines.pop(wl.key, None)
        self._by_job.pop(wl.spec.job_key, None)
        self.version += 1

    def next_wakeup(self) -> float | None:
        """When ``schedule`` must run next even if nothing else happens: the earliest PodsReady
        deadline or end of a requeue backoff; None when no timer is running."""
        times = list(self._deadlines.values())
        times += [t for k in self._backing_off if (t := self.by_key[k].requeue_at) is not None]
        return min(times) if times else None

    # ------------------------------------------------------------------ what the caller reads

    def status(self, key: str) -> dict[str, Any]:
        """The Workload's ``status`` as Kueue writes it (conditions, admission, requeueState)."""
        wl = self._get(key)
        out: dict[str, Any] = {"conditions": [c.as_dict() for c in wl.conditions.values()]}
        a = wl.admission
        if a is not None:
            out["admission"] = {"clusterQueue": a.cluster_queue, "podSetAssignments": [{
                "name": m.POD_SET_MAIN, "flavors": dict(a.flavors), "count": wl.spec.count,
                "resourceUsage": {r: quantity_string(r, q) for (f, r), q in a.usage.items()}}]}
        if wl.requeue_count or wl.requeue_at is not None:
            out["requeueState"] = {"count": wl.requeue_count, "requeueAt": wl.requeue_at}
        return out

    def workloads(self) -> list[dict[str, Any]]:
        """One row per workload (DataFrame-friendly): namespace, name, job, queue,
        cluster_queue, priority, state (Pending, Admitted, Evicting, Finished, Deactivated),
        flavors, created_at, admitted_at, finished_at, requeues, reason, message."""
        rows = []
        for wl in sorted(self.by_key.values(), key=lambda w: w.seq):
            shown = self._shown_condition(wl)
            rows.append({
                "namespace": wl.spec.namespace, "name": wl.spec.name, "job": wl.spec.job,
                "queue": wl.spec.queue, "cluster_queue": wl.cluster_queue, "priority": wl.spec.priority,
                "state": wl.state,
                "flavors": ",".join(f"{r}={f}" for r, f in sorted(wl.admission.flavors.items()))
                if wl.admission else None,
                "created_at": wl.spec.created,
                "admitted_at": wl.admitted_at if wl.admitted_at is not None else math.nan,
                "finished_at": wl.finished_at if wl.finished_at is not None else math.nan,
                "requeues": wl.requeue_count,
                "reason": shown.reason if shown else None, "message": shown.message if shown else None,
            })
        return rows


    def cluster_queue_status(self, name: str) -> dict[str, Any]:
        """The ClusterQueue's ``status``: Active condition, workload counts, flavor usage."""
        cq = self.config.cluster_queues.get(name)
        if cq is None:
            raise GpuLabError(f'clusterqueues.kueue.x-k8s.io "{name}" not found')
        reason, message = self._cq_condition(cq)
        node = self.snap.node(name)
        holding = list(self.snap.workloads[name].values())
        usage = []
        for rg in cq.resource_groups:
            for fq in rg.flavors:
                usage.append({"name": fq.name, "resources": [{
                    "name": res, "total": quantity_string(res, node.usage.get((fq.name, res), 0)),
                    "borrowed": quantity_string(res, max(0, node.usage.get((fq.name, res), 0) - q.nominal)),
                } for res, q in fq.resources.items()]})
        return {"conditions": [{"type": m.CQ_ACTIVE, "status": "True" if reason == m.CQ_READY[0] else "False",
                                "reason": reason, "message": message}],
                "pendingWorkloads": len(self.queues[name]),
                "reservingWorkloads": len(holding),
                "admittedWorkloads": sum(1 for wl in holding if wl.admitted),
                "flavorsReservation": usage, "flavorsUsage": usage}

    def local_queue_status(self, key: str) -> dict[str, Any]:
        """The LocalQueue's ``status`` (``namespace/name``): Active condition and counts."""
        lq = self.config.local_queues.get(key)
        if lq is None:
            raise GpuLabError(f'localqueues.kueue.x-k8s.io "{key.split("/")[-1]}" not found')
        cq = self.config.cluster_queues.get(lq.cluster_queue)
        if lq.stop_policy != STOP_NONE:
            reason, message = m.LQ_STOPPED
        elif cq is None:
            reason, message = m.LQ_CQ_MISSING
        elif self.cluster_queue_active(cq.name):
            reason, message = m.LQ_READY
        else:
            reason, message = m.LQ_CQ_INACTIVE
        mine = [wl for wl in self.by_key.values() if wl.spec.namespace == lq.namespace
                and wl.spec.queue == lq.name and not wl.finished]
        return {"conditions": [{"type": m.CQ_ACTIVE, "status": "True" if reason == m.LQ_READY[0] else "False",
                                "reason": reason, "message": message}],
                "pendingWorkloads": sum(1 for wl in mine if wl.in_queue),
                "reservingWorkloads": sum(1 for wl in mine if self._holds_quota(wl)),
                "admittedWorkloads": sum(1 for wl in mine if self._holds_quota(wl) and wl.admitted)}

    # ------------------------------------------------------------------ used by the scheduler

    def cluster_queue_active(self, name: str) -> bool:
        return self._active[name]

    def namespace_matches(self, wl: Workload, cq: ClusterQueue) -> bool:
        key = (cq.name, wl.spec.namespace)
        ok = self._namespace_ok.get(key)
        if ok is None:  # namespaces and selectors do not change: remember the answer
            ok = self._namespace_ok[key] = cq.namespace_selector.matches(self.config.labels_of(wl.spec.namespace))
        return ok

    def admission_blocked(self) -> bool:
        """``blockAdmission`` and some workload holding quota without PodsReady=True."""
        if not self.wfpr or not self.wfpr.block_admission:
            return False
        return any(not wl.is_true(m.PODS_READY) for wl in self._holding())

    def block(self, e: sched.Entry, now: float) -> None:
        self.blocked = e
        self.set_pending(e.wl, m.WAITING, m.WAITING_FOR_PODS_READY, now)

    def admit(self, wl: Workload, cq: ClusterQueue, assignment: Assignment, now: float) -> None:
        """``admit`` + ``SetQuotaReservation`` + ``SyncAdmittedCondition``."""
        flavors = {res: fa.flavor for res, fa in sorted(assignment.flavors.items())}
        wl.admission = Admission(cq.name, flavors, dict(assignment.usage))
        self.snap.add_workload(wl)
        self.queues[cq.name].delete(wl.key)
        wl.set(m.QUOTA_RESERVED, True, m.QUOTA_RESERVED, m.quota_reserved(cq.name), now)
        for kind in (m.EVICTED, m.PREEMPTED):
            c = wl.condition(kind)
            if c is not None and c.status == "True":
                wl.set(kind, False, m.QUOTA_RESERVED, m.previously(c.message), now)
        wl.set(m.ADMITTED, True, m.ADMITTED, m.ADMITTED_MESSAGE, now)
        wl.admitted_at = now
        self.version += 1
        self._track(wl)
        selector: dict[str, str] = {}
        tolerations: list[dict] = []
        for name in dict.fromkeys(flavors.values()):
            rf = self.config.resource_flavors[name]
            selector.update(rf.node_labels)
            tolerations += [dict(t) for t in rf.raw_tolerations]
        self._decisions.append(Admit(wl.key, wl.spec.job_key, cq.name, flavors, wl.spec.count, selector,
                                     tuple(tolerations), now))

    def issue_preemptions(self, preemptor: Workload, cq: ClusterQueue, targets: list[preemption.Target],
                          now: float) -> int:
        """``IssuePreemptions``: evict each target not already being evicted."""
        for t in targets:
            if t.workload.evicted:
                continue
            assert t.workload.admission is not None
            message = m.preemption_message(preemptor.spec.uid, preemptor.spec.job_uid, t.reason,
                                           preemption.cq_path(self.snap, cq.name),
                                           preemption.cq_path(self.snap, t.workload.admission.cluster_queue))
            t.workload.set(m.PREEMPTED, True, t.reason, message, now)
            self._evict(t.workload, m.EVICTED_BY_PREEMPTION, message, now, preemptor.key)
        return len(targets)

    def set_pending(self, wl: Workload, reason: str, message: str, now: float) -> None:
        self._unset_quota(wl, reason, message, now)

    # ------------------------------------------------------------------ internals

    def _get(self, key: str) -> Workload:
        wl = self.by_key.get(key) or self.by_key.get(self._by_job.get(key, ""))
        if wl is None:
            raise GpuLabError(f'workloads.kueue.x-k8s.io "{key.split("/")[-1]}" not found')
        return wl

    def _cq_condition(self, cq: ClusterQueue) -> tuple[str, str]:
        """``inactiveReason``: Ready, or the first reason with every message."""
        reasons, texts = [], []
        if cq.stop_policy != STOP_NONE:
            reasons.append(m.CQ_STOPPED)
            texts.append(m.CQ_IS_STOPPED)
        missing = [f for f in cq.flavor_names() if f not in self.config.resource_flavors]
        if missing:
            reasons.append(m.CQ_FLAVOR_NOT_FOUND)
            texts.append(m.cq_missing_flavors(missing))
        return (reasons[0], m.cq_cannot_admit(texts)) if reasons else m.CQ_READY

    def _enqueue(self, wl: Workload, now: float) -> None:
        """Where the workload controller puts a pending workload, or why it cannot."""
        lq = self.config.local_queues.get(f"{wl.spec.namespace}/{wl.spec.queue}")
        if lq is None:
            self.set_pending(wl, m.INADMISSIBLE, m.local_queue_missing(wl.spec.queue), now)
            return
        if lq.stop_policy != STOP_NONE:
            self.set_pending(wl, m.INADMISSIBLE, m.local_queue_inactive(wl.spec.queue), now)
            return
        cq = self.config.cluster_queues.get(lq.cluster_queue)
        if cq is None:
            self.set_pending(wl, m.INADMISSIBLE, m.cluster_queue_missing(lq.cluster_queue), now)
            return
        wl.cluster_queue = cq.name
        wl.evaluated = -1  # new to the queue: the scheduler has not seen it at this state
        if not self.cluster_queue_active(cq.name):
            self.set_pending(wl, m.INADMISSIBLE, m.cluster_queue_inactive(cq.name), now)
        self.queues[cq.name].add(wl, now)

    def _dequeue(self, wl: Workload) -> None:
        if wl.cluster_queue in self.queues:
            self.queues[wl.cluster_queue].delete(wl.key)
        if self.blocked is not None and self.blocked.wl is wl:
            self.blocked = None

    def _holding(self) -> list[Workload]:
        """The workloads in the cache: holding quota (admitted, or evicted and not stopped)."""
        return [wl for wls in self.snap.workloads.values() for wl in wls.values()]

    def _holds_quota(self, wl: Workload) -> bool:
        a = wl.admission
        return a is not None and self.snap.workloads[a.cluster_queue].get(wl.key) is wl

    def _release(self, wl: Workload, now: float) -> None:
        """Remove the workload from the cache and retry the parked workloads of its cohort
        (``QueueAssociatedInadmissibleWorkloadsAfter``)."""
        assert wl.admission is not None
        cq = wl.admission.cluster_queue
        if self._holds_quota(wl):
            self.snap.remove_workload(wl)
        self.version += 1
        for name in self.snap.members(cq):
            target = self.config.cluster_queues[name]
            self.queues[name].retry_inadmissible(now, functools.partial(self.namespace_matches, cq=target))

    def _unset_quota(self, wl: Workload, reason: str, message: str, now: float) -> None:
        """``UnsetQuotaReservationWithCondition``; a changed message becomes a ``Pending``."""
        wl.set(m.QUOTA_RESERVED, False, reason, message, now)
        if wl.admitted:
            wl.set(m.ADMITTED, False, m.NO_RESERVATION, m.NO_RESERVATION_MESSAGE, now)
        if self._shown.get(wl.key) != (reason, message):
            self._shown[wl.key] = (reason, message)
            self._decisions.append(Pending(wl.key, wl.spec.job_key, reason, message, now))

    def _evict(self, wl: Workload, reason: str, message: str, now: float, preemptor: str | None = None) -> None:
        wl.set(m.EVICTED, True, reason, message, now)
        self.version += 1
        self._track(wl)
        self._decisions.append(Evict(wl.key, wl.spec.job_key, reason, message, preemptor, now))

    def _pods_ready_deadline(self, wl: Workload) -> float | None:
        """``admittedNotReadyWorkload``: when the admitted workload times out, if it can."""
        if not self.wfpr or not wl.admitted or wl.evicted or wl.finished or not wl.active:
            return None
        c = wl.condition(m.PODS_READY)
        if c is not None and c.status == "True":
            return None
        if c is None or c.reason in (m.WAIT_FOR_START, "PodsReady"):
            admitted = wl.condition(m.ADMITTED)
            assert admitted is not None
            return admitted.last_transition_time + self.wfpr.timeout
        if c.reason == m.WAIT_FOR_RECOVERY and self.wfpr.recovery_timeout:
            return c.last_transition_time + self.wfpr.recovery_timeout
        return None

    def _track(self, wl: Workload) -> None:
        """Keep ``_deadlines`` in step with the workload's conditions."""
        deadline = self._pods_ready_deadline(wl)
        if deadline is None:
            self._deadlines.pop(wl.key, None)
        else:
            self._deadlines[wl.key] = deadline

    def _timeouts(self, now: float) -> None:
        """``reconcileNotReadyTimeout``: evict, or deactivate past ``backoffLimitCount``."""
        if self.wfpr is None or not self._deadlines or min(self._deadlines.values()) > now:
            return
        due = sorted((self.by_key[k] for k, d in self._deadlines.items() if d <= now), key=lambda w: w.seq)
        for wl in due:
            limit = self.wfpr.backoff_limit_count
            if limit is not None and wl.requeue_count + 1 > limit:
                wl.active = False
                wl.requeue_at = None
                reason = m.deactivated_due_to(m.REQUEUING_LIMIT_EXCEEDED)
                self._evict(wl, reason, f"{m.DEACTIVATED_MESSAGE} due to {m.REQUEUING_LIMIT_MESSAGE}", now)
                continue
            wl.requeue_count += 1
            wl.requeue_at = now + self._backoff(wl.requeue_count)
            self._evict(wl, m.EVICTED_BY_PODS_READY_TIMEOUT, m.pods_ready_timeout(wl.key), now)

    def _backoff(self, n: int) -> float:
        """``UpdateRequeueState``: base·2^(n-1), capped (jitter of 0.0001 left out)."""
        assert self.wfpr is not None
        delay = float(self.wfpr.backoff_base_seconds) * 2 ** (n - 1)
        cap = self.wfpr.backoff_max_seconds
        return min(delay, cap) if cap else delay

    def _in_backoff(self, wl: Workload) -> bool:
        c = wl.condition(m.REQUEUED)
        return (wl.active and not wl.finished and not wl.has_quota and wl.requeue_at is not None
                and c is not None and c.status == "False" and c.reason == m.EVICTED_BY_PODS_READY_TIMEOUT)

    def _backoffs(self, now: float) -> None:
        """The workload controller ending a backoff: Requeued=True, back in the queue."""
        for wl in sorted((self.by_key[k] for k in self._backing_off), key=lambda w: w.seq):
            if not self._in_backoff(wl):
                self._backing_off.discard(wl.key)
            elif wl.requeue_at is not None and wl.requeue_at <= now:
                self._backing_off.discard(wl.key)
                wl.requeue_at = None
                wl.set(m.REQUEUED, True, m.BACKOFF_FINISHED, m.BACKOFF_FINISHED_MESSAGE, now)
                self._enqueue(wl, now)

    def _shown_condition(self, wl: Workload):
        for kind in ((m.FINISHED,) if wl.finished else ()) + ((m.EVICTED,) if wl.evicted or not wl.active
                                                              else ()):
            c = wl.condition(kind)
            if c is not None:
                return c
        if wl.admitted:
            return wl.condition(m.ADMITTED)
        return wl.condition(m.QUOTA_RESERVED)

    def _flush(self) -> list[Decision]:
        out, self._decisions = self._decisions, []
        return out
