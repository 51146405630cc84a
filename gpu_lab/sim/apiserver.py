"""Creating a scenario's objects in the simulated cluster, as the API server and its watchers do.

Everything is checked before anything changes, so an apply that fails leaves nothing
half-created: names already taken, namespaces that do not exist, PodGroups, DRA objects,
a scheduler configuration, durations, Kueue's objects. Then the objects are stored and
handed to whoever watches them: new nodes to their kubelets, workloads to their
controllers, pods to the scheduling queue (or, with spec.nodeName, straight to their
node's kubelet). Objects annotated ``gpulab.dev/submit-at`` are created when the clock
gets there, after earlier ones, in the order they were applied.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..collector import collector_paused
from ..errors import GpuLabError
from ..model.creationorder import pods_in_order
from ..model.duration import DURATION_ANNOTATION, parse_duration
from ..model.objects import Pod
from ..model.scenario import parse_scenario
from ..model.statefulset import slow_start_batch
from ..model.timing import rendezvous_settings, submit_time
from .cluster import PodRecord
from .dra import backend as dra
from .policies import Policies
from .scheduler import Scheduler

if TYPE_CHECKING:
    from .runner import Runner


@dataclass
class _Checked:
    """What validation computed and the storing steps use."""

    dra_records: Any
    scheduler: Scheduler | None  # a new scheduler, when the apply carries a configuration
    at_of: dict  # pod key or ("workload", i) -> when it is created
    rendezvous: dict[str, tuple[int, float | None, float | None]]
    admitted: dict


class ApiServer:
    def __init__(self, sim: Runner) -> None:
        self._sim = sim
        self.cluster = sim.cluster
        # PodDisruptionBudgets, ResourceQuotas, LimitRanges: admission and the PDBs preemption reads
        self.policies = Policies(sim.cluster)
        sim.cluster.scheduler.disruption_budgets = self.policies.disruption_budgets

    def create(self, docs: list[dict]) -> list[str]:
        """Create the documents' objects; returns "kind/name" refs."""
        with collector_paused():  # thousands of long-lived objects at once
            sc = parse_scenario(docs, known_priority_classes=dict(self.cluster.priority_classes),
                                first_created=self.cluster.created, names=self.cluster.names)
        checked = self._validate(sc)  # everything, before anything changes: nothing half-applied
        refs: list[str] = []
        self._take_admitted(sc, checked.admitted)
        refs += self.policies.add(sc)
        refs += self._store_definitions(sc, checked)
        refs += self._swap_scheduler(sc, checked.scheduler)
        refs += self._store_nodes_and_controllers(sc)
        refs += self._submit_pods(sc, checked)
        return refs

    def _validate(self, sc) -> _Checked:
        """Every check an apply makes, in the API server's order; raises on the first
        object that fails, having changed nothing."""
        c, controllers = self.cluster, self._sim.controllers
        for n in sc.nodes:
            if n.name in c.nodes:
                raise GpuLabError(f'nodes "{n.name}" already exists')
        for p in sc.pods:
            if p.key in c.records:
                raise GpuLabError(f'pods "{p.name}" already exists (namespace {p.namespace})')
            if p.namespace not in c.namespaces and p.namespace not in sc.namespaces:
                raise GpuLabError(f'namespaces "{p.namespace}" not found')
        self._check_pod_groups(sc.pod_groups, sc.namespaces)
        self.policies.check(sc, c.namespaces | set(sc.namespaces))
        for svc in sc.services:
            if svc["name"] in controllers.listers.services.get(svc["namespace"], {}):
                raise GpuLabError(f'services "{svc["name"]}" already exists')
            if svc["namespace"] not in c.namespaces and svc["namespace"] not in sc.namespaces:
                raise GpuLabError(f'namespaces "{svc["namespace"]}" not found')
        dra_records = dra.admit(c.snapshot, sc.dra, sc.pods, c.namespaces | set(sc.namespaces))
        scheduler = None
        if sc.scheduler_config is not None:
            scheduler = Scheduler.from_config(sc.scheduler_config, c.snapshot, c.seed, c.deterministic, c.record)
        for p in sc.pods:
            if p.annotations.get(DURATION_ANNOTATION):
                parse_duration(p.annotations[DURATION_ANNOTATION])
        at_of, rendezvous = self._plan(sc)
        admitted = self.policies.admit_batch(sc, self._created_now(sc, at_of, c.now))  # a refused bare pod raises
        if sc.kueue:
            controllers.kueue.check(sc.kueue)
        return _Checked(dra_records, scheduler, at_of, rendezvous, admitted)

    def _store_definitions(self, sc, checked: _Checked) -> list[str]:
        """PodGroups, PriorityClasses, Namespaces, Services and DRA objects: what pods refer to."""
        c, controllers = self.cluster, self._sim.controllers
        if sc.pod_groups or sc.dra or sc.priority_classes or sc.namespaces or checked.scheduler is not None:
            c.wakeups += 1  # what a gate or a plugin waits for may exist now; a new scheduler retries all
        c.pod_groups.update((g.key, g) for g in sc.pod_groups)
        refs = [f"podgroup/{g.key}" for g in sc.pod_groups]
        c.priority_classes.update(sc.priority_classes)
        refs += [f"priorityclass/{k}" for k in sc.priority_classes]
        c.namespaces.update(sc.namespaces)
        refs += [f"namespace/{k}" for k in sc.namespaces]
        for svc in sc.services:  # before any pod of this apply is scheduled, as kubectl creates them first
            controllers.listers.add_service(svc)
            refs.append(f"service/{svc['namespace']}/{svc['name']}")
        return refs + dra.commit(c.snapshot, checked.dra_records)

    def _swap_scheduler(self, sc, scheduler: Scheduler | None) -> list[str]:
        """A KubeSchedulerConfiguration: the new scheduler takes over the old one's queue state."""
        if scheduler is None:
            return []
        c = self.cluster
        c.scheduler_config_raw = sc.scheduler_config
        scheduler.nominated = c.scheduler.nominated
        scheduler.disruption_budgets = c.scheduler.disruption_budgets
        scheduler.started = c.scheduler.started
        scheduler.pod_groups = c.scheduler.pod_groups  # members waiting at Permit
        c.scheduler = scheduler
        self._sim.predicate_checker.forget()  # verdicts of the old configuration
        return ["kubeschedulerconfiguration"]

    def _store_nodes_and_controllers(self, sc) -> list[str]:
        """Nodes to their kubelets; NodePools, Kueue's objects and the autoscaler to the
        controllers that watch them."""
        controllers = self._sim.controllers
        refs: list[str] = []
        if sc.nodes:
            self._sim.nodes.add(sc.nodes)
            refs += [f"node/{n.name}" for n in sc.nodes]
        controllers.pool_docs += sc.node_pools
        if sc.kueue:
            controllers.kueue.add(sc.kueue + [d for d in sc.documents if d.get("kind") == "Namespace"])
            refs += [f"{d.get('kind', '').lower()}/{(d.get('metadata') or {}).get('name')}" for d in sc.kueue]
        if sc.autoscaler is not None or any((p.get("spec") or {}).get("autoscaling") for p in sc.node_pools):
            controllers.start_autoscaler(sc.autoscaler)
            refs += ["autoscaler"] if sc.autoscaler is not None else []
        return refs

    def _submit_pods(self, sc, checked: _Checked) -> list[str]:
        """Workloads and pods now, or on the clock at their submit time (in apply order)."""
        c = self.cluster
        c.created = max([c.created] + [p.created + 1 for p in sc.pods])
        self._sim.controllers.register_rendezvous(checked.rendezvous)
        at_of = checked.at_of
        later: dict[tuple[float, int], tuple[dict | None, list[Pod]]] = {}
        by_key = {p.key: p for p in sc.pods}
        for i, record in enumerate(sc.workloads):
            at = at_of[("workload", i)]
            pods = [by_key[f"{record['namespace']}/{n}"] for n in record["pods"]]
            if at > c.now:
                later[(at, len(later))] = (record, pods)
            else:
                self._add_workload(record, pods)
        refs: list[str] = []
        for p in sc.pods:
            refs.append(f"pod/{p.key}")
            at = at_of.get(p.key)
            if at is None:
                continue  # a workload's pod: created with its workload
            if at > c.now:
                later[(at, len(later))] = (None, [p])
            else:
                self.add_pod(p)
        for (at, _), item in sorted(later.items(), key=lambda kv: kv[0]):
            c.events.push(at, "submit", item)
        return refs

    @staticmethod
    def _created_now(sc, at_of: dict, now: float) -> list[Pod]:
        """The pods an apply creates at once, in the order every backend creates them
        (``model.creationorder``): the order quota admits them in."""
        keys = {p.key for p in sc.pods if at_of.get(p.key, now) <= now}
        for i, record in enumerate(sc.workloads):
            if at_of[("workload", i)] > now:
                keys -= {f"{record['namespace']}/{n}" for n in record["pods"]}
        return [p for p in pods_in_order(sc.documents, sc.pods) if p.key in keys]

    def _take_admitted(self, sc, admitted: dict) -> None:
        """The apply's pods as admission made them (LimitRange defaults); a controller's pod
        that quota refused is left out, with its owner's FailedCreate event."""
        if not admitted:
            return
        refused = {k for k, v in admitted.items() if isinstance(v, str)}
        tried = _tried(sc, refused)
        for p in sc.pods:
            if p.key in refused and p.key in tried:
                self.policies.refused(p, admitted[p.key])
        sc.pods = [admitted.get(p.key, p) for p in sc.pods if p.key not in refused]
        for record in sc.workloads:
            record["pods"] = [n for n in record["pods"] if f"{record['namespace']}/{n}" not in refused]
        self.policies.admitted |= {k for k, v in admitted.items() if not isinstance(v, str)}

    def _check_pod_groups(self, groups: list, namespaces: list[str]) -> None:
        """PodGroups are created once, in namespaces that exist (or that the same apply creates)."""
        c = self.cluster
        for g in groups:
            if g.key in c.pod_groups:
                raise GpuLabError(f'podgroups.scheduling.k8s.io "{g.name}" already exists')
            if g.namespace not in c.namespaces and g.namespace not in namespaces:
                raise GpuLabError(f'namespaces "{g.namespace}" not found')

    def _plan(self, sc) -> tuple[dict, dict[str, tuple[int, float | None, float | None]]]:
        """When each object is created (``gpulab.dev/submit-at``) and which Jobs are rendezvous
        Jobs (size, seconds of work, timeout): checked before anything is applied."""
        at_of: dict = {}
        owned: set[str] = set()
        rendezvous = {}
        for i, record in enumerate(sc.workloads):
            ann = (record["raw"].get("metadata") or {}).get("annotations") or {}
            at_of[("workload", i)] = submit_time(ann)
            owned.update(f"{record['namespace']}/{n}" for n in record["pods"])
            if record["kind"] == "Job":
                is_rendezvous, timeout = rendezvous_settings(record)
                if is_rendezvous:
                    work = (record["template"]["metadata"].get("annotations") or {}).get(DURATION_ANNOTATION)
                    rendezvous[f"{record['namespace']}/{record['name']}"] = (
                        record["parallelism"], parse_duration(work) if work else None, timeout)
        for p in sc.pods:
            if p.key not in owned:
                at_of[p.key] = submit_time(p.annotations)
        return at_of, rendezvous

    def _add_workload(self, record: dict, pods: list[Pod]) -> None:
        controllers = self._sim.controllers
        if controllers.kueue.manages(record):  # Kueue's webhook suspends it: no pods until admitted
            controllers.jobs.add(record, [], suspended=True)
            controllers.kueue.submit(record)
            return
        controllers.listers.add_workload(record)  # default spreading selects on its selector from now on
        if record["kind"] == "Job":
            controllers.jobs.add(record, pods)
        elif record["kind"] == "StatefulSet":
            controllers.statefulsets.add(record, pods)
        elif record["kind"] == "DaemonSet":
            controllers.daemonsets.add(record)  # its pods come from its controller, node by node
        else:
            controllers.replicasets.add(record, pods)
        for p in pods:
            self.add_pod(p)

    def submit(self, items: list[tuple[dict | None, list[Pod]]]) -> None:
        """Objects whose ``gpulab.dev/submit-at`` has come: created now, queued after earlier
        ones, in the order they were applied."""
        c = self.cluster
        for _, pods in items:
            for p in pods:
                p.created = c.created
                c.created += 1
        for record, pods in items:
            if record is not None:
                self._add_workload(record, pods)
            else:
                for p in pods:
                    self.add_pod(p)

    def add_pod(self, pod: Pod) -> None:
        """A pod is created: queued for the scheduler, or (spec.nodeName) admitted by its node."""
        c = self.cluster
        rec = PodRecord(pod, created_at=c.now)
        self._sim.controllers.adopt(rec)
        admitted = self.policies.admit_created(pod)  # LimitRanger and ResourceQuota
        if admitted is None:  # never created: its controller tries again at its next sync
            refused = getattr(rec.owner, "refused", None)
            if callable(refused):
                refused(rec.owner_key, pod.key)
            return
        rec.pod = pod = admitted
        c.records[pod.key] = rec
        c.generation += 1
        if pod.node_name:
            self._sim.binder.admit_direct(rec)
        else:
            c.pending[pod.key] = rec


def _tried(sc, refused: set[str]) -> set[str]:
    """The refused pods whose creation the controller tried: all but a StatefulSet's after the
    slow-start batch where its first create failed (they would be refused the same way, but no
    FailedCreate names them; its controller tries them at its next sync)."""
    out = set(refused)
    for record in sc.workloads:
        if record.get("kind") != "StatefulSet":
            continue
        keys = [f"{record['namespace']}/{n}" for n in record["pods"]]
        index = {k: int(k.rsplit("-", 1)[1]) - record["start"] for k in keys}
        failed = [slow_start_batch(index[k]) for k in keys if k in refused]
        if failed:
            out -= {k for k in keys if slow_start_batch(index[k]) > min(failed)}
    return out
