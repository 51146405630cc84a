"""The autoscaler: told the cluster now, it answers with what to add and what to remove."""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Sequence

from ...errors import GpuLabError
from ...model.autoscaler import AutoscalerSpec
from .actions import Action, Event, ScaleDown, ScaleUp
from .consolidation import Consolidator
from .estimator import Fits
from .removal import CallbackSimulation, RemovalSimulation, Reschedule, ResourceSimulation
from .scaledown import NodeStatus, ScaleDownPlanner
from .scaleup import Upcoming, plan_scale_up
from .state import NodeGroup, NodeState, PodState
from .templates import DaemonPods, TemplateProvider, no_daemon_pods


def _fits_anywhere(pod: PodState, group: NodeGroup) -> bool:
    return True


class Autoscaler:
    """cluster-autoscaler (``mode: ClusterAutoscaler``) or Karpenter-style consolidation
    (``mode: Consolidation``) over the given node groups.

    ``fits(pod, group)`` says whether ``pod`` could run on an empty new node of
    ``group`` as far as anything but resources goes (selectors, taints,
    affinity): True, or False or the scheduler's reason (``node(s) had
    untolerated taint {nvidia.com/gpu: present}``) for the events. Default: always.

    ``can_reschedule(pods, without)`` says whether all of ``pods`` could run on
    the cluster's Ready nodes other than those named in ``without`` (the node
    being removed plus any chosen before it in the same pass, whose pods are
    among ``pods``): True, or False or the key of the pod that found no place.
    Default: a first fit by resources alone over the nodes last passed in.

    ``daemon_pods(group, node)`` lists the pods of the DaemonSets that should
    run on ``node`` (a ``NodeState``; None: the group's template), one per
    DaemonSet, with ``owner_name`` set; cluster-autoscaler mode puts them on
    each group's template node (``templates``). Default: none.

    ``seed`` drives the random expander and random tie-breaks.
    """

    def __init__(self, spec: AutoscalerSpec, groups: Iterable[NodeGroup], *, fits: Fits | None = None,
                 can_reschedule: Reschedule | None = None, daemon_pods: DaemonPods | None = None,
                 seed: int = 0):
        self.spec = spec
        self.groups: dict[str, NodeGroup] = {}
        for g in groups:
            if g.name in self.groups:
                raise GpuLabError(f'Autoscaler "{spec.name}": node group "{g.name}" is given twice')
            self.groups[g.name] = g
        self.fits = fits or _fits_anywhere
        self.templates = TemplateProvider(daemon_pods or no_daemon_pods, spec.force_ds)
        self._reschedule = can_reschedule
        self.rng = random.Random(seed)
        self.upcoming: list[Upcoming] = []
        # CA starts its clocks an hour back "so as to not start in cooldown mode" (static_autoscaler.go).
        self.last_scale_up = float("-inf")
        self.last_delete = float("-inf")
        self._planner = ScaleDownPlanner(spec)
        self._consolidator = Consolidator(spec)
        self._next_index: dict[str, int] = {}
        self._pod_sets: dict[str, frozenset[str]] = {}
        self._seen: set[str] = set()
        self._last_event: dict[str, float] = {}
        self._said: dict[tuple[str, str], str] = {}
        self._nodes: Sequence[NodeState] = ()
        self._now = float("-inf")
        self._more_soon = False
        self._evaluated = False  # the planner's findings still hold for the cluster as last seen

    # -- the engine's two calls ---------------------------------------------------------------

    def reconcile(self, now: float, nodes: Sequence[NodeState], pending: Sequence[PodState] = (),
                  *, changed: bool = True) -> list[Action]:
        """One autoscaler loop at ``now``.

        ``nodes``: every Ready node with the pods bound to it. Nodes of a
        ``ScaleUp`` must be among them from its ``ready_at`` on. ``pending``: the
        pods the scheduler could not place (Unschedulable), not those merely
        waiting for a gate or a queue. Returns the actions to carry out now, in
        order, and the events to record.

        ``changed=False`` promises that no node and no pod binding changed since
        the previous call, the previous call's own actions included (a timer
        wake-up): cluster-autoscaler mode then keeps its unneeded-node findings
        and only checks the clocks, which is cheap. Consolidation re-evaluates
        either way.
        """
        self._now = now
        self._nodes = nodes
        self.upcoming = [u for u in self.upcoming if u.ready_at > now]
        self._track_pod_events(now, nodes)
        sizes: dict[str, int] = {}
        for n in nodes:
            if n.pool in self.groups:
                sizes[n.pool] = sizes.get(n.pool, 0) + 1
        actions: list[Action] = []
        groups = self.groups
        if self.spec.mode == "ClusterAutoscaler":  # new nodes come with their DaemonSet pods
            groups = self.templates.groups(now, nodes, groups)
        ups, events = plan_scale_up(now, self.spec, groups, sizes, self.upcoming, pending,
                                    self.fits, self.rng, self._new_name)
        for up in ups:
            self.upcoming.append(Upcoming(up.pool, up.nodes, up.ready_at))
        actions += ups
        actions += events
        targets = {g: sizes.get(g, 0) + sum(len(u.nodes) for u in self.upcoming if u.pool == g)
                   for g in self.groups}
        self._more_soon = False
        if ups:
            self._evaluated = False
            self.last_scale_up = now  # CA: "No scale down in this iteration."
        elif self.spec.mode == "ClusterAutoscaler":
            if changed or not self._evaluated:
                self._planner.update(now, nodes, self.groups, targets, self._simulation())
                self._evaluated = True
            cooldown = self._planner.cooldown_until(self.last_scale_up, self.last_delete)
            pools = {n.name: n.pool for n in nodes}
            removed = self._planner.remove(now, self.groups, pools, targets, cooldown)
            if any(isinstance(a, ScaleDown) for a in removed):
                self.last_delete = now
                self._evaluated = False  # the cluster is about to change
            actions += removed
            self._more_soon = self._planner.waiting(now)
        else:
            planned = self._consolidator.plan(now, nodes, self.groups, self._last_event,
                                              self._simulation(), self.fits, targets, self._new_name)
            for a in planned:
                if isinstance(a, ScaleUp):
                    self.upcoming.append(Upcoming(a.pool, a.nodes, a.ready_at))
            actions += planned
        return self._dedupe(actions)

    def next_wakeup(self) -> float | None:
        """When to call ``reconcile`` again if nothing else changes (None: not until something does).

        Always later than the last ``reconcile``'s ``now``."""
        now = self._now
        times = [u.ready_at for u in self.upcoming]
        if self._more_soon:  # CA deletes more on its next scan
            times.append(now + self.spec.scan_interval)
        if self.spec.mode == "ClusterAutoscaler":
            t = self._planner.next_time(now, self._planner.cooldown_until(self.last_scale_up, self.last_delete))
        else:
            t = self._consolidator.next_time(now, self._nodes, self.groups, self._last_event)
        if t is not None:
            times.append(t)
        later = [t for t in times if t > now]
        return min(later) if later else None

    # -- for explanations ---------------------------------------------------------------------

    def status(self) -> dict[str, NodeStatus]:
        """Per node, why it stayed or went in the last ``reconcile`` (CA's unremovable reasons)."""
        if self.spec.mode == "ClusterAutoscaler":
            return dict(self._planner.status)
        return dict(self._consolidator.status)

    def unneeded(self) -> dict[str, float]:
        """cluster-autoscaler's unneeded nodes and since when."""
        return dict(self._planner.since)

    # -- helpers ------------------------------------------------------------------------------

    def _simulation(self) -> RemovalSimulation:
        if self._reschedule is not None:
            return CallbackSimulation(self._reschedule)
        return ResourceSimulation(self._nodes)

    def _new_name(self, pool: str) -> str:
        """The next node name of ``pool``: ``<pool>-<i>`` past every index seen, never reused,
        as a cloud never reuses an instance name."""
        i = self._next_index.get(pool, 0)
        self._next_index[pool] = i + 1
        return f"{pool}-{i}"

    def _track_pod_events(self, now: float, nodes: Sequence[NodeState]) -> None:
        """Karpenter's lastPodEventTime (Consolidation mode): when a (non-DaemonSet) pod last came
        to or left the node; its Ready time before any. Also notes node indices in use."""
        present = set()
        track = self.spec.mode == "Consolidation"
        for node in nodes:
            name = node.name
            present.add(name)
            if name not in self._seen and node.pool is not None:
                m = re.fullmatch(rf"{re.escape(node.pool)}-(\d+)", name)
                if m:
                    self._next_index[node.pool] = max(self._next_index.get(node.pool, 0), int(m.group(1)) + 1)
            if not track:
                self._seen.add(name)
                continue
            keys = frozenset(p.key for p in node.pods if not p.daemonset)
            if node.last_pod_event is not None:
                self._last_event[name] = node.last_pod_event
            elif name not in self._seen:
                self._last_event[name] = now if keys else node.created_at
            elif self._pod_sets.get(name) != keys:
                self._last_event[name] = now
            self._pod_sets[name] = keys
            self._seen.add(name)
        for gone in [n for n in self._seen if n not in present]:
            self._seen.discard(gone)
            self._pod_sets.pop(gone, None)
            self._last_event.pop(gone, None)

    def _dedupe(self, actions: list[Action]) -> list[Action]:
        """Drop an event identical to the last one recorded for the same object and reason,
        as the API server folds repeats into a count."""
        out = []
        for a in actions:
            if isinstance(a, Event):
                key = (a.involved, a.reason)
                if self._said.get(key) == a.message:
                    continue
                self._said[key] = a.message
            out.append(a)
        return out
