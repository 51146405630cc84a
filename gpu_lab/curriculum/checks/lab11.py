"""Lab 11 checks: three teams share 24 H100s; the inference team's Deployment is short.

The task (``solutions/11_team_quotas.ipynb``): the cluster (``CLUSTER``) is three 8-GPU
H100 nodes and three team namespaces. The GPU committee split the 24 GPUs as ``SHARE``
says. Today's policy (``TODAY_POLICY``) has three faults a learner finds with kubectl:
the inference team's LimitRange caps containers at 1 GPU without a default, so its
log-shipper sidecars get a GPU each and every replica costs 2 of a 4-GPU quota; the
vision team's quota uses the plain key ``nvidia.com/gpu``, which counts nothing; and the
quotas do not follow the split. The workload (``WORKLOADS``) is fixed.

The checks replay the morning on a fresh simulator session (the cluster, the learner's
policy, then the workloads) and grade what happened there:

* ``check_diagnosis``: the GPUs one ``serve`` replica holds today and how many replicas
  are missing;
* ``check_serve``: every ``serve`` replica runs, each holding exactly one GPU;
* ``check_shares``: every team's quota counts ``requests.nvidia.com/gpu`` at its share,
  the quotas add up to the fleet, and no team holds more than its share;
* ``check_cap``: the cap stays: an inference container asking for 2 GPUs is refused, and
  a pod that names no GPU gets none.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ... import connect
from ...errors import GpuLabError
from .feedback import Checklist, Feedback
from .manifests import read_manifests

TITLE = "Lab 11"
GPU = "nvidia.com/gpu"
QUOTA_KEY = f"requests.{GPU}"
FLEET = 24  # three H100 nodes with 8 GPUs each
SHARE = {"research": 12, "inference": 8, "vision": 4}  # the GPU committee's split of FLEET
SERVE = ("inference", "serve", 6)  # namespace, Deployment, replicas
TODAY_GPUS_PER_REPLICA = 2
TODAY_MISSING = 4
POLICY_KINDS = ("ResourceQuota", "LimitRange")

CLUSTER = """\
# Three H100 nodes (the shape of an AWS p5.48xlarge), shared by three teams.
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: h100}
spec: {count: 3, gpu: {model: H100-80GB, count: 8}, cpu: "192", memory: 2048Gi}
---
apiVersion: v1
kind: Namespace
metadata: {name: research}
---
apiVersion: v1
kind: Namespace
metadata: {name: inference}
---
apiVersion: v1
kind: Namespace
metadata: {name: vision}
"""

TODAY_POLICY = """\
# The platform team's policy as it is today.
apiVersion: v1
kind: ResourceQuota
metadata: {name: gpu-quota, namespace: research}
spec:
  hard: {requests.nvidia.com/gpu: "16"}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: gpu-quota, namespace: inference}
spec:
  hard: {requests.nvidia.com/gpu: "4"}
---
# "No inference container may take more than one GPU."
apiVersion: v1
kind: LimitRange
metadata: {name: gpu-cap, namespace: inference}
spec:
  limits:
  - type: Container
    max: {nvidia.com/gpu: "1"}
---
apiVersion: v1
kind: ResourceQuota
metadata: {name: gpu-quota, namespace: vision}
spec:
  hard: {nvidia.com/gpu: "4"}
"""

WORKLOADS = """\
# The teams' work, as they deploy it every morning. Fixed: the lab changes only the policy.
apiVersion: batch/v1
kind: Job
metadata: {name: pretrain, namespace: research}
spec:
  parallelism: 2
  completions: 2
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: trainer
        image: nvcr.io/nvidia/pytorch:24.08-py3
        resources:
          requests: {cpu: "32", memory: 512Gi}
          limits: {nvidia.com/gpu: 4}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: detector, namespace: vision}
spec:
  replicas: 6
  selector: {matchLabels: {app: detector}}
  template:
    metadata: {labels: {app: detector}}
    spec:
      containers:
      - name: triton
        image: nvcr.io/nvidia/tritonserver:24.08-py3
        resources:
          requests: {cpu: "8", memory: 64Gi}
          limits: {nvidia.com/gpu: 1}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: serve, namespace: inference}
