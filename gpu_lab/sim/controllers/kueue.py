"""Kueue as a controller of the embedded cluster: its webhook, Job reconciler and scheduler.

The admission decisions are ``sim.kueue``'s model of Kueue v0.17.0; this controller
does what Kueue's other parts do around it:

* the Job webhook: a Job labelled ``kueue.x-k8s.io/queue-name`` is created suspended
  (no pods) and its Workload is queued;
* the Job reconciler: on admission the Job's pod template gets the flavors' node labels
  and tolerations and is resumed (the Job controller then creates its pods); on
  eviction it is suspended again (its pods are deleted) and the template restored;
* PodsReady: once every pod of an admitted Job runs, the model is told, so
  ``waitForPodsReady`` can evict Jobs that never got all their pods.

Kueue is "installed" in the sim once any ``kueue.x-k8s.io`` object has been applied;
before that the queue-name label means nothing, as on a cluster without Kueue.
"""

from __future__ import annotations

import copy

from ...errors import GpuLabError
from ...names import QUEUE_LABEL
from ..kueue import Admit, Evict, Kueue, Pending, job_workload, parse_kueue
from .base import Cluster, Controller
from .job import JobController

WAKE = "kueue"


class KueueController(Controller):
    def __init__(self, cluster: Cluster, jobs: JobController) -> None:
        super().__init__(cluster)
        self.jobs = jobs
        self.documents: list[dict] = []
        self.model: Kueue | None = None
        self._workload_of: dict[str, str] = {}  # job key -> workload key
        self._templates: dict[str, dict] = {}  # job key -> its template before admission
        self._admitted: set[str] = set()  # job keys admitted and not yet all pods ready
        self._open: set[str] = set()  # job keys whose end the model has not been told yet
        self._due = False

    @property
    def active(self) -> bool:
        return self.model is not None

    def check(self, docs: list[dict]) -> None:
        """Before ``apply`` changes anything: the objects as Kueue's API would admit them."""
        if self.model is not None and self.model.by_key:
            raise GpuLabError("Kueue objects after Kueue workloads: apply ResourceFlavors, ClusterQueues "
                              "and LocalQueues before the Jobs that use them (changing queues under "
                              "queued workloads is not modelled)")
        parse_kueue(self.documents + docs)

    def add(self, docs: list[dict]) -> None:
        self.documents += docs
        self.model = Kueue(parse_kueue(self.documents))
        self._due = True

    def manages(self, record: dict) -> bool:
        labels = ((record.get("raw") or {}).get("metadata") or {}).get("labels") or {}
        return self.model is not None and record["kind"] == "Job" and bool(labels.get(QUEUE_LABEL))

    def submit(self, record: dict) -> None:
        """Kueue's Job webhook suspended the Job at creation; its Workload is queued now."""
        raw = copy.deepcopy(record["raw"])
        raw.setdefault("metadata", {})["namespace"] = record["namespace"]
        model = self.model
        assert model is not None  # submit follows manages(), true only with a model
        spec = job_workload(raw, created=self.cluster.now, uid=record["uid"], config=model.config,
                            priority_classes=self.cluster.priority_classes())
        assert spec is not None  # manages() saw the queue-name label, so Kueue makes a Workload
        key = f"{record['namespace']}/{record['name']}"
        model.submit(spec, self.cluster.now)
        self._workload_of[key] = spec.key
        self._open.add(key)
        self._templates[key] = copy.deepcopy(record["template"])
        self.jobs.jobs[key].queue = spec.queue
        self._due = True

    def wake(self, key: str) -> None:
        self._due = True

    def sync(self) -> bool:
        if self.model is None:
            return False
        now = self.cluster.now
        changed = self._report(now)
        if not (self._due or changed):
            return False
        self._due = False
        acted = False
        for d in self.model.schedule(now):
            job = self.jobs.jobs.get(d.job)
            if job is None:
                continue
            if isinstance(d, Admit):
                self._admit(d, job.record)
                acted = True
            elif isinstance(d, Evict):
                self._admitted.discard(d.job)
                job.record["template"] = copy.deepcopy(self._templates[d.job])  # restored on suspend
                job.record["prototype"] = None
                job.message = d.message
                self.jobs.set_suspended(d.job, True)
                self.model.stopped(d.key, now)
                self._due = True  # the quota it held is free: whoever waited for it goes next
                acted = True
            elif isinstance(d, Pending):
                job.message = d.message
        wake = self.model.next_wakeup()
        if wake is not None and wake > now:
            self.cluster.wake_at(wake, self, WAKE)
        return acted

    def _admit(self, d: Admit, record: dict) -> None:
        """Kueue's Job reconciler: the flavors' node labels and tolerations go into the pod
        template, then the Job is resumed."""
        template = copy.deepcopy(self._templates[d.job])
        spec = template["spec"]
        if d.node_selector:
            spec["nodeSelector"] = {**(spec.get("nodeSelector") or {}), **d.node_selector}
        if d.tolerations:
            spec["tolerations"] = [*(spec.get("tolerations") or []), *d.tolerations]
        record["template"], record["prototype"] = template, None
        job = self.jobs.jobs[d.job]
        job.message = ""
        job.admitted_at = self.cluster.now
        self._admitted.add(d.job)
        self.jobs.set_suspended(d.job, False)

    def _report(self, now: float) -> bool:
        """Tell the model what the Jobs did: all pods running (PodsReady), or finished."""
        model = self.model
        assert model is not None  # sync returns before reporting when there is no model
        told = False
        for key in list(self._admitted):
            job = self.jobs.jobs[key]
            if job.finished:
                continue
            running = sum(1 for pod in job.active if self.cluster.pod_phase(pod) == "Running")
            if job.active and running == len(job.active) >= job.wanted_active():
                model.pods_ready(self._workload_of[key], now)
                self._admitted.discard(key)
                told = True
        for key in [k for k in self._open if self.jobs.jobs[k].finished]:
            self._open.discard(key)
            self._admitted.discard(key)
            model.finish(self._workload_of[key], now, succeeded=self.jobs.jobs[key].complete)
            told = True
        return told

    def workloads(self) -> list[dict]:
        return self.model.workloads() if self.model is not None else []
