"""The sim's PodDisruptionBudgets, ResourceQuotas and LimitRanges, and what they do.

Admission, as the API server runs it on every pod it creates (an apply's or a
controller's): LimitRanger fills the namespace's default requests and limits and checks
min/max, then ResourceQuota counts the pod against each quota of its namespace, whose
``status.used`` is what the quota controller would count from the pods that exist (a
running cluster after the controller synced). A refused bare pod refuses the apply (the
API server's answer to that create); a refused controller pod is never created: its owner
gets a ``FailedCreate`` event in the controller's words, and tries again at its next sync
(a real controller also retries on its own backoff, 5 ms doubling to 16 min; here a change
to the owner's pods is what brings the retry).

PodDisruptionBudgets: the disruption controller's ``disruptionsAllowed``, worked out from
the pods as they are whenever kube-scheduler's preemption reads its PDB lister
(``handle.disruption_budgets``), as on a cluster whose controller has synced.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import Forbidden, GpuLabError
from ..model.disruptionbudget import DisruptionBudget, PodView, allowed
from ..model.limitrange import LimitRange
from ..model.limitrange import admit as limit_range_admit
from ..model.objects import Pod
from ..model.resourcequota import Ledger, ResourceQuota, used_by

if TYPE_CHECKING:
    from .cluster import Cluster, PodRecord

#: what a pod the sim keeps, Failed, was for a real cluster: deleted (preempted)
DELETED_REASONS = ("PreemptionByScheduler",)


class Policies:
    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.budgets: dict[tuple[str, str], DisruptionBudget] = {}
        self.quotas: dict[tuple[str, str], ResourceQuota] = {}
        self.ranges: dict[tuple[str, str], LimitRange] = {}
        self.admitted: set[str] = set()  # pods an apply already admitted (add_pod skips them)
        # (owner kind, namespace, owner name, message): the controllers' FailedCreate events
        self.failed_creates: list[tuple[str, str, str, str]] = []

    # ------------------------------------------------------------ objects
    def check(self, sc, namespaces: set[str]) -> None:
        """Refuse what already exists or lives in a namespace that does not."""
        for objs, store, resource in ((sc.disruption_budgets, self.budgets, "poddisruptionbudgets.policy"),
                                      (sc.resource_quotas, self.quotas, "resourcequotas"),
                                      (sc.limit_ranges, self.ranges, "limitranges")):
            for o in objs:
                if (o.namespace, o.name) in store:
                    raise GpuLabError(f'{resource} "{o.name}" already exists')
                if o.namespace not in namespaces:
                    raise GpuLabError(f'namespaces "{o.namespace}" not found')

    def add(self, sc) -> list[str]:
        self.budgets.update(((b.namespace, b.name), b) for b in sc.disruption_budgets)
        self.quotas.update(((q.namespace, q.name), q) for q in sc.resource_quotas)
        self.ranges.update(((r.namespace, r.name), r) for r in sc.limit_ranges)
        return ([f"poddisruptionbudget/{b.namespace}/{b.name}" for b in sc.disruption_budgets]
                + [f"resourcequota/{q.namespace}/{q.name}" for q in sc.resource_quotas]
                + [f"limitrange/{r.namespace}/{r.name}" for r in sc.limit_ranges])

    # ------------------------------------------------------------ admission
    def _existing(self) -> list[tuple[Pod, str]]:
        return [(r.pod, r.phase) for r in self.cluster.records.values() if r.reason not in DELETED_REASONS]

    def ledger(self, sc=None) -> Ledger:
        """The quotas (with those ``sc`` is about to create) and what each has used so far."""
        quotas = list(self.quotas.values()) + (list(sc.resource_quotas) if sc is not None else [])
        pods = self._existing() if quotas else []
        return Ledger(quotas, {(q.namespace, q.name): used_by(q, pods) for q in quotas})

    def admit(self, pod: Pod, ledger: Ledger, ranges: list[LimitRange] | None = None) -> Pod:
        """LimitRanger, then ResourceQuota: the pod as created, or ``Forbidden``."""
        pod = limit_range_admit(pod, list(self.ranges.values()) if ranges is None else ranges)
        ledger.admit(pod)
        return pod

    def admit_batch(self, sc, pods: list[Pod]) -> dict[str, Pod | str]:
        """An apply's pods created now, in creation order: each one as admitted, or the
        refusal of a controller's pod (a bare pod's refusal raises: the apply fails)."""
        if not (self.quotas or self.ranges or sc.resource_quotas or sc.limit_ranges):
            return {}
        ledger = self.ledger(sc)
        ranges = list(self.ranges.values()) + list(sc.limit_ranges)
        out: dict[str, Pod | str] = {}
        for p in pods:
            try:
                out[p.key] = self.admit(p, ledger, ranges)
            except Forbidden as err:
                if p.owner_kind is None:
                    raise
                out[p.key] = str(err)
        return out

    def admit_created(self, pod: Pod) -> Pod | None:
        """A pod created outside an apply's batch (a controller's, or one submitted later):
        admitted, or None after recording why it was refused."""
        if pod.key in self.admitted:
            self.admitted.discard(pod.key)
            return pod
        if not (self.quotas or self.ranges):
            return pod
        try:
            return self.admit(pod, self.ledger())
        except Forbidden as err:
            self.refused(pod, str(err))
            return None

    def refused(self, pod: Pod, message: str) -> None:
        """The controller's ``FailedCreate`` event: ``Error creating: <the API server's words>``
        from the controllers that create through ``RealPodControl`` (controller_utils.go), the
        StatefulSet controller's own wording from ``recordPodEvent`` (stateful_pod_control.go)."""
        if pod.owner_kind is not None:
            owner = pod.owner_name or ""
            text = (f"Create Pod {pod.name} in StatefulSet {owner} failed error: {message}"
                    if pod.owner_kind == "StatefulSet" else f"Error creating: {message}")
            self.failed_creates.append((pod.owner_kind, pod.namespace, owner, text))
            self.cluster.api_events.record(pod.namespace, pod.owner_kind, owner, "Warning", "FailedCreate", text,
                                           self.cluster.now)

    # ------------------------------------------------------------ disruption budgets
    def disruption_budgets(self) -> list[tuple[DisruptionBudget, int]]:
        """Every PDB with its ``disruptionsAllowed`` now (what the scheduler's lister holds)."""
        if not self.budgets:
            return []
        views = [_view(r) for r in self.cluster.records.values() if r.reason not in DELETED_REASONS]
        return [(b, allowed(b, views, self._scale)) for _, b in sorted(self.budgets.items())]

    def _scale(self, namespace: str, owner: tuple[str, str]) -> int | None:
        """The disruption controller's finders: a ReplicaSet's replicas (its Deployment's when it
        has one) or a StatefulSet's; a Job has no scale."""
        kind, name = owner
        if kind in ("ReplicaSet", "StatefulSet"):
            for rec in self.cluster.records.values():
                pod = rec.pod
                if pod.namespace == namespace and pod.owner_kind == kind and pod.owner_name == name \
                        and rec.owner is not None and rec.owner_key is not None:
                    record = getattr(rec.owner, "sets", {}).get(rec.owner_key)  # both controllers' records
                    if isinstance(record, dict) and isinstance(record.get("replicas"), int):
                        return record["replicas"]
        return None


def _view(rec: PodRecord) -> PodView:
    pod = rec.pod
    owner = (pod.owner_kind, pod.owner_name or "") if pod.owner_kind else None
    return PodView(pod.namespace, pod.name, pod.labels, owner, rec.phase == "Running")
