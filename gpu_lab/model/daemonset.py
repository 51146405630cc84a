"""DaemonSets (apps/v1): validated as the API server does, and the pods their controller makes.

A DaemonSet has no pods of its own at creation: the DaemonSet controller
(``pkg/controller/daemon``) makes one per node that should run it and lets the default
scheduler place it. Each pod is the template with ``CreatePodTemplate``'s additions (the
daemon tolerations, ``pod-template-generation`` and ``controller-revision-hash`` labels)
and a required node affinity on ``metadata.name`` naming its node
(``ReplaceDaemonSetPodNodeNameNodeAffinity``), named ``<daemonset>-<5 chars>``.
``should_run`` is ``nodeShouldRunDaemonPod``: the template's nodeName, nodeSelector and
required node affinity, and taints (NoSchedule and NoExecute) the pods do not tolerate.
"""

from __future__ import annotations

import copy
from typing import Any

from ..errors import InvalidObject
from . import validation as v
from .objects import Pod, Taint, Toleration
from .parse import NameGenerator
from .podtemplate import (
    always_running_errors,
    pod_template_hash,
    selector_matches,
    template_errors,
    template_of,
    template_pod,
)
from .selectors import NodeSelectorTerm, node_selector_matches

TEMPLATE_GENERATION = "pod-template-generation"  # extensions.DaemonSetTemplateGenerationKey
REVISION_HASH = "controller-revision-hash"  # extensions.DefaultDaemonSetUniqueLabelKey
# AddOrUpdateDaemonPodTolerations: kept through node problems, placed despite pressure and cordons
DAEMON_TOLERATIONS = [
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"},
    {"key": "node.kubernetes.io/disk-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/memory-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/pid-pressure", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"},
]
NETWORK_UNAVAILABLE = {"key": "node.kubernetes.io/network-unavailable", "operator": "Exists",
                       "effect": "NoSchedule"}


def expand_daemonset(raw: dict, meta: dict, spec: dict, uid: str) -> tuple[dict[str, Any], list[Pod]]:
    """``ValidateDaemonSet``, then the record the controller works from (no pods yet)."""
    name, ns = meta.get("name") or "", meta["namespace"]
    template = template_of(spec)
    selector = spec.get("selector")
    errs = v.validate_object_meta(meta)
    errs += v.validate_label_selector(selector, "spec.selector")
    errs += selector_matches(selector, template, "spec.template.metadata.labels")
    if isinstance(selector, dict) and not selector.get("matchLabels") and not selector.get("matchExpressions"):
        errs.append(v.invalid("spec.selector", v.selector_value(selector), "empty selector is invalid for daemonset"))
    errs += template_errors(template) + always_running_errors(template, "DaemonSet")
    if errs:
        raise InvalidObject("DaemonSet.apps", name, v.dedupe(errs))

    pod_template = copy.deepcopy(template)
    add_daemon_tolerations(pod_template["spec"])
    labels = pod_template["metadata"].setdefault("labels", {})
    labels[TEMPLATE_GENERATION] = "1"  # a new DaemonSet's generation
    labels[REVISION_HASH] = pod_template_hash(template)  # stands in for the ControllerRevision's hash
    owner = {"apiVersion": "apps/v1", "kind": "DaemonSet", "name": name, "uid": uid}
    record = {"kind": "DaemonSet", "namespace": ns, "name": name, "uid": uid,
              "selector": copy.deepcopy(selector), "pods": [], "template": pod_template,
              "owner": owner, "prefix": f"{name}-"}
    return record, []


def add_daemon_tolerations(spec: dict) -> None:
    """``AddOrUpdateDaemonPodTolerations``: each default toleration replaces one that matches it
    (same key, operator, value and effect) or is appended."""
    wanted = DAEMON_TOLERATIONS + ([NETWORK_UNAVAILABLE] if spec.get("hostNetwork") is True else [])
    tolerations = list(spec.get("tolerations") or [])
    for t in wanted:
        same = [i for i, have in enumerate(tolerations) if isinstance(have, dict) and all(
            (have.get(k) or "") == (t.get(k) or "") for k in ("key", "operator", "value", "effect"))]
        if same:
            for i in same:
                tolerations[i] = dict(t)
        else:
            tolerations.append(dict(t))
    spec["tolerations"] = tolerations


def daemon_pod(record: dict, node: str, names: NameGenerator, created: int, classes: dict[str, dict]) -> Pod:
    """The pod for ``node``: the template pinned there by a required node affinity on
    ``metadata.name`` (the scheduler still places it)."""
    t = copy.deepcopy(record["template"])
    pin = {"nodeSelectorTerms": [{"matchFields": [
        {"key": "metadata.name", "operator": "In", "values": [node]}]}]}
    affinity = t["spec"].get("affinity") or {}
    node_affinity = affinity.get("nodeAffinity") or {}
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = (
        {**required, "nodeSelectorTerms": pin["nodeSelectorTerms"]} if isinstance(required, dict) else pin)
    affinity["nodeAffinity"] = node_affinity
    t["spec"]["affinity"] = affinity
    ns = record["namespace"]
    return template_pod(t, names.generate(ns, record["prefix"]), ns, record["owner"], classes, created)


def should_run(record: dict, node: str, labels: dict[str, str], taints: list[Taint]) -> tuple[bool, bool]:
    """``nodeShouldRunDaemonPod``: (should run, should continue running) on this node."""
    spec = record["template"]["spec"]
    if spec.get("nodeName") and spec["nodeName"] != node:
        return False, False
    if not _fits_node_affinity(spec, node, labels):
        return False, False
    tolerations = [_toleration(t) for t in spec.get("tolerations") or [] if isinstance(t, dict)]

    def untolerated(effects: tuple[str, ...]) -> bool:
        return any(t.effect in effects and not any(tol.tolerates(t) for tol in tolerations) for t in taints)

    if untolerated(("NoSchedule", "NoExecute")):
        return False, not untolerated(("NoExecute",))
    return True, True


def _fits_node_affinity(spec: dict, node: str, labels: dict[str, str]) -> bool:
    """``RequiredNodeAffinity.Match``: the nodeSelector, then the required terms (ORed)."""
    if any(labels.get(k) != str(val) for k, val in (spec.get("nodeSelector") or {}).items()):
        return False
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution")
    if not isinstance(required, dict):
        return True
    terms = [NodeSelectorTerm.parse(t) for t in required.get("nodeSelectorTerms") or [] if isinstance(t, dict)]
    return node_selector_matches(terms, node, labels)


def _toleration(t: dict) -> Toleration:
    return Toleration(key=str(t.get("key") or ""), operator=t.get("operator") or "Equal",
                      value=str(t.get("value") or ""), effect=t.get("effect") or "")
