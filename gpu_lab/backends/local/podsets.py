"""StatefulSets, DaemonSets and Services on the local control plane.

kube-controller-manager's own StatefulSet and DaemonSet controllers make their pods; when
they are done for now is the rule every backend on a real API server shares
(``backends.podsets``). Services are created as they are (the API server allocates their
cluster IPs from the service CIDR; no kube-proxy runs: they only steer default spreading).
"""

from __future__ import annotations

from ...kube import KubeClient
from ..podsets import KINDS, PodSets, failed_create_reported

DEFAULT_SERVICE = ("default", "kubernetes")  # the API server's own: never deleted by reset

__all__ = ["DEFAULT_SERVICE", "KINDS", "PodSets", "delete_services", "failed_create_reported"]


def delete_services(client: KubeClient, namespace: str) -> None:
    """Every Service of ``namespace`` but the API server's own."""
    for svc in client.list("Service", namespace=namespace)["items"]:
        name = svc["metadata"]["name"]
        if (namespace, name) != DEFAULT_SERVICE:
            client.delete("Service", name, namespace=namespace, missing_ok=True)
