"""Scenarios: multi-document YAML of Kubernetes objects and gpu-lab NodePools.

``documents.load_documents`` reads YAML (a string, a file, or objects already loaded);
``parse_scenario`` admits every document the way ``kubectl create`` against
an API server would, and returns validated records. Nothing is half-applied:
the first problem raises a one-line ``GpuLabError`` before anything returns.

PriorityClasses are admitted before any pod, whatever the document order, so
a scenario may list its pods first.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass, field
from typing import Any

from ..errors import Forbidden, GpuLabError, InvalidObject
from . import validation as v
from .autoscaler import parse_autoscaler
from .disruptionbudget import parse_disruption_budget
from .documents import Source, flatten, load_documents
from .kueue.manifests import parse_kueue
from .limitrange import parse_limit_range
from .nodepool import expand_node_pool, node_from_manifest
from .objects import Node, Pod
from .parse import SYSTEM_PRIORITY_CLASSES, NameGenerator, parse_pod
from .podgroup import KINDS as GANG_KINDS
from .podgroup import RESOURCES as GANG_RESOURCES
from .podgroup import PodGroup, parse_pod_group, validate_workload
from .resourcequota import parse_resource_quota
from .service import parse_service
from .timing import check_timing
from .workloads import WORKLOAD_KINDS, expand_workload

SCHEDULER_CONFIG = ("kubescheduler.config.k8s.io/v1", "KubeSchedulerConfiguration")
PRIORITY_CLASS = ("scheduling.k8s.io/v1", "PriorityClass")
NODE_POOL = ("gpulab.dev/v1alpha1", "NodePool")
AUTOSCALER = ("gpulab.dev/v1alpha1", "Autoscaler")  # cluster-autoscaler's flags, or consolidation
# Dynamic Resource Allocation: collected here, admitted by each backend (gpu_lab.sim.dra, the API server).
DRA_KINDS = {("resource.k8s.io/v1", k) for k in ("DeviceClass", "ResourceClaim", "ResourceClaimTemplate",
                                                 "ResourceSlice", "DeviceTaintRule")}
KINDS = {("v1", "Node"), ("v1", "Pod"), ("v1", "Namespace"), SCHEDULER_CONFIG, PRIORITY_CLASS,
         NODE_POOL, AUTOSCALER} | WORKLOAD_KINDS | GANG_KINDS | DRA_KINDS
# How the API server names each resource in "already exists" messages.
RESOURCES = {"Node": "nodes", "Pod": "pods", "Namespace": "namespaces", "NodePool": "nodepools.gpulab.dev",
             "PriorityClass": "priorityclasses.scheduling.k8s.io", "Deployment": "deployments.apps",
             "ReplicaSet": "replicasets.apps", "Job": "jobs.batch", **GANG_RESOURCES}
SERVICE = ("v1", "Service")  # only its selector matters here: default spreading (model/service.py)
KINDS |= {SERVICE}
RESOURCES.update({"StatefulSet": "statefulsets.apps", "DaemonSet": "daemonsets.apps", "Service": "services"})
# Policy objects that change scheduling outcomes: PDBs steer preemption, quota and limit ranges
# are admission (model/disruptionbudget.py, resourcequota.py, limitrange.py).
PDB = ("policy/v1", "PodDisruptionBudget")
RESOURCE_QUOTA = ("v1", "ResourceQuota")
LIMIT_RANGE = ("v1", "LimitRange")
POLICY_KINDS = {PDB, RESOURCE_QUOTA, LIMIT_RANGE}
KINDS |= POLICY_KINDS
RESOURCES.update({"PodDisruptionBudget": "poddisruptionbudgets.policy", "ResourceQuota": "resourcequotas",
                  "LimitRange": "limitranges"})
HIGHEST_USER_PRIORITY = 1_000_000_000
# What one apply may create: Kubernetes is tested up to 150,000 pods and 5,000 nodes per
# cluster; past these a typo (replicas: 1000000000) would exhaust memory, not teach.
MAX_PODS = 150_000
MAX_DEVICES = 1_000_000  # device IDs the simulated device plugins advertise, all nodes together
SYSTEM_PREFIX = "system-"


@dataclass
class Scenario:
    nodes: list[Node] = field(default_factory=list)
    pods: list[Pod] = field(default_factory=list)
    priority_classes: dict[str, dict] = field(default_factory=dict)  # defined here, defaults filled
    scheduler_config: dict | None = None  # raw KubeSchedulerConfiguration
    namespaces: list[str] = field(default_factory=list)  # declared by Namespace documents
    node_pools: list[dict] = field(default_factory=list)
    workloads: list[dict] = field(default_factory=list)  # see workloads.expand_workload
    pod_groups: list[PodGroup] = field(default_factory=list)  # scheduling.k8s.io PodGroups (gangs)
    autoscaler: Any = None  # sim.autoscaler.AutoscalerSpec of the Autoscaler document, if any
    dra: list[dict] = field(default_factory=list)  # resource.k8s.io/v1 documents (DRA_KINDS), unchecked
    kueue: list[dict] = field(default_factory=list)  # kueue.x-k8s.io objects (sim/kueue checks them)
    services: list[dict] = field(default_factory=list)  # see service.parse_service
    disruption_budgets: list = field(default_factory=list)  # disruptionbudget.DisruptionBudget
    resource_quotas: list = field(default_factory=list)  # resourcequota.ResourceQuota
    limit_ranges: list = field(default_factory=list)  # limitrange.LimitRange
    documents: list[dict] = field(default_factory=list)


# ------------------------------------------------------------------ parsing


def parse_scenario(docs: list[dict], *, known_priority_classes: dict[str, dict] | None = None,
                   first_created: int = 0, names: NameGenerator | None = None) -> Scenario:
    """Admit every document; raise on the first object the API server would refuse.

    ``names`` generates the names of controller-made pods (``generateName``); a session
    passes its own, so names are reproducible from its seed and never collide with its pods.
    """
    names = names if names is not None else NameGenerator(0)
    with names.transaction():
        return _parse_scenario(docs, known_priority_classes, first_created, names)


def _parse_scenario(docs, known_priority_classes, first_created, names) -> Scenario:
    docs = flatten(list(docs), "<list>")
    for doc in docs:
        _check_kind(doc)
    sc = Scenario(documents=docs)
    known = dict(known_priority_classes or {})
    for doc in docs:  # PriorityClasses first: pods resolve them at admission
        if _gvk(doc) == PRIORITY_CLASS:
            name, pc = _priority_class(doc, known)
            known[name] = sc.priority_classes[name] = pc
    seen: set[tuple[str, str, str]] = set()
    created = first_created
    devices = 0
    for doc in docs:
        gvk = _gvk(doc)
        kind = gvk[1]
        if gvk == PRIORITY_CLASS:
            continue
        if gvk == SCHEDULER_CONFIG:
            if sc.scheduler_config is not None:
                raise GpuLabError("KubeSchedulerConfiguration: a scenario holds at most one "
                                  "(kube-scheduler reads a single --config file)")
            sc.scheduler_config = copy.deepcopy(doc)
        elif kind == "Namespace":
            ns = _meta(doc).get("name")
            errs = v.validate_object_meta(_meta(doc), namespaced=False, name_check=v.is_dns1123_label)
            if errs:
                raise InvalidObject("Namespace", ns if isinstance(ns, str) else "", errs)
            _claim(seen, "Namespace", "", ns)
            sc.namespaces.append(str(ns))  # a DNS label once validated
        elif kind == "Node":
            sc.nodes.append(_node(doc, seen))
            devices += _device_count(sc.nodes[-1])
            _check_devices(devices, doc, "status.capacity")
        elif kind == "NodePool":
            nodes = expand_node_pool(doc, max_devices=MAX_DEVICES - devices)
            devices += sum(_device_count(n) for n in nodes)
            _claim(seen, "NodePool", "", _meta(doc).get("name"))
            for n in nodes:
                _claim(seen, "Node", "", n.name)
            sc.node_pools.append(doc)
            sc.nodes += nodes
        elif _is_kueue(gvk):
            sc.kueue.append(doc)
        elif gvk in DRA_KINDS:
            sc.dra.append(doc)
        elif gvk == SERVICE:
            svc = parse_service(doc)
            _claim(seen, "Service", svc["namespace"], svc["name"])
            sc.services.append(svc)
        elif gvk in POLICY_KINDS:
            _policy(sc, doc, seen)
        elif gvk == AUTOSCALER:
            if sc.autoscaler is not None:
                raise GpuLabError("Autoscaler: a scenario holds at most one (cluster-autoscaler runs once "
                                  "per cluster)")
            sc.autoscaler = parse_autoscaler(doc)
        elif gvk in GANG_KINDS:  # the native Workload API (model/podgroup.py)
            if kind == "PodGroup":
                group = parse_pod_group(doc, known)
                _claim(seen, kind, group.namespace, group.name)
                sc.pod_groups.append(group)
            else:
                _claim(seen, kind, *validate_workload(doc))
        elif kind == "Pod":
            if len(sc.pods) >= MAX_PODS:
                raise GpuLabError(f"more than {MAX_PODS} pods in one apply (Kubernetes is tested up to "
                                  f"{MAX_PODS} pods in a cluster)")
            pod = parse_pod(doc, priority_classes=known, created=created, names=names)
            _claim(seen, "Pod", pod.namespace, pod.name)
            sc.pods.append(pod)
            created += 1
        else:
            record, pods = expand_workload(doc, priority_classes=known, first_created=created,
                                           names=names, max_pods=MAX_PODS - len(sc.pods))
            _claim(seen, kind, record["namespace"], record["name"])
            if "replicaset" in record:
                _claim(seen, "ReplicaSet", record["namespace"], record["replicaset"])
            for p in pods:
                _claim(seen, "Pod", p.namespace, p.name)
            record["raw"] = doc
            sc.workloads.append(record)
            sc.pods += pods
            created += len(pods)
    check_timing(sc)  # gpu-lab's clock annotations: refused alike on every backend
    if sc.kueue:  # as Kueue's CRDs and webhooks admit them (a Namespace's labels matter to them)
        parse_kueue(sc.kueue + [d for d in docs if _gvk(d) == ("v1", "Namespace")])
    return sc


KUEUE_GROUPS = ("kueue.x-k8s.io/", "config.kueue.x-k8s.io/")


def _is_kueue(gvk: tuple[str, str]) -> bool:
    return isinstance(gvk[0], str) and gvk[0].startswith(KUEUE_GROUPS)


def _device_count(node: Node) -> int:
    """Device IDs the node's device plugin advertises (a plain Node: one per nvidia.com/gpu)."""
    if node.devices:
        return sum(len(ids) for ids in node.devices.values())
    return node.capacity.get("nvidia.com/gpu", 0)


