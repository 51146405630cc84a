"""Random valid scenarios, one per seed: the same seed gives the same scenario on any machine.

What a learner meets, small and tight enough that decisions matter: one to three NodePools
(≤ 6 nodes) of catalog GPU models, some with MIG (single or mixed) or time-slicing, cpu and
memory given or defaulted, zones and taints; bare Pods, Deployments and Jobs (≤ 20 pods)
asking for whole GPUs, MIG slices, time-sliced replicas or only cpu, with tolerations,
nodeSelector, node affinity, pod (anti-)affinity and topology spread; PriorityClasses
(one that never preempts); sometimes a scheduler profile that packs GPUs; and sometimes a
second batch applied after the first has settled, so preemption happens. GPU demand is
drawn around the cluster's GPU capacity.

On top of that, from a second random stream of the same seed (so a seed that draws none of
them gives the scenario it gave before they existed), each in roughly one seed in seven: a
Deployment or Job made a StatefulSet (Parallel, or OrderedReady where it is the last pod
maker of its batch: ``_ordered_ready_last``); a DaemonSet of small cpu pods; a Service whose
selector spans one or two workloads (default spreading); a PodDisruptionBudget over a
workload, in seeds with PriorityClasses (preemption reads it); a ResourceQuota on a GPU resource or pods,
never below what the first batch's bare pods need (a refused bare pod refuses the whole
apply), so controllers' pods and later batches meet it; a LimitRange whose default requests
fill a workload left without them.

A quota that a preemption frees while a controller waits on it (its create was refused
before) is left out: which refused controller takes the freed quota, and whether its retry
comes before the backend reads the result, is a race of the controllers' retry backoffs
(the ReplicaSet controller's 5 ms doubling, the Job controller's 1 s doubling), not a
scheduling decision (seed 7695960 before this rule: the real ReplicaSet's retry won, the
sim's Job took it). The sim, run on the scenario, says where that happens (``_contested``).

A scenario is a :class:`gpu_lab.fidelity.Case`: its documents, and its later batch as an
``apply`` action.
"""

from __future__ import annotations

import random
from typing import Any

from ..backends.sim import SimSession
from ..fidelity import Case, run_case
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
    docs += _extras(random.Random(f"extras-{seed}"), nodes, classes, workloads, later)
    case = Case(f"seed-{seed}", docs + workloads, actions=[{"apply": later}] if later else [])
    if any(d["kind"] == "ResourceQuota" for d in docs) and _contested(case):
        case = Case(case.name, [d for d in case.documents if d["kind"] != "ResourceQuota"], actions=case.actions)
    return case


def _contested(case: Case) -> bool:
    """Whether, on the sim, a preemption comes after a quota refused a controller's pod: the
    victim's quota is then freed while that controller waits to retry."""

    sim = SimSession()
    run_case(case, sim)
    events, refused = sim.events(), False
    for reason, message in zip(events["reason"], events["message"]):
        refused = refused or (reason == "FailedCreate" and "exceeded quota" in message)
        if reason == "Preempted" and refused:
            return True
    return False


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


# ------------------------------------------------- controllers and policies
EXTRA = 0.14  # each extra kind's chance per seed


def _extras(x: random.Random, nodes, classes: list[dict], workloads: list[dict], later: list[dict]) -> list[dict]:
    """The extra kinds this seed draws: the objects to create before the workloads; the
    workloads are changed in place (a StatefulSet, a DaemonSet appended, labels, requests)."""
    docs: list[dict] = []
    every = workloads + later
    roll = [x.random() for _ in range(6)]  # one draw per kind, so each kind's choice is independent
    if roll[0] < EXTRA:
        _make_stateful(x, every)
    pods = sum(_replicas(w) for w in every)
    if roll[1] < EXTRA and pods + len(nodes) <= MAX_PODS:
        workloads.append(_daemonset(x, nodes, classes))
    if roll[2] < EXTRA:
        docs += _service(x, [w for w in every if w["kind"] != "DaemonSet"])
    if roll[3] < EXTRA and classes:
        docs += _pdb(x, [w for w in workloads if w["kind"] not in ("Pod", "DaemonSet")] or workloads)
    if roll[4] < EXTRA:
        docs += _quota(x, classes, workloads, later)
    if roll[5] < EXTRA:
        docs += _limit_range(x, every)
    for batch in (workloads, later):
        _ordered_ready_last(batch, classes)
    return docs


def _ordered_ready_last(batch: list[dict], classes: list[dict]) -> None:
    """An OrderedReady StatefulSet only where no other pod maker of its batch is created after
    it (model.creationorder.creation_order); elsewhere Parallel. Its next pod comes once the one
    before runs: on a running cluster that is seconds after a batch is created (a kubelet
    starts the container), so the sim queues it after the batch. The local lab's node agents
    report a pod Ready at once, while apply() creates a batch object by object (waiting for
    each controller's first pods), so there the next pod can come before the objects after
    the StatefulSet (seed 24 before this rule: serve0-1 before web1 and the DaemonSet)."""
    value = {pc["name"]: pc["value"] for pc in classes}
    order = sorted(batch, key=lambda w: -value.get(_pod_template(w)["spec"].get("priorityClassName"), 0))
    for w in order[:-1]:
        if w["kind"] == "StatefulSet" and "podManagementPolicy" not in w["spec"]:
            w["spec"]["podManagementPolicy"] = "Parallel"


def _replicas(w: dict) -> int:
    spec = w["spec"]
    return 1 if w["kind"] == "Pod" else int(spec.get("replicas") or spec.get("parallelism") or 0)


