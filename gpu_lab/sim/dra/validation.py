"""The API server's admission of resource.k8s.io/v1 objects, in its words.

Strict decoding first, as ``kubectl apply`` asks for it (``ResourceClaim in version "v1"
cannot be handled as a ResourceClaim: strict decoding error: unknown field
"spec.devices.requests[0].deviceClassName"``: the v1beta1 layout under v1 is the usual
cause), then defaulting (``allocationMode: ExactCount``, ``count: 1``, toleration operator
``Equal``), then ``pkg/apis/resource/validation`` for the fields the scheduler reads: names,
request names, the ``exactly``/``firstAvailable`` choice, allocation modes and counts,
CEL selectors (compiled as the API server compiles them, see ``cel``), constraints,
tolerations, taints and the ``extendedResourceName`` of a DeviceClass. Every error of an
object is reported at once, as ``Kind.resource.k8s.io "name" is invalid: [...]``.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from ...errors import CelCompileError, GpuLabError, InvalidObject, QuantityError
from ...model import validation as v
from ...model.objects import is_extended_resource
from ...model.quantity import parse_quantity
from .cel import Semver, compile_selector
from .objects import (
    ALL,
    EXACT_COUNT,
    FIRST_AVAILABLE_MAX,
    ClaimRequest,
    ClaimSpec,
    ClaimTemplate,
    Constraint,
    CounterUse,
    Device,
    DeviceClass,
    DeviceTaint,
    DeviceToleration,
    Request,
    ResourceSlice,
    TaintRule,
)

_ANY = None  # a field whose content is not checked (metadata, opaque config, status)
_TOLERATION = {"key": str, "operator": str, "value": str, "effect": str, "tolerationSeconds": int}
_SELECTORS = [{"cel": {"expression": str}}]
_CAPACITY_REQ = {"requests": _ANY}
_REQUEST_BODY = {"deviceClassName": str, "selectors": _SELECTORS, "allocationMode": str, "count": int,
                 "adminAccess": bool, "tolerations": [_TOLERATION], "capacity": _CAPACITY_REQ}
_CLAIM_SPEC: dict[str, Any] = {"devices": {
    "requests": [{"name": str, "exactly": _REQUEST_BODY,
                  "firstAvailable": [{"name": str, **{k: t for k, t in _REQUEST_BODY.items() if k != "adminAccess"}}]}],
    "constraints": [{"requests": [str], "matchAttribute": str, "distinctAttribute": str}],
    "config": [{"requests": [str], "opaque": _ANY}]}}
_TAINT = {"key": str, "value": str, "effect": str, "timeAdded": _ANY}
_DEVICE = {"name": str, "attributes": _ANY, "capacity": _ANY, "consumesCounters": [{"counterSet": str, "counters": _ANY}],
           "nodeName": str, "nodeSelector": _ANY, "allNodes": bool, "taints": [_TAINT], "bindsToNode": bool,
           "bindingConditions": [str], "bindingFailureConditions": [str], "allowMultipleAllocations": bool}
_SCHEMAS: dict[str, dict] = {
    "DeviceClass": {"spec": {"selectors": _SELECTORS, "config": _ANY, "extendedResourceName": str}},
    "ResourceClaim": {"spec": _CLAIM_SPEC, "status": _ANY},
    "ResourceClaimTemplate": {"spec": {"metadata": _ANY, "spec": _CLAIM_SPEC}},
    "ResourceSlice": {"spec": {"driver": str, "pool": {"name": str, "generation": int, "resourceSliceCount": int},
                               "nodeName": str, "nodeSelector": _ANY, "allNodes": bool,
                               "perDeviceNodeSelection": bool, "devices": [_DEVICE],
                               "sharedCounters": [{"name": str, "counters": _ANY}]}},
    "DeviceTaintRule": {"spec": {"deviceSelector": {"driver": str, "pool": str, "device": str}, "taint": _TAINT},
                        "status": _ANY},
}
_GO_TYPES = {str: "string", int: "int64", bool: "bool"}
# The Go struct each schema mapping decodes into (encoding/json names it in type errors).
_STRUCTS = {id(_TOLERATION): "DeviceToleration", id(_SELECTORS[0]): "DeviceSelector",
            id(_SELECTORS[0]["cel"]): "CELDeviceSelector", id(_REQUEST_BODY): "ExactDeviceRequest",
            id(_CLAIM_SPEC): "ResourceClaimSpec", id(_CLAIM_SPEC["devices"]): "DeviceClaim",
            id(_CLAIM_SPEC["devices"]["requests"][0]): "DeviceRequest",
            id(_CLAIM_SPEC["devices"]["requests"][0]["firstAvailable"][0]): "DeviceSubRequest",
            id(_CLAIM_SPEC["devices"]["constraints"][0]): "DeviceConstraint", id(_DEVICE): "Device",
            id(_TAINT): "DeviceTaint"}
_EFFECTS = ("NoExecute", "NoSchedule", "None")


def _decode(kind: str, doc: dict) -> None:
    """Strict decoding: a value of the wrong JSON type, then every unknown field."""
    unknown: list[str] = []

    def walk(value: Any, schema: Any, path: str, where: str, struct: str = kind) -> None:
        if value is None or schema is _ANY:
            return
        if isinstance(schema, list):
            if not isinstance(value, list):
                raise GpuLabError(v.decode_error(kind, f"{struct}.{path}", value, "[]" + _go(schema[0])))
            for i, item in enumerate(value):
                walk(item, schema[0], path, f"{where}[{i}]", struct)
            return
        if isinstance(schema, dict):
            if not isinstance(value, dict):
                raise GpuLabError(v.decode_error(kind, f"{struct}.{path}", value, f"v1.{_STRUCTS.get(id(schema), kind)}"))
            inner = _STRUCTS.get(id(schema), struct)
            for key in value:
                sub_path = f"{path}.{key}" if path else str(key)
                sub_where = f"{where}.{key}" if where else str(key)
                if key not in schema:
                    unknown.append(sub_where)
                else:
                    walk(value[key], schema[key], sub_path, sub_where, inner)
            return
        ok = isinstance(value, schema) and not (schema is int and isinstance(value, bool))
        if not ok:
            raise GpuLabError(v.decode_error(kind, f"{struct}.{path}", value, _GO_TYPES[schema]))

    top = {"apiVersion": str, "kind": str, "metadata": _ANY, **_SCHEMAS[kind]}
    walk(doc, top, "", "")
    if unknown:
        raise GpuLabError(f'{kind} in version "v1" cannot be handled as a {kind}: strict decoding error: '
                          + ", ".join(f'unknown field "{u}"' for u in unknown))


def _go(schema: Any) -> str:
    if isinstance(schema, list):
        return "[]" + _go(schema[0])
    if isinstance(schema, dict):
        return "struct"
    return _GO_TYPES.get(schema, "interface {}")


def _meta(doc: dict) -> dict:
    meta = doc.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _invalid(kind: str, doc: dict, errs: list[str]) -> None:
    if errs:
        name = _meta(doc).get("name")
        raise InvalidObject(f"{kind}.resource.k8s.io", name if isinstance(name, str) else "", v.dedupe(errs))


# ------------------------------------------------------------------ claims


def _selectors(raw: list | None, path: str, errs: list[str]) -> tuple[str, ...]:
    out = []
    for i, sel in enumerate(raw or []):
        at = f"{path}[{i}]"
        expr = ((sel or {}).get("cel") or {}).get("expression") if isinstance(sel, dict) else None
        if not isinstance(sel, dict) or sel.get("cel") is None:
            errs.append(v.required(f"{at}.cel"))
            continue
        if not expr:
            errs.append(v.required(f"{at}.cel.expression"))
            continue
        if len(expr) > 10 * 1024:
            errs.append(f"{at}.cel.expression: Too long: may not be more than 10240 bytes")
            continue
        try:
            compile_selector(expr)
        except CelCompileError as err:
            errs.append(v.invalid(f"{at}.cel.expression", expr, err.detail))
            continue
        out.append(expr)
    return tuple(out)


def _tolerations(raw: list | None, path: str, errs: list[str]) -> tuple[DeviceToleration, ...]:
    out = []
    for i, t in enumerate(raw or []):
        at = f"{path}[{i}]"
        t = t or {}
        key, op, value, effect = t.get("key", ""), t.get("operator", "Equal"), t.get("value", ""), t.get("effect", "")
        if key:
            errs += [v.invalid(f"{at}.key", key, m) for m in v.is_qualified_name(key)]
        if op == "Exists" and value:
            errs.append(v.invalid(f"{at}.value", value, "must be empty for operator `Exists`"))
        elif op == "Equal":
            errs += [v.invalid(f"{at}.value", value, m) for m in v.is_label_value(value)]
        elif op not in ("Exists", "Equal"):
            errs.append(v.not_supported(f"{at}.operator", op, ["Equal", "Exists"]))
        if effect and effect not in _EFFECTS:
            errs.append(v.not_supported(f"{at}.effect", effect, sorted(_EFFECTS)))
        out.append(DeviceToleration(key, op, value, effect))
    return tuple(out)


def _request(raw: dict, name: str, path: str, errs: list[str]) -> Request:
    cls = raw.get("deviceClassName") or ""
    if not cls:
        errs.append(v.required(f"{path}.deviceClassName"))
    else:
        errs += v.validate_name(cls, f"{path}.deviceClassName")
    selectors = _selectors(raw.get("selectors"), f"{path}.selectors", errs)
    mode = raw.get("allocationMode") or EXACT_COUNT
    count = raw.get("count") or (1 if mode == EXACT_COUNT else 0)
    if mode == ALL and count:
        errs.append(v.invalid(f"{path}.count", count, "must not be specified when allocationMode is 'All'"))
    elif mode == EXACT_COUNT and count <= 0:
        errs.append(v.invalid(f"{path}.count", count, "must be greater than zero"))
    elif mode not in (ALL, EXACT_COUNT):
        errs.append(v.not_supported(f"{path}.allocationMode", mode, [ALL, EXACT_COUNT]))
    if raw.get("adminAccess"):
        errs.append(f"{path}.adminAccess: Forbidden: admin access is outside what gpu-lab's simulator models")
    if raw.get("capacity") is not None:
        errs.append(f"{path}.capacity: Forbidden: consumable capacity is outside what gpu-lab's simulator models")
    tolerations = _tolerations(raw.get("tolerations"), f"{path}.tolerations", errs)
    return Request(name, cls, selectors, mode, count if mode == EXACT_COUNT else 0, tolerations)


def claim_spec(raw: Any, path: str, errs: list[str]) -> ClaimSpec:
    """``validateResourceClaimSpec``: the claim's requests and constraints (configs are opaque)."""
    devices = (raw or {}).get("devices") or {}
    requests: list[ClaimRequest] = []
    names: dict[str, set[str] | None] = {}
    raw_requests = devices.get("requests") or []
    if len(raw_requests) > 32:
        errs.append(f"{path}.devices.requests: Too many: {len(raw_requests)}: must have at most 32 items")
        raw_requests = []
    for i, req in enumerate(raw_requests):
        at = f"{path}.devices.requests[{i}]"
        req = req or {}
        name = req.get("name") or ""
        if not name:
            errs.append(v.required(f"{at}.name"))
        else:
            errs += v.validate_name(name, f"{at}.name", v.is_dns1123_label)
        if name in names:
            errs.append(v.duplicate(at, name))
        exactly, first = req.get("exactly"), req.get("firstAvailable") or []
        if exactly is None and not first:
            errs.append(v.required(at, "exactly one of `exactly` or `firstAvailable` is required"))
            names[name] = None
            continue
        if exactly is not None and first:
            errs.append(f"{at}: Invalid value: null: exactly one of `exactly` or `firstAvailable` is required, "
                        "but multiple fields are set")
            continue
        if exactly is not None:
            requests.append(ClaimRequest(name, exactly=_request(exactly, name, f"{at}.exactly", errs)))
            names[name] = None
            continue
        if len(first) > FIRST_AVAILABLE_MAX:
            errs.append(f"{at}.firstAvailable: Too many: {len(first)}: must have at most {FIRST_AVAILABLE_MAX} items")
            continue
        subs, seen = [], set()
        for j, sub in enumerate(first):
            sat = f"{at}.firstAvailable[{j}]"
            sub = sub or {}
            sname = sub.get("name") or ""
            if not sname:
                errs.append(v.required(f"{sat}.name"))
            else:
                errs += v.validate_name(sname, f"{sat}.name", v.is_dns1123_label)
            if sname in seen:
                errs.append(v.duplicate(sat, sname))
            seen.add(sname)
            subs.append(_request(sub, sname, sat, errs))
        names[name] = seen
        requests.append(ClaimRequest(name, first_available=tuple(subs)))
    constraints = []
    for i, c in enumerate(devices.get("constraints") or []):
        at = f"{path}.devices.constraints[{i}]"
        c = c or {}
        refs = tuple(c.get("requests") or [])
        for j, ref in enumerate(refs):
            base, _, sub = ref.partition("/")
            if base not in names or (sub and sub not in (names[base] or ())):
                errs.append(v.invalid(f"{at}.requests[{j}]", ref, "must be the name of a request in the claim "
                                      "or the name of a request and a subrequest separated by '/'"))
        match, distinct = c.get("matchAttribute"), c.get("distinctAttribute")
        attr = match if match is not None else distinct
        if attr is None:
            errs.append(v.required(at, 'exactly one of "matchAttribute" or "distinctAttribute" is required, '
                                   "but multiple fields are set"))
            continue
        field = f"{at}.{'matchAttribute' if match is not None else 'distinctAttribute'}"
        errs += [v.invalid(field, attr, m) for m in v.is_qualified_name(attr)]
        if "/" not in attr:
            errs.append(v.invalid(field, attr, "a fully qualified name must be a domain and a name separated by a slash"))
        constraints.append(Constraint(refs, match, distinct if match is None else None))
    return ClaimSpec(tuple(requests), tuple(constraints))


