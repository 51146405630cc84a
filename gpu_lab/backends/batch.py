"""What one ``apply`` hands the scheduler, on every backend: the order a batch is created in.

kube-scheduler's queue pops pods by priority, then by the time each entered the queue. On a
running cluster a pod enters when it is created, so the order objects are created in is the
order equal pods are tried. Every backend creates a batch the way the simulator queues it:
objects that make no pods first (in file order), then the objects that make pods, higher
priority first and otherwise in file order, each controller's pods before the next object.
"""

from __future__ import annotations

POD_MAKERS = ("Pod", "Deployment", "ReplicaSet", "Job", "StatefulSet", "DaemonSet")


def pods_of(doc: dict, pods: list) -> list:
    """The parsed pods ``doc`` makes (a Deployment's through its ReplicaSet)."""
    meta = doc.get("metadata") or {}
    ns, name, kind = meta.get("namespace", "default"), meta.get("name"), doc.get("kind")
    if kind == "Pod":
        return [p for p in pods if p.owner_kind is None and p.namespace == ns and p.name == name]
    if kind == "Deployment":
        return [p for p in pods if p.owner_kind == "ReplicaSet" and p.namespace == ns
                and (p.owner_name or "").rsplit("-", 1)[0] == name]
    return [p for p in pods if p.owner_kind == kind and p.namespace == ns and p.owner_name == name]


def creation_order(docs: list[dict], pods: list) -> list[dict]:
    """``docs`` in the order to create them: what makes no pods first, then the pod makers by
    their pods' priority (highest first; stable, so file order among equals)."""
    others = [d for d in docs if d.get("kind") not in POD_MAKERS]
    makers = sorted((d for d in docs if d.get("kind") in POD_MAKERS),
                    key=lambda d: -max((p.priority for p in pods_of(d, pods)), default=0))
    return others + makers


def pods_in_order(docs: list[dict], pods: list) -> list:
    """``pods`` in the order the batch creates them (the order admission, quota included,
    sees them): each pod maker's in ``creation_order``, then any no document here names."""
    ordered = [p for d in creation_order(docs, pods) for p in pods_of(d, pods)]
    seen = {p.key for p in ordered}
    return ordered + [p for p in pods if p.key not in seen]
