"""Deployments, ReplicaSets, Jobs, StatefulSets and DaemonSets, expanded into the Pods their
controllers create (``statefulset.py`` and ``daemonset.py`` hold the last two).

The API server validates the workload (its own rules plus the pod template's),
then the controllers create pods with ``generateName``: a Deployment makes a
ReplicaSet ``<deployment>-<pod-template-hash>``, which makes pods
``<replicaset>-<5 chars>``; a Job makes ``<job>-<5 chars>`` (``<job>-<index>-<5
chars>`` when Indexed). Kubernetes draws those characters at random and draws again
on a collision; so do we (``parse.NameGenerator``), from the session's seed, so every
run of a scenario shows the same pods.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from ..errors import GpuLabError, InvalidObject
from ..names import stable_uid
from . import validation as v
from .daemonset import expand_daemonset
from .objects import Pod
from .parse import NameGenerator
from .podtemplate import (
    QUALIFIED,
    check_budget,
    nonnegative,
    pod_template_hash,
    selector_errors,
    selector_matches,
    template_errors,
    template_of,
    template_pod,
)
from .selectors import LabelSelector
from .statefulset import expand_statefulset

POD_TEMPLATE_HASH = "pod-template-hash"
JOB_NAME = "batch.kubernetes.io/job-name"
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"
LEGACY_JOB_NAME = "job-name"
LEGACY_CONTROLLER_UID = "controller-uid"
COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
WORKLOAD_KINDS = {("apps/v1", "Deployment"), ("apps/v1", "ReplicaSet"), ("batch/v1", "Job"),
                  ("apps/v1", "StatefulSet"), ("apps/v1", "DaemonSet")}


def expand_workload(raw: dict, *, priority_classes: dict[str, dict] | None = None,
                    first_created: int = 0, names: NameGenerator | None = None,
                    max_pods: int | None = None) -> tuple[dict[str, Any], list[Pod]]:
    """Validate one workload and return (a summary record, its pods in creation order).

    The record has kind, namespace, name, uid, selector, pods (names) and, per
    kind: replicas and replicaset/pod_template_hash (Deployment); parallelism,
    completions, completion_mode and suspend (Job); replicas, pod_management_policy
    (StatefulSet: the pods of its controller's first sync). A DaemonSet has no pods
    here: its controller makes them per node.
    """
    kind = raw.get("kind")
    if not isinstance(kind, str) or (raw.get("apiVersion"), kind) not in WORKLOAD_KINDS:
        raise GpuLabError(f'no matches for kind "{kind}" in version "{raw.get("apiVersion")}"')
    meta = dict(metadata_raw if isinstance(metadata_raw := raw.get("metadata"), dict) else {})
    meta["namespace"] = meta.get("namespace") or "default"
    spec = spec_raw if isinstance(spec_raw := raw.get("spec"), dict) else {}
    name = name_raw if isinstance(name_raw := meta.get("name"), str) else ""
    uid = stable_uid(kind, meta["namespace"], name)
    names = names if names is not None else NameGenerator(0)
    _check_int32(kind, spec)
    if kind == "Job":
        return _job(raw, meta, spec, uid, priority_classes, first_created, names, max_pods)
    if kind == "StatefulSet":
        return expand_statefulset(raw, meta, spec, uid, priority_classes, first_created, max_pods)
    if kind == "DaemonSet":
        return expand_daemonset(raw, meta, spec, uid)
    return _replicated(raw, meta, spec, uid, priority_classes, first_created, names, max_pods)


_INT32_FIELDS = {"Deployment": ("DeploymentSpec", ("replicas",)),
                 "ReplicaSet": ("ReplicaSetSpec", ("replicas",)),
                 "Job": ("JobSpec", ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds")),
                 "StatefulSet": ("StatefulSetSpec", ("replicas", "minReadySeconds")),
                 "DaemonSet": ("DaemonSetSpec", ("minReadySeconds",))}


def _check_int32(kind: str, spec: dict) -> None:
    """The API server decodes counts into int32 fields: a larger number is refused before
    validation, in encoding/json's words."""
    struct, fields = _INT32_FIELDS[kind]
    selector = spec.get("selector")
    if selector is not None and not isinstance(selector, dict):
        raise GpuLabError(v.decode_error(kind, f"{struct}.spec.selector", selector, "v1.LabelSelector"))
    for f in fields:
        n = spec.get(f)
        if isinstance(n, int) and not isinstance(n, bool) and not -(2**31) <= n < 2**31:
            go_type = "int64" if f == "activeDeadlineSeconds" else "int32"
            if go_type == "int64" and -(2**63) <= n < 2**63:
                continue
            raise GpuLabError(f'{kind} in version "v1" cannot be handled as a {kind}: json: cannot '
                              f"unmarshal number {n} into Go struct field {struct}.spec.{f} of type "
                              f"{go_type}")


# ------------------------------------------------------- Deployment, ReplicaSet


def _replicated(raw, meta, spec, uid, classes, first, names, max_pods):
    kind, name, ns = raw["kind"], meta.get("name") or "", meta["namespace"]
    replicas = 1 if spec.get("replicas") is None else spec["replicas"]  # the apps/v1 default
    template = template_of(spec)
    errs = v.validate_object_meta(meta)
    errs += nonnegative(replicas, "spec.replicas")
    selector = spec.get("selector")
    errs += selector_errors(selector, "spec.selector")
    errs += selector_matches(selector, template, "spec.template.metadata.labels")
    errs += template_errors(template)
    policy = template["spec"].get("restartPolicy") or "Always"
    if policy != "Always":
        errs.append(v.not_supported("spec.template.spec.restartPolicy", policy, ["Always"]))
    if errs:
        raise InvalidObject(QUALIFIED[kind], name, v.dedupe(errs))

    record: dict[str, Any] = {"kind": kind, "namespace": ns, "name": name, "uid": uid,
                              "replicas": replicas, "selector": copy.deepcopy(selector)}
    owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": name, "uid": uid}
    if kind == "Deployment":
        # The Deployment controller names its ReplicaSet after the template's hash
        # and adds the hash to the ReplicaSet's selector and to every pod's labels.
        h = pod_template_hash(template)
        rs = f"{name}-{h}"
        owner.update(name=rs, uid=stable_uid("ReplicaSet", ns, rs))
        template["metadata"]["labels"] = {**template["metadata"].get("labels", {}), POD_TEMPLATE_HASH: h}
        selector = copy.deepcopy(selector)
        selector.setdefault("matchLabels", {})[POD_TEMPLATE_HASH] = h
        record.update(replicaset=rs, pod_template_hash=h, selector=selector)
    check_budget(kind, name, replicas, max_pods, "spec.replicas")
    prefix = owner["name"] + "-"
    pods = _replicas(template, replicas, names, prefix, ns, owner, classes, first)
    record["pods"] = [p.name for p in pods]
    record.update(template=template, owner=owner, prefix=prefix, prototype=pods[0] if pods else None)
    return record, pods


# ---------------------------------------------------------------------- Job


def _job(raw, meta, spec, uid, classes, first, names, max_pods):
    name, ns = meta.get("name") or "", meta["namespace"]
    template = template_of(spec)
    parallelism, completions = spec.get("parallelism"), spec.get("completions")
    if parallelism is None and completions is None:  # batch/v1 defaults: a single pod
        parallelism = completions = 1
    parallelism = 1 if parallelism is None else parallelism
    mode = spec.get("completionMode") or "NonIndexed"
    manual = spec.get("manualSelector") is True

    errs = v.validate_object_meta(meta)
    generated = {CONTROLLER_UID: uid, JOB_NAME: name, LEGACY_CONTROLLER_UID: uid, LEGACY_JOB_NAME: name}
    selector = copy.deepcopy(spec.get("selector"))
    if not manual:
        # The API server labels the template and selects on the controller uid.
        labels = template["metadata"].setdefault("labels", {})
        for key in (LEGACY_JOB_NAME, JOB_NAME, LEGACY_CONTROLLER_UID, CONTROLLER_UID):
            labels.setdefault(key, generated[key])
        selector = selector if isinstance(selector, dict) else {}
        selector.setdefault("matchLabels", {}).setdefault(CONTROLLER_UID, uid)
        for key in (LEGACY_CONTROLLER_UID, LEGACY_JOB_NAME, CONTROLLER_UID, JOB_NAME):
            if labels[key] != generated[key]:
                errs.append(v.invalid(f"spec.template.metadata.labels[{key}]", labels, f"must be '{generated[key]}'"))
        if not v.validate_label_selector(selector, "spec.selector") and \
                not LabelSelector.parse(selector).matches(generated):
            errs.append(v.invalid("spec.selector", v.selector_value(selector), "`selector` not auto-generated"))
    errs += nonnegative(parallelism, "spec.parallelism")
    errs += nonnegative(completions, "spec.completions", optional=True)
    errs += nonnegative(spec.get("backoffLimit"), "spec.backoffLimit", optional=True)
    if mode not in ("NonIndexed", "Indexed"):
        errs.append(v.not_supported("spec.completionMode", mode, ["NonIndexed", "Indexed"]))
    elif mode == "Indexed" and completions is None:
        errs.append(v.required("spec.completions", "when completion mode is Indexed"))
    errs += template_errors(template)
    policy = template["spec"].get("restartPolicy") or "Always"
    if policy == "Always":
        errs.append(v.required("spec.template.spec.restartPolicy", 'valid values: "OnFailure", "Never"'))
    elif policy not in ("OnFailure", "Never"):
        errs.append(v.not_supported("spec.template.spec.restartPolicy", policy, ["OnFailure", "Never"]))
    if selector is None:
        errs.append(v.required("spec.selector"))
    else:
        errs += v.validate_label_selector(selector, "spec.selector")
        errs += selector_matches(selector, template, "spec.template.metadata.labels")
    if errs:
        raise InvalidObject("Job.batch", name, v.dedupe(errs))

    suspend = spec.get("suspend") is True
    count = 0 if suspend else min(parallelism, completions) if completions is not None else parallelism
    check_budget("Job", name, count, max_pods,
                  "spec.parallelism" if completions is None or parallelism <= completions else "spec.completions")
    owner = {"apiVersion": "batch/v1", "kind": "Job", "name": name, "uid": uid}
    if mode != "Indexed":
        pods = _replicas(template, count, names, f"{name}-", ns, owner, classes, first)
        count = 0
    else:
        pods = []
    for i in range(count):
        t = copy.deepcopy(template)
        prefix = f"{name}-"
        if mode == "Indexed":  # each pod carries its completion index and a stable hostname
            t["metadata"].setdefault("annotations", {})[COMPLETION_INDEX] = str(i)
            t["metadata"]["labels"][COMPLETION_INDEX] = str(i)
            t["spec"].setdefault("hostname", f"{name}-{i}")
            prefix = f"{name}-{i}-"
        pods.append(template_pod(t, names.generate(ns, prefix), ns, owner, classes, first + i))
    backoff = spec.get("backoffLimit")
    record = {"kind": "Job", "namespace": ns, "name": name, "uid": uid, "selector": selector,
              "parallelism": parallelism, "completions": completions, "completion_mode": mode,
              "suspend": suspend, "pods": [p.name for p in pods],
              # what the Job controller needs to make more pods later
              "template": template, "owner": owner, "prefix": f"{name}-",
              "backoff_limit": 6 if backoff is None else backoff,  # the batch/v1 default
              "prototype": pods[0] if pods and mode != "Indexed" else None}
    return record, pods


def controller_pod(record: dict, names: NameGenerator, created: int, classes: dict[str, dict],
                   index: int | None = None) -> Pod:
    """One more pod from a workload's template, as its controller creates it (a replacement,
    or a pod of a Job that was suspended): a fresh generated name, the next creation order."""
    ns = record["namespace"]
    if index is None and record.get("prototype") is not None:
        return _renamed(record["prototype"], names.generate(ns, record["prefix"]), created)
    t = copy.deepcopy(record["template"])
    prefix = record["prefix"]
    if index is not None:
        t["metadata"].setdefault("annotations", {})[COMPLETION_INDEX] = str(index)
        t["metadata"].setdefault("labels", {})[COMPLETION_INDEX] = str(index)
        t["spec"].setdefault("hostname", f"{record['name']}-{index}")
        prefix = f"{record['name']}-{index}-"
    pod = template_pod(t, names.generate(ns, prefix), ns, record["owner"], classes, created)
    if index is None:
        record["prototype"] = pod
    return pod


# ------------------------------------------------------------------ helpers


def _replicas(template: dict, count: int, names: NameGenerator, prefix: str, ns: str, owner: dict,
              classes, first: int) -> list[Pod]:
    """``count`` pods from one template: the first admitted in full, the others the same pod
    under their own names (what differs between a controller's pods), so a 100,000-replica
    Deployment costs one admission and 100,000 names."""
    if count <= 0:
        return []
    pod = template_pod(template, names.generate(ns, prefix), ns, owner, classes, first)
    return [pod] + [_renamed(pod, names.generate(ns, prefix), first + i) for i in range(1, count)]


def _renamed(pod: Pod, name: str, created: int) -> Pod:
    meta = dict(pod.raw["metadata"])
    meta["name"] = name
    return dataclasses.replace(
        pod, name=name, uid=stable_uid(pod.namespace, name), created=created,
        raw={**pod.raw, "metadata": meta}, labels=dict(pod.labels), annotations=dict(pod.annotations),
        node_selector=dict(pod.node_selector), tolerations=list(pod.tolerations),
        topology_spread_constraints=list(pod.topology_spread_constraints),
        host_ports=list(pod.host_ports), requests=dict(pod.requests))