def _pod_template(w: dict) -> dict:
    """The pod (metadata and spec) a workload makes: a bare Pod itself, else its template."""
    return w if w["kind"] == "Pod" else w["spec"]["template"]


def _make_stateful(x: random.Random, workloads: list[dict]) -> None:
    candidates = [w for w in workloads if w["kind"] in ("Deployment", "Job")]
    if not candidates:
        return
    w = x.choice(candidates)
    n, template = _replicas(w), w["spec"]["template"]
    template["spec"].pop("restartPolicy", None)  # a StatefulSet's pods restart Always
    spec: dict[str, Any] = {"replicas": n, "selector": {"matchLabels": dict(template["metadata"]["labels"])}}
    if x.random() < 0.5:
        spec["podManagementPolicy"] = "Parallel"
    spec["template"] = template
    w.clear()
    w.update({"apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": template["metadata"]["labels"]["app"]},
              "spec": spec})


def _daemonset(x: random.Random, nodes, classes: list[dict]) -> dict:
    """A node agent (an exporter, a log shipper): small cpu and memory on every node it selects."""
    name = x.choice(["exporter", "logs", "agent"])
    requests = {"cpu": x.choice(["500m", "1", "2", "4"]), "memory": x.choice(["256Mi", "1Gi", "2Gi"])}
    spec: dict[str, Any] = {"containers": [{"name": "c", "image": "agent", "resources": {"requests": requests}}]}
    taints = sorted({(t.key, t.effect) for n in nodes for t in n.taints})
    if taints and x.random() < 0.6:
        spec["tolerations"] = [{"key": k, "operator": "Exists", "effect": e} for k, e in taints]
    pools = sorted({n.pool for n in nodes if n.pool})
    if len(pools) > 1 and x.random() < 0.3:
        spec["nodeSelector"] = {POOL: x.choice(pools)}
    if classes and x.random() < 0.4:
        spec["priorityClassName"] = x.choice(classes)["name"]
    labels = {"app": name}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": name},
            "spec": {"selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": dict(labels)}, "spec": spec}}}


def _service(x: random.Random, workloads: list[dict]) -> list[dict]:
    """A Service over one or two workloads' pods: its selector is what default spreading counts."""
    if not workloads:
        return []
    chosen = x.sample(workloads, min(len(workloads), x.choice([1, 2])))
    for w in chosen:
        _pod_template(w)["metadata"]["labels"]["tier"] = "front"
    return [{"apiVersion": "v1", "kind": "Service", "metadata": {"name": "front"},
             "spec": {"selector": {"tier": "front"}, "ports": [{"port": 80}]}}]


def _pdb(x: random.Random, workloads: list[dict]) -> list[dict]:
    if not workloads:
        return []
    w = x.choice(workloads)
    n = _replicas(w)
    app = _pod_template(w)["metadata"]["labels"]["app"]
    spec: dict[str, Any] = {}
    if x.random() < 0.5:
        spec["minAvailable"] = x.choice([x.randint(1, max(1, n)), "50%", "100%"])
    else:
        spec["maxUnavailable"] = x.choice([0, 1, "50%"])
    spec["selector"] = {"matchLabels": {"app": app}}
    return [{"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": app}, "spec": spec}]


def _demand(w: dict, key: str) -> int:
    """What ``w``'s pods together count against quota ``key``: pods, or a GPU resource's requests."""
    if key == "pods":
        return _replicas(w)
    limits = _pod_template(w)["spec"]["containers"][0]["resources"].get("limits") or {}
    return _replicas(w) * int(limits.get(key.removeprefix("requests."), 0))


def _quota(x: random.Random, classes: list[dict], workloads: list[dict], later: list[dict]) -> list[dict]:
    """A quota the first batch's bare pods fit under (those are created in priority order,
    then file order, as model.creationorder.creation_order has it: every maker created up to the
    last bare pod counts), which controllers' pods and later batches may exceed."""
    keys = sorted({f"requests.{r}" for w in workloads + later
                   for r in (_pod_template(w)["spec"]["containers"][0]["resources"].get("limits") or {})})
    if not any(w["kind"] == "DaemonSet" for w in workloads):
        keys.append("pods")
    if not keys:
        return []
    key = x.choice(keys)
    value = {pc["name"]: pc["value"] for pc in classes}
    first = sorted(workloads, key=lambda w: -value.get(_pod_template(w)["spec"].get("priorityClassName"), 0))
    bare = max((i for i, w in enumerate(first) if w["kind"] == "Pod"), default=-1)
    floor = sum(_demand(w, key) for w in first[:bare + 1])
    total = sum(_demand(w, key) for w in workloads + later)
    hard = x.randint(floor, max(floor, total - 1)) if total > floor else floor + x.randint(0, 1)
    return [{"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "team-quota"},
             "spec": {"hard": {key: str(hard)}}}]


def _limit_range(x: random.Random, workloads: list[dict]) -> list[dict]:
    """Default requests (only requests: a default limit below a stated request is invalid),
    and one workload left without requests so the defaults decide something."""
    targets = [w for w in workloads if w["kind"] != "DaemonSet"]
    if targets:
        _pod_template(x.choice(targets))["spec"]["containers"][0]["resources"].pop("requests", None)
    return [{"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "defaults"},
             "spec": {"limits": [{"type": "Container",
                                  "defaultRequest": {"cpu": x.choice(["500m", "1", "2"]),
                                                     "memory": x.choice(["1Gi", "4Gi"])}}]}}]
