"""Small builders for scheduler unit tests: nodes, pods and a cycle context."""

from __future__ import annotations

from gpu_lab.model.objects import (
    ContainerResources,
    Node,
    Pod,
    Taint,
    Toleration,
    compute_pod_requests,
)
from gpu_lab.sim.framework import CycleContext
from gpu_lab.sim.profile import load_scheduler_config
from gpu_lab.sim.scheduler import Scheduler
from gpu_lab.sim.snapshot import Snapshot

GI = 2**30


def node(name, cpu=8, mem_gi=32, gpus=0, pods=110, labels=None, taints=(), unschedulable=False):
    alloc = {"cpu": cpu * 1000, "memory": mem_gi * GI, "pods": pods}
    if gpus:
        alloc["nvidia.com/gpu"] = gpus
    return Node(name, labels={"kubernetes.io/hostname": name, **(labels or {})},
                taints=[Taint(*t) for t in taints], unschedulable=unschedulable,
                capacity=dict(alloc), allocatable=dict(alloc),
                devices={"nvidia.com/gpu": [f"GPU-{name}-{i}" for i in range(gpus)]} if gpus else {})


def pod(name, cpu_m=None, mem_mi=None, gpus=0, priority=0, ns="default", labels=None,
        tolerations=(), node_selector=None, affinity=None, created=0, **kw):
    req, stated = {}, set()
    if cpu_m is not None:
        req["cpu"], _ = cpu_m, stated.add("cpu")
    if mem_mi is not None:
        req["memory"], _ = mem_mi * 2**20, stated.add("memory")
    if gpus:
        req["nvidia.com/gpu"] = gpus
    p = Pod(ns, name, labels=dict(labels or {}), priority=priority, created=created,
            tolerations=[Toleration(**t) for t in tolerations], node_selector=dict(node_selector or {}),
            affinity=affinity or {}, containers=[ContainerResources("c", req, dict(req), frozenset(stated))], **kw)
    compute_pod_requests(p)
    return p


def snapshot(*nodes):
    s = Snapshot()
    s.set_nodes(list(nodes))
    return s


def ctx(p, snap, config=None):
    cfg = load_scheduler_config(config)
    return CycleContext(pod=p, snapshot=snap, profile=cfg.profile_for(p.scheduler_name))


def scheduler(snap, config=None, **kw):
    kw.setdefault("deterministic", True)
    return Scheduler.from_config(config, snap, seed=0, **kw)


def bind(snap, p, node_name):
    snap.add_pod(p, snap.index[node_name])
