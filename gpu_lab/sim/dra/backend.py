"""What the simulated cluster (``gpu_lab.sim``: apiserver, queue, kubelet, binder) calls to take part in DRA.

Each function is one step of the real cluster's flow, so each caller's edit stays one line:

* ``admit``: the API server's checks of a scenario's resource.k8s.io/v1 documents
  (``Scenario.dra``), and of the pods' ``resourceClaims``
  (``spec.resourceClaims`` and ``containers[].resources.claims``), before anything changes;
  ``commit`` then stores them (DeviceClasses first, claims before the pods that use them);
* ``not_queued``: PreEnqueue, for a pod whose claims do not exist yet;
* ``bind``: Reserve and PreBind of DynamicResources, returning the devices per container;
* ``kubelet_skips``: the extended resources the kubelet's admission leaves out on a node
  whose allocatable lacks them (``removeMissingExtendedResources``), which DRA serves there;
* ``explain_notes``: the pod's claims and how many devices match each request, for ``explain``;
* ``what_if``: the DRA objects for a scratch snapshot (the autoscaler's "would it fit?").
"""

from __future__ import annotations

from typing import Any

from ...errors import InvalidObject
from ...model import validation as v
from ...model.objects import Node, Pod
from .notes import explain_notes
from .objects import API_VERSION, KINDS
from .scheduling import BindError, wants_dra
from .scheduling import bind as _bind
from .state import DraController, DraState, dra_state, pod_claims

_ORDER = ("DeviceClass", "DeviceTaintRule", "ResourceSlice", "ResourceClaimTemplate", "ResourceClaim")

__all__ = ["BindError", "DraController", "DraState", "admit", "bind", "commit", "dra_state", "explain_notes",
           "kubelet_skips", "not_queued", "what_if"]


def admit(snapshot: Any, docs: list[dict], pods: list[Pod], namespaces: set[str]) -> list:
    """Check everything, change nothing; the records for ``commit``, in creation order (classes
    and taint rules, slices, templates, claims: before the pods that use them)."""
    for pod in pods:
        errs = validate_pod_claims(pod.raw.get("spec") or {})
        if errs:
            raise InvalidObject("Pod", pod.name, errs)
    if not docs:
        return []
    ordered = sorted((d for d in docs if d.get("apiVersion") == API_VERSION and d.get("kind") in KINDS),
                     key=lambda d: _ORDER.index(d["kind"]))
    return dra_state(snapshot).check(ordered, namespaces)


def commit(snapshot: Any, records: list) -> list[str]:
    return dra_state(snapshot).commit(records) if records else []


def what_if(snapshot: Any, scratch: Any) -> None:
    """Give a what-if snapshot (an autoscaler's template node) the cluster's DRA objects."""
    state = getattr(snapshot, "dra", None)
    if state is not None:
        scratch.dra = state.what_if()


def not_queued(snapshot: Any, pod: Pod) -> str | None:
    """Why PreEnqueue keeps the pod out of the scheduling queue (its claims are missing)."""
    if not pod_claims(pod):
        return None
    for _, claim, why in dra_state(snapshot).claims_for(pod):
        if claim is None:
            return why
    return None


def bind(snapshot: Any, pod: Pod, node: Node) -> dict[str, dict[str, list[str]]]:
    state = getattr(snapshot, "dra", None)
    if state is None or not wants_dra(pod, state):
        return {}
    state.sync_nodes(snapshot)
    return _bind(state, pod, node)


def kubelet_skips(snapshot: Any, pod: Pod, node: Node) -> set[str]:
    state = getattr(snapshot, "dra", None)
    if state is None or not wants_dra(pod, state):
        return set()
    return {r for r in pod.extended_requests() if r not in node.allocatable and state.extended_class(r) is not None}


def validate_pod_claims(spec: dict) -> list[str]:
    """``validatePodResourceClaims`` and ``validateResourceClaimNames`` (pkg/apis/core/validation)."""
    errs: list[str] = []
    names: set[str] = set()
    for i, c in enumerate(spec.get("resourceClaims") or []):
        at = f"spec.resourceClaims[{i}]"
        c = c if isinstance(c, dict) else {}
        name = c.get("name") or ""
        if not name:
            errs.append(v.required(f"{at}.name"))
        elif name in names:
            errs.append(v.duplicate(f"{at}.name", name))
        else:
            errs += v.validate_name(name, f"{at}.name", v.is_dns1123_label)
            names.add(name)
        shown = v.go_struct(c, ("name", "resourceClaimName", "resourceClaimTemplateName"),
                            omitempty=("resourceClaimName", "resourceClaimTemplateName"))
        claim, template = c.get("resourceClaimName"), c.get("resourceClaimTemplateName")
        if claim is not None and template is not None:
            errs.append(v.invalid(at, shown, "at most one of `resourceClaimName` or `resourceClaimTemplateName` "
                                  "may be specified"))
        if claim is None and template is None:
            errs.append(v.invalid(at, shown, "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"))
        for field, value in (("resourceClaimName", claim), ("resourceClaimTemplateName", template)):
            if value is not None:
                errs += v.validate_name(str(value), f"{at}.{field}")
    for group in ("initContainers", "containers"):
        for j, container in enumerate(spec.get(group) or []):
            refs = ((container or {}).get("resources") or {}).get("claims") or []
            seen: set[str] = set()
            for k, ref in enumerate(refs):
                at = f"spec.{group}[{j}].resources.claims[{k}]"
                name = (ref or {}).get("name") or ""
                if not name:
                    errs.append(v.required(at))
                    continue
                key = f"{name}/{ref['request']}" if ref.get("request") else name
                if name in seen or key in seen:
                    errs.append(v.duplicate(at, key))
                seen.update({name, key})
                if name not in names:
                    detail = "must be one of the names in pod.spec.resourceClaims"
                    detail += f": {', '.join(sorted(names))}" if names else " which is empty"
                    errs.append(f"{at}: Not found: {v.go_value(name)}: {detail}")
    return errs
