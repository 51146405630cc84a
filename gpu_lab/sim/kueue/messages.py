"""Kueue v0.17.0's own words: condition types, reasons and messages, copied from its source.

Every string here is what sigs.k8s.io/kueue v0.17.0 writes into a Workload's, a
ClusterQueue's or a LocalQueue's status (or an event), so the sim's statuses equal
real Kueue's. The comment above each group names the file it comes from.
"""

from __future__ import annotations

# apis/kueue/v1beta2/workload_types.go: condition types
QUOTA_RESERVED = "QuotaReserved"
ADMITTED = "Admitted"
PODS_READY = "PodsReady"
EVICTED = "Evicted"
PREEMPTED = "Preempted"
REQUEUED = "Requeued"
FINISHED = "Finished"

# apis/kueue/v1beta2/workload_types.go: reasons
INADMISSIBLE = "Inadmissible"
EVICTED_BY_PREEMPTION = "Preempted"
EVICTED_BY_PODS_READY_TIMEOUT = "PodsReadyTimeout"
BACKOFF_FINISHED = "BackoffFinished"
DEACTIVATED = "Deactivated"
REQUEUING_LIMIT_EXCEEDED = "RequeuingLimitExceeded"
WAIT_FOR_START = "WaitForStart"
WAIT_FOR_RECOVERY = "WaitForRecovery"
STARTED = "Started"
RECOVERED = "Recovered"
FINISHED_SUCCEEDED = "Succeeded"
FINISHED_FAILED = "Failed"
IN_CLUSTER_QUEUE = "InClusterQueue"
IN_COHORT_RECLAMATION = "InCohortReclamation"
IN_COHORT_RECLAIM_WHILE_BORROWING = "InCohortReclaimWhileBorrowing"

# pkg/scheduler/scheduler.go (requeueAndUpdate, the BlockAdmission wait)
PENDING = "Pending"
WAITING = "Waiting"
WAITING_FOR_PODS_READY = "waiting for all admitted workloads to be in PodsReady condition"
NAMESPACE_MISMATCH = "Workload namespace doesn't match ClusterQueue selector"
OVERLAPPING_TARGETS = "Workload has overlapping preemption targets with another workload"
NO_LONGER_FITS = "Workload no longer fits after processing another workload"


def pending_preemption(n: int) -> str:
    """pkg/scheduler/scheduler.go: appended to the flavor assigner's message."""
    return f". Pending the preemption of {n} workload(s)"


# pkg/workload/workload.go (SetQuotaReservation, resetActiveCondition)
def quota_reserved(cluster_queue: str) -> str:
    return f"Quota reserved in ClusterQueue {cluster_queue}"


def previously(message: str) -> str:
    return "Previously: " + message


# pkg/workload/admissionchecks.go (SyncAdmittedCondition)
ADMITTED_MESSAGE = "The workload is admitted"
NO_RESERVATION = "NoReservation"
NO_RESERVATION_MESSAGE = "The workload has no reservation"


# pkg/controller/core/workload_controller.go (Reconcile, reconcileNotReadyTimeout)
def local_queue_missing(lq: str) -> str:
    return f"LocalQueue {lq} doesn't exist"


def local_queue_inactive(lq: str) -> str:
    return f"LocalQueue {lq} is inactive"


def cluster_queue_missing(cq: str) -> str:
    return f"ClusterQueue {cq} doesn't exist"


def cluster_queue_inactive(cq: str) -> str:
    return f"ClusterQueue {cq} is inactive"


def pods_ready_timeout(key: str) -> str:
    """``req.String()`` of the Workload: ``namespace/name``."""
    return f"Exceeded the PodsReady timeout {key}"


BACKOFF_FINISHED_MESSAGE = "The workload backoff was finished"
DEACTIVATED_MESSAGE = "The workload is deactivated"
REQUEUING_LIMIT_MESSAGE = "exceeding the maximum number of re-queuing retries"


def deactivated_due_to(cause: str) -> str:
    """pkg/workload/workload.go ``ReasonWithCause``: the Evicted reason of a deactivation."""
    return f"{DEACTIVATED}DueTo{cause}"