spec:
  replicas: 6
  selector: {matchLabels: {app: serve}}
  template:
    metadata: {labels: {app: serve}}
    spec:
      containers:
      - name: vllm
        image: vllm/vllm-openai:v0.6.0
        resources:
          requests: {cpu: "8", memory: 96Gi}
          limits: {nvidia.com/gpu: 1}
      - name: log-shipper
        image: fluent/fluent-bit:3.1
        resources:
          requests: {cpu: 100m, memory: 128Mi}
"""

HINTS = (
    "Start from what on-call sees: `kubectl get deploy -n inference` says READY 2/6, yet "
    "`kubectl get pods -n inference --field-selector=status.phase=Pending` lists nothing. Pods that "
    "were never created leave their reason on the ReplicaSet: "
    "`kubectl get events -n inference --field-selector reason=FailedCreate`.",
    "The refusal says each new replica asks for requests.nvidia.com/gpu=2, but the Deployment asks for "
    "1 GPU. Compare the pod's containers with the template: `kubectl get pod -n inference <pod> "
    "-o jsonpath='{.spec.containers[*].resources.limits}'`, then `kubectl describe limitrange -n "
    "inference`. Which container got a GPU it never asked for, and who gave it one?",
    "Now the other teams: `kubectl describe resourcequota -A`. A quota key for an extended resource "
    "counts only with the requests. prefix; vision's quota shows no GPU usage while vision holds 6 "
    "GPUs. And the committee's split (SHARE) is research 12, inference 8, vision 4: 24, the whole fleet.",
    "The answer: in the inference LimitRange keep max {nvidia.com/gpu: \"1\"} and add default "
    "{nvidia.com/gpu: \"0\"} (then defaultRequest is 0 too), so the log-shipper gets no GPU; set the "
    "three ResourceQuotas to requests.nvidia.com/gpu: \"12\" (research), \"8\" (inference) and \"4\" "
    "(vision, replacing its plain nvidia.com/gpu key). serve then runs 6/6 on 6 GPUs, vision 4/6.",
)

__all__ = [
    "CLUSTER",
    "FLEET",
    "HINTS",
    "POLICY_KINDS",
    "QUOTA_KEY",
    "SERVE",
    "SHARE",
    "TODAY_POLICY",
    "WORKLOADS",
    "check_cap",
    "check_diagnosis",
    "check_serve",
    "check_shares",
    "policy_problem",
    "run",
]


# ------------------------------------------------------------------ the session
def documents(submission: Any) -> list[dict]:
    """Manifests from YAML text, a path to a YAML file, a dict, or a list of any of these."""
    return read_manifests(submission, TITLE)


def run(policy: Any, backend: str = "sim"):
    """A fresh session: the cluster, then ``policy``, then the teams' workloads, each scheduled.

    Raises ``GpuLabError`` with the API server's words when ``policy`` is refused.
    """
    lab = connect(backend, deterministic=True)
    for source in (CLUSTER, documents(policy), WORKLOADS):
        if source:
            lab.apply(source)
        lab.schedule()
    return lab


def policy_problem(docs: list[dict]) -> str | None:
    """One line when the policy holds objects other than quotas and LimitRanges."""
    other = [f"{d.get('kind')} {(d.get('metadata') or {}).get('name', '?')}" for d in docs
             if d.get("kind") not in POLICY_KINDS]
    if not other:
        return None
    return (f"the policy holds {', '.join(other[:4])}: only ResourceQuota and LimitRange objects belong in it "
            "(the cluster and the teams' work are fixed)")


def _session(c: Checklist, policy: Any):
    try:
        docs = documents(policy)
    except GpuLabError as err:
        c.require(False, f"the policy is not readable: {err}")
        return None, []
    problem = policy_problem(docs)
    if problem:
        c.require(False, problem)
        return None, docs
    try:
        lab = run(docs)
    except GpuLabError as err:
        c.require(False, f"the policy does not apply: {err}",
                  look="kubectl apply -f policy.yaml")
        return None, docs
    return lab, docs


def _serve_pods(lab) -> pd.DataFrame:
    namespace, name, _ = SERVE
    pods = lab.pods()
    return pods[(pods["namespace"] == namespace) & pods["name"].str.startswith(name + "-")]


def _held(lab) -> dict[str, int]:
    """GPUs requested by each namespace's bound pods."""
    pods = lab.pods()
    bound = pods[pods["node"].notna()]
    return {ns: int(bound.loc[bound["namespace"] == ns, "gpus"].sum()) for ns in SHARE}