def _object_meta(doc: dict, errs: list[str], namespaced: bool = True) -> None:
    errs += v.validate_object_meta(_meta(doc), namespaced=namespaced)


def resource_claim(doc: dict) -> tuple[str, str, ClaimSpec]:
    """Admit a ResourceClaim: (namespace, name, spec)."""
    _decode("ResourceClaim", doc)
    errs: list[str] = []
    _object_meta(doc, errs)
    spec = claim_spec(doc.get("spec"), "spec", errs)
    _invalid("ResourceClaim", doc, errs)
    meta = _meta(doc)
    return meta.get("namespace") or "default", meta["name"], spec


def claim_template(doc: dict) -> ClaimTemplate:
    _decode("ResourceClaimTemplate", doc)
    errs: list[str] = []
    _object_meta(doc, errs)
    spec = doc.get("spec") or {}
    inner = claim_spec(spec.get("spec"), "spec.spec", errs)
    tmeta = spec.get("metadata") or {}
    errs += v.validate_labels(tmeta.get("labels"), "spec.metadata.labels")
    _invalid("ResourceClaimTemplate", doc, errs)
    meta = _meta(doc)
    return ClaimTemplate(meta.get("namespace") or "default", meta["name"], inner,
                         dict(tmeta.get("labels") or {}), dict(tmeta.get("annotations") or {}))


