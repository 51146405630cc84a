"""Workload and PodGroup (``scheduling.k8s.io/v1beta1``): the native gang API, admitted as
the API server admits them.

In Kubernetes v1.37 (feature gate ``GenericWorkload``, beta, off by default) a PodGroup is
what kube-scheduler places as one unit: its ``spec.schedulingPolicy`` is either ``basic``
(pods scheduled one by one) or ``gang`` with ``minCount`` (all-or-nothing for at least that
many pods). A pod joins it with ``spec.schedulingGroup.podGroupName``; the PodGroup may be
created after its pods. A Workload only holds ``podGroupTemplates`` that a controller stamps
PodGroups from (``PodGroup.spec.workloadRef``): the scheduler never reads it, so it is
validated here and nothing else is kept.

The API server does not compare ``minCount`` with the number of pods (it cannot know them):
a gang larger than its pods is accepted and its pods wait, unscheduled, for more members.
The messages are kube-apiserver v1.37.2's (declarative validation of
``k8s.io/api/scheduling/v1beta1``, the Priority admission plugin, encoding/json).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import Forbidden, GpuLabError, InvalidObject
from . import validation as v
from .objects import Pod
from .parse import SYSTEM_PRIORITY_CLASSES
from .validation.errors import json_kind

API_VERSION = "scheduling.k8s.io/v1beta1"
WORKLOAD = (API_VERSION, "Workload")
POD_GROUP = (API_VERSION, "PodGroup")
KINDS = {WORKLOAD, POD_GROUP}
RESOURCES = {"Workload": "workloads.scheduling.k8s.io", "PodGroup": "podgroups.scheduling.k8s.io"}
MAX_POD_GROUP_TEMPLATES = 8  # WorkloadMaxPodGroupTemplates
INT32 = 2**31


@dataclass(frozen=True)
class PodGroup:
    """An admitted PodGroup: ``min_count`` is None for the basic policy."""

    namespace: str
    name: str
    min_count: int | None
    priority: int = 0
    priority_class_name: str = ""

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def gang(self) -> bool:
        return self.min_count is not None


def pod_group_name(pod: Pod) -> str | None:
    """The PodGroup a pod belongs to (``spec.schedulingGroup.podGroupName``), if any."""
    memo = pod.memo  # shared by pods of one spec: the field is part of it
    if "pod_group" not in memo:
        spec = pod.raw.get("spec") if isinstance(pod.raw, dict) else None
        group = spec.get("schedulingGroup") if isinstance(spec, dict) else None
        name = group.get("podGroupName") if isinstance(group, dict) else None
        memo["pod_group"] = name if isinstance(name, str) and name else None
    return memo["pod_group"]


# ------------------------------------------------------------------ decoding


def _decode_error(kind: str, field: str, value: Any, go_type: str) -> GpuLabError:
    """encoding/json's refusal, as the API server words it for a v1beta1 object."""
    what = json_kind(value)
    if what.startswith("number") and not go_type.startswith("int"):
        what = "number"
    return GpuLabError(f'{kind} in version "v1beta1" cannot be handled as a {kind}: json: cannot '
                       f"unmarshal {what} into Go struct field {field} of type {go_type}")


def _mapping(kind: str, value: Any, struct: str, path: str, go_type: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise _decode_error(kind, f"{struct}.{path}", value, f"v1beta1.{go_type}")
    return value


def _policy(kind: str, raw: Any, path: str, go_path: str) -> tuple[list[str], int | None]:
    """``PodGroupSchedulingPolicy``: exactly one of basic and gang; a gang's minCount >= 1.
    Returns the errors and the gang's minCount (None for basic or when invalid)."""
    parent = "PodGroupTemplate" if "podGroupTemplates" in go_path else "PodGroupSpec"
    policy = _mapping(kind, raw, parent, go_path, "PodGroupSchedulingPolicy")
    basic = policy.get("basic")
    gang_raw = policy.get("gang")
    if basic is not None:
        _mapping(kind, basic, "PodGroupSchedulingPolicy", f"{go_path}.basic", "BasicSchedulingPolicy")
    gang = _mapping(kind, gang_raw, "PodGroupSchedulingPolicy", f"{go_path}.gang", "GangSchedulingPolicy")
    count = gang.get("minCount")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int)
                              or not -INT32 <= count < INT32):
        raise _decode_error(kind, f"GangSchedulingPolicy.{go_path}.gang.minCount", count, "int32")
    chosen = [name for name, value in (("basic", basic), ("gang", gang_raw)) if value is not None]
    if not chosen:
        return [v.invalid(path, "", "must specify one of: `basic`, `gang`")], None
    if len(chosen) > 1:
        return [v.invalid(path, "{basic, gang}", "must specify exactly one of: `basic`, `gang`")], None
    if gang_raw is None:
        return [], None
    if not count:  # +k8s:required: 0 is the zero value, so "missing"
        return [v.required(f"{path}.gang.minCount")], None
    if count < 1:
        return [v.invalid(f"{path}.gang.minCount", count, "must be greater than or equal to 1")], None
    return [], count


def _meta(doc: dict) -> dict:
    meta = dict(metadata_raw if isinstance(metadata_raw := doc.get("metadata"), dict) else {})
    meta["namespace"] = meta.get("namespace") or "default"
    return meta


