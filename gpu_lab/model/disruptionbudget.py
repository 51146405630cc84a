"""PodDisruptionBudget (policy/v1): validated as the API server does; its status as the
disruption controller computes it; what kube-scheduler's preemption reads from it.

The controller (``pkg/controller/disruption``) counts the pods its selector picks in its
namespace: ``currentHealthy`` are those Ready and not being deleted; ``desiredHealthy``
is ``minAvailable`` (an int as it is, a percent of the expected pods rounded up) or the
expected pods less ``maxUnavailable`` (rounded up too); the expected pods are all selected
pods for an int ``minAvailable``, else the sum of their controllers' scale (a Deployment's
or ReplicaSet's replicas). A selected pod whose controller has no scale (a Job) fails the
sync, which leaves ``disruptionsAllowed`` at 0; pods with no controller are left out.
``disruptionsAllowed = max(0, currentHealthy - desiredHealthy)``, 0 while nothing is expected.

kube-scheduler (``FilterVictimsWithPDBViolation``) takes every PDB of a victim's namespace
whose selector matches it (an empty selector matches nothing there, though the controller
counts every pod with it), and counts the victim as violating once a budget it matches has
no disruption left.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidObject
from . import validation as v
from .selectors import LabelSelector

API_VERSION = "policy/v1"
KIND = "PodDisruptionBudget"
POLICIES = ["AlwaysAllow", "IfHealthyBudget"]
_PERCENT = re.compile(r"^[0-9]+%$")
PERCENT_ERROR = v.regex_error("a valid percent string must be a numeric string followed by an ending '%'",
                              "[0-9]+%", "1%", "93%")


@dataclass(frozen=True)
class PodView:
    """What the controller and the scheduler read of one pod."""

    namespace: str
    name: str
    labels: dict[str, str]
    owner: tuple[str, str] | None  # (kind, name) of its controller
    ready: bool  # Ready and not being deleted


@dataclass
class DisruptionBudget:
    namespace: str
    name: str
    selector: dict | None  # as written: nil and {} differ
    min_available: int | str | None = None
    max_unavailable: int | str | None = None

    def selects(self, pod: PodView) -> bool:
        """The controller's selector (``LabelSelectorAsSelector``: {} selects every pod)."""
        if pod.namespace != self.namespace or self.selector is None:
            return False
        return LabelSelector.parse(self.selector).matches(pod.labels)

    def guards(self, namespace: str, labels: dict[str, str]) -> bool:
        """The scheduler's match: same namespace, a non-empty selector that matches, labels present."""
        if namespace != self.namespace or not labels or not self.selector:
            return False
        if not (self.selector.get("matchLabels") or self.selector.get("matchExpressions")):
            return False
        return LabelSelector.parse(self.selector).matches(labels)


def _int_or_percent(value: Any, path: str) -> list[str]:
    """``ValidatePositiveIntOrPercent`` and ``IsNotMoreThan100Percent``."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        return [v.invalid(path, value, "must be an integer or percentage (e.g '5%%')")]
    if isinstance(value, int):
        return [v.invalid(path, value, "must be greater than or equal to 0")] if value < 0 else []
    if not _PERCENT.match(value):
        return [v.invalid(path, value, PERCENT_ERROR)]
    return [v.invalid(path, value, "must not be greater than 100%")] if int(value[:-1]) > 100 else []


def parse_disruption_budget(doc: dict) -> DisruptionBudget:
    meta = m if isinstance(m := doc.get("metadata"), dict) else {}
    name = name_raw if isinstance(name_raw := meta.get("name"), str) else ""
    errs = v.validate_object_meta(meta)
    spec = sp if isinstance(sp := doc.get("spec"), dict) else {}
    low, high = spec.get("minAvailable"), spec.get("maxUnavailable")
    if low is not None and high is not None:
        errs.append(v.invalid("spec", "{...}", "minAvailable and maxUnavailable cannot be both set"))
    if low is not None:
        errs += _int_or_percent(low, "spec.minAvailable")
    if high is not None:
        errs += _int_or_percent(high, "spec.maxUnavailable")
    errs += v.validate_label_selector(spec.get("selector"), "spec.selector")
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in POLICIES:
        errs.append(v.not_supported("spec.unhealthyPodEvictionPolicy", policy, POLICIES))
    if errs:
        raise InvalidObject(f"{KIND}.policy", name, v.dedupe(errs))
    selector = spec.get("selector")
    return DisruptionBudget(str(meta.get("namespace") or "default"), name,
                            dict(selector) if isinstance(selector, dict) else None, low, high)


def _scaled(value: int | str, total: int) -> int:
    """``GetScaledValueFromIntOrPercent`` rounding up."""
    if isinstance(value, int):
        return value
    return math.ceil(int(value[:-1]) * total / 100)


@dataclass(frozen=True)
class BudgetStatus:
    current_healthy: int
    desired_healthy: int
    expected_pods: int
    disruptions_allowed: int


def status(pdb: DisruptionBudget, pods: Iterable[PodView],
           scale_of: Callable[[str, tuple[str, str]], int | None]) -> BudgetStatus | None:
    """The status the disruption controller writes (``trySync``); None where its sync fails
    (a selected pod's controller has no scale), which leaves ``disruptionsAllowed`` at 0.
    ``scale_of(namespace, (kind, name))``: a controller's replicas, None if it has no scale."""
    selected = [p for p in pods if pdb.selects(p)]
    if pdb.max_unavailable is not None or isinstance(pdb.min_available, str):
        scales: dict[tuple[str, str], int] = {}
        for p in selected:
            if p.owner is None:
                continue  # unmanaged: an event, and left out of the count
            if p.owner not in scales:
                scale = scale_of(p.namespace, p.owner)
                if scale is None:
                    return None
                scales[p.owner] = scale
        expected = sum(scales.values())
        if pdb.max_unavailable is not None:
            desired = max(0, expected - _scaled(pdb.max_unavailable, expected))
        else:
            desired = _scaled(pdb.min_available, expected)  # type: ignore[arg-type]
    elif pdb.min_available is not None:
        desired, expected = pdb.min_available, len(selected)
    else:
        desired, expected = 0, 0
    healthy = sum(1 for p in selected if p.ready)
    allowed = healthy - desired
    if expected <= 0 or allowed <= 0:
        allowed = 0
    return BudgetStatus(healthy, desired, expected, allowed)


def allowed(pdb: DisruptionBudget, pods: Iterable[PodView],
            scale_of: Callable[[str, tuple[str, str]], int | None]) -> int:
    st = status(pdb, pods, scale_of)
    return 0 if st is None else st.disruptions_allowed


def violating(victims: list, budgets: list[tuple[DisruptionBudget, int]]) -> tuple[list[tuple[Any, int]], list]:
    """``FilterVictimsWithPDBViolation`` for single pods, most important first: (violating
    victims with their count, the others). ``budgets``: each PDB with its disruptionsAllowed.
    A victim needs ``namespace`` and ``labels``."""
    left = [a for _, a in budgets]
    bad: list[tuple[Any, int]] = []
    good = []
    for p in victims:
        hit = False
        for i, (pdb, _) in enumerate(budgets):
            if not pdb.guards(p.namespace, p.labels):
                continue
            left[i] -= 1
            if left[i] < 0:
                hit = True
                break
        if hit:
            bad.append((p, 1))
        else:
            good.append(p)
    return bad, good
