"""Lab 01: the device-plugin outage. ``gpu_lab.labs.lab01``.

``paged_cluster()`` builds the incident of the ticket: a mixed fleet (four L4 nodes of 4
GPUs for serving, two A100 nodes of 8 for research), serving replicas and a fine-tuning job
pending, and the device plugin dead on some nodes (which ones is the
learner's to find, from what ``kubectl`` shows). It remembers the facts of the incident
so the check cells can compare the learner's answers with them and say exactly what
is wrong: ``check_diagnosis`` (which nodes, how many GPUs stranded) and
``check_recovery`` (every job running, nothing that was running disturbed).

Only the public ``Session`` calls are used, so the same lab runs on ``"sim"`` and on
``"local"`` (a real control plane whose fake plugins are real processes).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ...errors import LabCheckFailed
from .feedback import Checklist, Feedback
from .tickets import fresh_session

__all__ = ["HINTS", "CLUSTER", "NAMESPACES", "check_diagnosis", "check_recovery", "paged_cluster"]

HINTS = (
    "Start from the pending pods: `kubectl get pods -A --field-selector=status.phase=Pending` and "
    "`kubectl describe pod -n serving ranker-4` say why the scheduler finds no room. Then compare, node by "
    "node, what the scheduler may hand out with what is installed: "
    "`kubectl get nodes -L nvidia.com/gpu.product -o custom-columns=NAME:.metadata.name,"
    "CAP:.status.capacity.nvidia\\.com/gpu,ALLOC:.status.allocatable.nvidia\\.com/gpu`.",
    "A node whose device plugin is down advertises fewer GPUs in allocatable than it has. Capacity is not "
    "a reliable count of what is installed (after a few minutes without a plugin it drops to 0 too); "
    "GPU Feature Discovery's label is: `kubectl describe node <node>` shows nvidia.com/gpu.count under Labels. "
    "The pools differ: an L4 node has 4 GPUs, an A100 node 8.",
    "Stranded means installed, idle and invisible: on each broken node, installed minus what running pods "
    "already hold (`kubectl describe node <node>`, Allocated resources). Running pods keep their devices "
    "when the plugin dies; do not count them. A node can be broken and strand nothing, and a full node "
    "is not broken for being full.",
    "The answer: broken_nodes are the nodes whose allocatable nvidia.com/gpu is below their "
    "nvidia.com/gpu.count label (full ones included); stranded_gpus is the sum over them of label count "
    "minus requested GPUs. To recover, call lab.restart_plugin(node) for each broken node, then "
    "lab.schedule(); move or delete nothing.",
)

NAMESPACES = ("serving", "research")
GPU = "nvidia.com/gpu"
COUNT_LABEL = "nvidia.com/gpu.count"  # written by GPU Feature Discovery, not by the device plugin
L4, A100 = "NVIDIA-L4", "NVIDIA-A100-SXM4-80GB"

CLUSTER = """
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: l4}
spec: {count: 4, gpu: {model: L4, count: 4}, cpu: "48", memory: 192Gi}
---
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: a100}
spec: {count: 2, gpu: {model: A100-80GB, count: 8}, cpu: "96", memory: 1024Gi}
---
apiVersion: v1
kind: Namespace
metadata: {name: serving}
---
apiVersion: v1
kind: Namespace
metadata: {name: research}
"""

# (namespace, name, GPUs, product, pinned node) running before the outage; then the pods
# that arrive during it (no node pinned: they ask for a GPU product, as serving pods do).
RUNNING = (
    ("serving", "embed-0", 1, L4, "l4-0"), ("serving", "embed-1", 1, L4, "l4-0"),
    ("serving", "ranker-0", 1, L4, "l4-0"), ("serving", "ranker-1", 1, L4, "l4-0"),
    ("serving", "ocr-0", 2, L4, "l4-1"),
    ("serving", "asr-0", 1, L4, "l4-2"),
    ("serving", "asr-1", 2, L4, "l4-3"), ("serving", "ocr-1", 2, L4, "l4-3"),
    ("research", "pretrain", 8, A100, "a100-0"),
    ("research", "sweep", 4, A100, "a100-1"),
)
ARRIVING = (
    ("serving", "ranker-2", 1, L4), ("serving", "ranker-3", 1, L4), ("serving", "ranker-4", 1, L4),
    ("serving", "ocr-2", 2, L4),
    ("research", "finetune", 4, A100),
)
# The incident: l4-2's plugin died in the night (past the kubelet's 5-minute grace period,
# so its capacity is 0 too); l4-3's and a100-1's died a minute before the ticket. l4-3 is
# full: its running pods keep their devices, so it is broken and strands nothing.
DEAD_LONG_AGO, DEAD_RECENTLY = ("l4-2",), ("l4-3", "a100-1")


def _pod(namespace: str, name: str, gpus: int, product: str, node: str | None = None) -> str:
    selector = f"kubernetes.io/hostname: {node}" if node else f"nvidia.com/gpu.product: {product}"
    image = "nvcr.io/nvidia/tritonserver:24.08-py3" if namespace == "serving" else "nvcr.io/nvidia/pytorch:24.08-py3"
    return f"""apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  nodeSelector: {{{selector}}}
  containers:
  - name: main
    image: {image}
    resources: {{limits: {{nvidia.com/gpu: {gpus}}}}}