def device_class(doc: dict, created: int) -> DeviceClass:
    _decode("DeviceClass", doc)
    errs: list[str] = []
    _object_meta(doc, errs, namespaced=False)
    spec = doc.get("spec") or {}
    selectors = _selectors(spec.get("selectors"), "spec.selectors", errs)
    ern = spec.get("extendedResourceName")
    if ern is not None and not is_extended_resource(ern):
        errs.append(v.invalid("spec.extendedResourceName", ern, "must be a valid extended resource name"))
    _invalid("DeviceClass", doc, errs)
    return DeviceClass(_meta(doc)["name"], selectors, ern, created)


def _taint(raw: dict | None, path: str, errs: list[str]) -> DeviceTaint:
    raw = raw or {}
    key, value, effect = raw.get("key") or "", raw.get("value") or "", raw.get("effect") or ""
    if not key:
        errs.append(v.required(f"{path}.key", "name part must be non-empty"))
    else:
        errs += [v.invalid(f"{path}.key", key, m) for m in v.is_qualified_name(key)]
    if value:
        errs += [v.invalid(f"{path}.value", value, m) for m in v.is_label_value(value)]
    if not effect:
        errs.append(v.required(f"{path}.effect"))
    elif effect not in _EFFECTS:
        errs.append(v.not_supported(f"{path}.effect", effect, sorted(_EFFECTS)))
    return DeviceTaint(key, value, effect)


