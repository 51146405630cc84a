"""Random valid scenarios, one per seed: the same seed gives the same scenario on any machine.

What a learner meets, small and tight enough that decisions matter: one to three NodePools
(≤ 6 nodes) of catalog GPU models, some with MIG (single or mixed) or time-slicing, cpu and
memory given or defaulted, zones and taints; bare Pods, Deployments and Jobs (≤ 20 pods)
asking for whole GPUs, MIG slices, time-sliced replicas or only cpu, with tolerations,
nodeSelector, node affinity, pod (anti-)affinity and topology spread; PriorityClasses
(one that never preempts); sometimes a scheduler profile that packs GPUs; and sometimes a
second batch applied after the first has settled, so preemption happens. GPU demand is
drawn around the cluster's GPU capacity.

A scenario is a :class:`gpu_lab.fidelity.Case`: its documents, and its later batch as an
``apply`` action.
"""

from __future__ import annotations

import random
from typing import Any

from ..fidelity import Case
from ..gpus.catalog import MODELS
from ..gpus.migparted import predefined_names
from ..model.scenario import parse_scenario

MAX_NODES = 6
MAX_PODS = 20
ZONE = "topology.kubernetes.io/zone"
HOSTNAME = "kubernetes.io/hostname"
PRODUCT = "nvidia.com/gpu.product"
POOL = "gpulab.dev/pool"
SHORT = {"T4": "t4", "A10G": "a10g", "L4": "l4", "L40S": "l40s", "A100-40GB": "a100s",
         "A100-80GB": "a100", "H100-80GB": "h100", "H200-141GB": "h200"}
