"""Flavor assignment: which ResourceFlavor each requested resource would use, and how.

pkg/scheduler/flavorassigner/flavorassigner.go (v0.17.0) for the one pod set of a Job,
with the FlavorFungibility gate on (its default): for each resource group the workload
touches, try the group's flavors in order; a flavor must tolerate-match (its NoSchedule
and NoExecute taints tolerated by the pod's and the flavor's tolerations) and match the
pod's node selector and required node affinity on the flavors' label keys; then each
requested resource is checked against the ClusterQueue's quota (``fitsResourceQuota``):
*fit* (maybe borrowing), *preempt* (only if preemption could free it), or *no fit*.
``whenCanBorrow``/``whenCanPreempt`` decide whether to stop at the first flavor that
fits by borrowing or preempting or to look for a better one.

Not modelled: partial admission, TAS, the "last tried flavor" memory (with the default
fungibility a retry starts at the first flavor anyway).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from ...model.kueue.objects import (
    NEVER,
    PREEMPTION_OVER_BORROWING,
    TRY_NEXT_FLAVOR,
    ClusterQueue,
    FlavorFungibility,
    ResourceFlavor,
    ResourceGroup,
)
from ...model.kueue.quantities import quantity_string
from ...model.objects import Taint
from ...model.selectors import Requirement
from . import messages as m
from .preemption import NO_CANDIDATES, PREEMPT
from .quota import FR, Snapshot, available, potential_available
from .workload import Workload

# FlavorAssignmentMode, from worst to best
NO_FIT, PREEMPT_MODE, FIT = 0, 1, 2
# the assigner's finer preemptionMode
G_NO_FIT, G_NO_CANDIDATES, G_PREEMPT, G_RECLAIM, G_FIT = range(5)
_COARSE = {G_NO_FIT: NO_FIT, G_NO_CANDIDATES: PREEMPT_MODE, G_PREEMPT: PREEMPT_MODE, G_RECLAIM: PREEMPT_MODE,
           G_FIT: FIT}
WORST = (G_NO_FIT, math.inf)
BEST = (G_FIT, 0)

Oracle = Callable[[FR, int], tuple[str, int]]


@dataclass
class FlavorAssignment:
    flavor: str
    mode: int
    borrow: int


@dataclass
class Assignment:
    """The pod set's assignment (``Assignment`` with one ``PodSetAssignment``)."""

    flavors: dict[str, FlavorAssignment] = field(default_factory=dict)
    reasons: list[str] = field(default_factory=list)
    usage: dict[FR, int] = field(default_factory=dict)
    borrowing: int = 0

    @property
    def mode(self) -> int:
        """``RepresentativeMode``."""
        if not self.reasons:
            return FIT
        if not self.flavors:
            return NO_FIT
        return min(fa.mode for fa in self.flavors.values())

    def message(self) -> str:
        """``Assignment.Message``: reasons sorted, joined with ", "."""
        if not self.reasons:
            return ""
        return m.cannot_assign(m.POD_SET_MAIN, ", ".join(sorted(self.reasons)))

    def needs_preemption(self) -> set[FR]:
        """``flavorResourcesNeedPreemption``."""
        return {(fa.flavor, res) for res, fa in self.flavors.items() if fa.mode == PREEMPT_MODE}


def is_preferred(a: tuple, b: tuple, fungibility: FlavorFungibility) -> bool:
    """``isPreferred``: whether granular mode ``a`` beats ``b``."""
    if a[0] == G_NO_FIT:
        return False
    if b[0] == G_NO_FIT:
        return True
    if fungibility.preference == PREEMPTION_OVER_BORROWING:
        return a[1] < b[1] if a[1] != b[1] else a[0] > b[0]
    return a[0] > b[0] if a[0] != b[0] else a[1] < b[1]


def should_try_next(mode: tuple, fungibility: FlavorFungibility) -> bool:
    if mode[0] in (G_NO_FIT, G_NO_CANDIDATES):
        return True
    if mode[0] in (G_PREEMPT, G_RECLAIM) and fungibility.when_can_preempt == TRY_NEXT_FLAVOR:
        return True
    return mode[1] != 0 and fungibility.when_can_borrow == TRY_NEXT_FLAVOR


def taint_text(t: Taint) -> str:
    """A ``v1.Taint`` as Go's ``%s`` prints the struct value: ``{key value effect <nil>}``."""
    return f"{{{t.key} {t.value} {t.effect} <nil>}}"


