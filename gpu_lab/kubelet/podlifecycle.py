"""What a kubelet does with a pod bound to its node, minus the containers.

Pure functions used by the node agent; admission itself (devices, then the resource-fit
predicate) is :mod:`gpu_lab.kubelet.admission`, shared with the simulator:

* ``pod_requests``: the pod's effective requests (``resourcehelper.PodRequests``:
  app containers summed, at least the largest init container, plus overhead), in
  gpu-lab's internal units (cpu in millicores, the rest in whole units), which the
  admission predicate compares with the node's;
* ``device_requests``: what each container asks of the device manager, in the
  kubelet's order;
* the status documents: running, completed (exit 0), rejected.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

from ..errors import GpuLabError, QuantityError
from ..model.duration import DURATION_ANNOTATION, parse_duration  # noqa: F401
from ..model.objects import ContainerResources, Pod, compute_pod_requests
from ..model.parse import internal_resources
from ..names import DEVICES_ANNOTATION  # noqa: F401  (the node agent and tests read it here)

#: same annotation and Go-duration syntax as the simulator (gpu_lab.backends.sim)
ENV_ANNOTATION = "gpulab.dev/env"
#: {container: [CDI device IDs]} of a pod's DRA devices (what the runtime would inject)
CDI_ANNOTATION = "gpulab.dev/cdi-devices"


def pod_key(pod: Mapping[str, Any]) -> str:
    meta = pod.get("metadata") or {}
    return f"{meta.get('namespace', 'default')}/{meta.get('name', '')}"


def _containers(spec: Mapping[str, Any], field: str) -> list[ContainerResources]:
    out = []
    for c in spec.get(field) or []:
        res = c.get("resources") or {}
        try:
            requests = internal_resources(res.get("requests"))
        except (GpuLabError, QuantityError, ValueError):
            requests = {}
        out.append(ContainerResources(str(c.get("name") or ""), requests, {}))
    return out


def pod_requests(pod: Mapping[str, Any]) -> dict[str, int]:
    """Effective requests of an API-server pod (internal units, zeros dropped)."""
    spec = pod.get("spec") or {}
    model = Pod(namespace="", name="")
    model.containers = _containers(spec, "containers")
    model.init_containers = _containers(spec, "initContainers")
    try:
        model.overhead = internal_resources(spec.get("overhead"))
    except (GpuLabError, QuantityError, ValueError):
        model.overhead = {}
    compute_pod_requests(model)
    return dict(model.requests)


def device_requests(
    pod: Mapping[str, Any], device_resources: set[str]
) -> list[tuple[str, str, int]]:
    """(container, resource, count) for every device-plugin resource a container asks
    for: init containers first, then app containers, as the kubelet allocates them."""
    spec = pod.get("spec") or {}
    out = []
    for field in ("initContainers", "containers"):
        for c in _containers(spec, field):
            for r, n in sorted(c.requests.items()):
                if r in device_resources and n > 0:
                    out.append((c.name, r, n))
    return out


# ---------------------------------------------------------------------- statuses


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _container_names(pod: Mapping[str, Any], field: str) -> list[tuple[str, str]]:
    return [
        (str(c.get("name", "")), str(c.get("image", "")))
        for c in (pod.get("spec") or {}).get(field) or []
    ]


def container_id(uid: str, name: str) -> str:
    return f"gpu-lab://{uid.replace('-', '')[:24]}-{name}"


def _condition(kind: str, status: str, at: str, reason: str | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {
        "type": kind,
        "status": status,
        "lastProbeTime": None,
        "lastTransitionTime": at,
    }
    if reason:
        c["reason"] = reason
    return c


def _completed(name: str, image: str, uid: str, ready: bool, started: str, finished: str) -> dict:
    """A container status that ran to completion (exit code 0)."""
    return {
        "name": name,
        "image": image,
        "imageID": "",
        "containerID": container_id(uid, name),
        "ready": ready,
        "started": False,
        "restartCount": 0,
        "state": {
            "terminated": {
                "exitCode": 0,
                "reason": "Completed",
                "startedAt": started,
                "finishedAt": finished,
                "containerID": container_id(uid, name),
            }
        },
    }


def _init_statuses(pod: Mapping[str, Any], uid: str, started: str) -> list[dict]:
    # init containers finished before the app containers started; "ready" as the kubelet reports them
    return [_completed(name, image, uid, True, started, started)
            for name, image in _container_names(pod, "initContainers")]


def running_status(
    pod: Mapping[str, Any], host_ip: str, pod_ip: str, started: str | None = None
) -> dict[str, Any]:
    """``status`` of a pod whose containers all run (a strategic-merge patch body:
    conditions merge by type, so PodScheduled stays)."""
    uid = (pod.get("metadata") or {}).get("uid", "")
    at = started or _now()
    status: dict[str, Any] = {
        "phase": "Running",
        "conditions": [
            _condition("PodReadyToStartContainers", "True", at),
            _condition("Initialized", "True", at),
            _condition("Ready", "True", at),
            _condition("ContainersReady", "True", at),
        ],
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": at,
        "containerStatuses": [
            {
                "name": name,
                "image": image,
                "imageID": "",
                "containerID": container_id(uid, name),
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": at}},
            }
            for name, image in _container_names(pod, "containers")
        ],
    }
    inits = _init_statuses(pod, uid, at)
    if inits:
        status["initContainerStatuses"] = inits
    return status


def succeeded_status(
    pod: Mapping[str, Any], started: str | None, finished: str | None = None
) -> dict:
    """``status`` of a pod whose containers all exited 0 (restartPolicy Never/OnFailure)."""
    uid = (pod.get("metadata") or {}).get("uid", "")
    end = finished or _now()
    start = started or end
    return {
        "phase": "Succeeded",
        "conditions": [
            _condition("PodReadyToStartContainers", "False", end),
            _condition("Ready", "False", end, "PodCompleted"),
            _condition("ContainersReady", "False", end, "PodCompleted"),
        ],
        "containerStatuses": [_completed(name, image, uid, False, start, end)
                              for name, image in _container_names(pod, "containers")],
    }


def rejected_status(reason: str, message: str) -> dict[str, Any]:
    """``status`` of a pod the kubelet refused to admit (``kubelet.rejectPod``)."""
    return {"phase": "Failed", "reason": reason, "message": message}


def evicted_status(message: str) -> dict[str, Any]:
    """``status`` of a pod the kubelet evicts (the eviction manager's ``evictPod``): Failed,
    reason Evicted, and the DisruptionTarget condition saying the kubelet ended it."""
    now = _now()
    target = {**_condition("DisruptionTarget", "True", now, "TerminationByKubelet"), "message": message}
    return {"phase": "Failed", "reason": "Evicted", "message": message,
            "conditions": [target, _condition("Ready", "False", now, "PodFailed")]}


def parse_time(text: str | None) -> float | None:
    """An RFC 3339 time as seconds since the epoch (None when absent or unreadable)."""
    if not text:
        return None
    try:
        return (
            dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")
            .replace(tzinfo=dt.timezone.utc)
            .timestamp()
        )
    except ValueError:
        return None