# pkg/controller/jobframework/reconciler.go (generatePodsReadyCondition)
PODS_NOT_READY_MESSAGE = "Not all pods are ready or succeeded"
PODS_RECOVERING_MESSAGE = "At least one pod has failed, waiting for recovery"
PODS_READY_MESSAGE = "All pods reached readiness and the workload is running"

# pkg/scheduler/flavorassigner/flavorassigner.go
POD_SET_MAIN = "main"  # apis/kueue/v1beta2/constants.go DefaultPodSetName


def cannot_assign(pod_set: str, status: str) -> str:
    """``Assignment.Message``: one pod set that does not fit, its reasons sorted and joined."""
    return f"couldn't assign flavors to pod set {pod_set}: {status}"


def resource_unavailable(resource: str) -> str:
    return f"resource {resource} unavailable in ClusterQueue"


def flavor_not_found(flavor: str) -> str:
    return f"flavor {flavor} not found"


def untolerated_taint(taint: str, flavor: str) -> str:
    return f"untolerated taint {taint} in flavor {flavor}"


def affinity_mismatch(flavor: str) -> str:
    return f"flavor {flavor} doesn't match node affinity"


def insufficient_quota(resource: str, flavor: str, assumed: str, request: str, capacity: str) -> str:
    return (f"insufficient quota for {resource} in flavor {flavor}, previously considered podsets "
            f"requests ({assumed}) + current podset request ({request}) > maximum capacity ({capacity})")


def insufficient_unused_quota(resource: str, flavor: str, more: str) -> str:
    return f"insufficient unused quota for {resource} in flavor {flavor}, {more} more needed"


# pkg/scheduler/preemption/preemption.go (HumanReadablePreemptionReasons, preemptionMessage)
HUMAN_PREEMPTION_REASONS = {
    IN_CLUSTER_QUEUE: "prioritization in the ClusterQueue",
    IN_COHORT_RECLAMATION: "reclamation within the cohort",
    "InCohortFairSharing": "Fair Sharing within the cohort",
    IN_COHORT_RECLAIM_WHILE_BORROWING: "reclamation within the cohort while borrowing",
    "": "UNKNOWN",
}


def preemption_message(uid: str, job_uid: str, reason: str, preemptor_path: str, preemptee_path: str) -> str:
    return (f"Preempted to accommodate a workload (UID: {uid or 'UNKNOWN'}, JobUID: {job_uid or 'UNKNOWN'}) "
            f"due to {HUMAN_PREEMPTION_REASONS.get(reason, 'UNKNOWN')}; preemptor path: "
            f"{preemptor_path or 'UNKNOWN'}; preemptee path: {preemptee_path or 'UNKNOWN'}")


# pkg/cache/scheduler/clusterqueue.go (inactiveReason)
CQ_ACTIVE = "Active"
CQ_READY = ("Ready", "Can admit new workloads")
CQ_STOPPED = "Stopped"
CQ_FLAVOR_NOT_FOUND = "FlavorNotFound"


def cq_cannot_admit(messages: list[str]) -> str:
    return f"Can't admit new workloads: {', '.join(messages)}."


def cq_missing_flavors(flavors: list[str]) -> str:
    return f"references missing ResourceFlavor(s): {','.join(flavors)}"


CQ_IS_STOPPED = "is stopped"

# pkg/controller/core/localqueue_controller.go
LQ_READY = ("Ready", "Can submit new workloads to localQueue")
LQ_CQ_MISSING = ("ClusterQueueDoesNotExist", "Can't submit new workloads to clusterQueue")
LQ_CQ_INACTIVE = ("ClusterQueueIsInactive", "Can't submit new workloads to clusterQueue")
LQ_STOPPED = ("Stopped", "LocalQueue is stopped")

# k8s.io/kubernetes pkg/controller/job/job_controller.go: the Job's Complete/Failed message,
# which Kueue copies into the Workload's Finished condition (pkg/controller/jobs/job Finished)
JOB_COMPLETE_MESSAGE = "Reached expected number of succeeded pods"
JOB_FAILED_MESSAGE = "Job has reached the specified backoff limit"
