"""Container resource names and amounts: ``ValidateResourceRequirements``."""

from __future__ import annotations

import math
from typing import Any

from ...errors import QuantityError
from .errors import forbidden, invalid, required, wrong_type
from .names import is_qualified_name
from .quantities import parse, quantity_string, quantity_text

STANDARD_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")
_STANDARD_RESOURCES = {
    "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory",
    "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage",
    "pods", "resourcequotas", "services", "replicationcontrollers", "secrets", "configmaps",
    "persistentvolumeclaims", "storage", "requests.storage", "services.nodeports",
    "services.loadbalancers",
}
_INTEGER_RESOURCES = {"pods", "resourcequotas", "services", "replicationcontrollers", "secrets",
                      "configmaps", "persistentvolumeclaims", "services.nodeports",
                      "services.loadbalancers"}


def is_native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def is_hugepages(name: str) -> bool:
    return name.startswith("hugepages-")


def is_extended(name: str) -> bool:
    """``helper.IsExtendedResourceName`` (also checks the quota form is a qualified name)."""
    if is_native(name) or name.startswith("requests."):
        return False
    return not is_qualified_name("requests." + name)


def overcommit_allowed(name: str) -> bool:
    return is_native(name) and not is_hugepages(name)


def validate_container_resource_name(name: str, path: str) -> list[str]:
    errs = [invalid(path, name, m) for m in is_qualified_name(name)]
    if "/" not in name:
        standard = name in _STANDARD_RESOURCES or is_hugepages(name) or name.startswith("requests.hugepages-")
        if not errs and not standard:  # validateResourceName stops at a malformed name
            errs.append(invalid(path, name, "must be a standard resource type or fully qualified"))
        if name not in STANDARD_CONTAINER_RESOURCES and not is_hugepages(name):
            errs.append(invalid(path, name, "must be a standard resource for containers"))
    elif not is_native(name) and not is_extended(name):
        errs.append(invalid(path, name, "doesn't follow extended resource name standard"))
    return errs


def validate_quantity_value(name: str, raw: Any, path: str) -> list[str]:
    """``ValidateResourceQuantityValue``: not negative; whole numbers for extended resources."""
    value = parse(raw)
    errs = []
    if value < 0:
        errs.append(invalid(path, quantity_string(raw), "must be greater than or equal to 0"))
    # MilliValue() overflows int64 past 2^63 millis, which reads as a fraction too
    milli = math.ceil(value * 1000)
    if (name in _INTEGER_RESOURCES or is_extended(name)) and (milli % 1000 or milli >= 2**63):
        errs.append(invalid(path, quantity_string(raw), "must be an integer"))
    return errs


def _quantities(resources: Any, path: str, errs: list[str]) -> dict[str, Any]:
    """The parseable entries of a resource list; a malformed one is an error at its key."""
    if resources is None:
        return {}
    if not isinstance(resources, dict):
        errs.append(wrong_type(path, resources, "a map of resource name to quantity"))
        return {}
    good = {}
    for name, raw in resources.items():
        try:
            parse(raw)
        except QuantityError as err:
            errs.append(invalid(f"{path}[{name}]", quantity_text(raw), str(err)))
            continue
        good[str(name)] = raw
    return good


def validate_resource_requirements(limits: Any, requests: Any, path: str) -> list[str]:
    """``validateResourceRequirements`` for one container (requests already defaulted)."""
    errs: list[str] = []
    lim_path, req_path = f"{path}.limits", f"{path}.requests"
    lims = _quantities(limits, lim_path, errs)
    reqs = _quantities(requests, req_path, errs)
    compute = hugepages = False
    for name, raw in lims.items():
        at = f"{lim_path}[{name}]"
        errs += validate_container_resource_name(name, at)
        errs += validate_quantity_value(name, raw, at)
        hugepages |= is_hugepages(name)
        compute |= name in ("cpu", "memory")
    for name, raw in reqs.items():
        at = f"{req_path}[{name}]"
        errs += validate_container_resource_name(name, at)
        errs += validate_quantity_value(name, raw, at)
        if name in lims:
            req, lim = parse(raw), parse(lims[name])
            limit = quantity_string(lims[name])
            if req != lim and not overcommit_allowed(name):
                errs.append(invalid(req_path, quantity_string(raw), f"must be equal to {name} limit of {limit}"))
            elif req > lim:
                errs.append(invalid(req_path, quantity_string(raw),
                                    f"must be less than or equal to {name} limit of {limit}"))
        elif not overcommit_allowed(name):
            errs.append(required(lim_path, "Limit must be set for non overcommitable resources"))
        hugepages |= is_hugepages(name)
        compute |= name in ("cpu", "memory")
    if hugepages and not compute:
        errs.append(forbidden(path, "HugePages require cpu or memory"))
    return errs
