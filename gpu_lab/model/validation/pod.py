"""Object metadata, owner references, containers and the pod spec: what a pod must pass."""

from __future__ import annotations

from typing import Any

from .affinity import validate_affinity
from .errors import duplicate, go_struct, invalid, not_supported, required, wrong_type
from .names import is_dns1123_label, is_dns1123_subdomain, validate_name
from .ports import host_port_conflicts, validate_ports
from .resources import validate_resource_requirements
from .selectors import validate_annotations, validate_labels
from .spread import validate_topology_spread
from .tolerations import validate_tolerations


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


def _containers(containers: Any, path: str, *, init: bool, names: set | None = None) -> list[str]:
    """``validateContainers``/``validateInitContainers``; ``names`` collects container names
    (an init container may not reuse a container's name)."""
    if containers is None or containers == []:
        return [] if init else [required(path)]
    if not isinstance(containers, list):
        return [wrong_type(path, containers, "a list of containers")]
    errs = []
    names = set() if names is None else names
    for i, c in enumerate(containers):
        at = f"{path}[{i}]"
        if not isinstance(c, dict):
            errs.append(wrong_type(at, c, "a container"))
            continue
        name, image = c.get("name"), c.get("image")
        if not name:
            errs.append(required(f"{at}.name"))
        elif not isinstance(name, str):
            errs.append(wrong_type(f"{at}.name", name, "a string"))
        elif name not in _GOOD_CONTAINER_NAMES:
            name_errs = validate_name(name, f"{at}.name", is_dns1123_label)
            if name_errs:
                errs += name_errs
            elif len(_GOOD_CONTAINER_NAMES) < 4096:  # pods repeat a few names thousands of times
                _GOOD_CONTAINER_NAMES.add(name)
        if image is not None and not isinstance(image, str):
            errs.append(wrong_type(f"{at}.image", image, "a string"))
        elif not image:
            errs.append(required(f"{at}.image"))
        errs += validate_ports(c.get("ports"), f"{at}.ports")
        res = c.get("resources")
        if res is not None and not isinstance(res, dict):
            errs.append(wrong_type(f"{at}.resources", res, "an object with limits and requests"))
        elif res:
            errs += validate_resource_requirements(res.get("limits"), res.get("requests"), f"{at}.resources")
        if init:  # the API server checks each init container on its own (always at index 0)
            errs += host_port_conflicts([c], path)
        if isinstance(name, str) and name:
            if name in names:
                errs.append(duplicate(f"{at}.name", name))
            names.add(name)
    if not init:
        errs += host_port_conflicts(containers, path)
    return errs


RESTART_POLICIES = ("Always", "OnFailure", "Never")
_GOOD_CONTAINER_NAMES: set[str] = set()


def validate_pod_spec(spec: dict, path: str = "spec") -> list[str]:
    """``ValidatePodSpec`` for the fields gpu-lab reads, in the API server's order."""
    names: set[str] = set()
    errs = _containers(spec.get("containers"), f"{path}.containers", init=False, names=names)
    errs += _containers(spec.get("initContainers"), f"{path}.initContainers", init=True, names=names)
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
    if spec.get("schedulingGroup") is not None:
        errs += _scheduling_group(spec["schedulingGroup"], f"{path}.schedulingGroup")
    return errs


def _scheduling_group(group: Any, path: str) -> list[str]:
    """``validateSchedulingGroup``: the PodGroup a gang member names (a one-of with one member)."""
    name = group.get("podGroupName") if isinstance(group, dict) else None
    if name is None:
        return [invalid(f"{path}.podGroupName", None, "must specify one of: `podGroupName`")]
    if not isinstance(name, str):
        return [wrong_type(f"{path}.podGroupName", name, "a string")]
    return validate_name(name, f"{path}.podGroupName")
