"""Node affinity, pod affinity and anti-affinity (``validateAffinity``)."""

from __future__ import annotations

from typing import Any

from .errors import invalid, required, wrong_type
from .names import is_dns1123_label, is_qualified_name, validate_name
from .selectors import _values, validate_label_selector, validate_node_selector_term

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def _weight(raw: Any, path: str) -> list[str]:
    if not isinstance(raw, int) or isinstance(raw, bool) or not 1 <= raw <= 100:
        return [invalid(path, raw if raw is not None else 0, "must be in the range 1-100")]
    return []


def _pod_affinity_term(term: Any, path: str) -> list[str]:
    if not isinstance(term, dict):
        return [wrong_type(path, term, "a pod affinity term")]
    errs = validate_label_selector(term.get("labelSelector"), f"{path}.labelSelector")
    errs += validate_label_selector(term.get("namespaceSelector"), f"{path}.namespaceSelector")
    for ns in _values(term.get("namespaces")):
        # the API server reports these at ".namespace", singular
        errs += validate_name(str(ns), f"{path}.namespace", is_dns1123_label)
    key = term.get("topologyKey") or ""
    if not key:
        errs.append(required(f"{path}.topologyKey", "can not be empty"))
    errs += [invalid(f"{path}.topologyKey", key, m) for m in is_qualified_name(str(key))]
    return errs


def _pod_affinity(raw: Any, path: str) -> list[str]:
    if not isinstance(raw, dict):
        return [wrong_type(path, raw, "an object")]
    errs = []
    for i, term in enumerate(_values(raw.get(REQUIRED))):
        errs += _pod_affinity_term(term, f"{path}.{REQUIRED}[{i}]")
    for i, w in enumerate(_values(raw.get(PREFERRED))):
        at = f"{path}.{PREFERRED}[{i}]"
        w = w if isinstance(w, dict) else {}
        errs += _weight(w.get("weight"), f"{at}.weight")
        errs += _pod_affinity_term(w.get("podAffinityTerm") or {}, f"{at}.podAffinityTerm")
    return errs


def validate_affinity(affinity: Any, path: str) -> list[str]:
    if affinity is None:
        return []
    if not isinstance(affinity, dict):
        return [wrong_type(path, affinity, "an object")]
    errs = []
    na = affinity.get("nodeAffinity")
    if isinstance(na, dict):
        at = f"{path}.nodeAffinity"
        req = na.get(REQUIRED)
        if req is not None:
            terms = _values(req.get("nodeSelectorTerms")) if isinstance(req, dict) else []
            if not terms:
                errs.append(required(f"{at}.{REQUIRED}.nodeSelectorTerms",
                                     "must have at least one node selector term"))
            for i, term in enumerate(terms):
                errs += validate_node_selector_term(term, f"{at}.{REQUIRED}.nodeSelectorTerms[{i}]")
        for i, pref in enumerate(_values(na.get(PREFERRED))):
            pat = f"{at}.{PREFERRED}[{i}]"
            pref = pref if isinstance(pref, dict) else {}
            errs += _weight(pref.get("weight"), f"{pat}.weight")
            # invalid label values are allowed in preferred terms (they may still match nothing)
            errs += validate_node_selector_term(pref.get("preference") or {}, f"{pat}.preference", False)
    elif na is not None:
        errs.append(wrong_type(f"{path}.nodeAffinity", na, "an object"))
    for which in ("podAffinity", "podAntiAffinity"):
        if affinity.get(which) is not None:
            errs += _pod_affinity(affinity[which], f"{path}.{which}")
    return errs
