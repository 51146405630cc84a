"""A ClusterQueue manifest into a ``ClusterQueue``: defaults, schema, webhook, conversion.

Defaults and schema come from config/components/crd/bases/kueue.x-k8s.io_clusterqueues.yaml
(v0.17.0), the webhook checks from pkg/webhooks/clusterqueue_webhook.go
``ValidateClusterQueue`` in its order. ``kueue.x-k8s.io/v1beta1`` (still served) names
the cohort ``spec.cohort`` and allows the deprecated fungibility values ``Borrow`` and
``Preempt``, which its conversion turns into ``MayStopSearch``
(apis/kueue/v1beta1/clusterqueue_conversion.go).
"""

from __future__ import annotations

from typing import Any

from .. import validation as v
from ..selectors import LabelSelector
from ..validation.quantities import quantity_string
from .objects import (
    ANY,
    BEST_EFFORT_FIFO,
    LOWER_OR_NEWER_EQUAL_PRIORITY,
    LOWER_PRIORITY,
    MAY_STOP_SEARCH,
    NEVER,
    STRICT_FIFO,
    TRY_NEXT_FLAVOR,
    ClusterQueue,
    FlavorFungibility,
    FlavorQuotas,
    Preemption,
    ResourceGroup,
    ResourceQuota,
)
from .quantities import resource_value
from .validation import (
    NAME_PATTERN,
    Schema,
    bounded_listing,
    check,
    deny,
    label_name,
    listing,
    mapping,
    negative,
    opened,
    quantity_value,
    require,
)

WEBHOOK = "vclusterqueue.kb.io"
STOP_POLICIES = ("None", "Hold", "HoldAndDrain")
QUOTA_FIELDS = ("nominalQuota", "borrowingLimit", "lendingLimit")


def parse_cluster_queue(doc: dict, version: str) -> ClusterQueue:
    meta = metadata_raw if isinstance(metadata_raw := doc.get("metadata"), dict) else {}
    name, s = opened(meta, namespaced=False)
    spec = mapping(s, doc.get("spec"), "spec")
    cohort_field = "cohort" if version == "v1beta1" else "cohortName"
    _schema(s, spec, cohort_field, version)
    check("ClusterQueue", name, s.result())
    deny(WEBHOOK, _webhook(spec, cohort_field))
    return _build(name, spec, cohort_field)