def _check_devices(total: int, doc: dict, field: str) -> None:
    if total > MAX_DEVICES:
        name = _meta(doc).get("name")
        raise GpuLabError(f'{doc.get("kind")} "{name}": {field}: the scenario\'s nodes advertise {total} '
                          f"GPU devices; the simulator holds at most {MAX_DEVICES}")


def load_scenario(src: Source, **kw: Any) -> Scenario:
    """``parse_scenario(load_documents(src), **kw)``."""
    return parse_scenario(load_documents(src), **kw)


def _gvk(doc: dict) -> tuple[Any, Any]:  # as written: checked by _check_kind
    return doc.get("apiVersion"), doc.get("kind")


def _meta(doc: dict) -> dict:
    return metadata_raw if isinstance(metadata_raw := doc.get("metadata"), dict) else {}


def _check_kind(doc: dict) -> None:
    """The decoder's and kubectl's refusals, before any object is looked at."""
    api_version, kind = _gvk(doc)
    if not kind or not api_version:
        data = json.dumps(doc, sort_keys=True, separators=(",", ":"), default=str)
        missing = "Kind" if not kind else "apiVersion"
        raise GpuLabError(f"Object '{missing}' is missing in '{data}'")
    if (api_version, kind) not in KINDS and not _is_kueue((api_version, kind)):
        raise GpuLabError(f'no matches for kind "{kind}" in version "{api_version}"')


