"""Well-known names more than one part of gpu-lab uses, defined once.

Kubernetes' own (the default scheduler, system namespaces, terminal pod phases, the API
server's request limit), NVIDIA's extended resource, Kueue's queue label, and gpu-lab's
own labels and annotations under ``gpulab.dev/``, and the stable ids derived from names.
A name only one module uses stays in that module. The bottom layer, beside ``errors``.
"""

from __future__ import annotations

import hashlib

#: ``spec.schedulerName`` of a pod that names none, and of kube-scheduler's default profile
DEFAULT_SCHEDULER = "default-scheduler"
#: namespaces every cluster has; gpu-lab never creates or deletes them
SYSTEM_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
#: pod phases after which a pod holds nothing on its node
TERMINAL_PHASES = ("Succeeded", "Failed")
#: the API server's maxRequestBodyBytes (one object per request)
MAX_REQUEST_BYTES = 3 * 1024 * 1024

#: gpu-lab's version (pyproject.toml's; the plugin image's tag), ``gpu_lab.__version__``
VERSION = "0.1.0"

#: the NVIDIA device plugin's whole-GPU resource (also cluster-autoscaler's GpuConfig name)
GPU_RESOURCE = "nvidia.com/gpu"
#: Kueue: the LocalQueue a Job is submitted to
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"

#: gpu-lab: the NodePool a node was made from
POOL_LABEL = "gpulab.dev/pool"
#: gpu-lab's node agent: the device IDs each container of a pod was given (JSON)
DEVICES_ANNOTATION = "gpulab.dev/devices"

def stable_uid(*parts: str) -> str:
    """A UUID-shaped id derived from names, so runs are reproducible."""
    h = hashlib.sha1("/".join(parts).encode()).hexdigest()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


__all__ = [
    "DEFAULT_SCHEDULER",
    "DEVICES_ANNOTATION",
    "GPU_RESOURCE",
    "MAX_REQUEST_BYTES",
    "POOL_LABEL",
    "QUEUE_LABEL",
    "SYSTEM_NAMESPACES",
    "TERMINAL_PHASES",
    "VERSION",
    "stable_uid",
]