WORDS = ("train", "infer", "batch", "web", "etl", "nb", "eval", "serve")
TAINTS = ({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"},
          {"key": "dedicated", "value": "batch", "effect": "NoSchedule"},
          {"key": "dedicated", "value": "batch", "effect": "PreferNoSchedule"})
PRIORITY_CLASSES: tuple[dict[str, Any], ...] = ({"name": "low", "value": 10}, {"name": "high", "value": 1000},
                    {"name": "polite", "value": 500, "preemptionPolicy": "Never"})


def scenario(seed: int) -> Case:
    """The scenario of ``seed``: a Case named ``seed-<seed>``."""
    rng = random.Random(seed)
    docs: list[dict] = []
    if rng.random() < 0.25:
        docs.append(_profile(rng))
    zones = rng.random() < 0.5
    pools = _pools(rng, zones)
    nodes = parse_scenario(pools).nodes
    classes = [pc for pc in PRIORITY_CLASSES if rng.random() < 0.6]
    docs += [{"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
              "metadata": {"name": pc["name"]}, "value": pc["value"],
              **({"preemptionPolicy": pc["preemptionPolicy"]} if "preemptionPolicy" in pc else {})}
             for pc in classes]
    docs += pools
    workloads = _workloads(rng, nodes, [pc["name"] for pc in classes], zones)
    later: list[dict] = []
    if len(workloads) > 1 and rng.random() < 0.5:
        cut = len(workloads) - rng.randint(1, min(2, len(workloads) - 1))
        workloads, later = workloads[:cut], workloads[cut:]
    return Case(f"seed-{seed}", docs + workloads, actions=[{"apply": later}] if later else [])


def documents(case: Case) -> list[dict]:
    """The scenario as one file would hold it: the FidelityCase header, then its objects."""
    header: dict[str, Any] = {"kind": "FidelityCase", "exact": case.exact}
    if case.actions:
        header["actions"] = case.actions
    return [header, *case.documents]


# ------------------------------------------------------------------ cluster
def _profile(rng: random.Random) -> dict:
    resources = [{"name": "nvidia.com/gpu", "weight": rng.choice([1, 3])}]
    if rng.random() < 0.4:
        resources.append({"name": "cpu", "weight": 1})
    if rng.random() < 0.5:
        strategy: dict[str, Any] = {"type": "MostAllocated", "resources": resources}
    else:
        strategy = {"type": "RequestedToCapacityRatio", "resources": resources,
                    "requestedToCapacityRatio": {"shape": [{"utilization": 0, "score": 0},
                                                           {"utilization": 100, "score": 10}]}}
    config = [{"name": "NodeResourcesFit", "args": {"scoringStrategy": strategy}}]
    if rng.random() < 0.3:
        config.append({"name": "PodTopologySpread", "args": {"defaultingType": "List"}})
    return {"apiVersion": "kubescheduler.config.k8s.io/v1", "kind": "KubeSchedulerConfiguration",
            "profiles": [{"schedulerName": "default-scheduler", "pluginConfig": config}]}


def _pools(rng: random.Random, zones: bool) -> list[dict]:
    out: list[dict] = []
    left = MAX_NODES
    for i in range(rng.randint(1, 3)):
        if left == 0:
            break
        count = rng.randint(1, min(3, left))
        left -= count
        gpu = rng.random() < 0.85 or i == 0
        spec: dict[str, Any] = {"count": count}
        name = "cpu" + "abc"[i]
        if gpu:
            model = MODELS[rng.choice(sorted(MODELS))]
            name = SHORT[model.name] + "abc"[i]
            spec["gpu"] = {"model": model.name, "count": rng.choice([1, 2, 4] + ([8] if model.mig_capable else []))}
            if model.mig_capable and rng.random() < 0.35:
                spec.update(_mig(rng, model.name))
            elif rng.random() < 0.25:
                sharing: dict[str, Any] = {"resources": [{"name": "nvidia.com/gpu", "replicas": rng.randint(2, 4)}]}
                if rng.random() < 0.3:
                    sharing["renameByDefault"] = True
                spec["devicePlugin"] = {"version": "v1", "sharing": {"timeSlicing": sharing}}
        if not gpu or rng.random() < 0.5:
            spec["cpu"] = rng.choice(["4", "8", "16", "32"])
            spec["memory"] = rng.choice(["32Gi", "64Gi", "128Gi"])
        if zones:
            spec["labels"] = {ZONE: f"zone-{rng.choice('ab')}"}
        if rng.random() < 0.3:
            spec["taints"] = [dict(rng.choice(TAINTS))]
        out.append({"apiVersion": "gpulab.dev/v1alpha1", "kind": "NodePool",
                    "metadata": {"name": name}, "spec": spec})
    return out


def _mig(rng: random.Random, model: str) -> dict:
    singles = [n for n in predefined_names(model)
               if n.startswith("all-") and n.count(".") == 1 and n[4].isdigit()]  # all-<profile>
    if rng.random() < 0.5:
        return {"devicePlugin": {"version": "v1", "flags": {"migStrategy": "single"}},
                "mig": {"config": rng.choice(singles)}}
    return {"devicePlugin": {"version": "v1", "flags": {"migStrategy": "mixed"}},
            "mig": {"config": rng.choice(["all-balanced", *singles])}}


# ---------------------------------------------------------------- workloads
def _workloads(rng: random.Random, nodes, classes: list[str], zones: bool) -> list[dict]:
    capacity: dict[str, int] = {}
    for n in nodes:
        for k, v in n.allocatable.items():
            if k.startswith("nvidia.com/") and v:
                capacity[k] = capacity.get(k, 0) + v
    target = rng.uniform(0.7, 1.4) * sum(capacity.values())
    taints = [t for n in nodes for t in n.taints]
    products = sorted({n.labels[PRODUCT] for n in nodes if PRODUCT in n.labels})
    pools = sorted({n.pool for n in nodes if n.pool})
    out: list[dict] = []
    pods = demand = 0
    while len(out) < 6 and pods < MAX_PODS and (demand < target or len(out) < 2):
        name = f"{rng.choice(WORDS)}{len(out)}"
        kind = rng.choices(["Pod", "Deployment", "Job"], [0.4, 0.35, 0.25])[0]
        n = 1 if kind == "Pod" else rng.randint(1, min(4, MAX_PODS - pods))
        spec, gpus = _pod_spec(rng, name, n, capacity, nodes, classes, taints, products, pools,
                               zones, [w["metadata"]["name"] for w in out])
        out.append(_workload(kind, name, n, spec))
        pods += n
        demand += n * gpus
    return out


def _workload(kind: str, name: str, n: int, spec: dict) -> dict:
    labels = {"app": name}
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": labels}, "spec": spec}
    template = {"metadata": {"labels": dict(labels)}, "spec": spec}
    if kind == "Deployment":
        return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": name},
                "spec": {"replicas": n, "selector": {"matchLabels": labels}, "template": template}}
    spec["restartPolicy"] = "Never"
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
            "spec": {"parallelism": n, "completions": n, "template": template}}


