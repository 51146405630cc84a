"""Small manifests for the clock and controller tests."""

from __future__ import annotations


def pool(name: str = "a100", nodes: int = 1, gpus: int = 8) -> dict:
    return {"apiVersion": "gpulab.dev/v1alpha1", "kind": "NodePool", "metadata": {"name": name},
            "spec": {"count": nodes, "gpu": {"model": "A100-SXM4-80GB", "count": gpus}}}


def job(name: str, pods: int, *, gpus: int = 1, duration: str | None = "1h", annotations: dict | None = None,
        priority_class: str | None = None, backoff_limit: int | None = None, completions: int | None = None,
        pod_annotations: dict | None = None) -> dict:
    template_ann = {"gpulab.dev/duration": duration} if duration else {}
    template_ann.update(pod_annotations or {})
    spec: dict = {"restartPolicy": "Never",
                  "containers": [{"name": "w", "image": "trainer",
                                  "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    job_spec: dict = {"parallelism": pods, "completions": pods if completions is None else completions,
                      "template": {"metadata": {"annotations": template_ann}, "spec": spec}}
    if backoff_limit is not None:
        job_spec["backoffLimit"] = backoff_limit
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "annotations": dict(annotations or {})}, "spec": job_spec}


def rendezvous(name: str, pods: int, **kw) -> dict:
    ann = {"gpulab.dev/rendezvous": "true", **kw.pop("annotations", {})}
    return job(name, pods, annotations=ann, **kw)


def pod(name: str, gpus: int = 1, duration: str | None = None, annotations: dict | None = None,
        priority_class: str | None = None) -> dict:
    ann = dict(annotations or {})
    if duration:
        ann["gpulab.dev/duration"] = duration
    spec: dict = {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}
    if priority_class:
        spec["priorityClassName"] = priority_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": ann}, "spec": spec}


def priority_class(name: str, value: int, never: bool = False) -> dict:
    doc = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass", "metadata": {"name": name},
           "value": value}
    if never:
        doc["preemptionPolicy"] = "Never"
    return doc