def taint_rule(doc: dict) -> TaintRule:
    _decode("DeviceTaintRule", doc)
    errs: list[str] = []
    _object_meta(doc, errs, namespaced=False)
    spec = doc.get("spec") or {}
    taint = _taint(spec.get("taint"), "spec.taint", errs)
    sel = spec.get("deviceSelector")
    _invalid("DeviceTaintRule", doc, errs)
    if sel is None:  # "Without a selector, no devices are matched."
        return TaintRule(_meta(doc)["name"], taint, driver="", pool="", device="")
    return TaintRule(_meta(doc)["name"], taint, sel.get("driver"), sel.get("pool"), sel.get("device"))


# ------------------------------------------------------------------ slices


def _attribute(raw: dict) -> Any:
    if "string" in raw:
        return raw["string"]
    if "int" in raw:
        return int(raw["int"])
    if "bool" in raw:
        return bool(raw["bool"])
    if "version" in raw:
        return Semver.parse(raw["version"])
    raise GpuLabError(f"device attribute {raw!r}: exactly one of bool, int, string or version is required")


def _qualify(name: str, driver: str) -> tuple[str, str]:
    domain, _, ident = name.rpartition("/")
    return (domain or driver), ident


def _quantity(raw: Any, where: str) -> Fraction:
    try:
        return parse_quantity(raw)
    except QuantityError as err:
        raise GpuLabError(f"{where}: Invalid value: {v.go_value(raw)}: {err}") from None


