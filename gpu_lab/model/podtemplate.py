"""What the workload controllers share about a pod template: defaults, validation, the
template hash in pod names and the pod made from it (Deployments, ReplicaSets and Jobs in
``workloads``, StatefulSets in ``statefulset``, DaemonSets in ``daemonset``).
"""

from __future__ import annotations

import copy
import json
from typing import Any

from ..errors import GpuLabError
from . import validation as v
from .objects import Pod
from .parse import NAME_ALPHABET, parse_pod, template_defaults
from .selectors import LabelSelector

#: how the API server names each workload kind in its messages
QUALIFIED = {"Deployment": "Deployment.apps", "ReplicaSet": "ReplicaSet.apps", "Job": "Job.batch",
              "StatefulSet": "StatefulSet.apps", "DaemonSet": "DaemonSet.apps"}


def check_budget(kind: str, name: str, count: int, max_pods: int | None, field: str) -> None:
    if max_pods is not None and count > max_pods:
        raise GpuLabError(f'{QUALIFIED[kind]} "{name}": {field}: {count} pods is more than the '
                          f"simulator holds ({max_pods} more pods fit in this apply; Kubernetes is "
                          "tested up to 150000 pods in a cluster)")


def pod_template_hash(template: dict) -> str:
    """A stable 10-character hash of the pod template, spelled like the controller's.

    The controller hashes the Go struct with FNV-32a and spells the decimal
    digits with ``rand.SafeEncodeString``; we hash the template's canonical JSON
    the same way, padded to ten digits so every name has the same shape.
    """
    data = json.dumps(template, sort_keys=True, separators=(",", ":"), default=str).encode()
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return "".join(NAME_ALPHABET[ord(d) % len(NAME_ALPHABET)] for d in f"{h:010d}")


def template_of(spec: dict) -> dict:
    t = template_raw if isinstance(template_raw := spec.get("template"), dict) else {}
    meta = copy.deepcopy(metadata_raw) if isinstance(metadata_raw := t.get("metadata"), dict) else {}
    pod_spec = spec_raw if isinstance(spec_raw := t.get("spec"), dict) else {}
    return {"metadata": meta, "spec": template_defaults(pod_spec)}


def template_errors(template: dict) -> list[str]:
    """``ValidatePodTemplateSpec``: template labels and annotations, then the pod spec."""
    meta = template["metadata"]
    errs = v.validate_labels(meta.get("labels"), "spec.template.labels")
    errs += v.validate_annotations(meta.get("annotations"), "spec.template.annotations")
    return errs + v.validate_pod_spec(template["spec"], "spec.template.spec")


def always_running_errors(template: dict, kind: str) -> list[str]:
    """What DaemonSets and StatefulSets ask of their template beyond a pod's: pods that run
    until deleted (``restartPolicy: Always``, no ``activeDeadlineSeconds``)."""
    errs = []
    policy = template["spec"].get("restartPolicy") or "Always"
    if policy != "Always":
        errs.append(v.not_supported("spec.template.spec.restartPolicy", policy, ["Always"]))
    if template["spec"].get("activeDeadlineSeconds") is not None:
        errs.append(v.forbidden("spec.template.spec.activeDeadlineSeconds",
                                f"activeDeadlineSeconds in {kind} is not Supported"))
    return errs


def selector_errors(selector: Any, path: str) -> list[str]:
    if selector is None:
        return [v.required(path)]
    errs = v.validate_label_selector(selector, path)
    if isinstance(selector, dict) and not selector.get("matchLabels") and not selector.get("matchExpressions"):
        # the ReplicaSet check reuses the Deployment's wording
        errs.append(v.invalid(path, v.selector_value(selector), "empty selector is invalid for deployment"))
    if v.validate_label_selector(selector, path):  # LabelSelectorAsSelector fails too
        errs.append(v.invalid(path, v.selector_value(selector), "invalid label selector"))
    return errs


def selector_matches(selector: Any, template: dict, path: str) -> list[str]:
    """The selector must select the template's pods; a missing selector selects nothing."""
    if selector is not None and (not isinstance(selector, dict)
                                 or v.validate_label_selector(selector, "spec.selector")):
        return []
    parsed = LabelSelector.parse(selector)
    labels = template["metadata"].get("labels")
    if parsed.empty or parsed.matches(labels if isinstance(labels, dict) else {}):
        return []
    return [v.invalid(path, labels, "`selector` does not match template `labels`")]


def nonnegative(n: Any, path: str, optional: bool = False) -> list[str]:
    if n is None and optional:
        return []
    if isinstance(n, bool) or not isinstance(n, int):
        return [v.wrong_type(path, n, "an integer")]
    return [v.invalid(path, n, "must be greater than or equal to 0")] if n < 0 else []


def template_pod(template: dict, name: str, ns: str, owner: dict, classes, created: int) -> Pod:
    meta = copy.deepcopy(template["metadata"])
    meta.update(name=name, namespace=ns,
                ownerReferences=[{**owner, "controller": True, "blockOwnerDeletion": True}])
    manifest = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": copy.deepcopy(template["spec"])}
    return parse_pod(manifest, priority_classes=classes, created=created)
