"""Topology spread constraints (``validateTopologySpreadConstraints``)."""

from __future__ import annotations

from typing import Any

from .errors import duplicate, invalid, not_supported, required, wrong_type
from .selectors import validate_label_selector

WHEN_UNSATISFIABLE = ("DoNotSchedule", "ScheduleAnyway")
_INCLUSION_POLICIES = ("Honor", "Ignore")


def validate_topology_spread(constraints: Any, path: str) -> list[str]:
    if constraints is None:
        return []
    if not isinstance(constraints, list):
        return [wrong_type(path, constraints, "a list")]
    errs = []
    for i, c in enumerate(constraints):
        at = f"{path}[{i}]"
        if not isinstance(c, dict):
            errs.append(wrong_type(at, c, "a topology spread constraint"))
            continue
        skew = c.get("maxSkew", 0)
        if isinstance(skew, bool) or not isinstance(skew, int) or skew <= 0:
            errs.append(invalid(f"{at}.maxSkew", skew, "must be greater than zero"))
        if not c.get("topologyKey"):
            errs.append(required(f"{at}.topologyKey", "can not be empty"))
        action = c.get("whenUnsatisfiable") or ""
        if action not in WHEN_UNSATISFIABLE:
            errs.append(not_supported(f"{at}.whenUnsatisfiable", action, WHEN_UNSATISFIABLE))
        for later in constraints[i + 1:]:
            if (isinstance(later, dict) and later.get("topologyKey") == c.get("topologyKey")
                    and later.get("whenUnsatisfiable") == c.get("whenUnsatisfiable")):
                errs.append(duplicate(f"{at}.{{topologyKey, whenUnsatisfiable}}",
                                      f"{{{c.get('topologyKey') or ''}, {action}}}"))
                break
        if c.get("minDomains") is not None:
            md = c["minDomains"]
            if isinstance(md, bool) or not isinstance(md, int) or md <= 0:
                errs.append(invalid(f"{at}.minDomains", md, "must be greater than zero"))
            if action != "DoNotSchedule":
                errs.append(invalid(f"{at}.minDomains", md,
                                    f"can only use minDomains if whenUnsatisfiable=DoNotSchedule, not {action}"))
        for policy in ("nodeAffinityPolicy", "nodeTaintsPolicy"):
            if c.get(policy) is not None and c[policy] not in _INCLUSION_POLICIES:
                errs.append(not_supported(f"{at}.{policy}", c[policy], _INCLUSION_POLICIES))
        errs += validate_label_selector(c.get("labelSelector"), f"{at}.labelSelector")
    return errs
