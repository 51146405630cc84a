"""The ``resource.k8s.io/v1`` objects of a scenario on the local backend: which they are, the
order they are created in, and how ``reset`` removes them.

The API server is their only judge here: a CEL selector that does not compile, a request
for a DeviceClass that does not exist or too many devices are refused (or left pending) in
kube-apiserver's and kube-scheduler's own words. DeviceClasses are created before the
claims and templates that name them, and all of them before the pods that use them.
"""

from __future__ import annotations

import contextlib
from typing import Any

from ..kube import ApiError, KubeClient
from .resourceslices import API_VERSION

GROUP = "resource.k8s.io"
#: creation order; ``reset`` deletes in reverse (ResourceSlices go with their Nodes)
KINDS = ("DeviceClass", "DeviceTaintRule", "ResourceClaimTemplate", "ResourceClaim")
CLUSTER_SCOPED = {"DeviceClass", "DeviceTaintRule", "ResourceSlice"}


def is_dra(doc: Any) -> bool:
    return isinstance(doc, dict) and str(doc.get("apiVersion", "")).split("/")[0] == GROUP


def order(doc: dict) -> int:
    kind = doc.get("kind")
    return KINDS.index(kind) if kind in KINDS else len(KINDS)


def namespace_of(doc: dict) -> str | None:
    if doc.get("kind") in CLUSTER_SCOPED:
        return None
    return (doc.get("metadata") or {}).get("namespace", "default")


def delete_all(client: KubeClient) -> None:
    """Every claim, template, taint rule and DeviceClass (the node agent installs NVIDIA's
    DeviceClasses again when it starts)."""
    for kind in reversed(KINDS):
        with contextlib.suppress(ApiError):
            for obj in client.list(kind, api_version=API_VERSION)["items"]:
                meta = obj["metadata"]
                client.delete(kind, meta["name"], namespace=meta.get("namespace"),
                              api_version=API_VERSION, missing_ok=True)


def left(client: KubeClient) -> bool:
    """Whether claims or ResourceSlices are still there (a claim waits for its pods' removal,
    a slice for the garbage collector once its Node is gone)."""
    with contextlib.suppress(ApiError):
        for kind in ("ResourceClaim", "ResourceSlice"):
            if client.list(kind, api_version=API_VERSION)["items"]:
                return True
    return False


def evicts(doc: dict) -> bool:
    """A DeviceTaintRule whose taint evicts the pods using the devices it selects."""
    return doc.get("kind") == "DeviceTaintRule" and (
        ((doc.get("spec") or {}).get("taint") or {}).get("effect") == "NoExecute")


def evictions_done(client: KubeClient, names: list[str]) -> bool:
    """Whether kube-controller-manager's device-taint-eviction controller has seen each rule
    (a condition for its generation) and no pod it is evicting is left: none that holds a
    claim with a device the rule selects (and no toleration for its taint key). Its own
    status says so only every 10 s (``ruleStatusPeriod``); the pods are gone sooner."""
    claims = client.list("ResourceClaim", api_version=API_VERSION)["items"]
    pods = {p["metadata"]["uid"]: p for p in client.list("Pod")["items"]}
    for name in names:
        rule = client.get("DeviceTaintRule", name, api_version=API_VERSION)
        gen = rule["metadata"].get("generation")
        if not any(c.get("type") == "EvictionInProgress" and c.get("observedGeneration") == gen
                   for c in (rule.get("status") or {}).get("conditions") or []):
            return False
        for claim in claims:
            if any(pods.get(r.get("uid")) is not None for r in _victims(rule, claim)):
                return False
    return True


def _victims(rule: dict, claim: dict) -> list[dict]:
    """The claim's consumers, when one of its devices is selected by ``rule`` untolerated."""
    sel = rule["spec"].get("deviceSelector") or {}
    taint = rule["spec"].get("taint") or {}
    status = claim.get("status") or {}
    for r in ((status.get("allocation") or {}).get("devices") or {}).get("results") or []:
        if any(sel.get(f) not in (None, r.get(f)) for f in ("driver", "pool", "device")):
            continue
        if not any(_tolerates(t, taint) for t in r.get("tolerations") or []):
            return list(status.get("reservedFor") or [])
    return []


def _tolerates(toleration: dict, taint: dict) -> bool:
    """A DeviceToleration matching a taint (the rules of v1 Pod tolerations)."""
    if toleration.get("effect") not in (None, "", taint.get("effect")):
        return False
    if toleration.get("operator") == "Exists":
        return toleration.get("key") in (None, "", taint.get("key"))
    return (toleration.get("key") == taint.get("key")
            and toleration.get("value", "") == taint.get("value", ""))


def claim_gated(client: KubeClient, pods: list[dict]) -> set[tuple[str, str]]:
    """Pods that kube-scheduler's DynamicResources plugin keeps out of its queue (PreEnqueue)
    because a claim they name does not exist: a ResourceClaim given by name, or the claim of a
    template that the resourceclaim controller could not create (it says why in a
    FailedResourceClaimCreation event). The scheduler says nothing about them, so no wait
    would end for them otherwise."""
    users = [p for p in pods if p["spec"].get("resourceClaims") and not p["spec"].get("nodeName")
             and (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")]
    if not users:
        return set()
    claims = {(c["metadata"]["namespace"], c["metadata"]["name"])
              for c in client.list("ResourceClaim", api_version=API_VERSION)["items"]}
    failed = {e["involvedObject"].get("uid") for e in client.list("Event")["items"]
              if e.get("reason") == "FailedResourceClaimCreation"}
    out = set()
    for p in users:
        ns, name = p["metadata"].get("namespace", "default"), p["metadata"]["name"]
        made = {s.get("name"): s.get("resourceClaimName")
                for s in (p.get("status") or {}).get("resourceClaimStatuses") or []}
        for entry in p["spec"]["resourceClaims"]:
            claim = entry.get("resourceClaimName") or made.get(entry.get("name"))
            missing = (ns, claim) not in claims if claim else (
                entry.get("name") not in made and p["metadata"]["uid"] in failed)
            if missing:
                out.add((ns, name))
    return out
