"""The cluster's DRA objects in the simulator, and the controllers that keep them.

``DraState`` holds DeviceClasses, ResourceClaimTemplates, ResourceClaims (with their
``status.allocation`` and ``reservedFor``), DeviceTaintRules and ResourceSlices: the ones a
scenario applies and the ones NVIDIA's driver publishes for every NodePool with
``spec.dra`` (built by ``gpu_lab.dradriver.resourceslices``, the same function the
local backend's node agent uses, so both backends see the same devices in the same
order; NVIDIA's ``gpu.nvidia.com`` and ``mig.nvidia.com`` DeviceClasses come with the
first such node). One state belongs to one scheduling ``Snapshot`` (``dra_state``).

It also plays the controllers around the scheduler:

* the resourceclaim controller: a pod's ``resourceClaimTemplateName`` becomes a claim named
  ``<pod>-<pod claim name>-<5 random>``, owned by the pod (``claims_for``); once no running
  pod holds a claim any more its allocation is cleared, and a claim made for one pod is
  deleted with that pod (``DraController.sync``);
* the device taint eviction controller: a running pod whose allocated device has a
  NoExecute taint its request does not tolerate is deleted (``DraController.sync``).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from ...dradriver.resourceslices import (
    device_classes,
    is_dra_node,
    published_devices,
    resource_slices,
)
from ...errors import GpuLabError
from ...model.objects import Node, Pod
from ...model.parse import NameGenerator
from ...names import stable_uid
from ..controllers.base import Controller
from . import validation
from .objects import (
    DEVICE_CLASS_PREFIX,
    EXTENDED_RESOURCE_CLAIM,
    RESOURCES,
    Claim,
    ClaimTemplate,
    Device,
    DeviceClass,
    ResourceSlice,
    TaintRule,
)


def dra_state(snapshot: Any) -> DraState:
    """The DRA state of a scheduling snapshot (made on first use)."""
    state = getattr(snapshot, "dra", None)
    if state is None:
        state = DraState()
        snapshot.dra = state
    return state


@dataclass
class PodClaim:
    """One entry of a pod's ``spec.resourceClaims``."""

    name: str
    claim_name: str | None = None
    template_name: str | None = None


def pod_claims(pod: Pod) -> list[PodClaim]:
    raw = (pod.raw.get("spec") or {}).get("resourceClaims") or []
    return [PodClaim(c.get("name") or "", c.get("resourceClaimName"), c.get("resourceClaimTemplateName"))
            for c in raw if isinstance(c, dict)]


