"""Could a node's pods run elsewhere? One pass of removal simulations, kept as they succeed.

cluster-autoscaler's ``RemovalSimulator`` places a candidate's pods on the other
nodes in a forked snapshot and, when every pod found a place, keeps the result
(``canPersist``): the next candidate sees those pods placed and that node gone.
Karpenter's multi-node consolidation asks the same of a set of nodes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .estimator import shortfall, take
from .state import NodeState, PodState

Reschedule = Callable[[Sequence[PodState], frozenset], "bool | str"]


class RemovalSimulation:
    """``try_remove(node, pods)``: True when all ``pods`` fit on the nodes still there (kept), else
    the key of a pod that found no place (or False); ``exclude(node)`` takes a node away unsimulated."""

    def try_remove(self, node: str, pods: Sequence[PodState]) -> bool | str:
        raise NotImplementedError

    def exclude(self, node: str) -> None:
        raise NotImplementedError


class CallbackSimulation(RemovalSimulation):
    """The caller's ``can_reschedule(pods, without)``, asked with every pod moved so far."""

    def __init__(self, can_reschedule: Reschedule):
        self.can_reschedule = can_reschedule
        self.moved: list[PodState] = []
        self.gone: set[str] = set()

    def try_remove(self, node: str, pods: Sequence[PodState]) -> bool | str:
        if not pods:
            self.gone.add(node)
            return True
        answer = self.can_reschedule([*self.moved, *pods], frozenset(self.gone | {node}))
        if answer is True:
            self.moved += pods
            self.gone.add(node)
        return answer

    def exclude(self, node: str) -> None:
        self.gone.add(node)


class ResourceSimulation(RemovalSimulation):
    """First fit by resources alone (no taints, selectors or affinity), largest pod first.

    Within a pass free resources only shrink (a failed simulation gives back
    what it took), so for each request shape the first node that may still fit
    only moves forward: a cursor per shape keeps the pass linear in the nodes.
    """

    def __init__(self, nodes: Sequence[NodeState]):
        self.order: list[str] = [n.name for n in nodes]
        self.index: dict[str, int] = {n.name: i for i, n in enumerate(nodes)}
        self.nodes: dict[str, NodeState] = {n.name: n for n in nodes}
        self.free: dict[str, dict[str, int]] = {}  # worked out when first needed
        self.gone: set[str] = set()
        self.added: dict[str, list[PodState]] = {}
        self.cursor: dict[tuple, int] = {}

    def _free(self, name: str) -> dict[str, int] | None:
        free = self.free.get(name)
        if free is None and name not in self.gone:
            node = self.nodes[name]
            free = {r: a for r, a in node.allocatable.items() if r != "pods"}
            for pod in node.pods:
                for r, amount in pod.requests.items():
                    free[r] = free.get(r, 0) - amount
            if "pods" in node.allocatable:
                free["pods"] = node.allocatable["pods"] - len(node.pods)
            self.free[name] = free
        return free

    def try_remove(self, node: str, pods: Sequence[PodState]) -> bool | str:
        # pods placed here by earlier simulations must move again
        movers = [*pods, *self.added.get(node, ())]
        done: list[tuple[str, PodState]] = []
        for pod in sorted(movers, key=lambda p: -sum(p.requests.values())):
            target = self._place(pod, node)
            if target is None:
                self._revert(done)
                return pod.key
            done.append((target, pod))
        for name, placed in done:
            self.added.setdefault(name, []).append(placed)
        self.exclude(node)
        return True

    def _place(self, pod: PodState, node: str) -> str | None:
        shape = tuple(sorted(pod.requests.items()))
        i = self.cursor.get(shape, 0)
        keep = None  # the first index that may still fit this shape
        order, frees, gone = self.order, self.free, self.gone
        while i < len(order):
            name = order[i]
            free = frees.get(name)
            if free is None and name not in gone:
                free = self._free(name)
            if free is not None:
                if name == node:
                    keep = i if keep is None else keep
                elif shortfall(pod.requests, free) is None:
                    take(free, pod.requests)
                    self.cursor[shape] = i if keep is None else keep
                    return name
            i += 1
        self.cursor[shape] = len(order) if keep is None else keep
        return None

    def _revert(self, done: list[tuple[str, PodState]]) -> None:
        """Give back what a failed simulation took; those nodes may fit any shape again."""
        if not done:
            return
        for name, placed in done:
            _give_back(self.free[name], placed.requests)
        first = min(self.index[name] for name, _ in done)
        for shape, at in self.cursor.items():
            if at > first:
                self.cursor[shape] = first

    def exclude(self, node: str) -> None:
        self.gone.add(node)
        self.free.pop(node, None)
        self.added.pop(node, None)


def _give_back(free: dict[str, int], requests) -> None:
    if "pods" in free:
        free["pods"] += 1
    for r, amount in requests.items():
        free[r] = free.get(r, 0) + amount
