"""The Warning events the kubelet records on a pod (a rejected admission, an eviction, claims
not prepared), in the shape ``kubectl describe pod`` and ``kubectl get events`` show."""

from __future__ import annotations

import contextlib
import uuid

from ..kube import ApiError, KubeClient
from . import nodestatus as ns


def warning(client: KubeClient, node: str, pod: dict, reason: str, message: str) -> None:
    """Record one Warning event on ``pod`` from the kubelet of ``node`` (best effort)."""
    meta = pod["metadata"]
    now = ns.rfc3339()
    event = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{meta['name']}.{uuid.uuid4().hex[:16]}",
            "namespace": meta["namespace"],
        },
        "involvedObject": {
            "apiVersion": "v1",
            "kind": "Pod",
            "name": meta["name"],
            "namespace": meta["namespace"],
            "uid": meta["uid"],
            "resourceVersion": meta.get("resourceVersion", ""),
        },
        "reason": reason,
        "message": message,
        "type": "Warning",
        "source": {"component": "kubelet", "host": node},
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
        "reportingComponent": "kubelet",
        "reportingInstance": node,
    }
    with contextlib.suppress(ApiError):
        client.create(event)
