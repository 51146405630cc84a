"""Which pods keep a node: cluster-autoscaler's drainability rules and Karpenter's do-not-disrupt.

cluster-autoscaler asks its rules in order and the first with a decision wins
(``simulator/drainability/rules/rules.go``): DaemonSet pods are not moved;
``cluster-autoscaler.kubernetes.io/safe-to-evict: "true"`` makes a pod movable
whatever else holds; then a pod blocks when it is not replicated (no
controller, or a custom controller while ``--skip-nodes-with-custom-controller-pods``),
when it is a kube-system pod (``--skip-nodes-with-system-pods``; gpu-lab has no
PodDisruptionBudgets to release it), or when it carries
``safe-to-evict: "false"``. The messages are the rules' own. PDBs and local
storage are not modelled.
"""

from __future__ import annotations

from collections.abc import Sequence

from .state import PodState

SAFE_TO_EVICT = "cluster-autoscaler.kubernetes.io/safe-to-evict"
SCALE_DOWN_DISABLED = "cluster-autoscaler.kubernetes.io/scale-down-disabled"  # on a node
DO_NOT_DISRUPT = "karpenter.sh/do-not-disrupt"  # on a pod or a node
# The owners the replicated rule checks for (the rest are "custom controllers").
BUILTIN_CONTROLLERS = ("ReplicationController", "DaemonSet", "Job", "ReplicaSet", "StatefulSet")


def pods_to_move(pods: Sequence[PodState], *, skip_system: bool = True,
                 skip_custom_controllers: bool = True) -> tuple[list[PodState], str | None]:
    """(the pods a drain must reschedule, the first blocking reason or None), as cluster-autoscaler decides."""
    move: list[PodState] = []
    for pod in pods:
        if pod.daemonset:
            continue
        safe = pod.annotations.get(SAFE_TO_EVICT)
        if safe == "true":
            move.append(pod)
            continue
        if pod.owner_kind is None or (skip_custom_controllers and pod.owner_kind not in BUILTIN_CONTROLLERS):
            return [], f"{pod.namespace}/{pod.name} is not replicated"
        if skip_system and pod.namespace == "kube-system":
            return [], f"non-daemonset, non-mirrored, non-pdb-assigned kube-system pod present: {pod.name}"
        if safe == "false":
            return [], f"pod annotated as not safe to evict present: {pod.name}"
        move.append(pod)
    return move, None


def karpenter_blocker(pods: Sequence[PodState]) -> str | None:
    """Karpenter's DisruptionBlocked message for the first do-not-disrupt pod, if any."""
    for pod in pods:
        if pod.annotations.get(DO_NOT_DISRUPT) == "true":
            return f'Pod has "{DO_NOT_DISRUPT}" annotation (Pod={pod.namespace}/{pod.name})'
    return None
