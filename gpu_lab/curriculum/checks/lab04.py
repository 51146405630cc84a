"""Lab 04 checks: pack small GPU jobs on a mixed fleet so that whole-node training jobs fit.

The lab's cluster (``GPU_POOLS``, ``CPU_POOL``) is not the lesson's eight equal nodes: two
8-GPU H100 nodes, four 4-GPU L40S nodes (each a quarter of the CPU and memory of an H100
node) and two CPU nodes. 16 GPUs of small work (``ARRIVALS``: 1-, 2- and 4-GPU pods, the
L40S pool's size exactly) arrive before two 8-GPU training jobs, which fit only if the
small work fills the L40S nodes and leaves both H100 nodes whole. The checks read only
what a learner can read too (``lab.pods()``, ``lab.nodes()``, ``lab.explain()``) and
the KubeSchedulerConfiguration the learner wrote, and say what went wrong in numbers
and names: which pods pend, the largest free block of GPUs, which scoring strategy
the profile uses and which score plugin outvoted packing.
"""

from __future__ import annotations

from typing import Any

import yaml

from .feedback import Checklist, Feedback

GPU = "nvidia.com/gpu"
TITLE = "Lab 04"
TAINT = "nvidia.com/gpu=present:NoSchedule"

GPU_POOLS = """\
# Lab 04: the GPU pools as the platform team created them. No taint.
# h100: the shape of an AWS p5.48xlarge (8 GPUs, 192 vCPU, 2048 GiB).
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: h100}
spec:
  count: 2
  gpu: {model: H100-80GB, count: 8}
  cpu: "192"
  memory: 2048Gi
---
# l40s: the shape of an AWS g6e.12xlarge (4 GPUs, 48 vCPU, 384 GiB).
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: l40s}
spec:
  count: 4
  gpu: {model: L40S, count: 4}
  cpu: "48"
  memory: 384Gi
"""

CPU_POOL = """\
# Lab 04: two CPU nodes for the services that need no GPU.
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: cpu}
spec:
  count: 2
  cpu: "64"
  memory: 256Gi
"""

ARRIVALS = """\
# Lab 04: the morning's arrivals, applied one document at a time in this order.
# The GPU teams' manifests already tolerate the nvidia.com/gpu taint; the CPU services
# (api, etl) do not. chat: 4 x 1 GPU, embed: 2 x 2 GPUs, finetune-1 and -2: 4 GPUs each
# = 16 GPUs of small work, then two 8-GPU training jobs, each needing a whole H100 node.
apiVersion: apps/v1
kind: Deployment
metadata: {name: chat}
spec:
  replicas: 4
  selector: {matchLabels: {app: chat}}
  template:
    metadata: {labels: {app: chat}}
    spec:
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      containers:
      - name: main
        image: vllm/vllm-openai:v0.6.0
        resources:
          requests: {cpu: "8", memory: 64Gi}
          limits: {nvidia.com/gpu: 1}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: api}
spec:
  replicas: 4
  selector: {matchLabels: {app: api}}
  template:
    metadata: {labels: {app: api}}
    spec:
      containers:
      - name: main
        image: ghcr.io/example/api:1.4
        resources:
          requests: {cpu: "8", memory: 16Gi}
---
apiVersion: batch/v1
kind: Job
metadata: {name: finetune-1}
spec:
  template:
    spec:
      restartPolicy: Never
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      containers:
      - name: trainer
        image: nvcr.io/nvidia/pytorch:24.08-py3
        resources:
          requests: {cpu: "32", memory: 256Gi}
          limits: {nvidia.com/gpu: 4}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: embed}
spec:
  replicas: 2
  selector: {matchLabels: {app: embed}}
  template:
    metadata: {labels: {app: embed}}
    spec:
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      containers:
      - name: main
        image: ghcr.io/huggingface/text-embeddings-inference:1.5
        resources:
          requests: {cpu: "16", memory: 128Gi}
          limits: {nvidia.com/gpu: 2}
---
apiVersion: batch/v1
kind: Job
metadata: {name: finetune-2}
spec:
  template:
    spec:
      restartPolicy: Never
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      containers:
      - name: trainer
        image: nvcr.io/nvidia/pytorch:24.08-py3
        resources:
          requests: {cpu: "32", memory: 256Gi}
          limits: {nvidia.com/gpu: 4}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: etl}
spec:
  replicas: 3
  selector: {matchLabels: {app: etl}}
  template:
    metadata: {labels: {app: etl}}
    spec:
      containers:
      - name: main
        image: apache/spark:3.5.1
        resources:
          requests: {cpu: "12", memory: 48Gi}
---
apiVersion: batch/v1
kind: Job
metadata: {name: train-big-1}
spec:
  template:
    spec:
      restartPolicy: Never
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      containers:
      - name: trainer
        image: nvcr.io/nvidia/pytorch:24.08-py3
        resources:
          requests: {cpu: "96", memory: 1024Gi}
          limits: {nvidia.com/gpu: 8}
---
apiVersion: batch/v1
kind: Job
metadata: {name: train-big-2}
spec:
  template:
    spec:
      restartPolicy: Never
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      containers:
      - name: trainer
        image: nvcr.io/nvidia/pytorch:24.08-py3
        resources:
          requests: {cpu: "96", memory: 1024Gi}
          limits: {nvidia.com/gpu: 8}
"""

