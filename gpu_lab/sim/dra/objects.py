"""The resource.k8s.io/v1 objects DRA scheduling reads, as small records.

Manifests stay Kubernetes YAML (``validation`` turns them into these records after the
API server's checks). Quantities are exact ``Fraction``s; attribute values are Python
values (a ``version`` attribute becomes ``cel.Semver``). Names follow the v1 API:
a claim's ``requests`` hold either ``exactly`` one ``Request`` or a ``first_available``
list of them (DRAPrioritizedList).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

API_VERSION = "resource.k8s.io/v1"
GROUP = "resource.k8s.io"
KINDS = ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate", "ResourceSlice", "DeviceTaintRule")
# How the API server names each kind's resource ("already exists", "not found").
RESOURCES = {k: f"{k.lower()}s.{GROUP}" for k in KINDS}
EXACT_COUNT, ALL = "ExactCount", "All"
# resourceapi.ExtendedResourceClaimAnnotation / PodResourceClaimAnnotation
EXTENDED_RESOURCE_CLAIM = "resource.kubernetes.io/extended-resource-claim"
POD_CLAIM_NAME = "resource.kubernetes.io/pod-claim-name"
DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"  # resourceapi.ResourceDeviceClassPrefix
ALLOCATION_RESULTS_MAX = 32  # resourceapi.AllocationResultsMaxSize
FIRST_AVAILABLE_MAX = 8  # resourceapi.FirstAvailableDeviceRequestMaxSize


@dataclass(frozen=True)
class DeviceTaint:
    key: str
    value: str = ""
    effect: str = "NoSchedule"  # None, NoSchedule or NoExecute


@dataclass(frozen=True)
class DeviceToleration:
    key: str = ""
    operator: str = "Equal"
    value: str = ""
    effect: str = ""

    def tolerates(self, taint: DeviceTaint) -> bool:
        """``resourceclaim.ToleratesTaint``."""
        if self.key and self.key != taint.key:
            return False
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return True
        return self.operator == "Equal" and self.value == taint.value


@dataclass(frozen=True)
class Request:
    """An ``exactly`` request or one ``firstAvailable`` subrequest."""

    name: str
    class_name: str
    selectors: tuple[str, ...] = ()
    mode: str = EXACT_COUNT
    count: int = 1
    tolerations: tuple[DeviceToleration, ...] = ()


@dataclass(frozen=True)
class ClaimRequest:
    name: str
    exactly: Request | None = None
    first_available: tuple[Request, ...] = ()

    @property
    def alternatives(self) -> tuple[Request, ...]:
        return (self.exactly,) if self.exactly is not None else self.first_available


@dataclass(frozen=True)
class Constraint:
    requests: tuple[str, ...] = ()  # empty: every request
    match_attribute: str | None = None
    distinct_attribute: str | None = None


@dataclass(frozen=True)
class ClaimSpec:
    requests: tuple[ClaimRequest, ...] = ()
    constraints: tuple[Constraint, ...] = ()


@dataclass(frozen=True)
class AllocatedDevice:
    """One ``status.allocation.devices.results`` entry."""

    request: str  # "<request>" or "<request>/<subrequest>"
    driver: str
    pool: str
    device: str

    @property
    def id(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.device)


@dataclass(frozen=True)
class Allocation:
    results: tuple[AllocatedDevice, ...]
    node: str | None = None  # nodeSelector: metadata.name In [node]; None = any node


@dataclass
class DeviceClass:
    name: str
    selectors: tuple[str, ...] = ()
    extended_resource_name: str | None = None
    created: int = 0  # creation order: the older class wins an extended resource name


@dataclass
class ClaimTemplate:
    namespace: str
    name: str
    spec: ClaimSpec
    labels: dict[str, str] = field(default_factory=dict)
    annotations: dict[str, str] = field(default_factory=dict)


@dataclass
class Claim:
    namespace: str
    name: str
    uid: str
    spec: ClaimSpec
    owner_pod: str | None = None  # "ns/name" of the pod that controls it (template claims)
    annotations: dict[str, str] = field(default_factory=dict)
    allocation: Allocation | None = None
    reserved_for: list[str] = field(default_factory=list)  # pod keys

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class CounterUse:
    counter_set: str
    counters: tuple[tuple[str, Fraction | int], ...]  # whole amounts as ints (validation._counter)


@dataclass
class Device:
    name: str
    # domain -> id -> value, the domain of bare names being the driver (as CEL sees them)
    attributes: dict[str, dict[str, Any]] = field(default_factory=dict)
    capacity: dict[str, dict[str, Fraction]] = field(default_factory=dict)
    consumes: tuple[CounterUse, ...] = ()
    taints: tuple[DeviceTaint, ...] = ()

    def attribute(self, qualified: str) -> Any:
        """``lookupAttribute`` of a fully qualified name (bare ids are kept under the driver's domain)."""
        domain, _, ident = qualified.partition("/")
        return self.attributes.get(domain, {}).get(ident)


@dataclass
class ResourceSlice:
    name: str
    driver: str
    pool: str
    generation: int = 0
    slice_count: int = 1
    node_name: str | None = None
    all_nodes: bool = False
    node_selector: dict | None = None
    devices: list[Device] = field(default_factory=list)
    shared_counters: dict[str, dict[str, Fraction | int]] = field(default_factory=dict)  # as CounterUse


@dataclass
class TaintRule:
    name: str
    taint: DeviceTaint
    driver: str | None = None
    pool: str | None = None
    device: str | None = None

    def selects(self, driver: str, pool: str, device: str) -> bool:
        return all(want is None or want == got
                   for want, got in ((self.driver, driver), (self.pool, pool), (self.device, device)))