def _schema(s: Schema, spec: dict, cohort_field: str, version: str) -> None:
    s.pattern(f"spec.{cohort_field}", spec.get(cohort_field), NAME_PATTERN, 253)
    s.enum("spec.queueingStrategy", spec.get("queueingStrategy"), (STRICT_FIFO, BEST_EFFORT_FIFO))
    s.enum("spec.stopPolicy", spec.get("stopPolicy"), STOP_POLICIES)
    mapping(s, spec.get("namespaceSelector"), "spec.namespaceSelector")
    p = mapping(s, spec.get("preemption"), "spec.preemption")
    s.enum("spec.preemption.withinClusterQueue", p.get("withinClusterQueue"),
           (NEVER, LOWER_PRIORITY, LOWER_OR_NEWER_EQUAL_PRIORITY))
    s.enum("spec.preemption.reclaimWithinCohort", p.get("reclaimWithinCohort"), (NEVER, LOWER_PRIORITY, ANY))
    b = mapping(s, p.get("borrowWithinCohort"), "spec.preemption.borrowWithinCohort")
    s.enum("spec.preemption.borrowWithinCohort.policy", b.get("policy"), (NEVER, LOWER_PRIORITY))
    if b.get("maxPriorityThreshold") is not None:
        s.wrong_type("spec.preemption.borrowWithinCohort.maxPriorityThreshold", b["maxPriorityThreshold"], "integer")
    f = mapping(s, spec.get("flavorFungibility"), "spec.flavorFungibility")
    legacy = version == "v1beta1"
    s.enum("spec.flavorFungibility.whenCanBorrow", f.get("whenCanBorrow"),
           (MAY_STOP_SEARCH, TRY_NEXT_FLAVOR) + (("Borrow",) if legacy else ()))
    s.enum("spec.flavorFungibility.whenCanPreempt", f.get("whenCanPreempt"),
           (MAY_STOP_SEARCH, TRY_NEXT_FLAVOR) + (("Preempt",) if legacy else ()))
    s.enum("spec.flavorFungibility.preference", f.get("preference"),
           ("BorrowingOverPreemption", "PreemptionOverBorrowing"))

    groups = listing(s, spec.get("resourceGroups"), "spec.resourceGroups")
    s.items("spec.resourceGroups", groups, max_items=16)
    any_borrowing_limit = False
    for i, rg in enumerate(groups):
        at = f"spec.resourceGroups[{i}]"
        rg = mapping(s, rg, at)
        require(s, rg, at, "coveredResources", "flavors")
        covered = bounded_listing(s, rg, "coveredResources", at, 1, 64)
        for j, r in enumerate(covered):
            s.wrong_type(f"{at}.coveredResources[{j}]", r, "string")
        flavors = bounded_listing(s, rg, "flavors", at, 1, 64)
        sizes_match = True
        for j, fq in enumerate(flavors):
            fat = f"{at}.flavors[{j}]"
            fq = mapping(s, fq, fat)
            require(s, fq, fat, "name", "resources")
            s.pattern(f"{fat}.name", fq.get("name"), NAME_PATTERN, 253)
            resources = bounded_listing(s, fq, "resources", fat, 1, 64)
            sizes_match = sizes_match and len(resources) == len(covered)
            for k, rq in enumerate(resources):
                rat = f"{fat}.resources[{k}]"
                rq = mapping(s, rq, rat)
                require(s, rq, rat, "name", "nominalQuota")
                for key in QUOTA_FIELDS:
                    if rq.get(key) is not None:
                        s.quantity(f"{rat}.{key}", rq[key])
                any_borrowing_limit = any_borrowing_limit or "borrowingLimit" in rq
        s.rule(at, sizes_match, "flavors must have the same number of resources as the coveredResources")
    s.rule("spec", bool(spec.get(cohort_field)) or not groups or not any_borrowing_limit,
           "borrowingLimit must be nil when cohort is empty")
    s.rule("spec.preemption", not (p.get("reclaimWithinCohort", NEVER) == NEVER and "borrowWithinCohort" in p
                                   and b.get("policy", NEVER) != NEVER),
           "reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never")
    s.rule("spec.flavorFungibility",
           "preference" not in f or (f.get("whenCanBorrow", MAY_STOP_SEARCH) == TRY_NEXT_FLAVOR
                                     and f.get("whenCanPreempt", TRY_NEXT_FLAVOR) == TRY_NEXT_FLAVOR),
           "preference can only be set when both whenCanBorrow and whenCanPreempt are TryNextFlavor")


def _webhook(spec: dict, cohort_field: str) -> list[str]:
    """``ValidateClusterQueue``: resource groups, then the namespace selector."""
    errs: list[str] = []
    has_cohort = bool(spec.get(cohort_field))
    seen_resources: set[str] = set()
    seen_flavors: set[str] = set()
    for i, rg in enumerate(spec.get("resourceGroups") or []):
        at = f"spec.resourceGroups[{i}]"
        covered = [str(r) for r in rg.get("coveredResources") or []]
        for j, r in enumerate(covered):
            errs += label_name(r, f"{at}.coveredResources[{j}]")
            if r in seen_resources:
                errs.append(v.duplicate(f"{at}.coveredResources[{j}]", r))
            seen_resources.add(r)
        for j, fq in enumerate(rg.get("flavors") or []):
            fat = f"{at}.flavors[{j}]"
            errs += _flavor_quotas(fq, covered, has_cohort, fat)
            if fq.get("name") in seen_flavors:
                errs.append(v.duplicate(f"{fat}.name", fq.get("name")))
            seen_flavors.add(fq.get("name"))
    errs += v.validate_label_selector(spec.get("namespaceSelector"), "spec.namespaceSelector")
    return errs


