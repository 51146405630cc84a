"""Services (v1), as far as scheduling sees them: a selector that default spreading folds in.

kube-scheduler's PodTopologySpread (and the selector ``helper.DefaultSelector`` builds for
its system default constraints) merges the selectors of every Service in the pod's
namespace that selects the pod. gpu-lab runs no kube-proxy: a Service routes nothing, it
only changes how pods spread. Checked as ``ValidateServiceCreate`` checks the fields
gpu-lab accepts, after the v1 defaults (type ClusterIP, sessionAffinity None, protocol TCP).
"""

from __future__ import annotations

import re
from typing import Any

from ..errors import GpuLabError, InvalidObject
from . import validation as v

SERVICE_TYPES = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"]
PROTOCOLS = ["SCTP", "TCP", "UDP"]


def parse_service(raw: dict) -> dict[str, Any]:
    """A record: namespace, name, selector (None when the Service has none: it selects nothing)."""
    meta = dict(raw["metadata"]) if isinstance(raw.get("metadata"), dict) else {}
    meta["namespace"] = meta.get("namespace") or "default"
    spec = raw["spec"] if isinstance(raw.get("spec"), dict) else {}
    name = name_raw if isinstance(name_raw := meta.get("name"), str) else ""
    _check_decodes(spec)
    kind = spec.get("type") or "ClusterIP"
    headless = spec.get("clusterIP") == "None"
    errs = v.validate_object_meta(meta, name_check=v.is_dns1123_label)
    ports = spec.get("ports")
    if ports is not None and not isinstance(ports, list):
        errs.append(v.wrong_type("spec.ports", ports, "a list"))
        ports = []
    ports = ports or []
    if not ports and not headless and kind != "ExternalName":
        errs.append(v.required("spec.ports"))
    names: set[str] = set()
    for i, p in enumerate(ports):
        errs += _port(p, len(ports) > 1, names, f"spec.ports[{i}]")
    selector = spec.get("selector")
    if selector is not None:
        errs += v.validate_labels(selector, "spec.selector")
    affinity = spec.get("sessionAffinity") or "None"
    if affinity not in ("ClientIP", "None"):
        errs.append(v.not_supported("spec.sessionAffinity", affinity, ["ClientIP", "None"]))
    if kind not in SERVICE_TYPES:
        errs.append(v.not_supported("spec.type", kind, SERVICE_TYPES))
    if errs:
        raise InvalidObject("Service", name, v.dedupe(errs))
    if kind != "ClusterIP":
        raise GpuLabError(f'Service "{name}": spec.type: gpu-lab models ClusterIP Services only (a '
                          f"{kind} Service would spread pods the same way: leave the type out)")
    return {"namespace": meta["namespace"], "name": name,
            # an empty selector is dropped when stored (omitempty): it selects nothing, as none does
            "selector": {str(k): str(val) for k, val in selector.items()} if isinstance(selector, dict)
            and selector else None}


def _check_decodes(spec: dict) -> None:
    """Values that do not decode into the Go types are refused before validation."""
    ports = spec.get("ports")
    for p in ports if isinstance(ports, list) else []:
        port = p.get("port") if isinstance(p, dict) else None
        if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not -(2**31) <= port < 2**31):
            raise GpuLabError(v.decode_error("Service", "ServicePort.spec.ports.port", port, "int32"))
    selector = spec.get("selector")
    if selector is not None and not isinstance(selector, dict):
        raise GpuLabError(v.decode_error("Service", "ServiceSpec.spec.selector", selector, "map[string]string"))
    for val in (selector or {}).values():
        if not isinstance(val, str):
            raise GpuLabError(v.decode_error("Service", "ServiceSpec.spec.selector", val, "string"))


def _port(p: Any, require_name: bool, names: set[str], path: str) -> list[str]:
    """``validateServicePort`` (protocol defaulted to TCP, targetPort to the port)."""
    if not isinstance(p, dict):
        return [v.wrong_type(path, p, "a service port")]
    errs = []
    name = p.get("name") or ""
    if require_name and not name:
        errs.append(v.required(f"{path}.name"))
    elif name:
        errs += v.validate_name(str(name), f"{path}.name", v.is_dns1123_label)
        if name in names:
            errs.append(v.duplicate(f"{path}.name", name))
        names.add(name)
    port = p.get("port") or 0
    if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
        errs.append(v.invalid(f"{path}.port", port, "must be between 1 and 65535, inclusive"))
    protocol = p.get("protocol") or "TCP"
    if protocol not in PROTOCOLS:
        errs.append(v.not_supported(f"{path}.protocol", protocol, PROTOCOLS))
    target = p.get("targetPort")
    if target in (None, 0, ""):  # SetDefaults_Service: the port itself
        target = port
    if isinstance(target, str):
        errs += [v.invalid(f"{path}.targetPort", target, m) for m in _port_name_errors(target)]
    elif isinstance(target, bool) or not isinstance(target, int) or not 1 <= target <= 65535:
        errs.append(v.invalid(f"{path}.targetPort", target, "must be between 1 and 65535, inclusive"))
    return errs


def _port_name_errors(name: str) -> list[str]:
    """``validation.IsValidPortName`` (an IANA service name)."""
    errs = []
    if len(name) > 15:
        errs.append("must be no more than 15 characters")
    if not re.fullmatch("[-a-z0-9]+", name):
        errs.append("must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)")
    if not re.search("[a-z]", name):
        errs.append("must contain at least one letter (a-z)")
    if "--" in name:
        errs.append("must not contain consecutive hyphens")
    if name and (name[0] == "-" or name[-1] == "-"):
        errs.append("must not begin or end with a hyphen")
    return errs