def _name(meta: dict) -> str:
    return name_raw if isinstance(name_raw := meta.get("name"), str) else ""


# ------------------------------------------------------------------ PodGroup


def parse_pod_group(doc: dict, priority_classes: dict[str, dict] | None = None) -> PodGroup:
    """Admit a PodGroup: decoding, the Priority admission plugin, then validation."""
    meta = _meta(doc)
    name = _name(meta)
    spec = _mapping("PodGroup", doc.get("spec"), "PodGroup", "spec", "PodGroupSpec")
    ref = _mapping("PodGroup", spec.get("workloadRef"), "PodGroupSpec", "spec.workloadRef", "WorkloadReference")
    priority, class_name = _priority(spec, name, priority_classes or {})
    errs = v.validate_object_meta(meta)
    if spec.get("workloadRef") is not None:
        for field, check in (("workloadName", v.is_dns1123_subdomain), ("templateName", v.is_dns1123_label)):
            value = ref.get(field)
            if not value:
                errs.append(v.required(f"spec.workloadRef.{field}"))
            else:
                errs += v.validate_name(str(value), f"spec.workloadRef.{field}", check)
    policy_errs, min_count = _policy("PodGroup", spec.get("schedulingPolicy"), "spec.schedulingPolicy",
                                     "spec.schedulingPolicy")
    errs += policy_errs
    if errs:
        raise InvalidObject("PodGroup.scheduling.k8s.io", name, v.dedupe(errs))
    return PodGroup(meta["namespace"], name, min_count, priority, class_name)


def _priority(spec: dict, name: str, classes: dict[str, dict]) -> tuple[int, str]:
    """The Priority admission plugin for pod groups (``admitPodGroup``)."""
    class_name = spec.get("priorityClassName") or ""
    if class_name:
        pc = classes.get(class_name) or SYSTEM_PRIORITY_CLASSES.get(class_name)
        if pc is None:
            raise Forbidden(RESOURCES["PodGroup"], name, f"no PriorityClass with name {class_name} was found")
    else:
        defaults = sorted((c.get("value", 0), n) for n, c in classes.items() if c.get("globalDefault"))
        pc = classes[defaults[0][1]] if defaults else {"value": 0}
        class_name = defaults[0][1] if defaults else ""
    priority = int(pc.get("value", 0))
    asked = spec.get("priority")
    if asked is not None and asked != priority:
        raise Forbidden(RESOURCES["PodGroup"], name, f"priority set in the pod group ({asked}) must match "
                        f"the priority computed ({priority}) based on the priority class set in the spec")
    return priority, class_name


# ------------------------------------------------------------------ Workload


def validate_workload(doc: dict) -> tuple[str, str]:
    """Admit a Workload; returns (namespace, name)."""
    meta = _meta(doc)
    name = _name(meta)
    spec = _mapping("Workload", doc.get("spec"), "Workload", "spec", "WorkloadSpec")
    templates = spec.get("podGroupTemplates")
    if templates is not None and not isinstance(templates, list):
        raise _decode_error("Workload", "WorkloadSpec.spec.podGroupTemplates", templates,
                            "[]v1beta1.PodGroupTemplate")
    errs = v.validate_object_meta(meta)
    ctrl = _mapping("Workload", spec.get("controllerRef"), "WorkloadSpec", "spec.controllerRef",
                    "TypedLocalObjectReference")
    if spec.get("controllerRef") is not None:
        for field in ("kind", "name"):
            if not ctrl.get(field):
                errs.append(v.required(f"spec.controllerRef.{field}"))
    if not templates and not spec.get("compositePodGroupTemplates"):
        errs.append(v.invalid("spec", "", "must specify one of: `podGroupTemplates`, `compositePodGroupTemplates`"))
    elif templates and len(templates) > MAX_POD_GROUP_TEMPLATES:
        errs.append(f"spec.podGroupTemplates: Too many: {len(templates)}: must have at most "
                    f"{MAX_POD_GROUP_TEMPLATES} items")
    else:
        seen: set[Any] = set()  # names as written, not yet known to be strings
        for i, t in enumerate(templates or []):
            path = f"spec.podGroupTemplates[{i}]"
            t = _mapping("Workload", t, "WorkloadSpec", "spec.podGroupTemplates", "PodGroupTemplate")
            tname = t.get("name")
            if not tname:
                errs.append(v.required(f"{path}.name"))
            else:
                errs += v.validate_name(str(tname), f"{path}.name", v.is_dns1123_label)
            policy_errs, _ = _policy("Workload", t.get("schedulingPolicy"), f"{path}.schedulingPolicy",
                                     "spec.podGroupTemplates.schedulingPolicy")
            errs += policy_errs
            if tname and tname in seen:
                shown = {**t, "schedulingConstraints": t.get("schedulingConstraints")}
                errs.append(v.duplicate(path, v.go_struct(shown, ("name", "schedulingPolicy", "schedulingConstraints"))))
            seen.add(tname)
    if errs:
        raise InvalidObject("Workload.scheduling.k8s.io", name, v.dedupe(errs))
    return meta["namespace"], name