def _flavor_quotas(fq: dict, covered: list[str], has_cohort: bool, at: str) -> list[str]:
    """``validateFlavorQuotas``: resources pair up with coveredResources by position."""
    errs: list[str] = []
    for k, rq in enumerate((fq.get("resources") or [])[:len(covered)]):
        rat = f"{at}.resources[{k}]"
        if str(rq.get("name")) != covered[k]:
            errs.append(v.invalid(f"{rat}.name", rq.get("name"), "must match the name in coveredResources"))
        errs += negative(rq.get("nominalQuota"), f"{rat}.nominalQuota")
        if rq.get("borrowingLimit") is not None:
            errs += _limit(rq["borrowingLimit"], has_cohort, f"{rat}.borrowingLimit")
            errs += negative(rq["borrowingLimit"], f"{rat}.borrowingLimit")
        if rq.get("lendingLimit") is not None:
            errs += negative(rq["lendingLimit"], f"{rat}.lendingLimit")
            errs += _limit(rq["lendingLimit"], has_cohort, f"{rat}.lendingLimit")
            lend, nominal = quantity_value(rq["lendingLimit"]), quantity_value(rq.get("nominalQuota"))
            if lend is not None and nominal is not None and lend > nominal:
                errs.append(v.invalid(f"{rat}.lendingLimit", quantity_string(rq["lendingLimit"]),
                                      "must be less than or equal to the nominalQuota"))
    return errs


def _limit(raw: Any, has_cohort: bool, path: str) -> list[str]:
    return [] if has_cohort else [v.invalid(path, quantity_string(raw), "must be nil when cohort is empty")]


def _build(name: str, spec: dict, cohort_field: str) -> ClusterQueue:
    groups = []
    for rg in spec.get("resourceGroups") or []:
        covered = tuple(str(r) for r in rg["coveredResources"])
        flavors = []
        for fq in rg["flavors"]:
            quotas = {}
            for rq in fq["resources"]:
                res = str(rq["name"])
                limits = [None if rq.get(k) is None else resource_value(res, rq[k])
                          for k in ("borrowingLimit", "lendingLimit")]
                quotas[res] = ResourceQuota(resource_value(res, rq["nominalQuota"]), *limits)
            flavors.append(FlavorQuotas(str(fq["name"]), quotas))
        groups.append(ResourceGroup(covered, tuple(flavors)))
    p = spec.get("preemption") or {}
    b = p.get("borrowWithinCohort") or {}
    f = spec.get("flavorFungibility") or {}
    legacy: dict[str | None, str] = {"Borrow": MAY_STOP_SEARCH, "Preempt": MAY_STOP_SEARCH}  # keyed by what YAML gave
    return ClusterQueue(
        name=name,
        resource_groups=tuple(groups),
        cohort=spec.get(cohort_field) or None,
        queueing_strategy=spec.get("queueingStrategy") or BEST_EFFORT_FIFO,
        namespace_selector=LabelSelector.parse(spec.get("namespaceSelector")),
        preemption=Preemption(p.get("withinClusterQueue") or NEVER, p.get("reclaimWithinCohort") or NEVER,
                              b.get("policy") or NEVER, b.get("maxPriorityThreshold")),
        flavor_fungibility=FlavorFungibility(
            legacy.get(f.get("whenCanBorrow"), f.get("whenCanBorrow") or MAY_STOP_SEARCH),
            legacy.get(f.get("whenCanPreempt"), f.get("whenCanPreempt") or TRY_NEXT_FLAVOR),
            f.get("preference")),
        stop_policy=spec.get("stopPolicy") or "None",
    )
