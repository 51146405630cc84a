"""LimitRange (v1): validated as the API server does, applied as the LimitRanger admission plugin.

LimitRanger runs on every pod the API server creates (a controller's too), before
ResourceQuota: it fills each container's missing limits from ``default`` and missing
requests from ``defaultRequest`` (the API server has already defaulted those from
``max``, ``default`` and ``min``), then refuses a container outside ``min``/``max``, in
``plugin/pkg/admission/limitranger``'s words. Only ``type: Container`` items are modelled.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..errors import Forbidden, GpuLabError, InvalidObject
from . import validation as v
from .objects import Pod, compute_pod_requests, spec_memo
from .parse import _container, internal_amount, pod_defaults
from .quantity import format_quantity

API_VERSION = "v1"
KIND = "LimitRange"
ANNOTATION = "kubernetes.io/limit-ranger"
FIELDS = ("max", "min", "default", "defaultRequest")
TYPES = ("Container", "Pod", "PersistentVolumeClaim")


@dataclass
class LimitRange:
    namespace: str
    name: str
    # type Container items, defaulted as SetDefaults_LimitRangeItem does: field -> {resource: raw quantity}
    items: list[dict[str, dict[str, Any]]] = field(default_factory=list)


def parse_limit_range(doc: dict) -> LimitRange:
    """``ValidateLimitRange`` for what gpu-lab models; other item types are refused in one line."""
    meta = m if isinstance(m := doc.get("metadata"), dict) else {}
    name = name_raw if isinstance(name_raw := meta.get("name"), str) else ""
    errs = v.validate_object_meta(meta)
    spec = sp if isinstance(sp := doc.get("spec"), dict) else {}
    items: list[dict[str, dict[str, Any]]] = []
    limits = spec.get("limits")
    if not isinstance(limits, list):
        errs.append(v.required("spec.limits") if limits is None else
                    v.wrong_type("spec.limits", limits, "an array"))
        limits = []
    for i, raw in enumerate(limits):
        path = f"spec.limits[{i}]"
        item = raw if isinstance(raw, dict) else {}
        kind = item.get("type")
        if kind not in TYPES:
            errs.append(v.required(f"{path}.type") if not kind else v.not_supported(f"{path}.type", kind, TYPES))
            continue
        if kind != "Container":
            raise GpuLabError(f'LimitRange "{name}": {path}.type: {kind} is not supported by gpu-lab '
                              "(only type Container limits are modelled)")
        if item.get("maxLimitRequestRatio"):
            raise GpuLabError(f'LimitRange "{name}": {path}.maxLimitRequestRatio is not supported by gpu-lab '
                              "(default, defaultRequest, min and max are)")
        parsed = {f: dict(item.get(f) or {}) for f in FIELDS}
        for values in parsed.values():  # a malformed quantity is a decode error; a negative one passes
            for q in values.values():
                v.parse(q)
        parsed = _defaulted(parsed)
        _check_item(parsed, path, errs)
        items.append(parsed)
    if errs:
        raise InvalidObject(KIND, name, v.dedupe(errs))
    return LimitRange(str(meta.get("namespace") or "default"), name, items)


def _check_item(item: dict[str, dict[str, Any]], path: str, errs: list[str]) -> None:
    """The rules ``ValidateLimitRange`` checks between min, max and the defaults, in its order,
    on the defaulted item (the API server validates after defaulting)."""
    amount = {f: {r: v.parse(q) for r, q in values.items()} for f, values in item.items()}
    lo, hi, dflt, req = amount["min"], amount["max"], amount["default"], amount["defaultRequest"]

    def text(f: str, res: str) -> str:
        return _text(res, item[f][res])

    for res in sorted(set(lo) | set(hi) | set(dflt) | set(req)):
        if res in lo and res in hi and lo[res] > hi[res]:
            errs.append(v.invalid(f"{path}.min[{res}]", text("min", res),
                                  f"min value {text('min', res)} is greater than max value {text('max', res)}"))
        if res in req and res in lo and lo[res] > req[res]:
            errs.append(v.invalid(f"{path}.defaultRequest[{res}]", text("defaultRequest", res),
                                  f"min value {text('min', res)} is greater than default request value "
                                  f"{text('defaultRequest', res)}"))
        if res in req and res in hi and req[res] > hi[res]:
            errs.append(v.invalid(f"{path}.defaultRequest[{res}]", text("defaultRequest", res),
                                  f"default request value {text('defaultRequest', res)} is greater than "
                                  f"max value {text('max', res)}"))
        if res in req and res in dflt and req[res] > dflt[res]:
            errs.append(v.invalid(f"{path}.defaultRequest[{res}]", text("defaultRequest", res),
                                  f"default request value {text('defaultRequest', res)} is greater than "
                                  f"default limit value {text('default', res)}"))
        if res in dflt and res in lo and lo[res] > dflt[res]:
            errs.append(v.invalid(f"{path}.default[{res}]", text("min", res),
                                  f"min value {text('min', res)} is greater than default value {text('default', res)}"))
        if res in dflt and res in hi and dflt[res] > hi[res]:
            errs.append(v.invalid(f"{path}.default[{res}]", text("max", res),
                                  f"default value {text('default', res)} is greater than max value {text('max', res)}"))


def _defaulted(item: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """``SetDefaults_LimitRangeItem``: default from max, defaultRequest from default, then min."""
    item = {f: dict(values) for f, values in item.items()}
    for res, q in item["max"].items():
        item["default"].setdefault(res, q)
    for res, q in item["default"].items():
        item["defaultRequest"].setdefault(res, q)
    for res, q in item["min"].items():
        item["defaultRequest"].setdefault(res, q)
    return item


def admit(pod: Pod, ranges: list[LimitRange]) -> Pod:
    """LimitRanger's Admit then Validate for one pod: the pod as created (a new record when a
    default was filled), or ``Forbidden`` in the plugin's words."""
    mine = [r for r in ranges if r.namespace == pod.namespace and r.items]
    if not mine:
        return pod
    raw = pod.raw if isinstance(pod.raw, dict) else {}
    spec = pod_defaults(sp if isinstance(sp := raw.get("spec"), dict) else {})
    notes: list[str] = []
    for r in mine:
        limits: dict[str, Any] = {}
        requests: dict[str, Any] = {}
        for item in r.items:
            requests.update(item["defaultRequest"])
            limits.update(item["default"])
        for key, label in (("containers", "container"), ("initContainers", "init container")):
            for c in spec.get(key) or []:
                notes += _merge(c, limits, requests, label)
    errors: list[str] = []
    for r in mine:
        for item in r.items:
            for key in ("containers", "initContainers"):
                for c in spec.get(key) or []:
                    errors += _violations(item, c.get("resources") or {})
    if errors:
        raise Forbidden("pods", pod.name, errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]")
    if not notes:
        return pod

    meta = dict(raw.get("metadata") or {})
    annotations = {**(meta.get("annotations") or {}), ANNOTATION: "LimitRanger plugin set: " + "; ".join(notes)}
    meta["annotations"] = annotations
    out = dataclasses.replace(
        pod, raw={**raw, "metadata": meta, "spec": spec}, annotations=dict(annotations),
        containers=[_container(c) for c in spec.get("containers") or []],
        init_containers=[_container(c) for c in spec.get("initContainers") or []],
        memo=spec_memo(pod.namespace, pod.labels, pod.owner_kind, spec))
    compute_pod_requests(out)
    return out


