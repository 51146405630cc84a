"""A new ``nvidia.com/mig.config`` label on a local lab's node, taken up by its node agent's
MIG manager as on a GPU Operator node: judged first by the shared model
(``kubelet.reconfigure``, so a refusal or an invalid config is the same one line as on the
sim, and nothing is labelled), then labelled, then waited for until the manager's run ended
(``nvidia.com/mig.config.state``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ...errors import GpuLabError
from ...kube import KubeClient
from ...kubelet.agent import NodeAgent
from ...kubelet.reconfigure import failure as reconfigure_failure
from ...kubelet.reconfigure import reconfigure
from ...model.nodepool import MIG_STATE_LABEL
from ..apiobjects import pod_row

Wait = Callable[[Callable[[], bool], str], None]


def relabel(client: KubeClient, agent: NodeAgent, node: str, labels: dict[str, str | None],
            current: dict[str, str], wanted: str, evict: bool, wait: Wait,
            unsupported: Callable[[str, str], Exception]) -> list[str]:
    """Apply ``labels`` (with the new config ``wanted``) to ``node``; the pods evicted.
    ``unsupported(call, why)``: the session's refusal for a node with no device plugin."""
    sn = agent.node(node)
    dry = reconfigure(replace(sn.node, labels=dict(current)), wanted,
                      pods_holding=gpu_holders(client, node), evict=evict)
    if dry.state == "failed":
        raise GpuLabError(reconfigure_failure(node, wanted, dry.message))
    if not sn.has_plugin:
        raise unsupported("label_node", f"{node} runs no device plugin for a MIG manager "
                          f"to restart ({sn.static_reason})")
    runs, _ = agent.mig_runs(node)
    agent.allow_mig_eviction(node, wanted if evict else None)
    try:
        client.patch("Node", node, {"metadata": {"labels": dict(labels)}})
        # the manager labels the state before it counts the run
        wait(lambda: agent.mig_runs(node)[0] > runs,
             f"the MIG manager of {node} to set {MIG_STATE_LABEL}=success")
    finally:
        agent.allow_mig_eviction(node, None)
    outcome = agent.mig_runs(node)[1]
    assert outcome is not None  # a run ended
    if outcome.state != "success":
        raise GpuLabError(reconfigure_failure(node, wanted, outcome.message))
    return list(outcome.evicted)


def gpu_holders(client: KubeClient, node: str) -> list[str]:
    """namespace/name of the running pods that hold devices of ``node`` (sorted)."""
    return sorted(f"{p['metadata'].get('namespace', 'default')}/{p['metadata']['name']}"
                  for p in client.list("Pod", field_selector=f"spec.nodeName={node}")["items"]
                  if (p.get("status") or {}).get("phase") == "Running"
                  and pod_row(p).devices)