HINTS = (
    "Start with what is stuck and where the GPUs went: `kubectl get pods --field-selector=status.phase=Pending` "
    "lists the training jobs, `kubectl describe node h100-0` (Allocated resources) shows what holds its GPUs. "
    "Is anything in the scheduler's scoring looking at nvidia.com/gpu at all?",
    "The default profile scores NodeResourcesFit with LeastAllocated over cpu and memory: an H100 node has "
    "four times an L40S node's CPU and memory, so every small pod prefers the big nodes. Which strategy "
    "scores a fuller node higher, and what does it compute for one more GPU on an empty 4-GPU node versus "
    "an empty 8-GPU node? (`kubectl get pods -o wide` shows where each pod landed.)",
    "Deployment replicas are also scored by PodTopologySpread's system-default constraints, which spread them "
    "over nodes; and pods without a toleration may land on any untainted node (`kubectl describe node l40s-0` "
    "shows its Taints line and its non-GPU pods).",
    "The answer: a KubeSchedulerConfiguration for default-scheduler with NodeResourcesFit scoringStrategy "
    "MostAllocated over cpu (weight 1), memory (1) and nvidia.com/gpu (3) (or RequestedToCapacityRatio over "
    "nvidia.com/gpu with a rising shape), PodTopologySpread args defaultingType: List, and the taint "
    "nvidia.com/gpu=present:NoSchedule on both GPU pools (taints: [{key: nvidia.com/gpu, value: present, "
    "effect: NoSchedule}] in each NodePool's spec).",
)


# ------------------------------------------------------------------ reading the lab
def _gpu_nodes(lab) -> list[dict[str, Any]]:
    """One dict per node that offers GPUs: name, used, allocatable, free."""
    nodes = lab.nodes()
    out: list[dict] = []
    if f"{GPU} allocatable" not in nodes.columns:
        return out
    for _, row in nodes.iterrows():
        alloc = int(row[f"{GPU} allocatable"] or 0)
        if alloc <= 0:
            continue
        used = int(row[f"{GPU} requested"] or 0)
        out.append({"name": row["name"], "used": used, "allocatable": alloc, "free": alloc - used})
    return out


def _pending(lab):
    pods = lab.pods()
    return pods[pods["node"].isna()]


def _names(items: list[str], limit: int = 4) -> str:
    shown = ", ".join(items[:limit])
    return shown + (f" and {len(items) - limit} more" if len(items) > limit else "")


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


# ------------------------------------------------------------- reading the config
def _documents(config) -> list[dict]:
    if config is None:
        return []
    if isinstance(config, dict):
        return [config]
    if isinstance(config, (list, tuple)):
        return [d for d in config if isinstance(d, dict)]
    text = str(config)
    if "\n" not in text and text.endswith((".yaml", ".yml")):
        with open(text, encoding="utf-8") as f:
            text = f.read()
    return [d for d in yaml.safe_load_all(text) if isinstance(d, dict)]


