"""The kubelet's and NVIDIA's kubelet plugin's part of DRA, minus the hardware: preparing a
bound pod's ResourceClaims and telling each container which devices it gets.

The kubelet (``pkg/kubelet/cm/dra/manager.go``, ``PrepareResources``) resolves each entry of
``pod.spec.resourceClaims`` to a ResourceClaim (by name, or through
``status.resourceClaimStatuses`` for a template's claim; ``status.extendedResourceClaimStatus``
for the claim kube-scheduler made for an extended resource backed by DRA), fetches it, checks
that it is reserved for the pod and hands the allocated devices to the driver. NVIDIA's
driver then injects them into the containers that name the claim in ``resources.claims``
(all of the claim's requests, or the one named) through a per-claim CDI spec; its device
IDs are ``k8s.gpu.nvidia.com/claim=<claim UID>-<device name>`` (``cdi.go``,
``GetClaimDeviceName``).

:func:`prepare` returns what the node agent records on the pod, as for device-plugin pods:
``{container: {key: [uuid, ...]}}`` with ``key`` the driver name (``gpu.nvidia.com``) for
claims the pod lists and the extended resource (``nvidia.com/gpu``) for the scheduler's
claim, the ``NVIDIA_VISIBLE_DEVICES`` a container sees, and the CDI device IDs. A claim that
is not there, not allocated or not reserved for the pod raises :class:`NotPrepared` in the
kubelet's words (it then retries, as the kubelet does).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ..errors import NotPrepared
from .resourceslices import DRIVER, PublishedDevice

#: CDI vendor and class of NVIDIA's claim specs (``cdi.go``: cdiVendor, cdiClaimClass)
CDI_KIND = "k8s.gpu.nvidia.com/claim"


@dataclass
class Prepared:
    devices: dict[str, dict[str, list[str]]] = field(default_factory=dict)
    env: dict[str, dict[str, str]] = field(default_factory=dict)
    cdi: dict[str, list[str]] = field(default_factory=dict)

    def add(self, container: str, key: str, uuid: str, cdi: str) -> None:
        ids = self.devices.setdefault(container, {}).setdefault(key, [])
        if uuid not in ids:
            ids.append(uuid)
            self.cdi.setdefault(container, []).append(cdi)
        every = [u for per in self.devices[container].values() for u in per]
        self.env.setdefault(container, {})["NVIDIA_VISIBLE_DEVICES"] = ",".join(every)

    def __bool__(self) -> bool:
        return bool(self.devices)


def uses_claims(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("spec") or {}).get("resourceClaims")
                or (pod.get("status") or {}).get("extendedResourceClaimStatus"))


def _claim_name(pod: Mapping[str, Any], entry: Mapping[str, Any]) -> str | None:
    """``resourceclaim.Name``: the ResourceClaim of one ``spec.resourceClaims`` entry."""
    meta = pod.get("metadata") or {}
    if entry.get("resourceClaimName"):
        return entry["resourceClaimName"]
    for st in (pod.get("status") or {}).get("resourceClaimStatuses") or []:
        if st.get("name") == entry.get("name"):
            return st.get("resourceClaimName")  # None: the template made no claim (nothing to do)
    raise NotPrepared(f'pod "{meta.get("namespace")}/{meta.get("name")}": ResourceClaim not created yet')


def _checked(pod: Mapping[str, Any], name: str, get_claim: Callable[[str], dict | None]) -> dict:
    meta = pod.get("metadata") or {}
    claim = get_claim(name)
    if claim is None:
        raise NotPrepared(f'fetch ResourceClaim {name}: resourceclaims.resource.k8s.io "{name}" not found')
    reserved = (claim.get("status") or {}).get("reservedFor") or []
    if not any(r.get("uid") == meta.get("uid") for r in reserved) or not (
            claim.get("status") or {}).get("allocation"):
        raise NotPrepared(f"pod {meta.get('name')} ({meta.get('uid')}) is not allowed to use "
                          f"ResourceClaim {name} ({claim['metadata'].get('uid')})")
    return claim


def _results(claim: dict, node: str, request: str | None) -> list[dict]:
    """The claim's devices on this node from NVIDIA's driver (one request, or all)."""
    out = []
    for r in ((claim["status"]["allocation"].get("devices") or {}).get("results") or []):
        if r.get("driver") != DRIVER or r.get("pool") != node:
            continue
        if request is None or r.get("request") == request or r.get("request", "").startswith(request + "/"):
            out.append(r)
    return out


def _containers(pod: Mapping[str, Any]) -> list[dict]:
    spec = pod.get("spec") or {}
    return list(spec.get("initContainers") or []) + list(spec.get("containers") or [])


def prepare(pod: Mapping[str, Any], node: str, devices: Mapping[str, PublishedDevice],
            get_claim: Callable[[str], dict | None]) -> Prepared:
    """The devices each container of ``pod`` gets on ``node`` (see the module docstring)."""
    out = Prepared()
    by_pod_name: dict[str, dict] = {}
    for entry in (pod.get("spec") or {}).get("resourceClaims") or []:
        name = _claim_name(pod, entry)
        if name is not None:
            by_pod_name[entry.get("name")] = _checked(pod, name, get_claim)

    def give(container: str, key: str, claim: dict, request: str | None) -> None:
        for r in _results(claim, node, request):
            dev = devices.get(r.get("device") or "")  # no name: no device either
            if dev is None:  # allocated from a slice this node no longer publishes
                raise NotPrepared(f"NodePrepareResources failed for ResourceClaim "
                                  f"{claim['metadata']['name']}: device {r.get('device')} not found")
            uid = claim["metadata"].get("uid", "")
            out.add(container, key, dev.uuid, f"{CDI_KIND}={uid}-{dev.name}")

    for c in _containers(pod):
        for ref in (c.get("resources") or {}).get("claims") or []:
            claim = by_pod_name.get(ref.get("name"))
            if claim is not None:
                give(c.get("name", ""), DRIVER, claim, ref.get("request"))
    ext = (pod.get("status") or {}).get("extendedResourceClaimStatus")
    if ext:
        claim = _checked(pod, ext.get("resourceClaimName", ""), get_claim)
        for m in ext.get("requestMappings") or []:
            give(m.get("containerName", ""), m.get("resourceName", ""), claim, m.get("requestName"))
    return out
