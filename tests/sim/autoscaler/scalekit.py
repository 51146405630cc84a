"""Small builders for the autoscaler tests: groups, nodes, pods, and picking actions apart."""

from __future__ import annotations

from gpu_lab.sim.autoscaler import (
    Autoscaler,
    AutoscalerSpec,
    Cordon,
    Event,
    NodeGroup,
    NodeState,
    PodState,
    ScaleDown,
    ScaleUp,
)

GI = 2**30


def gpu_group(name="h100", gpus=8, max_count=4, min_count=0, price=None, delay=300.0, cpu=192, mem_gi=2048):
    alloc = {"cpu": cpu * 1000, "memory": mem_gi * GI, "pods": 110, "nvidia.com/gpu": gpus}
    return NodeGroup(name, max_count, min_count, delay, alloc, price)


def cpu_group(name="cpu", max_count=4, min_count=0, price=None, delay=120.0, cpu=16, mem_gi=64):
    return NodeGroup(name, max_count, min_count, delay, {"cpu": cpu * 1000, "memory": mem_gi * GI, "pods": 110},
                     price)


def pod(name, cpu_m=100, mem_mi=128, gpus=0, owner="ReplicaSet", ns="default", annotations=None):
    req = {"cpu": cpu_m, "memory": mem_mi * 2**20}
    if gpus:
        req["nvidia.com/gpu"] = gpus
    return PodState(ns, name, req, owner, dict(annotations or {}))


def node(name, group, *pods, created_at=0.0, annotations=None, pool=None):
    return NodeState(name, pool if pool is not None else group.name, dict(group.allocatable), list(pods),
                     created_at, annotations=dict(annotations or {}))


def scaler(*groups, **spec):
    seed = spec.pop("seed", 0)
    fits = spec.pop("fits", None)
    reschedule = spec.pop("can_reschedule", None)
    return Autoscaler(AutoscalerSpec(**spec), groups, fits=fits, can_reschedule=reschedule, seed=seed)


def ups(actions):
    return [a for a in actions if isinstance(a, ScaleUp)]


def downs(actions):
    return [a for a in actions if isinstance(a, ScaleDown)]


def cordons(actions):
    return [a for a in actions if isinstance(a, Cordon)]


def events(actions, reason=None):
    return [a for a in actions if isinstance(a, Event) and (reason is None or a.reason == reason)]


def removed(actions):
    return [a.node for a in downs(actions)]
