"""LocalQueue and WorkloadPriorityClass manifests: their CRD schemas (no webhook).

config/components/crd/bases/kueue.x-k8s.io_localqueues.yaml and
kueue.x-k8s.io_workloadpriorityclasses.yaml (v0.17.0). A LocalQueue naming a
ClusterQueue that does not exist is valid: Kueue reports it in the LocalQueue's
status and in its workloads' conditions.
"""

from __future__ import annotations

from .objects import LocalQueue, WorkloadPriorityClass
from .validation import NAME_PATTERN, check, mapping, opened

STOP_POLICIES = ("None", "Hold", "HoldAndDrain")


def parse_local_queue(doc: dict) -> LocalQueue:
    meta = dict(metadata_raw) if isinstance(metadata_raw := doc.get("metadata"), dict) else {}
    meta["namespace"] = meta.get("namespace") or "default"
    name, s = opened(meta, namespaced=True)
    spec = mapping(s, doc.get("spec"), "spec")
    if spec.get("clusterQueue") is not None and not s.wrong_type("spec.clusterQueue", spec["clusterQueue"], "string"):
        s.pattern("spec.clusterQueue", spec["clusterQueue"], NAME_PATTERN, 253)
    s.enum("spec.stopPolicy", spec.get("stopPolicy"), STOP_POLICIES)
    check("LocalQueue", name, s.result())
    return LocalQueue(str(meta["namespace"]), name, str(spec.get("clusterQueue") or ""),
                      spec.get("stopPolicy") or "None")


def parse_priority_class(doc: dict) -> WorkloadPriorityClass:
    meta = metadata_raw if isinstance(metadata_raw := doc.get("metadata"), dict) else {}
    name, s = opened(meta, namespaced=False)
    value = doc.get("value")
    if value is None:
        s.required("value")
    else:
        s.wrong_type("value", value, "integer")
    if doc.get("description") is not None:
        s.wrong_type("description", doc["description"], "string")
    check("WorkloadPriorityClass", name, s.result())
    assert value is not None  # check() raised on the required value
    return WorkloadPriorityClass(name, int(value), str(doc.get("description") or ""))
