"""What a controller may do to the embedded cluster, and what it is told.

Controllers are level-triggered like the real ones, but told which objects
changed (``pod_finished``) so one event costs one object's sync, not a scan of
every pod: a day of 2,000 Jobs is tens of thousands of events.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from ...model.objects import Node, Pod
from ...model.parse import NameGenerator


class Cluster(Protocol):
    """The simulated cluster, as its controllers see it (``sim.controllermanager.ClusterView``)."""

    names: NameGenerator

    @property
    def now(self) -> float: ...

    def create_pod(self, pod: Pod) -> None:
        """Add a pod created by a controller (it enters the scheduling queue)."""

    def remove_pod(self, key: str) -> None:
        """Delete a pod a controller no longer wants (its resources are freed)."""

    def wake_at(self, at: float, controller: Controller, key: str) -> None:
        """Call ``controller.wake(key)`` when the clock reaches ``at``."""

    def next_created(self) -> int:
        """The next creation order (the scheduling queue's tie-break)."""

    def priority_classes(self) -> dict[str, dict]: ...

    # ---- nodes and pods as the autoscaler, Kueue and the DRA controllers read them
    def nodes(self) -> dict[str, Node]: ...

    def pods_on(self, node: str) -> list[Pod]: ...

    def pending_pods(self) -> list[Pod]: ...

    def pod_phase(self, key: str) -> str | None: ...

    def node_version(self) -> int: ...

    def generation(self) -> int: ...

    def cordon(self, name: str) -> None: ...

    def can_reschedule(self, pods: list[Pod], without: set[str]) -> bool | str: ...

    def add_node(self, node: Node) -> None: ...

    def remove_node(self, name: str, reason: str) -> list[str]: ...

    def fits_on(self, pod: Pod, node: Node, pods: Sequence[Pod] = ()) -> bool: ...

    def daemonsets(self) -> list[dict]: ...


class Controller:
    """A controller: told about its pods' ends, asked to reconcile what changed."""

    #: a change it makes may help an unschedulable pod (it frees what pods wait for), so the
    #: scheduling queue retries them; creating pods is not such a change
    frees_resources = False

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._dirty: set[str] = set()

    def owns(self, pod: Pod) -> str | None:
        """The key of the object that controls ``pod``, if this controller manages it."""
        return None

    def pod_finished(self, owner: str, pod_key: str, phase: str, reason: str) -> None:
        """A pod this controller owns reached Succeeded or Failed, or was deleted (phase "")."""

    def wake(self, key: str) -> None:
        """A timer this controller set has fired."""
        self._dirty.add(key)

    def sync(self) -> bool:
        """Reconcile every object marked dirty; True when anything changed."""
        return False
