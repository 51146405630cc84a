"""Builders for the Kueue model tests: the manifests users apply, workloads, decisions."""

from __future__ import annotations

from gpu_lab.sim.kueue import Admit, Evict, Kueue, Pending, WorkloadSpec, parse_kueue

V = "kueue.x-k8s.io/v1beta2"


def flavor(name, labels=None, taints=None, tolerations=None):
    spec = {}
    if labels:
        spec["nodeLabels"] = labels
    if taints:
        spec["nodeTaints"] = taints
    if tolerations:
        spec["tolerations"] = tolerations
    return {"apiVersion": V, "kind": "ResourceFlavor", "metadata": {"name": name}, "spec": spec}


def cluster_queue(name, quotas, *, resources=("nvidia.com/gpu",), cohort=None, strategy=None,
                  preemption=None, selector=None, **extra):
    """``quotas``: [(flavor, {resource: nominal or dict of quota fields}), ...], one resource group."""
    flavors = []
    for fname, amounts in quotas:
        rs = []
        for res in resources:
            q = amounts[res]
            rs.append({"name": res, **(q if isinstance(q, dict) else {"nominalQuota": q})})
        flavors.append({"name": fname, "resources": rs})
    spec = {"namespaceSelector": {} if selector is None else selector,
            "resourceGroups": [{"coveredResources": list(resources), "flavors": flavors}], **extra}
    if selector is False:
        del spec["namespaceSelector"]
    if cohort:
        spec["cohortName"] = cohort
    if strategy:
        spec["queueingStrategy"] = strategy
    if preemption:
        spec["preemption"] = preemption
    return {"apiVersion": V, "kind": "ClusterQueue", "metadata": {"name": name}, "spec": spec}


def local_queue(name, cq, ns="default"):
    return {"apiVersion": V, "kind": "LocalQueue", "metadata": {"name": name, "namespace": ns},
            "spec": {"clusterQueue": cq}}


def priority_class(name, value):
    return {"apiVersion": V, "kind": "WorkloadPriorityClass", "metadata": {"name": name}, "value": value}


def configuration(timeout="5m", **fields):
    return {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
            "waitForPodsReady": {"timeout": timeout, **fields}}


def gpu_cluster(gpus=8, strategy=None, preemption=None, extra_docs=()):
    """One h100 flavor, one ClusterQueue ``team`` with ``gpus`` GPUs, LocalQueue ``q``."""
    return parse_kueue([flavor("h100", {"gpu": "h100"}),
                        cluster_queue("team", [("h100", {"nvidia.com/gpu": gpus})], strategy=strategy,
                                      preemption=preemption),
                        local_queue("q", "team"), *extra_docs])


def job(name, gpus, *, pods=1, queue="q", ns="default", created=0.0, priority=0, cpu=None, **kw):
    requests = {"nvidia.com/gpu": gpus}
    if cpu is not None:
        requests["cpu"] = cpu
    return WorkloadSpec(ns, name, queue, pods, requests, created=created, priority=priority, job=name,
                        uid=f"uid-{name}", job_uid=f"job-uid-{name}", **kw)


def submit_all(k: Kueue, *specs):
    for s in specs:
        k.submit(s, s.created)


def admitted(decisions):
    return [d.key.split("/")[1] for d in decisions if isinstance(d, Admit)]


def evicted(decisions):
    return [d for d in decisions if isinstance(d, Evict)]


def pending(decisions):
    return {d.key.split("/")[1]: d.message for d in decisions if isinstance(d, Pending)}


def state(k: Kueue, name, ns="default"):
    return next(r for r in k.workloads() if r["name"] == name and r["namespace"] == ns)


def condition(k: Kueue, name, kind, ns="default"):
    return next((c for c in k.status(f"{ns}/{name}")["conditions"] if c["type"] == kind), None)
