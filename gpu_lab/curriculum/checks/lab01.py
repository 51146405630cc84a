"""Lab 01: the device-plugin outage. ``gpu_lab.labs.lab01``.

``paged_cluster()`` builds the incident the learner is paged for: four H100 nodes,
training jobs pending, and the device plugin dead on some nodes (which ones is the
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

from ...connection import connect
from ...errors import LabCheckFailed
from .feedback import Checklist, Feedback

__all__ = ["HINTS", "CLUSTER", "NAMESPACE", "check_diagnosis", "check_recovery", "paged_cluster"]

HINTS = (
    "Start from the pending jobs: `kubectl get pods -n ml --field-selector=status.phase=Pending` and "
    "`kubectl describe pod -n ml big-train` say why the scheduler finds no room. Then compare, node by "
    "node, what the scheduler may hand out with what is installed: "
    "`kubectl get nodes -o custom-columns=NAME:.metadata.name,CAP:.status.capacity.nvidia\\.com/gpu,"
    "ALLOC:.status.allocatable.nvidia\\.com/gpu`.",
    "A node whose device plugin is down advertises fewer GPUs in allocatable than it has. Capacity is not "
    "a reliable count of what is installed (after a few minutes without a plugin it drops to 0 too); "
    "GPU Feature Discovery's label is: `kubectl describe node <node>` shows nvidia.com/gpu.count under Labels.",
    "Stranded means installed, idle and invisible: on each broken node, installed minus what running pods "
    "already hold (`kubectl describe node <node>`, Allocated resources). Running pods keep their devices "
    "when the plugin dies; do not count them.",
    "The answer: broken_nodes are the nodes whose allocatable nvidia.com/gpu is below their "
    "nvidia.com/gpu.count label; stranded_gpus is the sum over them of label count minus requested GPUs. "
    "To recover, call lab.restart_plugin(node) for each broken node, then lab.schedule(); move or delete nothing.",
)

NAMESPACE = "ml"
GPU = "nvidia.com/gpu"
COUNT_LABEL = "nvidia.com/gpu.count"  # written by GPU Feature Discovery, not by the device plugin

CLUSTER = """
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: h100}
spec: {count: 4, gpu: {model: H100-80GB, count: 8}, cpu: "96", memory: 1024Gi}
---
apiVersion: v1
kind: Namespace
metadata: {name: ml}
"""

# (name, GPUs, pinned node) running before the outage; then the jobs that arrive during it.
RUNNING = (("pretrain-a", 8, "h100-0"), ("serve-llm", 2, "h100-1"), ("train-b", 6, "h100-2"))
ARRIVING = (("big-train", 8), ("finetune", 4), ("eval", 2))
# The incident: h100-3's plugin died long ago (past the kubelet's 5-minute grace period,
# so its capacity is 0 too); h100-1's died a minute before the page.
DEAD_LONG_AGO, DEAD_RECENTLY = "h100-3", "h100-1"


def _pod(name: str, gpus: int, node: str | None = None) -> str:
    selector = f"\n  nodeSelector: {{kubernetes.io/hostname: {node}}}" if node else ""
    return f"""apiVersion: v1
kind: Pod
metadata: {{name: {name}, namespace: {NAMESPACE}}}
spec:{selector}
  containers:
  - name: trainer
    image: nvcr.io/nvidia/pytorch:24.08-py3
    resources: {{limits: {{nvidia.com/gpu: {gpus}}}}}
"""


@dataclass
class Incident:
    broken: dict[str, int]  # node -> GPUs stranded (installed, idle, not allocatable)
    installed: dict[str, int]  # node -> GPUs GFD counted
    in_use: dict[str, int]  # node -> GPUs running pods held at the page
    running: dict[str, str]  # pod -> node, for pods running when the pager went off
    gpus: dict[str, int] = field(default_factory=dict)  # pod -> GPUs it asks for
    capacity_gap: int = 0  # sum of capacity - allocatable at the page (a tempting wrong answer)


_INCIDENTS: weakref.WeakKeyDictionary[Any, Incident] = weakref.WeakKeyDictionary()


def paged_cluster(backend: str = "sim", **options: Any):
    """The cluster you are paged for: returns a ``Session`` with the incident under way.

    ``options`` go to ``gpu_lab.connect`` (``deterministic=True`` unless given).
    """

    options.setdefault("deterministic", True)
    lab = connect(backend, **options)
    if backend != "sim":
        lab.reset()
    lab.apply(CLUSTER)
    lab.apply("---\n".join(_pod(n, g, node) for n, g, node in RUNNING))
    lab.schedule()
    lab.kill_plugin(DEAD_LONG_AGO)
    lab.advance(600)  # past the grace period: capacity follows allocatable to 0
    lab.kill_plugin(DEAD_RECENTLY)
    lab.advance(60)
    lab.apply("---\n".join(_pod(n, g) for n, g in ARRIVING))
    lab.schedule()
    nodes = lab.nodes().set_index("name")
    installed = {n: int(lab.describe_node(n).labels.get(COUNT_LABEL, 0)) for n in nodes.index}
    in_use = {n: int(nodes.loc[n, f"{GPU} requested"]) for n in nodes.index}
    broken = {n: installed[n] - in_use[n] for n in (DEAD_RECENTLY, DEAD_LONG_AGO)}
    pods = lab.pods()
    running = {r["name"]: r["node"] for _, r in pods.iterrows() if r["phase"] == "Running"}
    gpus = {r["name"]: int(r["gpus"]) for _, r in pods.iterrows()}
    gap = int((nodes[f"{GPU} capacity"] - nodes[f"{GPU} allocatable"]).sum())
    _INCIDENTS[lab] = Incident(dict(sorted(broken.items())), installed, in_use, running, gpus, gap)
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
            c.require(False, f"you named {node}, but its plugin is fine: it advertises all "
                             f"{_gpus(gpus)} GFD counted (allocatable = capacity = {gpus}; "
                             f"{inc.in_use[node]} in use). A full node is busy, not broken")
    for node in truth:
        if node in named:
            continue
        if node == DEAD_LONG_AGO:
            why = (f"its plugin died more than 5 minutes ago, so capacity fell to 0 as well as "
                   f"allocatable; its label {COUNT_LABEL}={inc.installed[node]} (from GPU Feature "
                   f"Discovery) still says {_gpus(inc.installed[node])} are installed")
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
        c.require(True, "", f"{total} idle GPUs were stranded ({breakdown})")
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
    c = Checklist("Lab 01: recovery", look="kubectl get pods -n ml --field-selector=status.phase!=Running")
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
              f"the {len(inc.running)} pods running at the page kept their nodes")
    nodes = lab.nodes().set_index("name")
    still = [f"{n} (allocatable {int(nodes.loc[n, f'{GPU} allocatable'])} of {inc.installed[n]})"
             for n in inc.installed
             if n in nodes.index and int(nodes.loc[n, f"{GPU} allocatable"]) < inc.installed[n]]
    c.require(not still, f"device plugin still down on {', '.join(still)}",
              f"every node advertises all its GPUs again ({sum(inc.installed.values())} in all)")
    return c.done()