def profile_settings(config, scheduler_name: str = "default-scheduler") -> dict[str, Any] | None:
    """What a KubeSchedulerConfiguration sets for one profile's scoring.

    Returns ``strategy`` (NodeResourcesFit's scoringStrategy.type, LeastAllocated when
    unset), ``resources`` (names; cpu and memory when unset), ``shape`` (for
    RequestedToCapacityRatio), ``spread`` ("System", "List" or "disabled": whether
    PodTopologySpread's system-default constraints still score) and
    ``fit_scored`` (False when NodeResourcesFit's score is disabled). ``None`` when
    ``config`` holds no KubeSchedulerConfiguration.
    """
    docs = [d for d in _documents(config) if d.get("kind") == "KubeSchedulerConfiguration"]
    if not docs:
        return None
    profiles = docs[-1].get("profiles") or [{"schedulerName": scheduler_name}]
    profile = next((p for p in profiles if (p.get("schedulerName") or "default-scheduler") == scheduler_name),
                   profiles[0])
    args: dict[str, dict] = {}
    for pc in profile.get("pluginConfig") or []:
        args[pc.get("name")] = pc.get("args") or {}
    plugins = profile.get("plugins") or {}

    def disabled(name: str) -> bool:
        for point in ("score", "multiPoint"):
            for d in (plugins.get(point) or {}).get("disabled") or []:
                if d.get("name") in (name, "*"):
                    enabled = [e.get("name") for e in (plugins.get(point) or {}).get("enabled") or []]
                    if name not in enabled:
                        return True
        return False

    strat = (args.get("NodeResourcesFit") or {}).get("scoringStrategy") or {}
    resources = [r.get("name") for r in strat.get("resources") or [{"name": "cpu"}, {"name": "memory"}]]
    shape = [(int(p.get("utilization", 0)), int(p.get("score", 0)))
             for p in (strat.get("requestedToCapacityRatio") or {}).get("shape") or []]
    pts = args.get("PodTopologySpread") or {}
    if disabled("PodTopologySpread"):
        spread = "disabled"
    else:
        spread = pts.get("defaultingType") or "System"
    return {"strategy": strat.get("type") or "LeastAllocated", "resources": resources, "shape": shape,
            "spread": spread, "fit_scored": not disabled("NodeResourcesFit")}


def describe_profile(settings: dict[str, Any] | None) -> str:
    """One sentence on why a profile does or does not pack GPUs."""
    if settings is None:
        return ("no KubeSchedulerConfiguration, so the default profile scores "
                "NodeResourcesFit with LeastAllocated over cpu and memory: it prefers the emptiest "
                "node and ignores nvidia.com/gpu")
    strategy, resources = settings["strategy"], settings["resources"]
    over = ", ".join(resources)
    if not settings["fit_scored"]:
        return "your profile disables NodeResourcesFit's score, so nothing prefers fuller nodes"
    if strategy == "LeastAllocated":
        gpu = "" if GPU in resources else f"; {GPU} is not even among its resources"
        return (f"your profile scores NodeResourcesFit with LeastAllocated over {over}: it prefers the "
                f"emptiest node, so small jobs land on every node{gpu}")
    if GPU not in resources:
        return (f"your profile scores NodeResourcesFit with {strategy} over {over}, but {GPU} is not "
                f"among its resources, so GPU use does not count")
    if strategy == "RequestedToCapacityRatio" and settings["shape"]:
        first, last = settings["shape"][0][1], settings["shape"][-1][1]
        if last <= first:
            return (f"your RequestedToCapacityRatio shape scores full nodes no higher than empty ones "
                    f"({settings['shape'][0]} -> {settings['shape'][-1]} as (utilization, score)): "
                    "it spreads")
    if settings["spread"] == "System":
        return (f"your profile scores NodeResourcesFit with {strategy} over {over}, but "
                "PodTopologySpread keeps the system default constraints (defaultingType: System, "
                "weight 2), which spread Deployment replicas across nodes")
    return f"your profile scores NodeResourcesFit with {strategy} over {over}"


# ---------------------------------------------------------- reading the decisions
def _overruled(lab) -> str | None:
    """The first placed GPU pod whose node NodeResourcesFit did not score highest, and who won."""
    pods = lab.pods()
    for _, row in pods.iterrows():
        if row["node"] is None or not row["gpus"]:
            continue
        try:
            scores = lab.explain(f"{row['namespace']}/{row['name']}").scores
        except Exception:  # an explanation is a bonus, never a reason to fail the check
            continue
        if scores is None or scores.empty or ("NodeResourcesFit", "weighted") not in scores.columns:
            continue
        fit = scores[("NodeResourcesFit", "weighted")]
        chosen = row["node"]
        if chosen not in scores.index:
            continue
        best = fit.idxmax()
        if best == chosen or fit[best] <= fit[chosen]:
            continue
        gains = {}
        for plugin in {c[0] for c in scores.columns if c[0] != "total"}:
            col = (plugin, "weighted")
            if col in scores.columns and plugin != "NodeResourcesFit":
                gains[plugin] = int(scores.at[chosen, col] - scores.at[best, col])
        if not gains:
            continue
        winner = max(gains, key=lambda k: gains[k])
        if gains[winner] <= 0:
            continue
        return (f"e.g. {row['name']} went to {chosen} although NodeResourcesFit scored {best} higher "
                f"({int(fit[best])} vs {int(fit[chosen])} weighted): {winner} gave {chosen} "
                f"{gains[winner]} more weighted points")
    return None


