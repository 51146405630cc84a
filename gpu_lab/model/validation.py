"""The API server's validation of the pod fields the scheduler reads, in its words.

Each check mirrors a function of ``pkg/apis/core/validation`` (Kubernetes
v1.37) or apimachinery's name and label rules, and returns error strings
shaped like ``field.Error.Error()``: ``<path>: <type>[: <value>][: <detail>]``.
Callers collect every error of an object before raising, as the API server
does, so a learner sees all problems of a manifest at once.

Go iterates maps in random order; we keep the manifest's order instead, so
messages are reproducible.
"""

from __future__ import annotations

import json
import math
import re
from fractions import Fraction
from typing import Any

from .objects import TAINT_EFFECTS
from .quantity import QuantityError, parse_quantity

# --------------------------------------------------------------- error shapes


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


def selector_value(sel: dict) -> go_struct:
    """A ``metav1.LabelSelector`` as the API server prints it."""
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


def dedupe(errors: list[str]) -> list[str]:
    """``ErrorList.ToAggregate`` drops messages that repeat."""
    return list(dict.fromkeys(errors))


def wrong_type(path: str, value: Any, expected: str) -> str:
    # The API server rejects these while decoding JSON, naming Go types; we
    # name the field instead, which is what a learner needs to fix it.
    return invalid(path, value, f"must be {expected}")


# ------------------------------------------------------------- name formats
# k8s.io/apimachinery/pkg/util/validation and pkg/api/validate/content

DNS1123_LABEL_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_FMT = DNS1123_LABEL_FMT + r"(\." + DNS1123_LABEL_FMT + ")*"
LABEL_KEY_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
LABEL_VALUE_FMT = f"({LABEL_KEY_FMT})?"

_DNS1123_LABEL_MSG = ("a lowercase RFC 1123 label must consist of lower case alphanumeric "
                      "characters or '-', and must start and end with an alphanumeric character")
