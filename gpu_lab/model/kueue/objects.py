"""The Kueue objects the model reads, after defaulting: flavors, queues, priority classes, config.

Field names follow ``kueue.x-k8s.io/v1beta2`` (apis/kueue/v1beta2/*_types.go) and the
manager's ``config.kueue.x-k8s.io/v1beta2`` Configuration (apis/config/v1beta2); defaults
are the CRDs' ``+kubebuilder:default`` markers and the cache's own (pkg/cache/scheduler/
clusterqueue.go ``defaultPreemption``, ``defaultFlavorFungibility``). Quantities are
Kueue's int64 (see ``quantities``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..objects import Taint, Toleration
from ..selectors import LabelSelector

NEVER, LOWER_PRIORITY, ANY = "Never", "LowerPriority", "Any"
LOWER_OR_NEWER_EQUAL_PRIORITY = "LowerOrNewerEqualPriority"
STRICT_FIFO, BEST_EFFORT_FIFO = "StrictFIFO", "BestEffortFIFO"
MAY_STOP_SEARCH, TRY_NEXT_FLAVOR = "MayStopSearch", "TryNextFlavor"
BORROWING_OVER_PREEMPTION, PREEMPTION_OVER_BORROWING = "BorrowingOverPreemption", "PreemptionOverBorrowing"
STOP_NONE = "None"
EVICTION_TIMESTAMP, CREATION_TIMESTAMP = "Eviction", "Creation"


@dataclass(frozen=True)
class ResourceFlavor:
    name: str
    node_labels: dict[str, str] = field(default_factory=dict)
    node_taints: tuple[Taint, ...] = ()
    tolerations: tuple[Toleration, ...] = ()
    # the tolerations as written, which Kueue adds to an admitted Job's pod template
    raw_tolerations: tuple[dict, ...] = ()


@dataclass(frozen=True)
class ResourceQuota:
    nominal: int
    borrowing_limit: int | None = None
    lending_limit: int | None = None


@dataclass(frozen=True)
class FlavorQuotas:
    name: str
    resources: dict[str, ResourceQuota]  # in manifest order, same names as coveredResources


@dataclass(frozen=True)
class ResourceGroup:
    covered_resources: tuple[str, ...]
    flavors: tuple[FlavorQuotas, ...]


@dataclass(frozen=True)
class Preemption:
    within_cluster_queue: str = NEVER
    reclaim_within_cohort: str = NEVER
    borrow_within_cohort: str = NEVER
    max_priority_threshold: int | None = None


@dataclass(frozen=True)
class FlavorFungibility:
    when_can_borrow: str = MAY_STOP_SEARCH
    when_can_preempt: str = TRY_NEXT_FLAVOR
    preference: str | None = None


@dataclass(frozen=True)
class ClusterQueue:
    name: str
    resource_groups: tuple[ResourceGroup, ...] = ()
    cohort: str | None = None  # spec.cohortName (v1beta1: spec.cohort)
    queueing_strategy: str = BEST_EFFORT_FIFO
    # nil selects no namespace at all (metav1.LabelSelectorAsSelector(nil) is labels.Nothing())
    namespace_selector: LabelSelector = field(default_factory=lambda: LabelSelector.parse(None))
    preemption: Preemption = field(default_factory=Preemption)
    flavor_fungibility: FlavorFungibility = field(default_factory=FlavorFungibility)
    stop_policy: str = STOP_NONE

    def group_for(self, resource: str) -> ResourceGroup | None:
        """``RGByResource``: the resource group that covers ``resource``."""
        for rg in self.resource_groups:
            if resource in rg.covered_resources:
                return rg
        return None

    def quota(self, flavor: str, resource: str) -> ResourceQuota:
        for rg in self.resource_groups:
            for fq in rg.flavors:
                if fq.name == flavor and resource in fq.resources:
                    return fq.resources[resource]
        return ResourceQuota(0)

    def flavor_names(self) -> list[str]:
        return [fq.name for rg in self.resource_groups for fq in rg.flavors]


@dataclass(frozen=True)
class LocalQueue:
    namespace: str
    name: str
    cluster_queue: str
    stop_policy: str = STOP_NONE

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class WorkloadPriorityClass:
    name: str
    value: int
    description: str = ""


@dataclass(frozen=True)
class WaitForPodsReady:
    """``Configuration.waitForPodsReady`` after defaulting (apis/config/v1beta2/defaults.go)."""

    timeout: float  # seconds
    block_admission: bool = False
    recovery_timeout: float | None = None  # defaults to timeout; 0 turns the check off
    requeuing_timestamp: str = EVICTION_TIMESTAMP
    backoff_limit_count: int | None = None  # None: requeue for ever
    backoff_base_seconds: int = 60  # DefaultRequeuingBackoffBaseSeconds
    backoff_max_seconds: int = 3600  # DefaultRequeuingBackoffMaxSeconds; 0: no cap


@dataclass
class KueueConfig:
    """Everything ``parse_kueue`` found, keyed by name (LocalQueues by ``namespace/name``)."""

    resource_flavors: dict[str, ResourceFlavor] = field(default_factory=dict)
    cluster_queues: dict[str, ClusterQueue] = field(default_factory=dict)
    local_queues: dict[str, LocalQueue] = field(default_factory=dict)
    priority_classes: dict[str, WorkloadPriorityClass] = field(default_factory=dict)
    wait_for_pods_ready: WaitForPodsReady | None = None
    namespace_labels: dict[str, dict[str, str]] = field(default_factory=dict)  # from v1 Namespaces

    def labels_of(self, namespace: str) -> dict[str, str]:
        """A namespace's labels; the API server always adds ``kubernetes.io/metadata.name``."""
        labels = dict(self.namespace_labels.get(namespace, {}))
        labels["kubernetes.io/metadata.name"] = namespace
        return labels
