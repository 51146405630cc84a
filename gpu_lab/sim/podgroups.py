"""What the scheduler knows of pod groups: kube-scheduler's PodGroupManager, in miniature.

kube-scheduler v1.37 (feature gate GenericWorkload) keeps, next to its node cache, every
PodGroup object and per group the pods that name it in ``spec.schedulingGroup``: how many
it knows at all (``AllPodsCount``, what PreEnqueue compares with ``minCount``), how many
are bound or assumed (``ScheduledPodsCount``, what PlacementFeasible and Permit compare),
and which assumed ones wait at Permit. The scheduling queue (``queue.py``) rebuilds the counts
from the cluster's pods before each pass; the GangScheduling plugin reads them through its
handle (the scheduler).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..model.objects import Pod
from ..model.podgroup import PodGroup, pod_group_name

# GangScheduling's permitTimeoutDuration: how long an assumed pod waits at Permit for
# the rest of its gang before it is rejected (pkg/scheduler/framework/plugins/gangscheduling)
PERMIT_TIMEOUT_S = 300.0


@dataclass
class PodGroupState:
    """One group's members as the scheduler counts them."""

    all_pods: int = 0  # members not finished: pending, waiting at Permit, bound
    scheduled: int = 0  # bound, or assumed and waiting at Permit
    waiting: list[str] = field(default_factory=list)  # keys of members waiting at Permit


@dataclass
class WaitingPod:
    """A pod assumed on a node, held at Permit (framework's waitingPod)."""

    pod: Pod
    node: str
    deadline: float  # on the simulated clock
    plugin: str
    timeout_s: float
    allowed: bool = False

    def allow(self, plugin: str) -> None:
        if plugin == self.plugin:
            self.allowed = True


class PodGroupManager:
    """PodGroups by ``namespace/name`` and their states."""

    def __init__(self) -> None:
        self.groups: dict[str, PodGroup] = {}
        self.states: dict[str, PodGroupState] = {}
        self.waiting_pods: dict[str, WaitingPod] = {}  # pod key -> its wait at Permit

    def get(self, namespace: str, name: str) -> PodGroup | None:
        return self.groups.get(f"{namespace}/{name}")

    def group_of(self, pod: Pod) -> tuple[str, PodGroup | None] | None:
        """(the group's key, the PodGroup or None when it does not exist yet), or None for
        a pod that belongs to no group."""
        name = pod_group_name(pod)
        if name is None:
            return None
        key = f"{pod.namespace}/{name}"
        return key, self.groups.get(key)

    def state(self, key: str) -> PodGroupState:
        st = self.states.get(key)
        if st is None:
            st = self.states[key] = PodGroupState()
        return st