# ------------------------------------------------------------------------ checks
def check_training_fits(lab, config=None) -> Feedback:
    """Every pod runs, the 8-GPU training jobs included.

    ``config``: the KubeSchedulerConfiguration you applied (YAML text, dict or file),
    so the feedback can say what your profile scores; ``""`` means none (the default
    profile), ``None`` leaves that part out.
    """
    c = Checklist(f"{TITLE}: the training jobs fit", look="kubectl get pods --field-selector=status.phase=Pending")
    pending = _pending(lab)
    pods = lab.pods()
    big = pods[pods["gpus"] >= 8]
    if len(pending):
        nodes = _gpu_nodes(lab)
        free = sum(n["free"] for n in nodes)
        largest = max(nodes, key=lambda n: (n["free"], -nodes.index(n))) if nodes else None
        listed = [f"{r['name']} ({_plural(int(r['gpus']), 'GPU')})" for _, r in pending.iterrows()]
        block = (f"{free} GPUs are free, but the largest free block is {largest['free']} on "
                 f"{largest['name']}" if largest else "no node offers GPUs")
        parts = [f"{_plural(len(pending), 'pod')} still pending: {_names(listed)}: {block}"]
        if config is not None:
            parts.append(describe_profile(profile_settings(config)))
        hint = _overruled(lab)
        if hint:
            parts.append(hint)
        message = "; ".join(parts)
        c.require(False, message)
    else:
        placed = ", ".join(f"{r['name']} on {r['node']}" for _, r in big.iterrows())
        c.require(True, "", f"every pod is running, the 8-GPU jobs included ({placed or 'none'})")
    return c.done()


def check_packed(lab, max_partial: int = 0) -> Feedback:
    """At most ``max_partial`` GPU nodes are partially used (neither empty nor full)."""
    c = Checklist(f"{TITLE}: GPU nodes packed", look="kubectl describe nodes")
    nodes = _gpu_nodes(lab)
    partial = [n for n in nodes if 0 < n["used"] < n["allocatable"]]
    listed = ", ".join(f"{n['name']}: {n['used']}/{n['allocatable']}" for n in partial)
    full = sum(1 for n in nodes if n["used"] >= n["allocatable"])
    empty = sum(1 for n in nodes if n["used"] == 0)
    c.require(len(partial) <= max_partial,
              f"{_plural(len(partial), 'GPU node')} partially used ({listed}), goal <= {max_partial}: "
              "small jobs are spread over many nodes, leaving a few free GPUs on each",
              f"{_plural(len(partial), 'GPU node')} partially used ({listed or 'none'}), goal <= "
              f"{max_partial}; {full} full, {empty} empty",
              look=f"kubectl describe node {partial[0]['name'] if partial else 'h100-0'}")
    return c.done()


def check_gpu_nodes_reserved(lab) -> Feedback:
    """CPU-only pods run, on nodes without GPUs; GPU pods are not kept out by a taint."""
    c = Checklist(f"{TITLE}: GPU nodes kept for GPU work", look="kubectl get pods -o wide")
    gpu_nodes = {n["name"] for n in _gpu_nodes(lab)}
    pods = lab.pods()
    cpu_pods = pods[pods["gpus"] == 0]
    on_gpu = cpu_pods[cpu_pods["node"].isin(gpu_nodes)]
    where = sorted(set(on_gpu["node"]))
    c.require(on_gpu.empty,
              f"{_plural(len(on_gpu), 'CPU-only pod')} run on GPU nodes: {_names(list(on_gpu['name']))}, "
              f"on {_names(where)}; they take CPU and memory that GPU jobs on those nodes need, and nothing "
              "on those nodes keeps out a pod without a toleration",
              f"no CPU-only pod on a GPU node ({len(cpu_pods)} CPU-only pods, all elsewhere)",
              look=f"kubectl describe node {where[0] if where else 'h100-0'}")
    cpu_pending = cpu_pods[cpu_pods["node"].isna()]
    c.require(cpu_pending.empty,
              f"{_plural(len(cpu_pending), 'CPU-only pod')} pending: "
              + "; ".join(f"{r['name']}: {r['message']}" for _, r in cpu_pending.head(2).iterrows()),
              "every CPU-only pod is running", look="kubectl get pods --field-selector=status.phase=Pending")
    tainted_out = [r for _, r in pods[pods["node"].isna() & (pods["gpus"] > 0)].iterrows()
                   if "untolerated taint" in (r["message"] or "")]
    c.require(not tainted_out,
              f"{_plural(len(tainted_out), 'GPU pod')} kept out by a taint: "
              + "; ".join(f"{r['name']}: {r['message']}" for r in tainted_out[:2])
              + " (the GPU pods tolerate key nvidia.com/gpu, effect NoSchedule, and nothing else)",
              "no GPU pod is kept out by a taint", look="kubectl describe pod <pending GPU pod>")
    return c.done()
