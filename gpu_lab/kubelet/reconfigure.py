"""Changing a node's MIG layout, the way the GPU Operator's MIG manager does it.

On a real cluster you relabel the node (``kubectl label node n1
nvidia.com/mig.config=all-1g.10gb --overwrite``) and the MIG manager on that
node (NVIDIA/mig-parted, ``deployments/gpu-operator/reconfigure-mig.sh`` and
its Go successor) does this:

1. If the requested config is already applied (``nvidia-mig-parted assert``),
   it sets ``nvidia.com/mig.config.state=success`` and stops: nothing restarts.
2. An unknown config name or a layout the GPUs cannot take makes it set the
   state to ``failed`` and change nothing.
3. Otherwise it sets the state to ``pending``, shuts down the GPU Operator's
   own GPU clients on the node (device plugin, GFD, DCGM exporter, validator),
   applies the MIG mode change (which may need a GPU reset; when that is not
   possible and the manager runs with ``WITH_REBOOT``, it sets ``rebooting``
   and reboots the node), creates the new GPU and compute instances, starts
   the clients again (the device plugin re-registers and re-advertises) and
   sets ``success``. The state values are exactly ``pending``, ``rebooting``,
   ``success`` and ``failed``.

The MIG manager does not drain user workloads: with pods still holding the
GPUs, ``nvidia-mig-parted apply`` fails (the GPU is in use) and the state ends
``failed``. gpu-lab refuses up front instead, naming the pods, unless the
caller asks for them to be evicted (what an operator does by draining first).

After the change the kubelet keeps resource names the plugin no longer serves:
allocatable 0 at once, capacity for its 5-minute grace period (the stopped
endpoint, which the caller's device manager models), then 0 for good (NVIDIA
k8s-device-plugin issue #214), so a switch from mixed ``nvidia.com/mig-1g.10gb``
to ``all-disabled`` leaves ``nvidia.com/mig-1g.10gb: 0`` behind. The node
returned here already carries those names at 0.

``reconfigure`` is a pure function: it returns a new ``Node`` and never
touches the one given. It works on nodes made by a ``NodePool`` (their pool
spec says which GPUs, device-plugin config and mig-parted file they have).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass, replace

from ..errors import GpuLabError
from ..gpus.catalog import get_model
from ..model.nodepool import MIG_CONFIG_LABEL, MIG_STATE_LABEL, pool_gpu_state
from ..model.objects import Node

STATES = ("pending", "rebooting", "success", "failed")
_GPU_LABEL_PREFIXES = ("nvidia.com/gpu.", "nvidia.com/mig-", "nvidia.com/mig.", "nvidia.com/mps.")
_PLUGIN_RESOURCE_PREFIXES = ("nvidia.com/gpu", "nvidia.com/mig-")


@dataclass(frozen=True)
class ReconfigureResult:
    node: Node  # the node after the MIG manager is done
    evicted: tuple[str, ...]  # pod keys evicted first (empty unless evict=True and needed)
    state: str  # final nvidia.com/mig.config.state: "success" or "failed"
    steps: tuple[str, ...] = ()  # every state the label took, e.g. ("pending", "success")
    message: str = ""  # why it failed, or what changed
    warnings: tuple[str, ...] = ()  # what the device plugin / GFD complain about afterwards

    @property
    def changed(self) -> bool:
        """True when GPU instances were destroyed and created (the plugin restarted)."""
        return "pending" in self.steps


def reconfigure(node: Node, new_config: str, *, pods_holding: list[str], evict: bool,
                reboot: bool = False) -> ReconfigureResult:
    """Apply mig-parted config ``new_config`` to ``node`` as the MIG manager would.

    ``pods_holding`` are the keys (``namespace/name``) of pods holding any of
    the node's GPU devices. While there are some, a real change is refused
    with a ``GpuLabError`` naming them, unless ``evict=True`` (they are then
    reported in ``evicted``; removing them is the caller's job). ``reboot``
    models a node where switching MIG mode needs a reboot (VMs, pass-through):
    the state goes through ``rebooting`` when the MIG mode of some GPU changes.
    The config is looked up among NVIDIA's predefined configs for the model,
    or in the node pool's own ``mig.migParted`` file when it has one.
    """
    spec = (node.raw or {}).get("nodePool")
    if not isinstance(spec, dict) or node.pool is None:
        raise GpuLabError(f'node "{node.name}": MIG reconfiguration needs a node made by a NodePool '
                          "(gpu-lab cannot tell the GPUs of a plain v1 Node)")
    gpu = gpu_raw if isinstance(gpu_raw := spec.get("gpu"), dict) else {}
    if not gpu.get("model") or not gpu.get("count"):
        raise GpuLabError(f'node "{node.name}": has no GPUs; there is no MIG config to change')
    model = get_model(gpu["model"])
    if not model.mig_capable:
        raise GpuLabError(f'node "{node.name}": {model.name} GPUs do not support MIG; the GPU Operator runs '
                          f"no MIG manager there, so {MIG_CONFIG_LABEL} has no effect")
    if not isinstance(new_config, str) or not new_config:
        raise GpuLabError(f'node "{node.name}": {MIG_CONFIG_LABEL}: Invalid value: {new_config!r}: '
                          "must be a config name")
    old_spec = copy.deepcopy(spec)
    new_spec = copy.deepcopy(spec)
    mig = dict(new_spec.get("mig") or {})
    mig["config"] = new_config
    new_spec["mig"] = mig

    _, old_name, old_layouts = pool_gpu_state(node.name, node.pool, old_spec, strict=False)
    try:
        state, _, new_layouts = pool_gpu_state(node.name, node.pool, new_spec, strict=False)
    except GpuLabError as err:
        # mig-parted assert --valid-config fails: state failed, nothing else changes.
        reason = re.sub(r'^NodePool "[^"]*"(?: is invalid)?: spec\.mig\.(config|migParted): ', "", str(err))
        labels = dict(node.labels)
        labels[MIG_CONFIG_LABEL] = new_config
        labels[MIG_STATE_LABEL] = "failed"
        return ReconfigureResult(replace(node, labels=labels), (), "failed", ("failed",),
                                 f'MIG config "{new_config}" cannot be applied: {reason}')

    assert new_layouts is not None  # new_spec names a MIG config: the layouts resolved, or it raised
    old_layouts = old_layouts if old_layouts is not None else [None] * len(new_layouts)
    if new_layouts == old_layouts:
        # Already applied: the manager only reports success; nothing restarts, nobody is evicted.
        labels = dict(node.labels)
        labels[MIG_CONFIG_LABEL] = new_config
        labels[MIG_STATE_LABEL] = "success"
        raw = dict(node.raw)
        raw["nodePool"] = new_spec
        return ReconfigureResult(replace(node, labels=labels, raw=raw), (), "success", ("success",),
                                 f'MIG config "{new_config}" is already applied'
                                 + (f' (same layout as "{old_name}")' if old_name not in (None, new_config) else ""))

    holders = list(dict.fromkeys(pods_holding or []))
    if holders and not evict:
        raise GpuLabError(f'node "{node.name}": cannot change MIG config to "{new_config}" while pods hold '
                          f"its GPUs: {', '.join(holders)} (evict them first, or pass evict=True)")

    steps = ["pending"]
    mode_change = any((a is None) != (b is None) for a, b in zip(old_layouts, new_layouts))
    if reboot and mode_change:
        steps.append("rebooting")
    steps.append("success")

    labels = {k: v for k, v in node.labels.items() if not k.startswith(_GPU_LABEL_PREFIXES)}
    labels.update(state.labels)
    labels.update(new_spec.get("labels") or {})  # the pool's own labels still win
    capacity, allocatable = dict(node.capacity), dict(node.allocatable)
    for res in list(capacity):
        if res.startswith(_PLUGIN_RESOURCE_PREFIXES) and res not in state.capacity:
            capacity[res] = 0  # the kubelet keeps names the plugin stopped serving, at 0
    for res in list(allocatable):
        if res.startswith(_PLUGIN_RESOURCE_PREFIXES) and res not in state.capacity:
            allocatable[res] = 0
    capacity.update(state.capacity)
    allocatable.update(state.capacity)
    raw = dict(node.raw)
    raw["nodePool"] = new_spec
    if state.warnings:
        raw["warnings"] = list(state.warnings)
    else:
        raw.pop("warnings", None)
    new_node = replace(node, labels=labels, capacity=capacity, allocatable=allocatable,
                       taints=list(node.taints), annotations=dict(node.annotations),
                       devices={r: list(ids) for r, ids in state.devices.items()},
                       device_numa=dict(state.numa), raw=raw)
    before = _describe(old_name, node)
    after = ", ".join(f"{r}: {n}" for r, n in state.capacity.items()) or "no GPU resources"
    return ReconfigureResult(new_node, tuple(holders), "success", tuple(steps),
                             f'{before} -> MIG config "{new_config}": {after}', state.warnings)


def eviction_message(node: str, config: str) -> str:
    """The status message of a pod evicted to apply ``config`` (every backend says it so)."""
    return f"evicted from {node} to apply {MIG_CONFIG_LABEL}={config}"


def failure(node: str, config: str, message: str) -> str:
    """The one line a relabel that leaves the state ``failed`` answers with."""
    return f'node "{node}": {MIG_CONFIG_LABEL}={config}: {message}'


def _describe(name: str | None, node: Node) -> str:
    res = ", ".join(f"{r}: {n}" for r, n in node.capacity.items()
                    if r.startswith(_PLUGIN_RESOURCE_PREFIXES) and n)
    return f'MIG config "{name or "none"}" ({res or "no GPU resources"})'
