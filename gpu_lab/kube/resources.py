"""Kinds to REST resources: ``Pod`` -> ``/api/v1/namespaces/<ns>/pods``.

The kinds gpu-lab creates resolve from :data:`BUILTIN` without a request; anything else
(CRDs, aggregated groups) through API discovery in :class:`~gpu_lab.kube.client.KubeClient`.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

#: (apiVersion, kind) -> (plural, namespaced); enough for everything gpu-lab creates
BUILTIN: dict[tuple[str, str], tuple[str, bool]] = {
    ("v1", "Namespace"): ("namespaces", False),
    ("v1", "Node"): ("nodes", False),
    ("v1", "Pod"): ("pods", True),
    ("v1", "Service"): ("services", True),
    ("v1", "Endpoints"): ("endpoints", True),
    ("v1", "ConfigMap"): ("configmaps", True),
    ("v1", "Secret"): ("secrets", True),
    ("v1", "ServiceAccount"): ("serviceaccounts", True),
    ("v1", "Event"): ("events", True),
    ("v1", "LimitRange"): ("limitranges", True),
    ("v1", "ResourceQuota"): ("resourcequotas", True),
    ("v1", "PersistentVolume"): ("persistentvolumes", False),
    ("v1", "PersistentVolumeClaim"): ("persistentvolumeclaims", True),
    ("apps/v1", "Deployment"): ("deployments", True),
    ("apps/v1", "ReplicaSet"): ("replicasets", True),
    ("apps/v1", "StatefulSet"): ("statefulsets", True),
    ("apps/v1", "DaemonSet"): ("daemonsets", True),
    ("batch/v1", "Job"): ("jobs", True),
    ("batch/v1", "CronJob"): ("cronjobs", True),
    ("coordination.k8s.io/v1", "Lease"): ("leases", True),
    ("scheduling.k8s.io/v1", "PriorityClass"): ("priorityclasses", False),
    ("events.k8s.io/v1", "Event"): ("events", True),
    ("policy/v1", "PodDisruptionBudget"): ("poddisruptionbudgets", True),
    ("node.k8s.io/v1", "RuntimeClass"): ("runtimeclasses", False),
    ("rbac.authorization.k8s.io/v1", "Role"): ("roles", True),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): ("rolebindings", True),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): ("clusterroles", False),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): ("clusterrolebindings", False),
    ("resource.k8s.io/v1", "DeviceClass"): ("deviceclasses", False),
    ("resource.k8s.io/v1", "ResourceClaim"): ("resourceclaims", True),
    ("resource.k8s.io/v1", "ResourceClaimTemplate"): ("resourceclaimtemplates", True),
    ("resource.k8s.io/v1", "ResourceSlice"): ("resourceslices", False),
    ("resource.k8s.io/v1", "DeviceTaintRule"): ("devicetaintrules", False),
}


@dataclass(frozen=True)
class Resource:
    api_version: str
    kind: str
    plural: str
    namespaced: bool

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None):
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        parts = [base]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{quote(namespace, safe='')}")
        parts.append(self.plural)
        if name:
            parts.append(quote(name, safe=""))
        if sub:
            parts.append(sub)
        return "/".join(parts)


def builtin(kind: str, api_version: str | None = None) -> Resource | None:
    """``kind`` (Kind, plural or lower-case singular) among :data:`BUILTIN`, else None."""
    want = kind.lower()
    for (av, k), (plural, namespaced) in BUILTIN.items():
        if api_version not in (None, av):
            continue
        if want in (k.lower(), plural):
            return Resource(av, k, plural, namespaced)
    return None


def discovered(kind: str, api_version: str, resources: list[dict]) -> Resource | None:
    """``kind`` among a discovery document's ``resources`` (subresources left out)."""
    want = kind.lower()
    for r in resources:
        if want in (r["kind"].lower(), r["name"], (r.get("singularName") or "").lower()):
            return Resource(api_version, r["kind"], r["name"], r["namespaced"])
    return None
