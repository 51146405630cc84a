"""One pod's DRA scheduling work: what the DynamicResources plugin checks in PreFilter, per
node in Filter, and commits in Reserve/PreBind (pkg/scheduler/framework/plugins/
dynamicresources, v1.37.2). The plugin and the bind path share it.

PreFilter (``PodDra.prepare``): every claim the pod names must exist (a missing one:
``could not find ResourceClaim "ns/name"``; a template's claim not made yet: ``pod "ns/p":
ResourceClaim not created yet``) and every DeviceClass an unallocated claim asks for
(``request gpu: device class gpu.example.com does not exist``); both keep the pod
pending on every node (UnschedulableAndUnresolvable).

Filter (``PodDra.on_node``): extended resources a DeviceClass maps become a claim for this
node when the node's allocatable has none of them; a claim allocated elsewhere makes the
node ``resourceclaim not available on the node``; the allocator must then place every
unallocated claim together (``cannot allocate all claims``). Problems the allocator
raises (a CEL runtime error, a claim over 32 devices, a class gone) abort the attempt:
kube-scheduler reports ``running "DynamicResources" filter plugin: <error>``.

Reserve/PreBind (``bind``): the node's allocations become the claims' ``status.allocation``,
the pod is added to every claim's ``reservedFor``, and the claim for extended resources is
created as ``<pod>-extended-resources-<5 random>``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ...model.objects import Node, Pod
from ...names import stable_uid
from .allocator import Allocator, AllocatorError, FailedOnNode
from .bridge import is_dra_extended_name, requests_and_mappings
from .objects import (
    DEVICE_CLASS_PREFIX,
    EXTENDED_RESOURCE_CLAIM,
    FIRST_AVAILABLE_MAX,
    Allocation,
    Claim,
    ClaimSpec,
)
from .state import DraState, pod_claims

NOT_AVAILABLE = "resourceclaim not available on the node"
CANNOT_ALLOCATE = "cannot allocate all claims"
CANNOT_FIT = "cannot fit resource"
SPECIAL_CLAIM = "<extended-resources>"  # specialClaimInMemName


def wants_dra(pod: Pod, state: DraState | None = None) -> bool:
    """Could the plugin have work for this pod: claims, or extended resources that a class
    may map (given ``state``: that some class does map)?"""
    got = pod.memo.get("dra_candidate")
    if got is None:
        claims = bool(pod_claims(pod))
        got = pod.memo["dra_candidate"] = (claims, any(is_dra_extended_name(r) for r in pod.requests))
    return got[0] or (got[1] and (state is None or state.maps_extended() or any(
        r.startswith(DEVICE_CLASS_PREFIX) for r in pod.requests)))


@dataclass
class NodeResult:
    ok: bool
    reason: str = ""
    allocations: list[Allocation] = field(default_factory=list)  # claims to allocate, in order
    extended: ClaimSpec | None = None  # this node's claim for extended resources
    mappings: list[tuple[str, str, str]] = field(default_factory=list)


class PodDra:
    """PreFilter's state for one pod (``stateData``)."""

    def __init__(self, state: DraState, pod: Pod):
        self.state = state
        self.pod = pod
        self.claims: list[Claim] = []
        self.extended: dict[str, int] = {}  # DRA-mapped extended resources the pod asks for
        self.allocator: Allocator | None = None

    def prepare(self) -> str | None:
        """PreFilter: None when the pod may go on to Filter, else the reason it cannot."""
        for _, claim, why in self.state.claims_for(self.pod):
            if claim is None:
                return why
            self.claims.append(claim)
        self.extended = {r: v for r, v in self.pod.requests.items()
                         if v > 0 and is_dra_extended_name(r) and self.state.extended_class(r) is not None}
        for claim in self.claims:
            if claim.allocation is not None:
                continue
            for req in claim.spec.requests:
                for r in req.alternatives:
                    name = f"{req.name}/{r.name}" if req.exactly is None else req.name
                    if r.class_name not in self.state.classes:
                        return f"request {name}: device class {r.class_name} does not exist"
        if any(c.allocation is None for c in self.claims) or self.extended:
            self.allocator = Allocator(self.state.classes, self.state.slices(), self.state.allocated())
        return None

    @property
    def empty(self) -> bool:
        return not self.claims and not self.extended

    def on_node(self, node: Node) -> NodeResult:
        """Filter for one node; raises ``AllocatorError`` to abort the attempt."""
        extended: ClaimSpec | None = None
        mappings: list[tuple[str, str, str]] = []
        if self.extended:
            delegated = {}
            for r, v in self.extended.items():
                if node.allocatable.get(r, 0) == 0:
                    delegated[r] = v
            for r, v in self.pod.requests.items():
                if v > 0 and is_dra_extended_name(r) and r not in self.extended and r not in node.allocatable:
                    return NodeResult(False, CANNOT_FIT)
            if delegated:
                extended, mappings = requests_and_mappings(self.pod, delegated, self.state.extended_class)
        if not self.claims and extended is None:
            return NodeResult(True)
        unavailable = any(c.allocation is not None and c.allocation.node not in (None, node.name)
                          for c in self.claims)
        todo = [(c.key, c.spec) for c in self.claims if c.allocation is None]
        if extended is not None:
            todo.append((f"{self.pod.namespace}/{SPECIAL_CLAIM}", extended))
        allocations: list[Allocation] = []
        if todo:
            assert self.allocator is not None
            try:
                got = self.allocator.allocate(node, todo)
            except FailedOnNode as err:
                return NodeResult(False, str(err))
            if got is None:
                return NodeResult(False, CANNOT_ALLOCATE)
            allocations = got
        if unavailable:
            return NodeResult(False, NOT_AVAILABLE)
        return NodeResult(True, "", allocations, extended, mappings)

    def score(self, result: NodeResult) -> int:
        """DRAPrioritizedList's score: 8 - i for each claim's request served by subrequest i."""
        score, k = 0, 0
        for claim in self.claims:
            if claim.allocation is not None:
                allocation = claim.allocation
            else:
                allocation = result.allocations[k]
                k += 1
            picked = {r.request for r in allocation.results if "/" in r.request}
            for req in claim.spec.requests:
                for i, sub in enumerate(req.first_available):
                    if f"{req.name}/{sub.name}" in picked:
                        score += FIRST_AVAILABLE_MAX - i
        return score

    @property
    def prioritized(self) -> bool:
        return any(req.first_available for c in self.claims for req in c.spec.requests)