"""


@dataclass
class Incident:
    broken: dict[str, int]  # node -> GPUs stranded (installed, idle, not allocatable)
    installed: dict[str, int]  # node -> GPUs GFD counted
    in_use: dict[str, int]  # node -> GPUs running pods held at the ticket
    running: dict[str, str]  # pod -> node, for pods running when the ticket came in
    gpus: dict[str, int] = field(default_factory=dict)  # pod -> GPUs it asks for
    capacity_gap: int = 0  # sum of capacity - allocatable at the ticket (a tempting wrong answer)
    capacity: dict[str, int] = field(default_factory=dict)  # node -> capacity at the ticket


_INCIDENTS: weakref.WeakKeyDictionary[Any, Incident] = weakref.WeakKeyDictionary()


def paged_cluster(backend: str = "sim", **options: Any):
    """The cluster of the ticket: returns a ``Session`` with the incident under way.

    ``options`` go to ``gpu_lab.connect`` (``deterministic=True`` unless given).
    """
    lab = fresh_session(backend, options)
    lab.apply(CLUSTER)
    lab.apply("---\n".join(_pod(*pod) for pod in RUNNING))
    lab.schedule()
    for node in DEAD_LONG_AGO:
        lab.kill_plugin(node)
    lab.advance(600)  # past the grace period: capacity follows allocatable to 0
    for node in DEAD_RECENTLY:
        lab.kill_plugin(node)
    lab.advance(60)
    lab.apply("---\n".join(_pod(*pod) for pod in ARRIVING))
    lab.schedule()
    nodes = lab.nodes().set_index("name")
    installed = {n: int(lab.describe_node(n).labels.get(COUNT_LABEL, 0)) for n in nodes.index}
    in_use = {n: int(nodes.loc[n, f"{GPU} requested"]) for n in nodes.index}
    capacity = {n: int(nodes.loc[n, f"{GPU} capacity"]) for n in nodes.index}
    broken = {n: installed[n] - in_use[n] for n in DEAD_RECENTLY + DEAD_LONG_AGO}
    pods = lab.pods()
    running = {r["name"]: r["node"] for _, r in pods.iterrows() if r["phase"] == "Running"}
    gpus = {r["name"]: int(r["gpus"]) for _, r in pods.iterrows()}
    gap = int((nodes[f"{GPU} capacity"] - nodes[f"{GPU} allocatable"]).sum())
    _INCIDENTS[lab] = Incident(dict(sorted(broken.items())), installed, in_use, running, gpus, gap, capacity)
    return lab


def _incident(lab) -> Incident:
    try:
        return _INCIDENTS[lab]
    except (KeyError, TypeError):
        raise LabCheckFailed("Lab 01: this session is not the paged cluster: build it with "
                             "lab = gpu_lab.labs.lab01.paged_cluster(BACKEND) and pass that lab") from None


def _gpus(n: int) -> str:
    return f"{n} GPU" if n == 1 else f"{n} GPUs"


def _names(nodes: Iterable[str]) -> str:
    nodes = list(nodes)
    return ", ".join(nodes) if nodes else "none"


def check_diagnosis(lab, broken_nodes: Iterable[str], stranded_gpus: int) -> Feedback:
    """Your diagnosis: the nodes whose device plugin is down, and the idle GPUs they hid."""
    inc = _incident(lab)
    c = Checklist("Lab 01: diagnosis", look="kubectl describe node <node>")
    if isinstance(broken_nodes, str):
        broken_nodes = [broken_nodes]
    named = sorted({str(n) for n in broken_nodes})
    truth = sorted(inc.broken)
    for node in named:
        if node in inc.broken:
            continue
        if node not in inc.installed:
            c.require(False, f"you named {node}, but the cluster has no such node "
                             f"(nodes: {_names(sorted(inc.installed))})")
        else:
            gpus = inc.installed[node]
            busy = " A full node is busy, not broken" if inc.in_use[node] == gpus else ""
            c.require(False, f"you named {node}, but its plugin is fine: it advertises all "
                             f"{_gpus(gpus)} GFD counted (allocatable = capacity = {gpus}; "
                             f"{inc.in_use[node]} in use).{busy}")
    for node in truth:
        if node in named:
            continue
        if node in DEAD_LONG_AGO:
            why = (f"its plugin died more than 5 minutes ago, so capacity fell to 0 as well as "
                   f"allocatable; its label {COUNT_LABEL}={inc.installed[node]} (from GPU Feature "
                   f"Discovery) still says {_gpus(inc.installed[node])} are installed")
        elif inc.broken[node] == 0:
            why = (f"running pods hold all {_gpus(inc.installed[node])} it has, so it looks full, "
                   f"but its allocatable is 0 (capacity {inc.capacity[node]}): full and broken "
                   f"at once, and no new pod can land there even when one of them ends")
        else:
            why = (f"capacity {inc.installed[node]} but allocatable 0: the kubelet still "
                   f"remembers the devices (grace period) while the plugin is gone")
        c.require(False, f"you missed a node whose plugin is down: on one node {why}")
    if named == truth:
        c.require(True, "", f"broken device plugins: {_names(truth)}")
    total = sum(inc.broken.values())
    breakdown = "; ".join(f"{n}: {inc.installed[n]} installed - {inc.in_use[n]} in use = {s}"
                          for n, s in inc.broken.items())
    try:
        said = int(stranded_gpus)
    except (TypeError, ValueError):
        said = None
    if said == total:
        # the per-node breakdown would name a node the learner missed: only once the nodes are right
        c.require(True, "", f"{total} idle GPUs were stranded" + (f" ({breakdown})" if named == truth else ""))
    elif said is None:
        c.require(False, f"stranded_gpus should be a number of GPUs, not {stranded_gpus!r}")
    else:
        hint = ""
        if said == sum(inc.installed[n] for n in inc.broken):
            hint = (" You also counted the GPUs running pods hold; those are not stranded: "
                    "running pods keep their devices when the plugin dies.")
        elif said == inc.capacity_gap:
            hint = (" Capacity minus allocatable misses a node whose plugin died more than 5 "
                    "minutes ago (capacity is 0 there too), and counts GPUs in use.")
        else:
            alone = [n for n, s in inc.broken.items() if s == said]
            if alone:
                hint = " That is one broken node alone."
        c.require(False, f"you said {said} stranded GPUs, which is not the count on the broken nodes.{hint}",
                  look="kubectl describe node <broken node>")
    return c.done()


def check_recovery(lab) -> Feedback:
    """Every job running, the pods that ran before the outage untouched, every plugin back."""
    inc = _incident(lab)
    c = Checklist("Lab 01: recovery", look="kubectl get pods -A --field-selector=status.phase!=Running")
    pods = lab.pods()
    pending = pods[pods["phase"] != "Running"]
    if len(pending):
        items = ", ".join(f"{r['name']} ({_gpus(int(r['gpus']))}, {r['phase']})"
                          for _, r in pending.iterrows())
        c.require(False, f"{len(pending)} pod{'s' if len(pending) != 1 else ''} still not running: "
                         f"{items}")
    else:
        c.require(True, "", f"all {len(pods)} pods are running")
    now = {r["name"]: r["node"] for _, r in pods.iterrows() if r["phase"] == "Running"}
    moved = [f"{p} (was on {node}, now {now.get(p) or 'not running'})"
             for p, node in inc.running.items() if now.get(p) != node]
    missing = [p for p in inc.gpus if p not in set(pods["name"])]
    c.require(not moved and not missing,
              "disturbed workloads: " + "; ".join(moved + [f"{p} was deleted" for p in missing])
              + ". Restarting a device plugin never needs a running pod moved",
              f"the {len(inc.running)} pods running when the ticket came in kept their nodes")
    nodes = lab.nodes().set_index("name")
    still = [f"{n} (allocatable {int(nodes.loc[n, f'{GPU} allocatable'])} of {inc.installed[n]})"
             for n in inc.installed
             if n in nodes.index and int(nodes.loc[n, f"{GPU} allocatable"]) < inc.installed[n]]
    c.require(not still, f"device plugin still down on {', '.join(still)}",
              f"every node advertises all its GPUs again ({sum(inc.installed.values())} in all)",
              look="kubectl describe node <node>")
    return c.done()