def _claim(seen: set, kind: str, namespace: str, name: Any) -> None:
    key = (kind, namespace, str(name))
    if key in seen:
        raise GpuLabError(f'{RESOURCES[kind]} "{name}" already exists')
    seen.add(key)


def _policy(sc: Scenario, doc: dict, seen: set) -> None:
    """A PodDisruptionBudget, ResourceQuota or LimitRange, validated; the backends enforce them."""

    kind = doc["kind"]
    parse: Any
    out: list
    parse, out = {"PodDisruptionBudget": (parse_disruption_budget, sc.disruption_budgets),
                  "ResourceQuota": (parse_resource_quota, sc.resource_quotas),
                  "LimitRange": (parse_limit_range, sc.limit_ranges)}[kind]
    obj: Any = parse(doc)
    _claim(seen, kind, obj.namespace, obj.name)
    out.append(obj)


def _node(doc: dict, seen: set) -> Node:
    node = node_from_manifest(doc)
    _claim(seen, "Node", "", node.name)
    return node


def _priority_class(doc: dict, known: dict[str, dict]) -> tuple[str, dict]:
    """``ValidatePriorityClass`` plus the Priority admission plugin's single-default rule."""
    meta = _meta(doc)
    name = name_raw if isinstance(name_raw := meta.get("name"), str) else ""
    errs = v.validate_object_meta(meta, namespaced=False)
    value = doc.get("value")
    if value is None:
        errs.append(v.required("value"))
    elif isinstance(value, bool) or not isinstance(value, int) or not -(2**31) <= value < 2**31:
        errs.append(v.invalid("value", value, "must be a 32-bit integer"))
    elif name.startswith(SYSTEM_PREFIX):
        system = SYSTEM_PRIORITY_CLASSES.get(name)
        if system is None:
            reason = f"{name} is not a known system priority class"
        elif value != system["value"]:
            reason = f"value of {name} PriorityClass must be {system['value']}"
        else:
            reason = ""  # a valid copy of a built-in class: "already exists" below
        if reason:
            errs.append(v.forbidden("metadata.name", f"priority class names with '{SYSTEM_PREFIX}' prefix "
                                    f"are reserved for system use only. error: {reason}"))
    elif value > HIGHEST_USER_PRIORITY:
        errs.append(v.forbidden("value", f"maximum allowed value of a user defined priority is {HIGHEST_USER_PRIORITY}"))
    policy = doc.get("preemptionPolicy")
    if policy is not None and policy not in ("PreemptLowerPriority", "Never"):
        errs.append(v.not_supported("preemptionPolicy", policy, ["PreemptLowerPriority", "Never"]))
    if errs:
        raise InvalidObject("PriorityClass.scheduling.k8s.io", name, v.dedupe(errs))
    if name in known or name in SYSTEM_PRIORITY_CLASSES:
        raise GpuLabError(f'{RESOURCES["PriorityClass"]} "{name}" already exists')
    if doc.get("globalDefault") is True:
        defaults = sorted((c.get("value", 0), n) for n, c in known.items() if c.get("globalDefault"))
        if defaults:
            raise Forbidden(RESOURCES["PriorityClass"], name, f"PriorityClass {defaults[0][1]} is already "
                            "marked as default. Only one default can exist")
    pc = copy.deepcopy(doc)
    pc.setdefault("preemptionPolicy", "PreemptLowerPriority")
    pc["globalDefault"] = doc.get("globalDefault") is True
    return name, pc
