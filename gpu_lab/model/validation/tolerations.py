"""Tolerations (``ValidateTolerations``)."""

from __future__ import annotations

from typing import Any

from ..objects import TAINT_EFFECTS
from .errors import invalid, not_supported, wrong_type
from .names import is_label_value, is_qualified_name


def validate_tolerations(tolerations: Any, path: str) -> list[str]:
    if tolerations is None:
        return []
    if not isinstance(tolerations, list):
        return [wrong_type(path, tolerations, "a list")]
    errs = []
    for i, t in enumerate(tolerations):
        at = f"{path}[{i}]"
        if not isinstance(t, dict):
            errs.append(wrong_type(at, t, "a toleration (key, operator, value, effect)"))
            continue
        for name in ("key", "value", "operator", "effect"):
            if t.get(name) is not None and not isinstance(t[name], str):
                # value: true is a YAML boolean; the API server only takes strings here
                errs.append(wrong_type(f"{at}.{name}", t[name], "a string (quote it in YAML)"))
        key, op = str(t.get("key") or ""), t.get("operator") or ""
        value, effect = str(t.get("value") or ""), t.get("effect") or ""
        if key:
            errs += [invalid(f"{at}.key", key, m) for m in is_qualified_name(key)]
        if not key and op != "Exists":
            errs.append(invalid(f"{at}.operator", op, "operator must be Exists when `key` is empty, "
                                'which means "match all values and all keys"'))
        seconds = t.get("tolerationSeconds")
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int)
                                    or not -(2**63) <= seconds < 2**63):
            errs.append(wrong_type(f"{at}.tolerationSeconds", seconds, "an integer (seconds)"))
        if t.get("tolerationSeconds") is not None and effect != "NoExecute":
            errs.append(invalid(f"{at}.effect", effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
        if op in ("Equal", ""):
            msgs = is_label_value(value)
            if msgs:
                errs.append(invalid(f"{at}.operator", value, ";".join(msgs)))
        elif op == "Exists":
            if value:
                errs.append(invalid(f"{at}.operator", value, "value must be empty when `operator` is 'Exists'"))
        elif op in ("Lt", "Gt"):  # TaintTolerationComparisonOperators is alpha, off by default
            errs.append(not_supported(f"{at}.operator", op, ["Equal", "Exists", "Lt", "Gt"]))
        else:
            errs.append(not_supported(f"{at}.operator", op, ["Equal", "Exists"]))
        if effect and effect not in TAINT_EFFECTS:
            errs.append(not_supported(f"{at}.effect", effect, TAINT_EFFECTS))
    return errs
