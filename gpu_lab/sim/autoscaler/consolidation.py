"""Karpenter-style consolidation: delete or replace nodes whose pods fit elsewhere.

A node is *consolidatable* once ``consolidateAfter`` has passed since its last
pod event (a pod bound to it or leaving it; its Ready time before any), as
Karpenter's ``nodeclaim/disruption/consolidation.go`` decides; ``Never``
turns consolidation off. Pods annotated ``karpenter.sh/do-not-disrupt: "true"``
(or the node itself) block it. Then, per call and within each pool's
disruption budget (``budgets``, the most restrictive; a percentage of the pool's
nodes rounded up) and ``minCount``:

* **Empty** (both policies): nodes with no pods but DaemonSet pods are deleted
  (``Disrupting Node: Empty/Delete``).
* **Underutilized** (``WhenEmptyOrUnderutilized``): nodes, fewest pods first, are
  deleted while all their pods could run on the remaining nodes
  (``Underutilized/Delete``; several at once, as multi-node consolidation does).
  If none can be deleted, the first node whose pods all fit on one new node of
  a cheaper pool is replaced: it is cordoned, the replacement requested, and the
  node deleted when the replacement is Ready (``Underutilized/Replace``).
  Karpenter's replacement may also lean on spare room elsewhere; here it must
  hold the node's pods alone.

Karpenter has no utilisation threshold: "underutilized" means the pods fit elsewhere.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from ...model.autoscaler import AutoscalerSpec
from .actions import Cordon, Event, ScaleDown, ScaleUp
from .drain import DO_NOT_DISRUPT, karpenter_blocker
from .estimator import Fits, shortfall, take, template_reason
from .removal import RemovalSimulation
from .scaledown import NodeStatus
from .state import NodeGroup, NodeState


@dataclass
class Replacement:
    node: str
    pool: str
    ready_at: float
    evict: tuple[str, ...]


class Consolidator:
    def __init__(self, spec: AutoscalerSpec):
        self.spec = spec
        self.replacing: dict[str, Replacement] = {}
        self.status: dict[str, NodeStatus] = {}

    def plan(self, now: float, nodes: Sequence[NodeState], groups: Mapping[str, NodeGroup],
             last_event: Mapping[str, float], sim: RemovalSimulation, fits: Fits,
             targets: Mapping[str, int], name_node) -> list:
        spec = self.spec
        out: list = []
        present = {n.name for n in nodes}
        for name in [n for n in self.replacing if n not in present]:
            del self.replacing[name]  # gone some other way
        finished = set()
        for rep in [r for r in self.replacing.values() if r.ready_at <= now]:
            del self.replacing[rep.node]
            finished.add(rep.node)
            out += _delete(rep.node, rep.pool, "Underutilized/Replace", rep.evict)
        self.status = {}
        after = spec.consolidate_after
        budget = {g: self._budget(sum(1 for n in nodes if n.pool == g)) for g in groups}
        for rep in self.replacing.values():
            budget[rep.pool] -= 1  # still disrupting: counts against its pool's budget
        size = dict(targets)
        candidates: list[NodeState] = []
        for node in nodes:
            if node.pool not in groups or node.name in self.replacing or node.name in finished:
                continue
            since = last_event.get(node.name, node.created_at)
            if after is None or now - since < after:
                self.status[node.name] = NodeStatus(node.name, "NotConsolidatable",
                                                    "consolidateAfter has not passed since the last pod event")
                continue
            blocked = ('disruption is blocked through the "karpenter.sh/do-not-disrupt" annotation'
                       if node.annotations.get(DO_NOT_DISRUPT) == "true" else karpenter_blocker(node.pods))
            if blocked:
                self.status[node.name] = NodeStatus(node.name, "DisruptionBlocked", f"Cannot disrupt Node: {blocked}")
                out.append(Event(f"Node {node.name}", "DisruptionBlocked", blocked, source="karpenter"))
                continue
            candidates.append(node)

        def allowed(node: NodeState) -> bool:
            pool = _pool(node)
            if budget[pool] <= 0:
                self.status[node.name] = NodeStatus(node.name, "DisruptionBlocked",
                                                    "No allowed disruptions due to blocking budget")
                return False
            if size[pool] <= groups[pool].min_count:
                self.status[node.name] = NodeStatus(node.name, "NodeGroupMinSizeReached",
                                                    f"nodepool {pool} is at minCount")
                return False
            return True

        def take_slot(node: NodeState) -> None:
            budget[_pool(node)] -= 1
            size[_pool(node)] -= 1

        busy: list[NodeState] = []
        for node in candidates:  # Emptiness
            if any(not p.daemonset for p in node.pods):
                busy.append(node)
            elif allowed(node):
                take_slot(node)
                out += self._delete(node, "Empty/Delete", ())
        if spec.consolidation_policy != "WhenEmptyOrUnderutilized":
            return out
        busy.sort(key=lambda n: (sum(not p.daemonset for p in n.pods), n.name))
        # nodes going now, and cordoned ones waiting for their replacement, take no pods
        for gone in {a.node for a in out if isinstance(a, ScaleDown)} | set(self.replacing):
            sim.exclude(gone)
        deleted = False
        for node in busy:
            if not allowed(node):
                continue
            move = [p for p in node.pods if not p.daemonset]
            if sim.try_remove(node.name, move) is True:
                take_slot(node)
                deleted = True
                out += self._delete(node, "Underutilized/Delete", tuple(p.key for p in move))
            else:
                self.status[node.name] = NodeStatus(node.name, "Unconsolidatable",
                                                    "its pods do not fit on the other nodes")
        if deleted:
            return out
        for node in busy:
            if getattr(self.status.get(node.name), "reason", None) != "Unconsolidatable":
                continue  # blocked by its budget or minCount
            group = _cheaper_home(node, groups, fits)
            if group is None:
                continue
            take_slot(node)
            new = name_node(group.name)
            evict = tuple(p.key for p in node.pods if not p.daemonset)
            rep = Replacement(node.name, _pool(node), now + group.provisioning_delay, evict)
            self.replacing[node.name] = rep
            self.status[node.name] = NodeStatus(node.name, "Replacing", f"{new} of nodepool {group.name} "
                                                f"replaces it at {rep.ready_at:g}s")
            msg = f"Disrupting Node: Underutilized/Replace (replacement {new} of nodepool {group.name})"
            out += [Cordon(node.name, "Underutilized/Replace", msg),
                    ScaleUp(group.name, 1, (new,), rep.ready_at, "Underutilized/Replace",
                            f"Launching NodeClaim: Underutilized/Replace ({new} replaces {node.name})", evict),
                    Event(f"Node {node.name}", "DisruptionTerminating", "Disrupting Node: Underutilized/Replace",
                          source="karpenter"),
                    Event(f"NodeClaim {new}", "DisruptionLaunching", "Launching NodeClaim: Underutilized/Replace",
                          source="karpenter")]
            break
        return out

    def _delete(self, node: NodeState, how: str, evict: tuple[str, ...]) -> list:
        self.status[node.name] = NodeStatus(node.name, "Removed", f"Disrupting Node: {how}")
        return _delete(node.name, _pool(node), how, evict)

    def _budget(self, nodes: int) -> int:
        """The most restrictive budget; percentages of the pool's nodes round up, as Karpenter's
        ``GetAllowedDisruptionsByReason`` scales them."""
        allowed = []
        for b in self.spec.budgets:
            allowed.append(math.ceil(nodes * int(b[:-1]) / 100) if b.endswith("%") else int(b))
        return min(allowed)

    def next_time(self, now: float, nodes: Sequence[NodeState], groups: Mapping[str, NodeGroup],
                  last_event: Mapping[str, float]) -> float | None:
        times = [r.ready_at for r in self.replacing.values()]
        after = self.spec.consolidate_after
        if after is not None:
            times += [last_event.get(n.name, n.created_at) + after for n in nodes if n.pool in groups]
        later = [t for t in times if t > now]
        return min(later) if later else None


def _cheaper_home(node: NodeState, groups: Mapping[str, NodeGroup], fits: Fits) -> NodeGroup | None:
    """The cheapest pool, cheaper than ``node``'s, one of whose new nodes holds all of its pods."""
    price = groups[_pool(node)].price_per_hour
    if price is None:
        return None
    pods = [p for p in node.pods if not p.daemonset]
    best: NodeGroup | None = None
    best_price = price  # only pools cheaper than the node's qualify, so the first that fits wins
    for group in sorted(groups.values(), key=lambda g: g.name):
        if group.price_per_hour is None or group.price_per_hour >= price:
            continue
        free = dict(group.allocatable)
        ok = True
        for pod in pods:
            if template_reason(pod, group, fits) or shortfall(pod.requests, free):
                ok = False
                break
            take(free, pod.requests)
        if ok and group.price_per_hour < best_price:
            best, best_price = group, group.price_per_hour
    return best


def _pool(node: NodeState) -> str:
    """A candidate's NodeGroup: ``plan`` considers only nodes whose pool is an autoscaled group."""
    assert node.pool is not None
    return node.pool


def _delete(name: str, pool: str, how: str, evict: tuple[str, ...]) -> list:
    msg = f"Disrupting Node: {how}"
    return [ScaleDown(name, pool, how, msg, evict),
            Event(f"Node {name}", "DisruptionTerminating", msg, source="karpenter")]
