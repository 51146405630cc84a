"""The kubelet's Topology Manager for devices: NUMA hints, the four policies, TopologyAffinityError.

A model of ``pkg/kubelet/cm/topologymanager`` and the device manager's hint provider
(``devicemanager/topology_hints.go``), checked against Kubernetes v1.37.2, for the one
provider gpu-lab has: devices whose plugin reports a NUMA node (``Device.topology``).
The CPU and memory managers' hints (static CPU policy, Guaranteed pods) are not modelled.
Scope is ``container`` (the default): each container is admitted, and gets its devices,
one after the other.

* **Hints** for one resource: every set of NUMA nodes (a mask) with enough healthy free
  devices for the request; a mask is *preferred* when it has as few NUMA nodes as any mask
  that could hold the request if every device were free (``minAffinitySize``). Too few free
  devices anywhere gives no hint at all; a resource without topology has no preference.
* **Merge**: one hint per resource, ANDed; preferred when all are preferred and equal; the
  best is preferred over not, then the narrowest, then the lowest NUMA nodes.
* **Policies** (``topologyManagerPolicy``): ``none`` admits without hints; ``best-effort``
  admits and aligns where it can; ``restricted`` admits only a preferred hint;
  ``single-numa-node`` admits only a preferred hint on one NUMA node. A refused pod fails
  on the node (the scheduler knew nothing of NUMA): phase Failed, reason
  ``TopologyAffinityError``, "Resources cannot be allocated with Topology locality".
* The admitted hint's NUMA nodes go to the device manager, which takes devices on them
  first (``DeviceManager.allocate(affinity=...)``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations, product

from ..gpus.topology import TOPOLOGY_MANAGER_POLICIES

POLICIES = TOPOLOGY_MANAGER_POLICIES
TOPOLOGY_AFFINITY_ERROR = "TopologyAffinityError"
TOPOLOGY_AFFINITY_MESSAGE = "Resources cannot be allocated with Topology locality"


@dataclass(frozen=True)
class Hint:
    """``TopologyHint``: a set of NUMA nodes (None: no preference) and whether it is preferred."""

    nodes: frozenset[int] | None
    preferred: bool

    def narrower_than(self, other: Hint) -> bool:
        assert self.nodes is not None and other.nodes is not None
        if len(self.nodes) != len(other.nodes):
            return len(self.nodes) < len(other.nodes)
        return sorted(self.nodes) < sorted(other.nodes)


def _masks(nodes: Sequence[int]) -> Iterable[frozenset[int]]:
    """``bitmask.IterateBitMasks``: by size, then in order."""
    for k in range(1, len(nodes) + 1):
        for combo in combinations(nodes, k):
            yield frozenset(combo)


def device_hints(numa: Mapping[str, int | None], free: Iterable[str], request: int
                 ) -> list[Hint] | None:
    """Hints for ``request`` devices of one resource. ``numa``: every device of it (healthy
    or not) -> its NUMA node; ``free``: the healthy devices no container holds.

    None: the resource has no topology (no preference); []: not enough free devices."""
    if not any(n is not None for n in numa.values()):
        return None
    free = list(free)
    if len(free) < request:
        return []
    nodes = sorted({n for n in numa.values() if n is not None})
    hints: list[Hint] = []
    min_size = len(nodes)
    for mask in _masks(nodes):
        if sum(1 for n in numa.values() if n in mask) >= request:
            min_size = min(min_size, len(mask))
        if sum(1 for d in free if numa.get(d) in mask) >= request:
            hints.append(Hint(mask, False))
    return [Hint(h.nodes, len(h.nodes or ()) == min_size) for h in hints]


def merge(per_resource: Sequence[list[Hint] | None], machine: frozenset[int]) -> Hint:
    """The best merged hint over one hint per resource (``HintMerger.Merge``)."""
    options = [[Hint(None, True)] if h is None else (h or [Hint(None, False)]) for h in per_resource]
    best: Hint | None = None
    for perm in product(*options):
        masks = [h.nodes for h in perm if h.nodes is not None]
        nodes = machine.intersection(*masks) if masks else machine
        preferred = all(h.preferred for h in perm) and all(m == masks[0] for m in masks)
        cand = Hint(frozenset(nodes), preferred)
        if not cand.nodes:
            continue
        if best is None or (cand.preferred and not best.preferred) or (
                cand.preferred == best.preferred and cand.narrower_than(best)):
            best = cand
    return best or Hint(machine, False)


def admit(policy: str, per_resource: Sequence[list[Hint] | None], machine: frozenset[int]
          ) -> tuple[bool, frozenset[int] | None]:
    """(admitted, NUMA nodes to allocate from; None = anywhere) for one container."""
    if policy == "none" or not machine:
        return True, None
    if policy == "single-numa-node":
        per_resource = [None if h is None else
                        [x for x in h if x.preferred and x.nodes is not None and len(x.nodes) == 1]
                        for h in per_resource]
    hint = merge(per_resource, machine)
    if policy == "single-numa-node" and hint.nodes == machine:
        hint = Hint(None, hint.preferred)  # the default affinity means "anywhere"
    ok = policy == "best-effort" or hint.preferred
    nodes = None if hint.nodes is None or hint.nodes == machine else hint.nodes
    return ok, nodes
