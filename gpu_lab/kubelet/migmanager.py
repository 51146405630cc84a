"""NVIDIA's MIG manager on the node agent's nodes (the GPU Operator's ``k8s-mig-manager``).

What it does, as NVIDIA/mig-parted's ``deployments/gpu-operator`` (``reconfigure-mig.sh``
and its Go successor) does it: it follows its Node's ``nvidia.com/mig.config`` label, and
on a new value

1. asserts the config is valid for the node's GPUs, else sets
   ``nvidia.com/mig.config.state=failed`` and changes nothing;
2. when the layout is already applied, sets ``success`` and restarts nothing;
3. else sets ``pending``, stops the GPU Operator's GPU clients on the node by setting their
   ``nvidia.com/gpu.deploy.<client>`` labels to ``paused-for-mig-change`` and waiting for
   them to go (here the one client the node runs: the device plugin), applies the layout,
   starts the clients again (the label back to what it was) and sets ``success``, or
   ``failed`` when applying fails.

It never evicts user pods: while one holds a GPU, ``nvidia-mig-parted apply`` fails (the GPU
is busy) and the state ends ``failed`` (here at once, without stopping the plugin first).
``label_node(..., evict=True)`` drains them, as an operator does first: the session allows
evictions for that one config, and the manager evicts once the plugin is stopped, so no
replacement can land on the old layout; the kubelet evicts them (Failed, reason Evicted).

The layout, devices and labels after the change are the shared model's
(``kubelet.reconfigure``, the simulator's too). The kubelet side keeps the real device
manager's rule: a resource the restarted plugin no longer serves keeps its capacity with
allocatable 0 until the endpoint's 5-minute grace period ends, then shows 0.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from ..errors import GpuLabError
from ..model.nodepool import MIG_CONFIG_LABEL, MIG_STATE_LABEL
from .reconfigure import eviction_message, reconfigure

if TYPE_CHECKING:
    from ..kube import KubeClient
    from .node import AgentNode

log = logging.getLogger("gpu_lab.nodeagent")

#: the device plugin DaemonSet's nodeSelector label in the GPU Operator
DEVICE_PLUGIN_DEPLOY_LABEL = "nvidia.com/gpu.deploy.device-plugin"
PAUSED = "paused-for-mig-change"
#: how long the plugin may take to stop, or to serve the new layout
STEP_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class MigOutcome:
    """How the MIG manager's run for ``config`` ended."""

    config: str
    state: str  # "success" or "failed" (the state label), or "ignored": no MIG manager acts
    evicted: tuple[str, ...] = ()  # namespace/name of the pods evicted for it
    message: str = ""


def holders(sn: AgentNode) -> list[str]:
    """The pods (namespace/name) holding any of the node's devices (the worker's view)."""
    return sorted(st.key for uid, st in list(sn.pods.items())
                  if st.admitted and sn.manager.pods.holds_any(uid))


def changes(before: dict[str, str], after: dict[str, str]) -> dict[str, str | None]:
    """A merge patch turning the labels ``before`` into ``after`` (None removes)."""
    return {k: after.get(k) for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)}


def _wait(done: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while not done():
        if time.monotonic() > deadline:
            raise GpuLabError(f"timed out after {STEP_TIMEOUT_S:.0f} s waiting for {what}")
        time.sleep(0.05)


def _published(sn: AgentNode, want: dict[str, int]) -> bool:
    """The node's last status patch shows allocatable ``want`` for those resources."""
    alloc = (sn.last_status or {}).get("allocatable") or {}
    return all(alloc.get(r) == str(n) for r, n in want.items())


def run(client: KubeClient, sn: AgentNode, wanted: str,
        evict: Callable[[str, str], None]) -> MigOutcome:
    """Apply ``wanted`` to ``sn`` (on the node's worker thread, which owns its pods);
    ``evict(pod key, message)`` evicts one pod as the kubelet does."""
    labels = dict((client.get("Node", sn.name).get("metadata") or {}).get("labels") or {})
    if not sn.has_plugin:
        why = sn.static_reason or "no device plugin"
        return MigOutcome(wanted, "ignored", message=f"the node runs no MIG manager ({why})")
    record = replace(sn.node, labels=labels)
    holding = holders(sn)
    allowed = sn.mig_evict == wanted
    try:
        result = reconfigure(record, wanted, pods_holding=holding, evict=allowed)
    except GpuLabError as err:
        if not holding:  # not a MIG GPU: the GPU Operator runs no MIG manager there
            return MigOutcome(wanted, "ignored", message=str(err))
        client.patch("Node", sn.name, {"metadata": {"labels": {MIG_STATE_LABEL: "failed"}}})
        return MigOutcome(wanted, "failed", message=str(err))
    if result.state == "failed":
        client.patch("Node", sn.name, {"metadata": {"labels": {MIG_STATE_LABEL: "failed"}}})
        return MigOutcome(wanted, "failed", message=result.message)
    if not result.changed:
        client.patch("Node", sn.name, {"metadata": {"labels": changes(labels, result.node.labels)}})
        return MigOutcome(wanted, "success", message=result.message)

    deploy = labels.get(DEVICE_PLUGIN_DEPLOY_LABEL)
    client.patch("Node", sn.name, {"metadata": {"labels": {MIG_STATE_LABEL: "pending",
                                                           DEVICE_PLUGIN_DEPLOY_LABEL: PAUSED}}})
    kubelet, plugin = sn.started()
    old = sorted(sn.plugin_resources)
    plugin.stop()
    _wait(lambda: _published(sn, dict.fromkeys(old, 0)), f"the device plugin of {sn.name} to stop")
    for key in result.evicted:
        evict(key, eviction_message(sn.name, wanted))
    sn.repartitioned(result.node)
    since = sn.manager.clock()
    plugin.start()
    try:
        _wait(lambda: sn.plugin_serving(since) or not plugin.alive,
              f"the device plugin of {sn.name} to serve {MIG_CONFIG_LABEL}={wanted}")
        if not plugin.alive:
            raise GpuLabError(f"the device plugin of {sn.name} exited: {plugin.log_tail()}")
        served = {r: len(ids) for r, ids in result.node.devices.items()}
        _wait(lambda: _published(sn, served), f"{sn.name}'s new devices to reach its Node")
    except GpuLabError as err:
        client.patch("Node", sn.name, {"metadata": {"labels": {MIG_STATE_LABEL: "failed",
                                                               DEVICE_PLUGIN_DEPLOY_LABEL: deploy}}})
        return MigOutcome(wanted, "failed", tuple(result.evicted), str(err))
    done = changes(labels, result.node.labels)
    done.update({MIG_STATE_LABEL: "success", DEVICE_PLUGIN_DEPLOY_LABEL: deploy})
    client.patch("Node", sn.name, {"metadata": {"labels": done}})
    log.info("%s: %s", sn.name, result.message)
    return MigOutcome(wanted, "success", tuple(result.evicted), result.message)
