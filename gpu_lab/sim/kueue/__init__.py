"""A model of Kueue v0.17.0 admission, engine-independent: the caller owns the clock.

It reads the YAML users apply to a cluster running Kueue (``kueue.x-k8s.io/v1beta2``, or
``v1beta1`` which v0.17 still serves) and decides, as Kueue's scheduler and controllers
would, which Job workloads get quota, in which flavor, which wait and why (in Kueue's own
condition messages), which are preempted, and which are evicted by ``waitForPodsReady``.

Objects (``parse_kueue``)
    ``ResourceFlavor`` (nodeLabels, nodeTaints, tolerations), ``ClusterQueue``
    (resourceGroups with coveredResources and per-flavor nominalQuota / borrowingLimit /
    lendingLimit, cohortName, queueingStrategy StrictFIFO | BestEffortFIFO (default),
    namespaceSelector (absent selects no namespace, ``{}`` all), preemption
    withinClusterQueue / reclaimWithinCohort / borrowWithinCohort, flavorFungibility,
    stopPolicy), ``LocalQueue``, ``WorkloadPriorityClass``, the manager
    ``Configuration``'s ``waitForPodsReady`` (timeout, blockAdmission, recoveryTimeout,
    requeuingStrategy), and ``v1 Namespace`` labels. Other documents are skipped. A bad
    object raises what the API server answers: ``ClusterQueue.kueue.x-k8s.io "x" is
    invalid: [...]`` for the CRD schema and CEL rules, ``admission webhook
    "vclusterqueue.kb.io" denied the request: ...`` for Kueue's webhook, every error at
    once. A LocalQueue naming a missing ClusterQueue is accepted, as in Kueue:
    ``local_queue_status`` shows ``ClusterQueueDoesNotExist`` and its workloads wait with
    ``ClusterQueue <name> doesn't exist``.

Workloads
    ``job_workload(job_manifest, created=..., config=..., priority_classes=...)`` builds the
    ``WorkloadSpec`` Kueue makes for a ``batch/v1`` Job labelled
    ``kueue.x-k8s.io/queue-name`` (None otherwise): pod set ``main``, count
    ``min(parallelism, completions)``, per-pod requests, priority (the
    ``kueue.x-k8s.io/priority-class`` label, else the pod's PriorityClass), name
    ``job-<name>-<hash>``. A ``WorkloadSpec`` can also be built directly.

The model (``Kueue(config)``), all times are the caller's seconds:
    ``submit(spec, now)``            a Job's Workload appears and is queued.
    ``schedule(now) -> [Decision]``  run timers and scheduling cycles until nothing
                                     changes. Decisions, in order:
        ``Admit``   unsuspend the Job with ``node_selector``/``tolerations`` added
                    (the flavors' nodeLabels and tolerations);
        ``Evict``   suspend the Job (``reason`` Preempted, PodsReadyTimeout or
                    DeactivatedDueToRequeuingLimitExceeded); once its pods are gone
                    call ``stopped``;
        ``Pending`` a waiting workload's QuotaReserved condition changed (reason
                    Pending, Inadmissible or Waiting, and Kueue's message).
    ``stopped(key, now)``            the evicted Job has no active pods: quota released,
                                     workload requeued (after its backoff if timed out).
    ``pods_ready(key, now, ready=True)``  all pods ready (or, ready=False, one failed
                                     after they were): the PodsReady condition.
    ``finish(key, now, succeeded=True)``  the Job completed or failed.
    ``delete(key, now)``             the Job was deleted.
    ``next_wakeup() -> float | None`` the next PodsReady deadline or backoff end; call
                                     ``schedule`` then even if nothing else happened.
    ``status(key)``                  the Workload's status (conditions, admission,
                                     requeueState) as Kueue writes it.
    ``workloads()``                  rows: namespace, name, job, queue, cluster_queue,
                                     priority, state, flavors, created_at, admitted_at,
                                     finished_at, requeues, reason, message.
    ``cluster_queue_status(name)``, ``local_queue_status("ns/name")``.
    Keys are ``namespace/<workload name>``; ``namespace/<job name>`` works too.

Call ``schedule(now)`` after every change (submit, stopped, pods_ready, finish,
delete) and at ``next_wakeup()``. Its cost follows Kueue's algorithm: every release of
quota sends each parked workload of the cohort back to be tried again, so a deep backlog
costs backlog x releases evaluations (workloads of the same shape share one evaluation
while nothing changes). What is left out: hierarchical Cohort objects,
fair sharing, admission checks, TAS, partial admission, MultiKueue, elastic jobs,
LimitRanges, the scheduler's jitter and its 1-second timestamp resolution (ties are
broken by submission order where Kueue compares UIDs).
"""

from ...model.kueue.manifests import parse_kueue
from ...model.kueue.objects import (
    ClusterQueue,
    KueueConfig,
    LocalQueue,
    ResourceFlavor,
    WaitForPodsReady,
    WorkloadPriorityClass,
)
from .decisions import Admit, Decision, Evict, Pending
from .kueue import Kueue
from .workload import WorkloadSpec, job_workload, workload_name

__all__ = [
    "Admit",
    "ClusterQueue",
    "Decision",
    "Evict",
    "Kueue",
    "KueueConfig",
    "LocalQueue",
    "Pending",
    "ResourceFlavor",
    "WaitForPodsReady",
    "WorkloadPriorityClass",
    "WorkloadSpec",
    "job_workload",
    "parse_kueue",
    "workload_name",
]