def _counter(raw: Any, where: str) -> Fraction | int:
    """A counter amount; whole numbers as ints, which the allocator's search adds up fast."""
    q = _quantity(raw, where)
    return int(q) if q.denominator == 1 else q


def resource_slice(doc: dict) -> ResourceSlice:
    """A ResourceSlice: what the scheduler's allocator reads of it."""
    _decode("ResourceSlice", doc)
    spec = doc.get("spec") or {}
    driver = spec.get("driver") or ""
    pool = spec.get("pool") or {}
    devices = []
    for i, d in enumerate(spec.get("devices") or []):
        attrs: dict[str, dict[str, Any]] = {}
        for name, raw in (d.get("attributes") or {}).items():
            domain, ident = _qualify(name, driver)
            attrs.setdefault(domain, {})[ident] = _attribute(raw or {})
        capacity: dict[str, dict[str, Fraction]] = {}
        for name, raw in (d.get("capacity") or {}).items():
            domain, ident = _qualify(name, driver)
            capacity.setdefault(domain, {})[ident] = _quantity((raw or {}).get("value"),
                                                               f"spec.devices[{i}].capacity[{name}].value")
        consumes = tuple(CounterUse(c.get("counterSet") or "", tuple(
            (k, _counter((x or {}).get("value"), f"spec.devices[{i}].consumesCounters"))
            for k, x in (c.get("counters") or {}).items())) for c in d.get("consumesCounters") or [])
        errs: list[str] = []
        taints = tuple(_taint(t, f"spec.devices[{i}].taints[{j}]", errs) for j, t in enumerate(d.get("taints") or []))
        _invalid("ResourceSlice", doc, errs)
        devices.append(Device(d.get("name") or "", attrs, capacity, consumes, taints))
    counters = {c.get("name") or "": {k: _counter((x or {}).get("value"), "spec.sharedCounters")
                                      for k, x in (c.get("counters") or {}).items()}
                for c in spec.get("sharedCounters") or []}
    return ResourceSlice(_meta(doc).get("name") or "", driver, pool.get("name") or "",
                         int(pool.get("generation") or 0), int(pool.get("resourceSliceCount") or 1),
                         spec.get("nodeName"), bool(spec.get("allNodes")), spec.get("nodeSelector"),
                         devices, counters)