class BindError(Exception):
    """The claims no longer fit the chosen node at bind time."""


def bind(state: DraState, pod: Pod, node: Node) -> dict[str, dict[str, list[str]]]:
    """Reserve and PreBind: commit the node's allocation; the devices each container gets,
    as {container: {driver or extended resource: [device UUIDs]}}.

    The allocation is worked out again against the claims as they are now: the same as Filter's
    for a pod scheduled on its own. Pods of one PodGroup are filtered together before any of
    them binds, and the simulator does not reserve their claims in between (kube-scheduler
    does, in Reserve): when the devices Filter saw are gone by then, ``BindError`` says so."""
    dra = PodDra(state, pod)
    why = dra.prepare()
    if why is not None:
        raise BindError(f"DynamicResources: {why}")
    if dra.empty:
        return {}
    try:
        result = dra.on_node(node)
    except AllocatorError as err:
        raise BindError(f'running "DynamicResources" filter plugin: {err}') from None
    if not result.ok:
        raise BindError(f"DynamicResources on {node.name} at bind time: {result.reason} (gpu-lab's simulator "
                        "does not reserve the claims of a PodGroup's pods within one scheduling cycle)")
    k = 0
    for claim in dra.claims:
        if claim.allocation is None:
            claim.allocation = result.allocations[k]
            k += 1
        if pod.key not in claim.reserved_for:
            claim.reserved_for.append(pod.key)
    ext_claim = None
    if result.extended is not None:
        name = state.new_extended_claim(pod)
        ext_claim = Claim(pod.namespace, name, stable_uid("resourceclaim", pod.namespace, name), result.extended,
                          owner_pod=pod.key, annotations={EXTENDED_RESOURCE_CLAIM: "true"},
                          allocation=result.allocations[k], reserved_for=[pod.key])
        state.add_claim(ext_claim)
    state.version += 1
    return _container_devices(state, pod, dra.claims, ext_claim, result.mappings)


def _container_devices(state: DraState, pod: Pod, claims: list[Claim], ext_claim: Claim | None,
                       mappings: list[tuple[str, str, str]]) -> dict[str, dict[str, list[str]]]:
    by_pod_name = {pc.name: c for pc, c in zip(pod_claims(pod), claims)}
    out: dict[str, dict[str, list[str]]] = {}
    spec = pod.raw.get("spec") or {}
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        for ref in ((c.get("resources") or {}).get("claims") or []):
            claim = by_pod_name.get(ref.get("name"))
            if claim is None or claim.allocation is None:
                continue
            want = ref.get("request")
            for r in claim.allocation.results:
                if want and r.request != want and not r.request.startswith(f"{want}/"):
                    continue
                ids = out.setdefault(c.get("name", ""), {}).setdefault(r.driver, [])
                ids.append(state.device_uuid(r.driver, r.pool, r.device))
    if ext_claim is not None and ext_claim.allocation is not None:
        for container, resource, request in mappings:
            for r in ext_claim.allocation.results:
                if r.request == request:
                    out.setdefault(container, {}).setdefault(resource, []).append(
                        state.device_uuid(r.driver, r.pool, r.device))
    return out


__all__ = ["AllocatorError", "BindError", "NodeResult", "PodDra", "bind", "wants_dra"]