_DNS1123_SUBDOMAIN_MSG = ("a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                          "characters, '-' or '.', and must start and end with an alphanumeric character")
_LABEL_KEY_MSG = ("must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
                  "with an alphanumeric character")
_LABEL_VALUE_MSG = ("a valid label must be an empty string or consist of alphanumeric characters, "
                    "'-', '_' or '.', and must start and end with an alphanumeric character")


def regex_error(msg: str, fmt: str, *examples: str) -> str:
    """``validation.RegexError``."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    # Go appends "', " after each example and " or " between them: two spaces before "or".
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def _full(fmt: str, value: str) -> bool:
    return re.fullmatch(fmt, value) is not None


def is_dns1123_subdomain(value: str, unit: str = "characters") -> list[str]:
    errs = []
    if len(value) > 253:
        errs.append(f"must be no more than 253 {unit}")
    if not _full(DNS1123_SUBDOMAIN_FMT, value):
        errs.append(regex_error(_DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, "example.com"))
    return errs


def is_dns1123_label(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 characters")
    if not _full(DNS1123_LABEL_FMT, value):
        if _full(DNS1123_SUBDOMAIN_FMT, value):
            errs.append("must not contain dots")
        else:
            errs.append(regex_error(_DNS1123_LABEL_MSG, DNS1123_LABEL_FMT, "my-name", "123-abc"))
    return errs


def is_qualified_name(value: str) -> list[str]:
    """``content.IsLabelKey``: an optional DNS-subdomain prefix and a name part."""
    parts = value.split("/")
    errs: list[str] = []
    if len(parts) > 2:
        return [f"a valid label key {regex_error(_LABEL_KEY_MSG, LABEL_KEY_FMT, 'MyName', 'my.name', '123-abc')}"
                " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            errs += ["prefix part " + m for m in is_dns1123_subdomain(prefix, unit="bytes")]
    if not name:
        errs.append("name part must be non-empty")
    elif len(name) > 63:
        errs.append("name part must be no more than 63 bytes")
    if not _full(LABEL_KEY_FMT, name):
        errs.append("name part " + regex_error(_LABEL_KEY_MSG, LABEL_KEY_FMT, "MyName", "my.name", "123-abc"))
    return errs


def is_label_value(value: str) -> list[str]:
    errs = []
    if len(value) > 63:
        errs.append("must be no more than 63 bytes")
    if not _full(LABEL_VALUE_FMT, value):
        errs.append(regex_error(_LABEL_VALUE_MSG, LABEL_VALUE_FMT, "MyValue", "my_value", "12345"))
    return errs


def validate_name(value: str, path: str, check=is_dns1123_subdomain) -> list[str]:
    return [invalid(path, value, m) for m in check(value)]


# --------------------------------------------------------------- quantities

_BINARY_EXP = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_EXP = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_DECIMAL_SUFFIX = {v: k for k, v in _DECIMAL_EXP.items()}
_BINARY_SUFFIX = ["", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"]
_PARTS = re.compile(r"([+-]?)0*(\d*)(?:\.(\d*))?(.*)")


def quantity_text(raw: Any) -> str:
    """The text the API server would see for a YAML scalar (JSON numbers print bare)."""
    if raw is None:
        return "0"  # a JSON null quantity decodes to zero
    if isinstance(raw, float) and raw.is_integer() and abs(raw) < 1e21:
        return str(int(raw))
    return str(raw).strip()


def parse(raw: Any) -> Fraction:
    """The exact value; raises ``QuantityError`` with the API server's message."""
    if raw is None:
        return Fraction(0)
    if isinstance(raw, bool):
        return parse_quantity(raw)
    return parse_quantity(quantity_text(raw))


def quantity_string(raw: Any) -> str:
    """``resource.Quantity.String()``: how the API server prints a quantity in errors.

    The canonical form keeps the input's flavour (decimal SI, binary SI or
    exponent) with the largest suffix that keeps an integer mantissa, so
    ``0.5`` prints as ``500m`` and ``1024Mi`` as ``1Gi``. Inputs already in
    canonical form are printed as written (``ParseQuantity``'s fast path).
    """
    text = quantity_text(raw)
    value = parse(raw)
    if value == 0:
        return "0"
    m = _PARTS.fullmatch(text)
    num, denom, suffix = (m.group(2) or "0"), (m.group(3) or ""), m.group(4)
    binary = suffix in _BINARY_EXP
    exponent_form = not binary and suffix not in _DECIMAL_EXP
    shifted = num + denom
    if binary:
        exp2 = _BINARY_EXP[suffix]
        if (not denom and 15 - len(num) - exp2 * 3 // 10 - 1 >= 0 and int(num) & 7
                and int(num) << exp2 < 2**63):
            return text
    else:
        exp10 = int(suffix[1:]) if exponent_form else _DECIMAL_EXP[suffix]
        scale = exp10 - len(denom)
        if (len(shifted) <= 18 and scale >= -9 and scale % 3 == 0
                and not shifted.endswith("000") and shifted[0] != "0"):
            return text
    # Values below a nano round up, away from zero, as ParseQuantity does.
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    nanos = math.ceil(magnitude * 10**9)
    if binary and magnitude >= 1024 and (nanos % 10**9 == 0):
        n, k = nanos // 10**9, 0
        while n % 1024 == 0 and k < 6:
            n, k = n // 1024, k + 1
        return f"{sign}{n}{_BINARY_SUFFIX[k]}"
    mantissa, exp = nanos, -9
    while mantissa % 10 == 0:
        mantissa, exp = mantissa // 10, exp + 1
    mantissa, exp = mantissa * 10 ** (exp % 3), exp - exp % 3
    if exponent_form:
        return f"{sign}{mantissa}" + (f"e{exp}" if exp else "")
    if exp in _DECIMAL_SUFFIX:
        return f"{sign}{mantissa}{_DECIMAL_SUFFIX[exp]}"
    return f"{sign}{mantissa}e{exp}"


# ---------------------------------------------------------- resource names

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
    if (name in _INTEGER_RESOURCES or is_extended(name)) and math.ceil(value * 1000) % 1000:
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


# ------------------------------------------------------- labels, selectors


def validate_labels(labels: Any, path: str) -> list[str]:
    if labels is None:
        return []
    if not isinstance(labels, dict):
        return [wrong_type(path, labels, "a map of string keys to string values")]
    errs = []
    for k, v in labels.items():
        errs += [invalid(path, k, m) for m in is_qualified_name(str(k))]
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
    for k, v in annotations.items():
        # Annotation keys are qualified names, compared case-insensitively.
        errs += [invalid(path, k, m) for m in is_qualified_name(str(k).lower())]
        if not isinstance(v, str):
            errs.append(wrong_type(f"{path}[{k}]", v, "a string (quote it in YAML)"))
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


# ---------------------------------------------------------------- affinity

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


# ------------------------------------------------------------- tolerations


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


# --------------------------------------------------------- topology spread

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


# -------------------------------------------------------------------- ports

PROTOCOLS = ("SCTP", "TCP", "UDP")


def validate_ports(ports: Any, path: str) -> list[str]:
    """``validateContainerPorts`` (protocol already defaulted to TCP)."""
    if ports is None:
        return []
    if not isinstance(ports, list):
        return [wrong_type(path, ports, "a list")]
    errs = []
    for i, p in enumerate(ports):
        at = f"{path}[{i}]"
        if not isinstance(p, dict):
            errs.append(wrong_type(at, p, "a container port"))
            continue
        cp, hp = p.get("containerPort") or 0, p.get("hostPort") or 0
        if cp == 0:
            errs.append(required(f"{at}.containerPort"))
        elif isinstance(cp, bool) or not isinstance(cp, int) or not 1 <= cp <= 65535:
            errs.append(invalid(f"{at}.containerPort", cp, "must be between 1 and 65535, inclusive"))
        if hp and (isinstance(hp, bool) or not isinstance(hp, int) or not 1 <= hp <= 65535):
            errs.append(invalid(f"{at}.hostPort", hp, "must be between 1 and 65535, inclusive"))
        proto = p.get("protocol") or ""
        if not proto:
            errs.append(required(f"{at}.protocol"))
        elif proto not in PROTOCOLS:
            errs.append(not_supported(f"{at}.protocol", proto, PROTOCOLS))
    return errs


def host_port_conflicts(containers: list, path: str) -> list[str]:
    """``checkHostPortConflicts``: one protocol/hostIP/hostPort per pod."""
    seen: set[str] = set()
    errs = []
    for ci, c in enumerate(containers):
        for pi, p in enumerate(_values(c.get("ports") if isinstance(c, dict) else None)):
            if not isinstance(p, dict) or not p.get("hostPort"):
                continue
            key = f"{p.get('protocol') or ''}/{p.get('hostIP') or ''}/{p['hostPort']}"
            if key in seen:
                errs.append(duplicate(f"{path}[{ci}].ports[{pi}].hostPort", key))
            seen.add(key)
    return errs


# ------------------------------------------------------- metadata and spec


def validate_object_meta(meta: dict, path: str = "metadata", *, namespaced: bool = True,
                         name_check=is_dns1123_subdomain) -> list[str]:
    """``ValidateObjectMeta`` on create (namespace already defaulted by the caller)."""
    errs = []
    name = meta.get("name")
    if not name:
        errs.append(required(f"{path}.name", "name or generateName is required"))
    elif not isinstance(name, str):
        errs.append(wrong_type(f"{path}.name", name, "a string"))
    else:
        errs += validate_name(name, f"{path}.name", name_check)
    ns = meta.get("namespace")
    if namespaced and ns:  # cluster-scoped objects: the API server clears the namespace
        errs += validate_name(str(ns), f"{path}.namespace", is_dns1123_label)
    errs += validate_labels(meta.get("labels"), f"{path}.labels")
    errs += validate_annotations(meta.get("annotations"), f"{path}.annotations")
    errs += validate_owner_references(meta.get("ownerReferences"), f"{path}.ownerReferences")
    return errs


def validate_owner_references(refs: Any, path: str) -> list[str]:
    if refs is None:
        return []
    if not isinstance(refs, list):
        return [wrong_type(path, refs, "a list")]
    errs, controller = [], ""
    for i, ref in enumerate(refs):
        at = f"{path}[{i}]"
        if not isinstance(ref, dict):
            errs.append(wrong_type(at, ref, "an owner reference"))
            continue
        for key in ("apiVersion", "kind", "name"):
            if not ref.get(key):
                errs.append(required(f"{at}.{key}", "must not be empty"))
        # uid is required too, but hand-written scenarios cannot know one; gpu-lab
        # fills a stable uid instead (objects.stable_uid).
        if ref.get("controller") is True:
            current = f"{ref.get('kind', '')}/{ref.get('name', '')}"
            if controller:
                shown = [go_struct(r, ("apiVersion", "kind", "name", "uid", "controller", "blockOwnerDeletion"),
                                   omitempty=("controller", "blockOwnerDeletion"))
                         if isinstance(r, dict) else r for r in refs]
                errs.append(invalid(path, shown, "Only one reference can have Controller set to true. "
                                    f'Found "true" in references for {controller} and {current}'))
            else:
                controller = current
    return errs


def _containers(containers: Any, path: str, *, init: bool) -> list[str]:
    if containers is None or containers == []:
        return [] if init else [required(path)]
    if not isinstance(containers, list):
        return [wrong_type(path, containers, "a list of containers")]
    errs = []
    for i, c in enumerate(containers):
        at = f"{path}[{i}]"
        if not isinstance(c, dict):
            errs.append(wrong_type(at, c, "a container"))
            continue
        errs += validate_ports(c.get("ports"), f"{at}.ports")
        res = c.get("resources")
        if res is not None and not isinstance(res, dict):
            errs.append(wrong_type(f"{at}.resources", res, "an object with limits and requests"))
        elif res:
            errs += validate_resource_requirements(res.get("limits"), res.get("requests"), f"{at}.resources")
        if init:  # the API server checks each init container on its own (always at index 0)
            errs += host_port_conflicts([c], path)
    if not init:
        errs += host_port_conflicts(containers, path)
    return errs


RESTART_POLICIES = ("Always", "OnFailure", "Never")


def validate_pod_spec(spec: dict, path: str = "spec") -> list[str]:
    """``ValidatePodSpec`` for the fields gpu-lab reads, in the API server's order."""
    errs = _containers(spec.get("containers"), f"{path}.containers", init=False)
    errs += _containers(spec.get("initContainers"), f"{path}.initContainers", init=True)
    errs += validate_labels(spec.get("nodeSelector"), f"{path}.nodeSelector")
    errs += validate_affinity(spec.get("affinity"), f"{path}.affinity")
    errs += validate_topology_spread(spec.get("topologySpreadConstraints"), f"{path}.topologySpreadConstraints")
    policy = spec.get("restartPolicy") or "Always"  # SetDefaults_PodSpec
    if policy not in RESTART_POLICIES:
        errs.append(not_supported(f"{path}.restartPolicy", policy, RESTART_POLICIES))
    if spec.get("nodeName"):
        errs += validate_name(str(spec["nodeName"]), f"{path}.nodeName")
    errs += validate_tolerations(spec.get("tolerations"), f"{path}.tolerations")
    if spec.get("priorityClassName"):
        errs += validate_name(str(spec["priorityClassName"]), f"{path}.priorityClassName")
    policy = spec.get("preemptionPolicy")
    if policy is not None and policy not in ("PreemptLowerPriority", "Never"):
        errs.append(required(f"{path}.preemptionPolicy") if policy == "" else
                    not_supported(f"{path}.preemptionPolicy", policy, ["PreemptLowerPriority", "Never"]))
    if spec.get("overhead") is not None:
        # validateOverhead reuses the container check with the overhead as limits
        errs += validate_resource_requirements(spec["overhead"], None, f"{path}.overhead")
    return errs
