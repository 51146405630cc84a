"""StatefulSets (apps/v1): validated as the API server does, and the pods their controller makes.

The StatefulSet controller (``pkg/controller/statefulset``) names its pods
``<statefulset>-<ordinal>`` (from ``spec.ordinals.start``, default 0), labels each with
``statefulset.kubernetes.io/pod-name``, ``apps.kubernetes.io/pod-index`` and
``controller-revision-hash`` and gives it ``hostname`` (its name) and ``subdomain``
(``spec.serviceName``). With ``podManagementPolicy: OrderedReady`` (the default) it
creates pod N+1 only once pod N is Running and Ready; with ``Parallel`` all at once. At
creation the API server makes nothing: the first pod (or, Parallel, every pod) is what
the controller creates on its first sync. Volume claim templates are not modelled.
"""

from __future__ import annotations

import copy
from typing import Any

from ..errors import GpuLabError, InvalidObject
from . import validation as v
from .objects import Pod
from .podtemplate import (
    always_running_errors,
    check_budget,
    nonnegative,
    pod_template_hash,
    selector_matches,
    template_errors,
    template_of,
    template_pod,
)

POD_NAME = "statefulset.kubernetes.io/pod-name"  # apps.StatefulSetPodNameLabel
POD_INDEX = "apps.kubernetes.io/pod-index"  # apps.PodIndexLabel
REVISION_HASH = "controller-revision-hash"  # apps.ControllerRevisionHashLabelKey
ORDERED_READY, PARALLEL = "OrderedReady", "Parallel"


def expand_statefulset(raw: dict, meta: dict, spec: dict, uid: str, classes, first: int,
                       max_pods: int | None) -> tuple[dict[str, Any], list[Pod]]:
    """``ValidateStatefulSet`` (after apps/v1 defaults), then the pods of the first sync."""
    name, ns = meta.get("name") or "", meta["namespace"]
    replicas = 1 if spec.get("replicas") is None else spec["replicas"]
    policy = spec.get("podManagementPolicy") or ORDERED_READY
    strategy = strategy_raw if isinstance(strategy_raw := spec.get("updateStrategy"), dict) else {}
    strategy_type = strategy.get("type") or "RollingUpdate"
    ordinals = ordinals_raw if isinstance(ordinals_raw := spec.get("ordinals"), dict) else {}
    start = ordinals.get("start") or 0
    template = template_of(spec)
    selector = spec.get("selector")

    errs = v.validate_object_meta(meta, name_check=v.is_dns1123_label)
    if policy not in (ORDERED_READY, PARALLEL):
        errs.append(v.invalid("spec.podManagementPolicy", policy,
                              f"must be '{ORDERED_READY}' or '{PARALLEL}'"))
    if strategy_type not in ("RollingUpdate", "OnDelete"):
        errs.append(v.invalid("spec.updateStrategy", v.go_struct(strategy, ("type", "rollingUpdate")),
                              "must be 'RollingUpdate' or 'OnDelete'"))
    errs += nonnegative(replicas, "spec.replicas")
    errs += nonnegative(spec.get("minReadySeconds") or 0, "spec.minReadySeconds")
    errs += nonnegative(start, "spec.ordinals.start")
    service = spec.get("serviceName")
    if isinstance(service, str) and service:
        errs += v.validate_name(service, "spec.serviceName", v.is_dns1123_label)
    if selector is None:
        errs.append(v.required("spec.selector"))
    else:
        errs += v.validate_label_selector(selector, "spec.selector")
        if isinstance(selector, dict) and not selector.get("matchLabels") and not selector.get("matchExpressions"):
            errs.append(v.invalid("spec.selector", v.selector_value(selector),
                                  "empty selector is invalid for statefulset"))
        errs += selector_matches(selector, template, "spec.template.metadata.labels")
    checked = copy.deepcopy(template)  # hostname and subdomain are the controller's to set
    checked["spec"].pop("hostname", None)
    checked["spec"].pop("subdomain", None)
    errs += template_errors(checked) + always_running_errors(template, "StatefulSet")
    if spec.get("volumeClaimTemplates"):
        raise GpuLabError(f'StatefulSet.apps "{name}": spec.volumeClaimTemplates: gpu-lab models no '
                          "volumes (leave it out)")
    if errs:
        raise InvalidObject("StatefulSet.apps", name, v.dedupe(errs))

    owner = {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": name, "uid": uid}
    record: dict[str, Any] = {
        "kind": "StatefulSet", "namespace": ns, "name": name, "uid": uid, "replicas": replicas,
        "selector": copy.deepcopy(selector), "pod_management_policy": policy, "start": start,
        "service_name": service if isinstance(service, str) else "", "template": template, "owner": owner,
        "revision": f"{name}-{pod_template_hash(template)}"}
    first_sync = replicas if policy == PARALLEL else min(replicas, 1)
    check_budget("StatefulSet", name, first_sync, max_pods, "spec.replicas")
    pods = [stateful_pod(record, start + i, first + i, classes) for i in range(first_sync)]
    record["pods"] = [p.name for p in pods]
    return record, pods


def slow_start_batch(index: int) -> int:
    """Which batch of ``slowStartBatch`` (sizes 1, 2, 4, ...; stateful_set_control.go) holds
    the ``index``-th replica. A Parallel StatefulSet's sync creates a batch's missing pods at
    once and stops after a batch in which a create failed (quota): the later ordinals are not
    tried, so get no FailedCreate, until the next sync. (The cap of 500 a batch is never met
    here.)"""
    return (index + 1).bit_length() - 1


def stateful_pod(record: dict, ordinal: int, created: int, classes: dict[str, dict]) -> Pod:
    """``newStatefulSetPod``: the template under the ordinal's name, with its identity."""
    t = copy.deepcopy(record["template"])
    name = f"{record['name']}-{ordinal}"
    labels = t["metadata"].setdefault("labels", {})
    labels[POD_NAME] = name
    labels[POD_INDEX] = str(ordinal)
    labels[REVISION_HASH] = record["revision"]
    t["spec"]["hostname"] = name
    if record["service_name"]:
        t["spec"]["subdomain"] = record["service_name"]
    else:
        t["spec"].pop("subdomain", None)
    return template_pod(t, name, record["namespace"], record["owner"], classes, created)