def _merge(container: dict, limits: dict, requests: dict, label: str) -> list[str]:
    """``mergeContainerResources``: fill what the container leaves out; the annotation's notes."""
    res = container.setdefault("resources", {})
    have_limits = res.setdefault("limits", {})
    have_requests = res.setdefault("requests", {})
    set_limits = sorted(k for k in limits if k not in have_limits)
    set_requests = sorted(k for k in requests if k not in have_requests)
    for k in set_limits:
        have_limits[k] = limits[k]
    for k in set_requests:
        have_requests[k] = requests[k]
    notes = []
    name = container.get("name", "")
    if set_requests:
        notes.append(f"{', '.join(set_requests)} request for {label} {name}")
    if set_limits:
        notes.append(f"{', '.join(set_limits)} limit for {label} {name}")
    return notes


def _violations(item: dict[str, dict[str, Any]], resources: dict) -> list[str]:
    """``minConstraint`` and ``maxConstraint`` for one container (ratio is not modelled)."""
    requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
    out = []
    for res, q in sorted(item["min"].items()):
        enforced = _text(res, q)
        if res not in requests:
            out.append(f"minimum {res} usage per Container is {enforced}.  No request is specified")
        elif v.parse(requests[res]) < v.parse(q):
            out.append(f"minimum {res} usage per Container is {enforced}, but request is {_text(res, requests[res])}")
        elif res in limits and v.parse(limits[res]) < v.parse(q):
            out.append(f"minimum {res} usage per Container is {enforced}, but limit is {_text(res, limits[res])}")
    for res, q in sorted(item["max"].items()):
        enforced = _text(res, q)
        if res not in limits:
            out.append(f"maximum {res} usage per Container is {enforced}.  No limit is specified")
        elif v.parse(limits[res]) > v.parse(q):
            out.append(f"maximum {res} usage per Container is {enforced}, but limit is {_text(res, limits[res])}")
        elif res in requests and v.parse(requests[res]) > v.parse(q):
            out.append(f"maximum {res} usage per Container is {enforced}, but request is {_text(res, requests[res])}")
    return out


def _text(resource: str, raw: Any) -> str:
    """A quantity as ``Quantity.String()`` prints it (canonical form)."""

    return format_quantity(resource, internal_amount(resource, raw))