@dataclass
class DraState:
    classes: dict[str, DeviceClass] = field(default_factory=dict)
    templates: dict[str, ClaimTemplate] = field(default_factory=dict)
    claims: dict[str, Claim] = field(default_factory=dict)
    taint_rules: dict[str, TaintRule] = field(default_factory=dict)
    user_slices: list[ResourceSlice] = field(default_factory=list)
    # the resourceclaim controller's record: pod key -> pod claim name -> claim name
    pod_claim_names: dict[str, dict[str, str]] = field(default_factory=dict)
    extended_claims: dict[str, str] = field(default_factory=dict)  # pod key -> its extended-resource claim
    created: int = 0
    names: NameGenerator = field(default_factory=lambda: NameGenerator(0))
    _node_slices: dict[str, tuple[int, list[ResourceSlice]]] = field(default_factory=dict)
    _published: dict[str, dict] = field(default_factory=dict)  # node -> device name -> PublishedDevice
    _nodes_seen: tuple = ()
    version: int = 0  # bumped by every change that can make a pending claim fit
    _extended: dict[str, DeviceClass] = field(default_factory=dict)  # the extended resource cache

    def __post_init__(self) -> None:
        self.names.taken = lambda ns, name: f"{ns}/{name}" in self.claims

    # ------------------------------------------------------------ apply
    def check(self, docs: list[dict], namespaces: set[str]) -> list[tuple[str, Any]]:
        """Admit DRA documents as the API server would, changing nothing: (kind, record)."""
        out: list[tuple[str, Any]] = []
        seen: set[tuple[str, str]] = set()
        created = self.created
        for doc in docs:
            kind: str = doc["kind"]  # admit passes only documents of a DRA kind
            if kind == "DeviceClass":
                record: Any = validation.device_class(doc, created)
                created += 1
                key = record.name
                exists = key in self.classes
            elif kind == "ResourceClaimTemplate":
                record = validation.claim_template(doc)
                key = f"{record.namespace}/{record.name}"
                exists = key in self.templates
            elif kind == "ResourceClaim":
                ns, name, spec = validation.resource_claim(doc)
                record = Claim(ns, name, stable_uid("resourceclaim", ns, name), spec,
                               annotations=dict((doc.get("metadata") or {}).get("annotations") or {}))
                key = record.key
                exists = key in self.claims
            elif kind == "DeviceTaintRule":
                record = validation.taint_rule(doc)
                key = record.name
                exists = key in self.taint_rules
            else:  # ResourceSlice
                record = validation.resource_slice(doc)
                key = record.name
                exists = any(s.name == key for s in self.user_slices)
            record_ns = getattr(record, "namespace", None)
            if record_ns is not None and record_ns not in namespaces:
                raise GpuLabError(f'namespaces "{record_ns}" not found')
            if exists or (kind, key) in seen:
                raise GpuLabError(f'{RESOURCES[kind]} "{key.rsplit("/", 1)[-1]}" already exists')
            seen.add((kind, key))
            out.append((kind, record))
        return out

    def commit(self, records: list[tuple[str, Any]]) -> list[str]:
        refs = []
        for kind, record in records:
            if kind == "DeviceClass":
                record.created = self.created
                self.created += 1
                self.classes[record.name] = record
                self._map_extended()
                refs.append(f"deviceclass/{record.name}")
            elif kind == "ResourceClaimTemplate":
                self.templates[f"{record.namespace}/{record.name}"] = record
                refs.append(f"resourceclaimtemplate/{record.namespace}/{record.name}")
            elif kind == "ResourceClaim":
                self.claims[record.key] = record
                refs.append(f"resourceclaim/{record.key}")
            elif kind == "DeviceTaintRule":
                self.taint_rules[record.name] = record
                refs.append(f"devicetaintrule/{record.name}")
            else:
                self.user_slices.append(record)
                refs.append(f"resourceslice/{record.name}")
        self.version += 1
        return refs

    def what_if(self) -> DraState:
        """A copy for a what-if snapshot (cluster-autoscaler's "would it fit on a new node?"):
        the same classes, templates and claims (claims copied, so nothing leaks back), no slices
        until that snapshot's nodes publish theirs."""
        new = DraState(classes=dict(self.classes), templates=dict(self.templates),
                       claims={k: replace(c, reserved_for=list(c.reserved_for)) for k, c in self.claims.items()},
                       taint_rules=dict(self.taint_rules), user_slices=list(self.user_slices),
                       pod_claim_names={k: dict(v) for k, v in self.pod_claim_names.items()},
                       extended_claims=dict(self.extended_claims), created=self.created)
        new._map_extended()
        return new

    # ------------------------------------------------------------ slices
    def sync_nodes(self, snapshot: Any) -> None:
        """Publish the slices of the snapshot's DRA nodes (and NVIDIA's DeviceClasses with the
        first one); redone only when the snapshot's nodes changed."""
        seen = (snapshot.node_version, len(snapshot))
        if seen == self._nodes_seen:
            return
        self._nodes_seen = seen
        nodes: list[Node] = snapshot.nodes
        fresh: dict[str, tuple[int, list[ResourceSlice]]] = {}
        for n in nodes:
            if not is_dra_node(n):
                continue
            old = self._node_slices.get(n.name)
            if old is not None and old[0] == id(n):
                fresh[n.name] = old
                continue
            fresh[n.name] = (id(n), [validation.resource_slice(s) for s in resource_slices(n)])
            self._published[n.name] = published_devices(n)
        self._node_slices = fresh
        if fresh:
            for doc in device_classes():
                name = doc["metadata"]["name"]
                if name not in self.classes:
                    self.classes[name] = validation.device_class(doc, self.created)
                    self.created += 1
            self._map_extended()
        self.version += 1

    def slices(self) -> list[ResourceSlice]:
        """Every ResourceSlice, device taints from DeviceTaintRules added (ListWithDeviceTaintRules)."""
        out = [s for _, slices in self._node_slices.values() for s in slices] + self.user_slices
        if not self.taint_rules:
            return out
        tainted = []
        for s in out:
            devices = []
            for d in s.devices:
                extra = tuple(r.taint for r in self.taint_rules.values() if r.selects(s.driver, s.pool, d.name))
                devices.append(Device(d.name, d.attributes, d.capacity, d.consumes, d.taints + extra) if extra else d)
            tainted.append(ResourceSlice(s.name, s.driver, s.pool, s.generation, s.slice_count, s.node_name,
                                         s.all_nodes, s.node_selector, devices, s.shared_counters))
        return tainted

    def allocated(self) -> set[tuple[str, str, str]]:
        return {r.id for c in self.claims.values() if c.allocation is not None for r in c.allocation.results}

    def device_uuid(self, driver: str, pool: str, device: str) -> str:
        """What NVIDIA_VISIBLE_DEVICES would hold for the device (its name when it has no UUID)."""
        published = self._published.get(pool, {}).get(device)
        if published is not None:
            return published.uuid
        for s in self.slices():
            if s.driver == driver and s.pool == pool:
                for d in s.devices:
                    if d.name == device:
                        return d.attributes.get(driver, {}).get("uuid", device)
        return device

    # ------------------------------------------------------------ extended resources
    def extended_class(self, resource: str) -> DeviceClass | None:
        """The extended resource cache: the class named by ``extendedResourceName`` (the oldest
        one, then the lowest name, wins), or ``deviceclass.resource.kubernetes.io/<class>``."""
        if resource.startswith(DEVICE_CLASS_PREFIX):
            return self.classes.get(resource[len(DEVICE_CLASS_PREFIX):])
        return self._extended.get(resource)

    def maps_extended(self) -> bool:
        """Does any DeviceClass name an extended resource (so some pods' requests may go to DRA)?"""
        return bool(self._extended)

    def _map_extended(self) -> None:
        by_name: dict[str, DeviceClass] = {}
        for c in sorted(self.classes.values(), key=lambda c: (c.created, c.name)):
            if c.extended_resource_name is not None:
                by_name.setdefault(c.extended_resource_name, c)
        self._extended = by_name

    # ------------------------------------------------------------ the resourceclaim controller
    def claims_for(self, pod: Pod) -> list[tuple[PodClaim, Claim | None, str]]:
        """Each of the pod's claims: (entry, claim or None, why None), creating template claims."""
        out: list[tuple[PodClaim, Claim | None, str]] = []
        entries = pod_claims(pod)
        if not entries:
            return out
        made = self.pod_claim_names.setdefault(pod.key, {})
        for pc in entries:
            if pc.claim_name is not None:
                claim = self.claims.get(f"{pod.namespace}/{pc.claim_name}")
                why = f'could not find ResourceClaim "{pod.namespace}/{pc.claim_name}"'  # the assume cache
                out.append((pc, claim, "" if claim else why))
                continue
            name = made.get(pc.name)
            if name is None and pc.template_name is not None:
                template = self.templates.get(f"{pod.namespace}/{pc.template_name}")
                if template is not None:
                    name = self._instantiate(pod, pc, template)
                    made[pc.name] = name
            claim = self.claims.get(f"{pod.namespace}/{name}") if name else None
            out.append((pc, claim, "" if claim else f'pod "{pod.key}": ResourceClaim not created yet'))
        return out

    def _instantiate(self, pod: Pod, pc: PodClaim, template: ClaimTemplate) -> str:
        base = f"{pod.name}-{pc.name}-"
        if len(base) > 57:  # the controller shortens both parts in proportion
            base = pod.name[:len(pod.name) * 57 // len(base)] + "-" + pc.name[:len(pc.name) * 57 // len(base)]
        name = self.names.generate(pod.namespace, base)
        annotations = {**template.annotations, "resource.kubernetes.io/pod-claim-name": pc.name}
        claim = Claim(pod.namespace, name, stable_uid("resourceclaim", pod.namespace, name), template.spec,
                      owner_pod=pod.key, annotations=annotations)
        self.claims[claim.key] = claim
        return name

    def new_extended_claim(self, pod: Pod) -> str:
        """PreBind's claim for extended resources backed by DRA: ``<pod>-extended-resources-xxxxx``."""
        return self.names.generate(pod.namespace, f"{pod.name}-extended-resources-")

    def add_claim(self, claim: Claim) -> None:
        self.claims[claim.key] = claim
        if claim.annotations.get(EXTENDED_RESOURCE_CLAIM) == "true" and claim.owner_pod:
            self.extended_claims[claim.owner_pod] = claim.name

    def release(self, running: set[str], gone=lambda pod_key: False) -> bool:
        """Drop reservations of pods that no longer run; deallocate unreserved claims and delete
        the ones made for a single pod, also when that pod is ``gone`` before it ever ran.
        True when anything changed."""
        changed = False
        for key, claim in list(self.claims.items()):
            if claim.allocation is None:
                if claim.owner_pod is not None and gone(claim.owner_pod):
                    del self.claims[key]
                    self.pod_claim_names.pop(claim.owner_pod, None)
                    changed = True
                continue
            keep = [p for p in claim.reserved_for if p in running]
            if keep == claim.reserved_for:
                continue
            claim.reserved_for = keep
            changed = True
            if keep:
                continue
            claim.allocation = None
            if claim.owner_pod is not None:
                del self.claims[key]
                self.pod_claim_names.pop(claim.owner_pod, None)
                if self.extended_claims.get(claim.owner_pod) == claim.name:
                    del self.extended_claims[claim.owner_pod]
        if changed:
            self.version += 1
        return changed

    def tainted_pods(self, running: set[str]) -> list[str]:
        """Running pods holding a device with a NoExecute taint their request does not tolerate."""
        taints: dict[tuple[str, str, str], tuple] = {}
        for s in self.slices():
            for d in s.devices:
                if any(t.effect == "NoExecute" for t in d.taints):
                    taints[(s.driver, s.pool, d.name)] = d.taints
        if not taints:
            return []
        out: list[str] = []
        for claim in self.claims.values():
            if claim.allocation is None:
                continue
            for result in claim.allocation.results:
                bad = [t for t in taints.get(result.id, ()) if t.effect == "NoExecute"]
                tolerations = _tolerations_of(claim, result.request)
                if any(not any(tol.tolerates(t) for tol in tolerations) for t in bad):
                    out += [p for p in claim.reserved_for if p in running and p not in out]
        return out


def _tolerations_of(claim: Claim, request: str) -> tuple:
    base, _, sub = request.partition("/")
    for req in claim.spec.requests:
        if req.name != base:
            continue
        for r in req.alternatives:
            if not sub or r.name == sub:
                return r.tolerations
    return ()


class DraController(Controller):
    """The resourceclaim controller's cleanup and the device taint eviction controller, as one
    level-triggered controller of the sim session (``_Cluster`` is its view of the session)."""

    frees_resources = True  # deallocated claims free devices

    def __init__(self, cluster: Any, snapshot: Any) -> None:
        super().__init__(cluster)
        self.snapshot = snapshot

    def sync(self) -> bool:
        state = getattr(self.snapshot, "dra", None)
        if state is None or not state.claims:
            return False
        running = {p.key for n in self.cluster.nodes() for p in self.cluster.pods_on(n)}
        evict = state.tainted_pods(running)
        for key in evict:
            self.cluster.remove_pod(key)
        if evict:
            running -= set(evict)
        phase = getattr(self.cluster, "pod_phase", None)  # None: the pod was deleted

        def gone(key: str) -> bool:
            return phase is not None and phase(key) in (None, "Succeeded", "Failed")

        return state.release(running, gone) or bool(evict)
