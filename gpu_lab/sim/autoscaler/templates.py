"""What a new node of each group starts with: cluster-autoscaler's template NodeInfo and its DaemonSet pods.

cluster-autoscaler 1.37, the minor that goes with Kubernetes v1.37 (its release-1.37 branch:
``processors/nodeinfosprovider/mixed_nodeinfos_processor.go`` and
``simulator/node_info_utils.go``), builds one template per node group in every loop:

* From a real node of the group when one is a good candidate: Ready for more than a
  minute (``stabilizationDelay``) and schedulable. The template keeps the DaemonSet
  pods running there; a DaemonSet with no pod there is added only with ``--force-ds``
  or when its pod is ``system-node-critical`` and may preempt
  (``podsExpectedOnFreshNode``). The result is cached per group
  (``--node-info-cache-expire-time``: 10 years) and used while the group has no good
  node, down to zero.
* Otherwise from the group's own template (``SanitizedTemplateNodeInfoFromNodeGroup``):
  every DaemonSet whose pod should run there, forced.

"Should run" is the DaemonSet controller's ``NodeShouldRunDaemonPod``
(``utils/daemonset.GetDaemonSetPodsForNode``); the caller answers it with the sim's
own DaemonSet eligibility. The estimator and the predicate checks then see these
pods on every new node, so a pod that fits an empty node but not one with its
daemons does not trigger a scale-up there.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence

from .state import NodeGroup, NodeState, PodState

#: the pods of the DaemonSets that should run on the node (a real one, or the group's template
#: when None), one per DaemonSet, as its controller would make them
DaemonPods = Callable[[NodeGroup, "NodeState | None"], Sequence[PodState]]

STABILIZATION_DELAY = 60.0  # mixed_nodeinfos_processor.go: stabilizationDelay = 1 * time.Minute
SYSTEM_NODE_CRITICAL = "system-node-critical"  # labels.SystemNodeCriticalLabel


def no_daemon_pods(group: NodeGroup, node: NodeState | None) -> Sequence[PodState]:
    return ()


def node_critical(pod: PodState) -> bool:
    """``isPreemptingSystemNodeCritical``: such daemon pods count even without ``--force-ds``."""
    return pod.priority_class_name == SYSTEM_NODE_CRITICAL and pod.preemption_policy == "PreemptLowerPriority"


class TemplateProvider:
    """``MixedTemplateNodeInfoProvider``: per group, the pods a fresh node starts with."""

    def __init__(self, daemon_pods: DaemonPods, force_daemonsets: bool = False) -> None:
        self.daemon_pods = daemon_pods
        self.force = force_daemonsets
        self._cache: dict[str, tuple[PodState, ...]] = {}

    def groups(self, now: float, nodes: Sequence[NodeState],
               groups: Mapping[str, NodeGroup]) -> dict[str, NodeGroup]:
        """``groups`` with each one's ``pods`` set to its template's pods this loop."""
        found: dict[str, tuple[PodState, ...]] = {}
        for node in nodes:  # the good candidates, in the order given; the first per group wins
            pool = node.pool
            if pool is not None and pool in groups and pool not in found and _good_candidate(node, now):
                found[pool] = self._from_node(groups[pool], node)
        self._cache.update(found)
        out: dict[str, NodeGroup] = {}
        for name, group in groups.items():
            pods = found.get(name)
            if pods is None:
                pods = self._cache.get(name)
            if pods is None:
                pods = tuple(self.daemon_pods(group, None))  # the group's own template: forced
            out[name] = dataclasses.replace(group, pods=pods) if pods else group
        return out

    def _from_node(self, group: NodeGroup, node: NodeState) -> tuple[PodState, ...]:
        running = [p for p in node.pods if p.daemonset]  # the sim has no mirror pods
        names = {(p.namespace, p.owner_name) for p in running}
        pending = [p for p in self.daemon_pods(group, node) if (p.namespace, p.owner_name) not in names]
        return tuple(running) + tuple(p for p in pending if self.force or node_critical(p))


def _good_candidate(node: NodeState, now: float) -> bool:
    """``isNodeGoodTemplateCandidate``: Ready for over a minute and schedulable (the sim's nodes
    are Ready from ``created_at``; the autoscaler deletes its nodes at once, never tainting them
    ToBeDeleted first)."""
    return node.created_at + STABILIZATION_DELAY < now and not node.unschedulable