def _quotas(docs: list[dict]) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {ns: [] for ns in SHARE}
    for d in docs:
        if d.get("kind") == "ResourceQuota":
            ns = (d.get("metadata") or {}).get("namespace") or "default"
            out.setdefault(ns, []).append(d)
    return out


def _quantity(value: Any) -> int | None:
    try:
        return int(str(value))
    except (TypeError, ValueError):
        return None


def _free(lab) -> int:
    nodes = lab.nodes()
    return int((nodes[f"{GPU} allocatable"] - nodes[f"{GPU} requested"]).sum())


# ------------------------------------------------------------------------ checks
def check_diagnosis(gpus_per_replica: Any, missing_replicas: Any) -> Feedback:
    """Today: how many GPUs one ``serve`` replica holds, and how many replicas do not exist."""
    c = Checklist(f"{TITLE}: diagnosis", look=f"kubectl get deploy -n {SERVE[0]}")
    namespace, name, replicas = SERVE
    got = _quantity(gpus_per_replica)
    c.require(got == TODAY_GPUS_PER_REPLICA,
              f"gpus_per_replica is {gpus_per_replica!r}: not what a running {name} pod holds; count the GPU "
              "limits of every container in the pod, not only the template's first",
              f"each {name} replica holds {TODAY_GPUS_PER_REPLICA} GPUs today, though the Deployment asks for 1",
              look=f"kubectl get pods -n {namespace} -o custom-columns=NAME:.metadata.name,"
                   "GPUS:.spec.containers[*].resources.limits.nvidia\\.com/gpu")
    missing = _quantity(missing_replicas)
    c.require(missing == TODAY_MISSING,
              f"missing_replicas is {missing_replicas!r}: the Deployment wants {replicas}; count the pods that "
              "exist at all (Running or Pending)",
              f"{TODAY_MISSING} of {replicas} replicas were never created (READY {replicas - TODAY_MISSING}/"
              f"{replicas}, none Pending)",
              look=f"kubectl get deploy {name} -n {namespace}")
    return c.done()


def check_serve(policy: Any) -> Feedback:
    """Every ``serve`` replica runs, each holding exactly one GPU."""
    c = Checklist(f"{TITLE}: inference/serve at full strength",
                  look=f"kubectl get events -n {SERVE[0]} --field-selector reason=FailedCreate")
    lab, _ = _session(c, policy)
    if lab is None:
        return c.done()
    namespace, name, replicas = SERVE
    pods = _serve_pods(lab)
    running = pods[pods["phase"] == "Running"]
    pending = pods[pods["phase"] == "Pending"]
    if len(running) < replicas:
        events = lab.events(namespace=namespace, kind="ReplicaSet")
        refused = events[events["reason"] == "FailedCreate"] if len(events) else events
        why = (f"; the ReplicaSet's last FailedCreate: {refused['message'].iloc[-1]}" if len(refused) else "")
        c.require(False, f"{namespace}/{name} is at {len(running)}/{replicas} with {len(pending)} Pending and "
                         f"{_free(lab)} GPUs free: {replicas - len(pods)} replicas were never created{why}")
    else:
        c.require(True, "", f"{namespace}/{name} runs {replicas}/{replicas}")
    extra = pods[pods["gpus"] != 1]
    c.require(extra.empty,
              f"{len(extra)} {name} replica(s) hold {int(extra['gpus'].max()) if len(extra) else 0} GPUs each, "
              "the Deployment's vllm container asks for 1: a container that names no GPU got some",
              f"each {name} replica holds exactly 1 GPU",
              look=f"kubectl get pods -n {namespace} -o custom-columns=NAME:.metadata.name,"
                   "GPUS:.spec.containers[*].resources.limits.nvidia\\.com/gpu")
    return c.done()