class FlavorAssigner:
    def __init__(self, wl: Workload, cq: ClusterQueue, snap: Snapshot, flavors: dict[str, ResourceFlavor],
                 oracle: Oracle):
        self.wl, self.cq, self.snap, self.flavors, self.oracle = wl, cq, snap, flavors, oracle

    def assign(self) -> Assignment:
        requests = self.wl.spec.total()
        if self.cq.group_for("pods") is not None:
            requests["pods"] = self.wl.spec.count
        assignment = Assignment()
        chosen: dict[str, FlavorAssignment] | None = {}
        reasons: list[str] = []
        # Go ranges over a map here; sorted keeps the result reproducible
        for res in sorted(requests):
            if chosen is None:
                break
            if requests[res] == 0 and self.cq.group_for(res) is None:
                continue
            if res in chosen:
                continue
            found, found_reasons = self._find_flavor(res, requests)
            if not found:
                chosen, reasons = None, found_reasons
                break
            chosen.update(found)
            reasons += found_reasons
        assignment.flavors = {r: fa for r, fa in (chosen or {}).items() if r in requests}
        assignment.reasons = reasons
        for res, fa in assignment.flavors.items():
            assignment.borrowing = max(assignment.borrowing, fa.borrow)
            fr = (fa.flavor, res)
            assignment.usage[fr] = assignment.usage.get(fr, 0) + requests[res]
        return assignment

    def _find_flavor(self, res: str, requests: dict[str, int]) -> tuple[dict[str, FlavorAssignment], list[str]]:
        """``findFlavorForPodSets``: the group's best flavor, and every reason met on the way."""
        rg = self.cq.group_for(res)
        if rg is None:
            return {}, [m.resource_unavailable(res)]
        wanted = {r: q for r, q in requests.items() if r in rg.covered_resources}
        fung = self.cq.flavor_fungibility
        best: dict[str, FlavorAssignment] = {}
        best_mode: tuple = WORST
        reasons: list[str] = []
        for fq in rg.flavors:
            problem = self._check_flavor(fq.name, rg)
            if problem:
                reasons.append(problem)
                continue
            assignments: dict[str, FlavorAssignment] = {}
            representative: tuple = BEST
            for r, val in wanted.items():
                mode, borrow, why = self._fits_quota((fq.name, r), val)
                reasons += why
                granular = (mode, borrow)
                if is_preferred(representative, granular, fung):
                    representative = granular
                if representative[0] == G_NO_FIT:
                    break
                assignments[r] = FlavorAssignment(fq.name, _COARSE[mode], borrow)
            if not should_try_next(representative, fung):
                best, best_mode = assignments, representative
                break
            if is_preferred(representative, best_mode, fung):
                best, best_mode = assignments, representative
        if best_mode[0] == G_FIT:
            return best, []
        return best, reasons

    def _check_flavor(self, name: str, rg: ResourceGroup) -> str | None:
        """``checkFlavorForPodSets``: taints, then node selector and required affinity."""
        flavor = self.flavors.get(name)
        if flavor is None:
            return m.flavor_not_found(name)
        tolerations = list(self.wl.spec.tolerations) + list(flavor.tolerations)
        for taint in flavor.node_taints:
            if taint.effect in ("NoSchedule", "NoExecute") and not any(t.tolerates(taint) for t in tolerations):
                return m.untolerated_taint(taint_text(taint), name)
        keys = {k for fq in rg.flavors if fq.name in self.flavors for k in self.flavors[fq.name].node_labels}
        if not _matches(self.wl.spec.node_selector, self.wl.spec.affinity, keys, flavor.node_labels):
            return m.affinity_mismatch(name)
        return None

    def _fits_quota(self, fr: FR, request: int) -> tuple[int, int, list[str]]:
        """``fitsResourceQuota`` for one pod set (nothing assumed from earlier pod sets)."""
        node = self.snap.node(self.cq.name)
        free = max(0, available(node, fr))
        capacity = potential_available(node, fr)
        res = fr[1]
        if request > capacity:
            return G_NO_FIT, 0, [m.insufficient_quota(res, fr[0], quantity_string(res, 0),
                                                      quantity_string(res, request), quantity_string(res, capacity))]
        borrow, may_reclaim = self.snap.lowest_subtree_that_fits(self.cq.name, fr, request)
        if request <= free:
            return G_FIT, borrow, []
        why = [m.insufficient_unused_quota(res, fr[0], quantity_string(res, request - free))]
        if request <= node.nominal(fr) or may_reclaim or self.cq.preemption.borrow_within_cohort != NEVER:
            possibility, borrow_after = self.oracle(fr, request)
            mode = {NO_CANDIDATES: G_NO_CANDIDATES, PREEMPT: G_PREEMPT}.get(possibility, G_RECLAIM)
            return mode, borrow_after, why
        return G_NO_FIT, borrow, why


def _matches(node_selector: dict, affinity: dict, keys: set[str], labels: dict[str, str]) -> bool:
    """``flavorSelector`` + ``RequiredNodeAffinity.Match`` against the flavor's node labels."""
    if any(k in keys and labels.get(k) != v for k, v in node_selector.items()):
        return False
    required = ((affinity.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
                or {})
    terms = []
    for term in required.get("nodeSelectorTerms") or []:
        exprs = [e for e in term.get("matchExpressions") or [] if e.get("key") in keys]
        if not exprs:  # an emptied term matches any flavor: the terms are ORed
            return True
        terms.append([Requirement(e["key"], e["operator"], tuple(str(x) for x in e.get("values") or ()))
                      for e in exprs])
    return not terms or any(all(r.matches(labels) for r in term) for term in terms)
