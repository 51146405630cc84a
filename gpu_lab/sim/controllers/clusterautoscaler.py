"""cluster-autoscaler (or Karpenter-style consolidation) as a controller of the embedded cluster.

The decisions are ``sim.autoscaler``'s pure model; this controller shows it the
cluster after every change, carries out what it answers (nodes join after the
pool's ``provisioningDelay``; a node scaled down is drained, its pods' controllers
replace them, and it is deleted), and wakes it on its own timers. It looks at most
once per ``scanInterval`` (10 s by default), as cluster-autoscaler does.

A NodePool with ``spec.autoscaling`` and no ``Autoscaler`` object gets
cluster-autoscaler's defaults: pools that scale imply an autoscaler.

Template nodes carry the DaemonSet pods that would run there, as the DaemonSet
controller decides (``daemonset.should_run_on``), made aside under
cluster-autoscaler's ``<daemonset>-pod-`` names: the scheduler's filters see them.
"""

from __future__ import annotations

from ...gpus.pricing import node_price_per_hour
from ...model.daemonset import daemon_pod
from ...model.nodepool import node_pool
from ...model.objects import Node, Pod
from ...model.parse import NameGenerator
from ..autoscaler import (
    Autoscaler,
    AutoscalerSpec,
    Cordon,
    Event,
    NodeGroup,
    NodeState,
    PodState,
    ScaleDown,
    ScaleUp,
    node_group,
    node_state,
    pod_state,
)
from .base import Cluster, Controller
from .daemonset import should_run_on

SCAN = "scan"


class ClusterAutoscalerController(Controller):
    def __init__(self, cluster: Cluster, spec: AutoscalerSpec | None, pools: list[dict], seed: int | None) -> None:
        super().__init__(cluster)
        self.spec = spec or AutoscalerSpec()
        self.pools = {(p.get("metadata") or {}).get("name"): p for p in pools}
        groups = [g for g in map(node_group, pools) if g]
        self.model = Autoscaler(self.spec, groups, fits=self._fits, can_reschedule=self._can_reschedule,
                                daemon_pods=self._daemon_pods, seed=seed or 0)
        self.events: list[tuple[float, Event]] = []
        self.joined_at: dict[str, float] = {}
        self.provisioning: dict[str, Node] = {}  # name -> node, billed from the scale-up on
        self._seen_generation = -1
        self._last_scan = float("-inf")
        self._scan_due = True
        self._pod_states: dict = {}
        # (namespace, daemonset, node) -> (its record, the pod it would make there); names of their own
        self._daemon: dict[tuple[str, str, str], tuple[dict, PodState]] = {}
        self._daemon_names = NameGenerator(seed=f"{seed or 0}/cluster-autoscaler")

    # -- callbacks for the model: the scheduler's filters, not resources alone
    def _fits(self, pod, group) -> bool:
        if not isinstance(pod.ref, Pod):
            return True
        return self.cluster.fits_on(pod.ref, group.template, [p.ref for p in group.pods if isinstance(p.ref, Pod)])

    def _daemon_pods(self, group: NodeGroup, example: NodeState | None) -> list[PodState]:
        """``GetDaemonSetPodsForNode``: a pod per DaemonSet that should run on the real node
        ``example`` (None: the group's template node)."""
        node = example.ref if example is not None else group.template
        if not isinstance(node, Node):
            return []
        out = []
        for record in self.cluster.daemonsets():
            if not should_run_on(record, node):
                continue
            key = (record["namespace"], record["name"], node.name)
            got = self._daemon.get(key)
            if got is None or got[0] is not record:
                aside = {**record, "prefix": f"{record['name']}-pod-"}
                pod = daemon_pod(aside, node.name, self._daemon_names, 0, self.cluster.priority_classes())
                got = self._daemon[key] = (record, pod_state(pod))
            out.append(got[1])
        return out

    def _can_reschedule(self, pods, without) -> bool | str:
        return self.cluster.can_reschedule([p.ref for p in pods if isinstance(p.ref, Pod)], set(without))

    def _state(self, pod: Pod):
        """The model's view of a pod, made once per pod (a day of jobs asks millions of times)."""
        got = self._pod_states.get(pod.key)
        if got is None or got.ref is not pod:
            got = self._pod_states[pod.key] = pod_state(pod)
        return got

    def wake(self, key: str) -> None:
        if key == SCAN:
            self._scan_due = True
        elif key in self.provisioning:  # the node is Ready and its device plugin advertises GPUs
            node = self.provisioning.pop(key)
            self.joined_at[node.name] = self.cluster.now
            self.cluster.add_node(node)
            self._scan_due = True

    def sync(self) -> bool:
        now = self.cluster.now
        generation = self.cluster.generation()
        changed = generation != self._seen_generation
        if not changed and not self._scan_due:
            return False
        if now < self._last_scan + self.spec.scan_interval:
            self.cluster.wake_at(self._last_scan + self.spec.scan_interval, self, SCAN)
            return False
        self._last_scan, self._scan_due, self._seen_generation = now, False, generation
        nodes = self.cluster.nodes()
        states = [node_state(n, [self._state(p) for p in self.cluster.pods_on(name)], self.joined_at.get(name, 0.0))
                  for name, n in nodes.items()]
        pending = [self._state(p) for p in self.cluster.pending_pods()]
        acted = False
        for action in self.model.reconcile(now, states, pending, changed=changed):
            acted |= self._carry_out(action, now)
        wake = self.model.next_wakeup()
        if wake is not None:
            self.cluster.wake_at(wake, self, SCAN)
        if acted:
            self._seen_generation = self.cluster.generation()
        return acted

    def _carry_out(self, action, now: float) -> bool:
        if isinstance(action, Event):
            self.events.append((now, action))
            return False
        if isinstance(action, ScaleUp):
            pool = node_pool(self.pools[action.pool])
            for name in action.nodes:
                node = pool.node(int(name.rsplit("-", 1)[1]))
                self.provisioning[name] = node
                self.cluster.wake_at(action.ready_at, self, name)
            return False  # the model's own Events say so, in cluster-autoscaler's words
        if isinstance(action, ScaleDown):
            self.cluster.remove_node(action.node, f"{action.reason}: {action.message}")
            self.joined_at.pop(action.node, None)
            return True
        if isinstance(action, Cordon):
            self.cluster.cordon(action.node)
            return True
        return False

    def provisioning_cost(self) -> tuple[int, float]:
        """Nodes asked for but not yet joined, and their dollars per hour (billed already)."""
        dollars = 0.0
        for n in self.provisioning.values():
            dollars += node_price_per_hour(n.labels, n.capacity, n.raw.get("nodePool")) or 0.0
        return len(self.provisioning), dollars
