"""What the model tells its caller to do: admit a Job, evict one, or show why one waits."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Admit:
    """Quota reserved and the workload admitted: unsuspend the Job, its pod template extended
    with ``node_selector`` (the flavors' ``nodeLabels``) and ``tolerations`` (the flavors'
    ``tolerations``), as Kueue's Job reconciler does (pkg/podset ``FromAssignment``, ``Merge``)."""

    key: str  # namespace/workload
    job: str  # namespace/job
    cluster_queue: str
    flavors: dict[str, str]  # resource -> ResourceFlavor
    count: int
    node_selector: dict[str, str] = field(default_factory=dict)
    tolerations: tuple[dict, ...] = ()
    time: float = 0.0


@dataclass(frozen=True)
class Evict:
    """Kueue evicted the workload: suspend the Job (its pods go), then call ``Kueue.stopped``,
    which releases the quota. ``reason`` is the Evicted condition's: ``Preempted``,
    ``PodsReadyTimeout`` or ``DeactivatedDueToRequeuingLimitExceeded``."""

    key: str
    job: str
    reason: str
    message: str
    preemptor: str | None = None  # namespace/workload that needs the quota, for Preempted
    time: float = 0.0


@dataclass(frozen=True)
class Pending:
    """The workload's QuotaReserved condition changed while it waits (reason ``Pending``,
    ``Inadmissible`` or ``Waiting``) and the message to show."""

    key: str
    job: str
    reason: str
    message: str
    time: float = 0.0


Decision = Admit | Evict | Pending
