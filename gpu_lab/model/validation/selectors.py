"""Labels, annotations, label selectors and node selector terms."""

from __future__ import annotations

from typing import Any

from .errors import forbidden, invalid, required, wrong_type
from .names import is_label_value, is_qualified_name, validate_name

TOTAL_ANNOTATION_SIZE_LIMIT = 256 * 1024  # apimachinery's TotalAnnotationSizeLimitB


def validate_labels(labels: Any, path: str) -> list[str]:
    if labels is None:
        return []
    if not isinstance(labels, dict):
        return [wrong_type(path, labels, "a map of string keys to string values")]
    errs = []
    for k, v in labels.items():
        if not isinstance(k, str):
            errs.append(wrong_type(path, k, "a string key (quote it in YAML)"))
            continue
        errs += [invalid(path, k, m) for m in is_qualified_name(k)]
        if not isinstance(v, str):
            errs.append(wrong_type(path, v, "a string (quote it in YAML)"))
            continue
        errs += [invalid(path, v, m) for m in is_label_value(v)]
    return errs


def validate_annotations(annotations: Any, path: str) -> list[str]:
    if annotations is None:
        return []
    if not isinstance(annotations, dict):
        return [wrong_type(path, annotations, "a map of string keys to string values")]
    errs = []
    size = 0
    for k, v in annotations.items():
        if not isinstance(k, str):
            errs.append(wrong_type(path, k, "a string key (quote it in YAML)"))
            continue
        # Annotation keys are qualified names, compared case-insensitively.
        errs += [invalid(path, k, m) for m in is_qualified_name(k.lower())]
        if not isinstance(v, str):
            errs.append(wrong_type(f"{path}[{k}]", v, "a string (quote it in YAML)"))
            continue
        size += len(k.encode()) + len(v.encode())
    if size > TOTAL_ANNOTATION_SIZE_LIMIT:  # ValidateAnnotationsSize
        errs.append(f"{path}: Too long: may not be more than {TOTAL_ANNOTATION_SIZE_LIMIT} bytes")
    return errs


def _values(raw: Any) -> list:
    return raw if isinstance(raw, list) else []


def validate_label_selector(sel: Any, path: str, *, check_values: bool = True) -> list[str]:
    """``metav1validation.ValidateLabelSelector``."""
    if sel is None:
        return []
    if not isinstance(sel, dict):
        return [wrong_type(path, sel, "a label selector (matchLabels, matchExpressions)")]
    errs = validate_labels(sel.get("matchLabels"), f"{path}.matchLabels")
    for i, expr in enumerate(_values(sel.get("matchExpressions"))):
        at = f"{path}.matchExpressions[{i}]"
        if not isinstance(expr, dict):
            errs.append(wrong_type(at, expr, "a requirement (key, operator, values)"))
            continue
        op, values = expr.get("operator", ""), _values(expr.get("values"))
        if op in ("In", "NotIn"):
            if not values:
                errs.append(required(f"{at}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
        elif op in ("Exists", "DoesNotExist"):
            if values:
                errs.append(forbidden(f"{at}.values",
                                      "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
        else:
            errs.append(invalid(f"{at}.operator", op, "not a valid selector operator"))
        errs += [invalid(f"{at}.key", expr.get("key", ""), m) for m in is_qualified_name(str(expr.get("key", "")))]
        if check_values:
            for j, v in enumerate(values):
                errs += [invalid(f"{at}.values[{j}]", v, m) for m in is_label_value(str(v))]
    return errs


def _node_selector_requirement(req: dict, path: str, check_values: bool) -> list[str]:
    errs = []
    op, values = req.get("operator", ""), _values(req.get("values"))
    if op in ("In", "NotIn"):
        if not values:
            errs.append(required(f"{path}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
    elif op in ("Exists", "DoesNotExist"):
        if values:
            errs.append(forbidden(f"{path}.values",
                                  "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"))
    elif op in ("Gt", "Lt"):
        if len(values) != 1:
            errs.append(required(f"{path}.values", "must be specified single value when `operator` is 'Lt' or 'Gt'"))
    else:
        errs.append(invalid(f"{path}.operator", op, "not a valid selector operator"))
    key = str(req.get("key", ""))
    errs += [invalid(f"{path}.key", key, m) for m in is_qualified_name(key)]
    if check_values:
        for j, v in enumerate(values):
            errs += [invalid(f"{path}.values[{j}]", v, m) for m in is_label_value(str(v))]
    return errs


def _node_field_requirement(req: dict, path: str) -> list[str]:
    errs = []
    values = _values(req.get("values"))
    if req.get("operator") in ("In", "NotIn"):
        if len(values) != 1:
            errs.append(required(f"{path}.values",
                                 "must be only one value when `operator` is 'In' or 'NotIn' for node field selector"))
    else:
        errs.append(invalid(f"{path}.operator", req.get("operator", ""), "not a valid selector operator"))
    if req.get("key") != "metadata.name":
        errs.append(invalid(f"{path}.key", req.get("key", ""), "not a valid field selector key"))
    else:
        for j, v in enumerate(values):
            errs += validate_name(str(v), f"{path}.values[{j}]")
    return errs


def validate_node_selector_term(term: Any, path: str, check_values: bool = True) -> list[str]:
    if not isinstance(term, dict):
        return [wrong_type(path, term, "a node selector term (matchExpressions, matchFields)")]
    errs = []
    for j, req in enumerate(_values(term.get("matchExpressions"))):
        errs += _node_selector_requirement(req if isinstance(req, dict) else {}, f"{path}.matchExpressions[{j}]",
                                           check_values)
    for j, req in enumerate(_values(term.get("matchFields"))):
        errs += _node_field_requirement(req if isinstance(req, dict) else {}, f"{path}.matchFields[{j}]")
    return errs
