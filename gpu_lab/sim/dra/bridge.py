"""Extended resources served through DRA (DRAExtendedResource, GA in v1.37).

A DeviceClass with ``spec.extendedResourceName: nvidia.com/gpu`` lets an unchanged pod
(``resources.limits: {nvidia.com/gpu: 1}``) get its GPU from a DRA driver on nodes whose
allocatable has none of that resource (a device plugin's node keeps serving it). On such a
node the scheduler writes the pod a claim with one request per container, named
``container-<i>-request-<j>`` (``i`` counting init containers first, ``j`` the resource's
place among the container's sorted requests), for the container's count of devices of
that class (``createRequestsAndMappings`` in extendeddynamicresources.go). Init containers
(which run one at a time) share the largest such request.
"""

from __future__ import annotations

from collections.abc import Callable

from ...model.objects import Pod, is_extended_resource
from .objects import DEVICE_CLASS_PREFIX, EXACT_COUNT, ClaimRequest, ClaimSpec, DeviceClass, Request


def is_dra_extended_name(name: str) -> bool:
    """``IsDRAExtendedResourceName``."""
    return is_extended_resource(name) or name.startswith(DEVICE_CLASS_PREFIX)


def requests_and_mappings(pod: Pod, resources: dict[str, int], class_of: Callable[[str], DeviceClass | None]
                          ) -> tuple[ClaimSpec, list[tuple[str, str, str]]]:
    """The claim spec for ``resources`` (resource -> count the pod needs) and, per container,
    (container, resource, request name): the pod's ``extendedResourceClaimStatus``."""
    containers = list(pod.init_containers) + list(pod.containers)
    n_init = len(pod.init_containers)
    requests: list[ClaimRequest] = []
    mappings: list[tuple[str, str, str]] = []
    for resource in sorted(resources):
        cls = class_of(resource)
        if cls is None:
            continue
        longest: ClaimRequest | None = None
        longest_count = 0
        short: list[tuple[str, str]] = []
        for i, c in enumerate(containers):
            count = c.requests.get(resource, 0)
            if count <= 0:
                continue
            name = f"container-{i}-request-{sorted(c.requests).index(resource)}"
            req = ClaimRequest(name, exactly=Request(name, cls.name, (), EXACT_COUNT, count))
            if i < n_init:
                short.append((c.name, name))
                if longest is None or longest_count < count:
                    longest, longest_count = req, count
                continue
            requests.append(req)
            mappings.append((c.name, resource, name))
        if longest is not None:
            requests.append(longest)
            mappings += [(c, resource, longest.name) for c, _ in short]
    requests.sort(key=lambda r: r.name)
    return ClaimSpec(tuple(requests)), mappings
