"""gpu-lab's reading of a pod's claims, for ``explain``: where kube-scheduler only says
``cannot allocate all claims``, these lines say which request could not be met and how many
devices match it on each node (what ``kubectl get resourceslices`` and the claim would show a
learner who went looking). They are gpu-lab's words, marked as such; the verdicts stay the
scheduler's.
"""

from __future__ import annotations

from typing import Any

from ...model.objects import Pod
from .allocator import Allocator, AllocatorError, _Attempt, _Data
from .counters import available
from .objects import Claim
from .pools import gather_pools
from .state import dra_state, pod_claims

MAX_NODES_SHOWN = 4


def explain_notes(snapshot: Any, pod: Pod) -> list[str]:
    if not pod_claims(pod) or getattr(snapshot, "dra", None) is None:
        return []
    state = dra_state(snapshot)
    notes = []
    for pc, claim, why in state.claims_for(pod):
        if claim is None:
            notes.append(f"DRA: pod claim {pc.name}: {why}")
            continue
        notes.append(_claim_line(claim))
        if claim.allocation is None:
            notes += _request_lines(state, snapshot, claim)
    return notes


def _claim_line(claim: Claim) -> str:
    head = f"DRA: claim {claim.key}"
    if claim.allocation is None:
        return f"{head}: not allocated"
    devices = ", ".join(f"{r.device} ({r.request})" for r in claim.allocation.results)
    where = f" on {claim.allocation.node}" if claim.allocation.node else ""
    return f"{head}: allocated {devices}{where}, reserved for {', '.join(claim.reserved_for) or 'nobody'}"


def _request_lines(state, snapshot: Any, claim: Claim) -> list[str]:
    alloc = Allocator(state.classes, state.slices(), state.allocated())
    lines = []
    for req in claim.spec.requests:
        for r in req.alternatives:
            name = f"{req.name}/{r.name}" if req.exactly is None else req.name
            cls = state.classes.get(r.class_name)
            if cls is None:
                lines.append(f"DRA:   request {name}: device class {r.class_name} does not exist")
                continue
            counts = []
            for node in snapshot.nodes:
                try:
                    matching, free = _matching(alloc, node, claim, r, cls, name)
                except AllocatorError as err:
                    lines.append(f"DRA:   request {name}: {err}")
                    break
                if matching:
                    counts.append((free, matching, node.name))
            else:
                want = "all matching devices" if r.mode == "All" else f"{r.count} device(s)"
                counts.sort(key=lambda c: (-c[0], -c[1], c[2]))
                shown = ", ".join(f"{n} {m} ({f} free)" for f, m, n in counts[:MAX_NODES_SHOWN]) or "none on any node"
                more = f", and {len(counts) - MAX_NODES_SHOWN} more nodes" if len(counts) > MAX_NODES_SHOWN else ""
                lines.append(f"DRA:   request {name} wants {want} of class {r.class_name}"
                             f"{' with ' + str(len(r.selectors)) + ' selector(s)' if r.selectors else ''}; "
                             f"matching devices per node: {shown}{more}")
    return lines


def _matching(alloc: Allocator, node, claim: Claim, req, cls, name: str) -> tuple[int, int]:
    attempt = _Attempt(alloc, node, [(claim.key, claim.spec)])
    data = _Data(req, None, cls, req.count)
    matching = free = 0
    for pool in gather_pools(alloc.slices, node):
        if pool.incomplete or pool.invalid:
            continue
        left = available(pool, alloc.allocated) if pool.counter_sets else {}
        for s in pool.slices:
            for d in s.devices:
                if attempt._selectable(0, data, s, d):  # noqa: SLF001 (the allocator's own test)
                    matching += 1
                    # free: not allocated, and its shared counters (MIG slices, SMs) still there
                    free += (s.driver, s.pool, d.name) not in alloc.allocated and all(
                        amount <= left.get(use.counter_set, {}).get(counter, 0)
                        for use in d.consumes for counter, amount in use.counters)
    return matching, free
