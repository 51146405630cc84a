"""Error strings shaped like ``field.Error.Error()``, and Go's way of printing values in them."""

from __future__ import annotations

import json
from typing import Any


def go_value(value: Any) -> str:
    """How ``field.Error`` prints a bad value: numbers bare, strings quoted, the rest as JSON.

    Go sorts map keys but writes struct fields in declaration order; callers
    pass structs through ``go_struct`` so both come out as the API server prints them.
    """
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return json.dumps(_sorted_maps(value), separators=(",", ":"), ensure_ascii=False, default=str)


class go_struct(dict):  # noqa: N801 (reads as a marker at the call site)
    """A dict whose key order is a Go struct's field order (kept as given when printed)."""

    def __init__(self, raw: dict, fields: tuple[str, ...], omitempty: tuple[str, ...] = ()):
        super().__init__((k, raw.get(k, "")) for k in fields
                         if k not in omitempty or raw.get(k) not in (None, "", [], {}))


def _sorted_maps(value: Any) -> Any:
    if isinstance(value, go_struct):
        return {k: _sorted_maps(x) for k, x in value.items()}
    if isinstance(value, dict):
        return {k: _sorted_maps(value[k]) for k in sorted(value, key=str)}
    if isinstance(value, list):
        return [_sorted_maps(x) for x in value]
    return value


def selector_value(sel: Any) -> Any:
    """A ``metav1.LabelSelector`` as the API server prints it (anything else as given)."""
    if not isinstance(sel, dict):
        return sel
    exprs = [go_struct(e, ("key", "operator", "values"), omitempty=("values",)) if isinstance(e, dict) else e
             for e in sel.get("matchExpressions") or []]
    fields = ("matchLabels", "matchExpressions")
    return go_struct({"matchLabels": sel.get("matchLabels"), "matchExpressions": exprs}, fields, omitempty=fields)


def required(path: str, detail: str = "") -> str:
    return f"{path}: Required value" + (f": {detail}" if detail else "")


def invalid(path: str, value: Any, detail: str) -> str:
    return f"{path}: Invalid value: {go_value(value)}: {detail}"


def not_supported(path: str, value: Any, supported: list[str] | tuple[str, ...]) -> str:
    values = ", ".join(json.dumps(v) for v in supported)
    return f"{path}: Unsupported value: {go_value(value)}: supported values: {values}"


def forbidden(path: str, detail: str) -> str:
    return f"{path}: Forbidden: {detail}"


def duplicate(path: str, value: Any, detail: str = "") -> str:
    return f"{path}: Duplicate value: {go_value(value)}" + (f": {detail}" if detail else "")


def json_kind(value: Any) -> str:
    """How encoding/json names a JSON value it cannot decode (numbers that do not fit show)."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return f"number {go_value(value)}"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def decode_error(kind: str, field: str, value: Any, go_type: str) -> str:
    """The API server's refusal of a value that does not decode into the field's Go type,
    e.g. ``Pod in version "v1" cannot be handled as a Pod: json: cannot unmarshal string
    into Go struct field Toleration.spec.tolerations.tolerationSeconds of type int64``.
    ``field`` is ``<Go struct>.<json path>``; numbers that do not fit show their value."""
    what = json_kind(value)
    if what.startswith("number") and not go_type.startswith(("int", "uint", "float")):
        what = "number"
    return (f'{kind} in version "v1" cannot be handled as a {kind}: json: cannot unmarshal {what} '
            f"into Go struct field {field} of type {go_type}")


def dedupe(errors: list[str]) -> list[str]:
    """``ErrorList.ToAggregate`` drops messages that repeat."""
    return list(dict.fromkeys(errors))


def wrong_type(path: str, value: Any, expected: str) -> str:
    # The API server rejects these while decoding JSON, naming Go types; we
    # name the field instead, which is what a learner needs to fix it.
    return invalid(path, value, f"must be {expected}")