def check_shares(policy: Any) -> Feedback:
    """Each team's quota counts ``requests.nvidia.com/gpu`` at its share; the shares add up
    to the fleet; no team holds more GPUs than its share."""
    c = Checklist(f"{TITLE}: the committee's split", look="kubectl describe resourcequota -A")
    lab, docs = _session(c, policy)
    if lab is None:
        return c.done()
    quotas = _quotas(docs)
    counted: dict[str, int | None] = {}
    for ns, share in SHARE.items():
        found = [_quantity(((q.get("spec") or {}).get("hard") or {}).get(QUOTA_KEY)) for q in quotas.get(ns, [])]
        values = [v for v in found if v is not None]
        limit = min(values) if values else None
        counted[ns] = limit
        ignored = sorted({k for q in quotas.get(ns, []) for k in ((q.get("spec") or {}).get("hard") or {})
                          if GPU in str(k) and k != QUOTA_KEY})
        if limit is None:
            c.require(False, f"{ns}: no quota counts its GPUs"
                      + (f" (the key{'s' if len(ignored) > 1 else ''} {', '.join(ignored)} {'count' if len(ignored) > 1 else 'counts'} nothing for an "
                         "extended resource)" if ignored else "")
                      + f"; it holds {_held(lab)[ns]} GPUs, its share is {share}",
                      look=f"kubectl describe resourcequota -n {ns}")
        else:
            c.require(limit == share,
                      f"{ns}: its quota allows {limit} GPUs, its share is {share}",
                      f"{ns}: quota {QUOTA_KEY}={limit}, its share",
                      look=f"kubectl get resourcequota -n {ns} -o yaml")
    total = sum(v or 0 for v in counted.values())
    c.require(total == FLEET,
              f"the quotas add up to {total} GPUs, the fleet has {FLEET}: "
              + ("some GPUs belong to no team" if total < FLEET else "the teams were promised more than exists"),
              f"the quotas add up to the fleet, {FLEET} GPUs",
              look="kubectl get resourcequota -A -o custom-columns=NS:.metadata.namespace,"
                   "GPUS:.spec.hard.requests\\.nvidia\\.com/gpu")
    held = _held(lab)
    over = [f"{ns} holds {held[ns]}, its share is {share}" for ns, share in SHARE.items() if held[ns] > share]
    c.require(not over, "; ".join(over),
              "no team holds more than its share (" + ", ".join(f"{ns} {held[ns]}" for ns in SHARE) + ")",
              look="kubectl get pods -A -o custom-columns=NS:.metadata.namespace,"
                   "GPUS:.spec.containers[*].resources.limits.nvidia\\.com/gpu")
    return c.done()


def _probe(lab, name: str, containers: list[dict]) -> str:
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": SERVE[0]},
           "spec": {"containers": containers}}
    try:
        lab.apply(pod)
    except GpuLabError as err:
        return str(err)
    return ""


def check_cap(policy: Any) -> Feedback:
    """In inference, a container asking for 2 GPUs is refused; a pod naming no GPU gets none."""
    namespace = SERVE[0]
    c = Checklist(f"{TITLE}: the inference cap", look=f"kubectl describe limitrange -n {namespace}")
    lab, _ = _session(c, policy)
    if lab is None:
        return c.done()
    refusal = _probe(lab, "probe-two-gpus", [{"name": "main", "image": "app",
                                               "resources": {"limits": {GPU: 2}}}])
    c.require(bool(refusal),
              f"a container asking for 2 GPUs was created in {namespace}: nothing caps a container at 1 GPU any more",
              f"a 2-GPU container is refused: {refusal}",
              look=f"kubectl run probe -n {namespace} --image=app --dry-run=server "
                   "--overrides='{\"spec\":{\"containers\":[{\"name\":\"probe\",\"image\":\"app\","
                   "\"resources\":{\"limits\":{\"nvidia.com/gpu\":2}}}]}}'")
    refused = _probe(lab, "probe-web", [{"name": "web", "image": "nginx",
                                         "resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}])
    pods = lab.pods()
    web = pods[(pods["namespace"] == namespace) & (pods["name"] == "probe-web")]
    gpus = int(web["gpus"].iloc[0]) if len(web) else None
    c.require(not refused and gpus == 0,
              (f"a web pod that names no GPU was refused in {namespace}: {refused}" if refused else
               f"a web pod that names no GPU was given {gpus} GPU(s) in {namespace}"),
              f"a pod that names no GPU gets none in {namespace}",
              look=f"kubectl get pod probe-web -n {namespace} -o jsonpath='{{.spec.containers[*].resources}}'")
    return c.done()