def _pod_spec(rng, name, n, capacity, nodes, classes, taints, products, pools, zones, others):
    requests: dict[str, str] = {}
    limits: dict[str, int] = {}
    gpus = 0
    if capacity and rng.random() < 0.85:
        resource = rng.choice(sorted(capacity))
        most = max(node.allocatable.get(resource, 0) for node in nodes)
        gpus = min(most, rng.choice([1, 1, 1, 2, 2, 4, 8]))
        limits[resource] = gpus
    if rng.random() < 0.85:
        requests["cpu"] = rng.choice(["500m", "1", "2", "4", "8"])
        requests["memory"] = rng.choice(["1Gi", "2Gi", "4Gi", "8Gi", "16Gi"])
    resources: dict[str, Any] = {}
    if requests:
        resources["requests"] = requests
    if limits:
        resources["limits"] = limits
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "app", "resources": resources}]}
    if classes and rng.random() < 0.7:
        spec["priorityClassName"] = rng.choice(classes)
    if taints and rng.random() < 0.6:
        t = rng.choice(taints)
        spec["tolerations"] = [rng.choice([
            {"key": t.key, "operator": "Equal", "value": t.value, "effect": t.effect},
            {"key": t.key, "operator": "Exists"}])]
    roll = rng.random()
    if roll < 0.12 and (products or pools):
        key, values = rng.choice([(k, v) for k, v in ((PRODUCT, products), (POOL, pools)) if v])
        spec["nodeSelector"] = {key: rng.choice([*values, "nowhere"] if rng.random() < 0.2 else values)}
    elif roll < 0.27 and products:
        chosen = rng.sample(products, rng.randint(1, len(products)))
        term = {"matchExpressions": [{"key": PRODUCT, "operator": rng.choice(["In", "NotIn"]), "values": chosen}]}
        if rng.random() < 0.5:
            spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution":
                                                 {"nodeSelectorTerms": [term]}}}
        else:
            spec["affinity"] = {"nodeAffinity": {"preferredDuringSchedulingIgnoredDuringExecution":
                                                 [{"weight": rng.choice([10, 50, 100]), "preference": term}]}}
    topology = ZONE if zones and rng.random() < 0.6 else HOSTNAME
    roll = rng.random()
    if roll < 0.15 and n > 1:
        spec.setdefault("affinity", {})["podAntiAffinity"] = _pod_terms(rng, name, topology)
    elif roll < 0.25 and others:
        spec.setdefault("affinity", {})["podAffinity"] = _pod_terms(rng, rng.choice(others), topology)
    elif roll < 0.4 and n > 1:
        spec["topologySpreadConstraints"] = [{
            "maxSkew": rng.choice([1, 1, 2]), "topologyKey": topology,
            "whenUnsatisfiable": rng.choice(["DoNotSchedule", "ScheduleAnyway"]),
            "labelSelector": {"matchLabels": {"app": name}}}]
    return spec, gpus


def _pod_terms(rng, app: str, topology: str) -> dict:
    term = {"labelSelector": {"matchLabels": {"app": app}}, "topologyKey": topology}
    if rng.random() < 0.5:
        return {"requiredDuringSchedulingIgnoredDuringExecution": [term]}
    return {"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": rng.choice([10, 100]), "podAffinityTerm": term}]}
