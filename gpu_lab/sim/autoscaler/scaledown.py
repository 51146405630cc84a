"""Scale-down as cluster-autoscaler does it: unneeded nodes, their timers, and what may go now.

Candidates are the nodes of autoscaled groups above ``minCount`` (a group at its
minimum offers none: ``processors/nodes/pre_filtering_processor.go``), empty
ones first, then those unneeded before. A candidate is *unneeded* when all of these hold (FAQ, "How
does scale-down work?"; ``core/scaledown/eligibility/eligibility.go``):

1. it lacks the ``cluster-autoscaler.kubernetes.io/scale-down-disabled: "true"`` annotation;
2. its utilisation is below the threshold: a GPU node's GPU requests over GPU
   allocatable below ``scaleDownGpuUtilizationThreshold``, any other node's
   larger of cpu and memory requests below ``scaleDownUtilizationThreshold``
   (``utilization >= threshold`` keeps it, so 4 of 8 GPUs at 0.5 stays);
3. no pod blocks a drain (``drain.pods_to_move``);
4. its movable pods could all run elsewhere, with the pods of the nodes found
   unneeded before it in this pass already moved and those nodes gone
   (``removal``), as CA's removal simulator keeps each success. At most the
   last loop's unneeded nodes plus ``2 x maxScaleDownParallelism`` are found
   per loop (``Planner.unneededNodesLimit``).

A node unneeded now keeps the time it first became so; one that stops being
unneeded loses it. It is removed once unneeded for ``scaleDownUnneededTime``
(``core/scaledown/unneeded/nodes.go``), unless scale-down is in cooldown (a
scale-up within ``scaleDownDelayAfterAdd`` or a deletion within
``scaleDownDelayAfterDelete``, cluster-wide as ``isScaleDownInCooldown`` has it)
or its group would go below ``minCount``. Empty nodes go up to
``maxScaleDownParallelism`` at a time; nodes that need a drain up to
``maxDrainParallelism`` more. CA's timer is strict (``since + t`` must be
*before* now) and it looks every 10 s; here a node may go at exactly ``since + t``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ...model.autoscaler import AutoscalerSpec
from .actions import Event, ScaleDown
from .drain import SCALE_DOWN_DISABLED, pods_to_move
from .removal import RemovalSimulation
from .state import NodeGroup, NodeState, PodState, Utilization, utilization

STATUS = "ConfigMap kube-system/cluster-autoscaler-status"


@dataclass(frozen=True)
class NodeStatus:
    """Why a node stays or goes, as of the last call. ``reason`` is CA's ``UnremovableReason``
    name (``NotUnderutilized``, ``BlockedByPod``, ``NoPlaceToMovePods``,
    ``ScaleDownDisabledAnnotation``, ``NotUnneededLongEnough``, ``NodeGroupMinSizeReached``,
    ``ScaleDownInCooldown``), ``Unneeded`` or ``Removed`` (Karpenter's words in Consolidation mode)."""

    node: str
    reason: str
    message: str
    utilization: Utilization | None = None
    unneeded_since: float | None = None


class ScaleDownPlanner:
    """The unneeded-node timers and the removal decisions of cluster-autoscaler."""

    def __init__(self, spec: AutoscalerSpec):
        self.spec = spec
        self.since: dict[str, float] = {}  # node -> when it became unneeded
        self.pods: dict[str, list[PodState]] = {}  # node -> pods its removal moves
        self.status: dict[str, NodeStatus] = {}

    def update(self, now: float, nodes: Sequence[NodeState], groups: Mapping[str, NodeGroup],
               targets: Mapping[str, int], sim: RemovalSimulation) -> None:
        """Recompute which nodes are unneeded (CA's planner ``UpdateClusterState``).

        ``targets`` is each group's size, Ready plus requested nodes: a group at
        ``minCount`` offers no candidates at all (``PreFilteringScaleDownNodeProcessor``)."""
        spec = self.spec
        self.pods = {}
        self.status = {}
        drains: dict[str, tuple[list[PodState], str | None]] = {}
        for n in nodes:
            if n.pool is None or n.pool not in groups:
                self.status[n.name] = NodeStatus(n.name, "NotAutoscaled", f"Node {n.name} is not autoscaled")
            elif targets.get(n.pool, 0) <= groups[n.pool].min_count:
                self.status[n.name] = NodeStatus(
                    n.name, "NodeGroupMinSizeReached", f"Skipping {n.name} - node group min size reached "
                    f"(current: {targets.get(n.pool, 0)}, min: {groups[n.pool].min_count})")
            else:
                drains[n.name] = pods_to_move(n.pods, skip_system=spec.skip_nodes_with_system_pods,
                                              skip_custom_controllers=spec.skip_nodes_with_custom_controller_pods)
        # Empty nodes first, then those unneeded before (so their timers survive), as CA sorts candidates.
        managed = sorted((n for n in nodes if n.name in drains),
                         key=lambda n: (bool(drains[n.name][0] or drains[n.name][1]), n.name not in self.since,
                                        self.since.get(n.name, 0.0), n.name))
        since: dict[str, float] = {}
        # CA's Planner.unneededNodesLimit: last loop's unneeded nodes plus 2 x --max-scale-down-parallelism,
        # at most what the removals could keep up with (parallelism x unneeded time / loop, plus one batch)
        parallelism = spec.max_scale_down_parallelism
        loops = max(int(spec.scale_down_unneeded_time // spec.scan_interval), 1)
        limit = min(len(self.since) + 2 * parallelism, parallelism * loops + parallelism)
        for node in managed:
            name = node.name
            if len(since) >= limit:
                self.status[name] = NodeStatus(name, "NotEvaluated", f"Node {name} was not simulated in this "
                                               f"loop (at most {limit} unneeded nodes per loop)")
                continue
            if node.annotations.get(SCALE_DOWN_DISABLED) == "true":
                self.status[name] = NodeStatus(name, "ScaleDownDisabledAnnotation",
                                               f"Skipping {name} from delete consideration - the node is "
                                               "marked as no scale down")
                continue
            util = utilization(node, spec.ignore_daemonsets_utilization)
            threshold = (spec.scale_down_gpu_utilization_threshold if node.is_gpu_node
                         else spec.scale_down_utilization_threshold)
            if util.value >= threshold:
                self.status[name] = NodeStatus(
                    name, "NotUnderutilized",
                    f"Node {name} unremovable: {util.resource} requested ({util.value * 100:.6g}% of "
                    "allocatable) is above the scale-down utilization threshold", util)
                continue
            move, blocked = drains[name]
            if blocked:
                self.status[name] = NodeStatus(name, "BlockedByPod", f"Node {name} cannot be removed: {blocked}",
                                               util)
                continue
            answer = sim.try_remove(name, move)
            if answer is not True:
                who = answer if isinstance(answer, str) and answer else ", ".join(p.key for p in move)
                self.status[name] = NodeStatus(name, "NoPlaceToMovePods",
                                               f"Node {name} is not suitable for removal: failed to find "
                                               f"place for {who}", util)
                continue
            since[name] = self.since.get(name, now)
            self.pods[name] = move
            self.status[name] = NodeStatus(name, "Unneeded", f"{name} is unneeded since {since[name]:g}s",
                                           util, since[name])
        self.since = since

    def cooldown_until(self, last_scale_up: float, last_delete: float) -> float:
        return max(last_scale_up + self.spec.scale_down_delay_after_add,
                   last_delete + self.spec.scale_down_delay_after_delete)

    def remove(self, now: float, groups: Mapping[str, NodeGroup], pools: Mapping[str, str | None],
               targets: Mapping[str, int], cooldown_until: float) -> list[ScaleDown | Event]:
        """The nodes to delete now, with cluster-autoscaler's events. ``pools`` maps node -> group;
        ``targets`` is each group's size (Ready plus requested)."""
        spec = self.spec
        if not spec.scale_down_enabled or not self.since:
            return []
        if now < cooldown_until:
            for name, since in self.since.items():
                self.status[name] = NodeStatus(name, "ScaleDownInCooldown",
                                               f"{name} is unneeded since {since:g}s; scale-down is in "
                                               f"cooldown until {cooldown_until:g}s",
                                               self.status[name].utilization, since)
            return []
        out: list[ScaleDown | Event] = []
        deleting: dict[str, int] = {}
        empty_budget = spec.max_scale_down_parallelism
        drain_budget = spec.max_drain_parallelism
        ready = sorted(self.since.items(), key=lambda kv: (bool(self.pods[kv[0]]), kv[1], kv[0]))
        for name, since in ready:
            status = self.status[name]
            if now - since < spec.scale_down_unneeded_time:
                self.status[name] = NodeStatus(name, "NotUnneededLongEnough",
                                               f"{name} was unneeded for {now - since:g}s",
                                               status.utilization, since)
                continue
            pool = pools[name]
            assert pool is not None  # update() finds unneeded nodes only in autoscaled groups
            if targets.get(pool, 0) - deleting.get(pool, 0) <= groups[pool].min_count:
                self.status[name] = NodeStatus(name, "NodeGroupMinSizeReached",
                                               f"Skipping {name} - node group min size reached",
                                               status.utilization, since)
                continue
            move = self.pods[name]
            if (empty_budget if not move else min(empty_budget, drain_budget)) <= 0:
                continue  # the next scan takes it
            empty_budget -= 1
            if move:
                drain_budget -= 1
            deleting[pool] = deleting.get(pool, 0) + 1
            out += _delete(name, pool, move, status.utilization)
            self.status[name] = NodeStatus(name, "Removed", f"{name} removed by cluster autoscaler",
                                           status.utilization, since)
        for action in out:
            if isinstance(action, ScaleDown):
                self.since.pop(action.node, None)
        return out

    def waiting(self, now: float) -> bool:
        """Unneeded nodes remain that were long enough unneeded but held back by parallelism."""
        return any(self.status[n].reason == "Unneeded" and now - s >= self.spec.scale_down_unneeded_time
                   for n, s in self.since.items())

    def next_time(self, now: float, cooldown_until: float) -> float | None:
        times = [max(s + self.spec.scale_down_unneeded_time, cooldown_until) for s in self.since.values()]
        later = [t for t in times if t > now]
        return min(later) if later else None


def _delete(name: str, pool: str, move: list[PodState], util: Utilization | None) -> list[ScaleDown | Event]:
    if not move:
        msg = f'Scale-down: removing empty node "{name}"'
        reason = "ScaleDownEmpty"
    else:
        msg = (f"Scale-down: removing node {name}, utilization: {util}, pods to reschedule: "
               + ",".join(p.key for p in move))
        reason = "ScaleDown"
    events = [Event(STATUS, reason, msg),
              Event(f"Node {name}", "ScaleDown", "marked the node as toBeDeleted/unschedulable")]
    events += [Event(f"Pod {p.key}", "ScaleDown", "deleting pod for node scale down") for p in move]
    return [ScaleDown(name, pool, reason, msg, tuple(p.key for p in move)), *events]
