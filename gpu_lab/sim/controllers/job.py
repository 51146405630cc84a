"""The Job controller (kube-controller-manager's ``pkg/controller/job``), on the sim's clock.

What it does, as v1.37.2 does it:

* keeps ``min(parallelism, completions - succeeded)`` pods active (``parallelism``
  when ``completions`` is unset, until the first pod succeeds);
* counts every pod that fails (an eviction or preemption too: a deleted pod that
  did not succeed counts as failed) and, past ``backoffLimit`` (default 6), fails
  the Job with ``BackoffLimitExceeded`` / "Job has reached the specified backoff
  limit" and removes its active pods;
* waits before replacing a failed pod: 10 s doubled per consecutive failure since
  the last success, at most 10 min, counted from the last failure
  (``DefaultJobPodFailureBackOff``, ``MaxJobPodFailureBackOff``,
  ``getRemainingTimeForFailuresCount`` in ``backoff_utils.go``);
* a suspended Job (``spec.suspend``, which Kueue sets) has no pods: suspending
  deletes the active ones without counting failures; resuming creates them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...model.objects import Pod
from ...model.workloads import controller_pod
from .base import Cluster, Controller

POD_FAILURE_BACKOFF = 10.0  # seconds: DefaultJobPodFailureBackOff
MAX_POD_FAILURE_BACKOFF = 600.0  # MaxJobPodFailureBackOff
BACKOFF_LIMIT_EXCEEDED = ("BackoffLimitExceeded", "Job has reached the specified backoff limit")


@dataclass
class JobState:
    record: dict  # model.workloads.expand_workload's record
    created_at: float
    active: dict[str, int | None] = field(default_factory=dict)  # pod key -> completion index
    succeeded: int = 0
    failed: int = 0
    succeeded_indexes: set[int] = field(default_factory=set)
    failures_since_success: int = 0
    last_failure: float | None = None
    suspended: bool = False
    condition: tuple[str, str] | None = None  # (reason, message) once Failed
    complete: bool = False
    admitted_at: float | None = None
    started_at: float | None = None  # first pod running
    finished_at: float | None = None
    queue: str | None = None  # Kueue LocalQueue (label kueue.x-k8s.io/queue-name)
    message: str = ""  # why it waits (Kueue's condition message) while not admitted

    @property
    def key(self) -> str:
        return f"{self.record['namespace']}/{self.record['name']}"

    @property
    def finished(self) -> bool:
        return self.complete or self.condition is not None

    def wanted_active(self) -> int:
        r = self.record
        if self.suspended or self.finished:
            return 0
        if r["completions"] is None:
            return 0 if self.succeeded else r["parallelism"]
        return max(0, min(r["parallelism"], r["completions"] - self.succeeded))

    def state(self) -> str:
        if self.complete:
            return "Complete"
        if self.condition is not None:
            return "Failed"
        if self.suspended:
            return "Suspended"
        return "Running" if self.started_at is not None and self.active else "Pending"


def failure_backoff(failures: int) -> float:
    """Seconds to wait after the ``failures``-th consecutive failure."""
    if failures <= 0:
        return 0.0
    delay = POD_FAILURE_BACKOFF
    for _ in range(1, failures):
        delay *= 2
        if delay >= MAX_POD_FAILURE_BACKOFF:
            return MAX_POD_FAILURE_BACKOFF
    return delay


class JobController(Controller):
    def __init__(self, cluster: Cluster) -> None:
        super().__init__(cluster)
        self.jobs: dict[str, JobState] = {}
        self._by_uid: dict[str, str] = {}

    def add(self, record: dict, pods: list[Pod], *, suspended: bool | None = None) -> JobState:
        """A Job was created; ``pods`` are those the API server's creation already made."""
        job = JobState(record, self.cluster.now)
        job.suspended = record["suspend"] if suspended is None else suspended
        indexed = record["completion_mode"] == "Indexed"
        for i, p in enumerate(pods):
            job.active[p.key] = i if indexed else None
        self.jobs[job.key] = job
        self._by_uid[record["uid"]] = job.key
        if not job.suspended:
            job.admitted_at = self.cluster.now
        self._dirty.add(job.key)
        return job

    def owns(self, pod: Pod) -> str | None:
        if pod.owner_kind != "Job":
            return None
        key = f"{pod.namespace}/{pod.owner_name}"
        return key if key in self.jobs else None

    def pod_started(self, owner: str) -> None:
        job = self.jobs[owner]
        if job.started_at is None:
            job.started_at = self.cluster.now

    def pod_finished(self, owner: str, pod_key: str, phase: str, reason: str) -> None:
        job = self.jobs[owner]
        if pod_key not in job.active:  # removed by this controller itself
            return
        index = job.active.pop(pod_key)
        if phase == "Succeeded":
            job.succeeded += 1
            job.failures_since_success = 0
            if index is not None:
                job.succeeded_indexes.add(index)
        elif phase == "Failed" or (phase == "" and not job.suspended):
            job.failed += 1
            job.failures_since_success += 1
            job.last_failure = self.cluster.now
        self._dirty.add(owner)

    def refused(self, owner: str, pod_key: str) -> None:
        """The API server refused the pod (quota): not active; the next sync tries again."""
        self.jobs[owner].active.pop(pod_key, None)

    def set_suspended(self, key: str, suspended: bool) -> None:
        """``spec.suspend`` changed (Kueue admits by resuming and evicts by suspending)."""
        job = self.jobs[key]
        if job.suspended == suspended:
            return
        job.suspended = suspended
        if suspended:
            for pod_key in list(job.active):
                job.active.pop(pod_key)
                self.cluster.remove_pod(pod_key)
        elif job.admitted_at is None:
            job.admitted_at = self.cluster.now
        self._dirty.add(key)

    def sync(self) -> bool:
        changed = False
        while self._dirty:
            key = min(self._dirty)  # not set.pop(): its order follows string hashing, per process
            self._dirty.discard(key)
            job = self.jobs.get(key)
            if job is not None and not job.finished:
                changed |= self._sync_job(job)
        return changed

    def _sync_job(self, job: JobState) -> bool:
        now = self.cluster.now
        r = job.record
        if job.failed > r["backoff_limit"]:
            job.condition = BACKOFF_LIMIT_EXCEEDED
            job.finished_at = now
            for pod_key in list(job.active):
                job.active.pop(pod_key)
                self.cluster.remove_pod(pod_key)
            return True
        done = (job.succeeded >= r["completions"] if r["completions"] is not None
                else job.succeeded > 0 and not job.active)
        if done:
            job.complete, job.finished_at = True, now
            return True
        missing = job.wanted_active() - len(job.active)
        if missing <= 0:
            return False
        if job.last_failure is not None:
            wait = failure_backoff(job.failures_since_success) - (now - job.last_failure)
            if wait > 1e-9:
                self.cluster.wake_at(now + wait, self, job.key)
                return False
        indexes = self._free_indexes(job, missing) if r["completion_mode"] == "Indexed" else [None] * missing
        classes = self.cluster.priority_classes()
        for index in indexes:
            pod = controller_pod(r, self.cluster.names, self.cluster.next_created(), classes, index)
            job.active[pod.key] = index
            self.cluster.create_pod(pod)
        return bool(indexes)

    @staticmethod
    def _free_indexes(job: JobState, count: int) -> list[int]:
        busy = job.succeeded_indexes | {i for i in job.active.values() if i is not None}
        return [i for i in range(job.record["completions"]) if i not in busy][:count]
