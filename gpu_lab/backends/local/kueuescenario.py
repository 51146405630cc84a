"""Run a Kueue scenario on a local lab that runs Kueue, and read what Kueue decided per Job.

A scenario is ordinary YAML: NodePools/Nodes (played by an in-process node agent),
``kueue.x-k8s.io`` objects (ResourceFlavors, Cohorts, ClusterQueues, LocalQueues, ...),
Namespaces and PriorityClasses, and Jobs labelled ``kueue.x-k8s.io/queue-name``. Jobs are
created in order of ``gpulab.dev/submit-at`` (real seconds times ``time_scale``), the rest
first. Reading back, per Job (the table a sim-vs-local differential test compares):

    namespace, name, queue, workload, admitted, order, admitted_at, cluster_queue, flavors,
    pending_message, pods_ready, suspended, finished

``order`` is the admission order, 1 first: the etcd revision of the Workload update that
set ``Admitted=True``, as a watch saw it (exact; ``lastTransitionTime`` only has seconds),
else that condition's ``lastTransitionTime``. ``pending_message`` is Kueue's own message
on the Workload's ``QuotaReserved=False`` condition (e.g. ``couldn't assign flavors to pod
set main: insufficient unused quota for nvidia.com/gpu in flavor h100, 8 more needed``).

    with KueueRun(lab, "scenario.yaml") as run:
        run.wait()
        table = run.outcomes()
"""

from __future__ import annotations

import contextlib
import datetime as dt
import threading
import time
from typing import TYPE_CHECKING, Any

import pandas as pd

from gpu_lab.errors import GpuLabError

from ...kube import ApiError, KubeClient, NotFound
from ...kubelet.agent import NodeAgent
from ...model.documents import load_documents
from ...model.duration import SUBMIT_AT_ANNOTATION, parse_duration
from ...model.scenario import parse_scenario
from ...names import QUEUE_LABEL
from ..apiobjects import condition
from .cluster import LocalCluster
from .kueue import API_GROUP, API_VERSION, check

if TYPE_CHECKING:  # imported when nodes start: the node agent pulls in gRPC
    from ...kubelet.agent import NodeAgent

JOB_UID_LABEL = "kueue.x-k8s.io/job-uid"
#: creation order of Kueue's own kinds (what a ClusterQueue names exists first)
KUEUE_ORDER = ("ResourceFlavor", "Topology", "AdmissionCheck", "WorkloadPriorityClass",
               "Cohort", "ClusterQueue", "LocalQueue")
COLUMNS = ["namespace", "name", "queue", "workload", "admitted", "order", "admitted_at",
           "cluster_queue", "flavors", "pending_message", "pods_ready", "suspended", "finished"]
_FIRST = ("Namespace", "PriorityClass")
_NODES = ("Node", "NodePool")


def _ts(text: str | None) -> float | None:
    if not text:
        return None
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _is_kueue(doc: dict) -> bool:
    return str(doc.get("apiVersion", "")).split("/", 1)[0] == API_GROUP


def workloads_by_job(client: KubeClient, namespace: str | None = None) -> dict[str, dict]:
    """Kueue's Workloads keyed by the uid of the Job that owns them."""
    out = {}
    for w in client.list("Workload", namespace=namespace, api_version=API_VERSION)["items"]:
        uid = (w["metadata"].get("labels") or {}).get(JOB_UID_LABEL)
        for ref in w["metadata"].get("ownerReferences") or []:
            if ref.get("kind") == "Job":
                uid = ref.get("uid") or uid
        if uid:
            out[uid] = w
    return out


def job_outcome(job: dict, workload: dict | None, revision: int | None = None,
                seen_at: float | None = None, t0: float | None = None) -> dict[str, Any]:
    """One row: what Kueue decided for ``job`` (see the module docstring)."""
    meta = job["metadata"]
    admitted = condition(workload or {}, "Admitted")
    reserved = condition(workload or {}, "QuotaReserved")
    admission = ((workload or {}).get("status") or {}).get("admission") or {}
    flavors: dict[str, str] = {}
    for ps in admission.get("podSetAssignments") or []:
        flavors.update(ps.get("flavors") or {})
    is_admitted = admitted.get("status") == "True"
    at = seen_at if seen_at is not None else _ts(admitted.get("lastTransitionTime"))
    return {
        "namespace": meta.get("namespace", "default"),
        "name": meta["name"],
        "queue": (meta.get("labels") or {}).get(QUEUE_LABEL),
        "workload": (workload or {}).get("metadata", {}).get("name"),
        "admitted": is_admitted,
        "_revision": revision,
        "_admitted_ts": _ts(admitted.get("lastTransitionTime")) if is_admitted else None,
        "admitted_at": (at - t0) if is_admitted and at is not None and t0 is not None else None,
        "cluster_queue": admission.get("clusterQueue"),
        "flavors": flavors,
        "pending_message": reserved.get("message") if reserved.get("status") == "False" else None,
        "pods_ready": condition(workload or {}, "PodsReady").get("status") == "True",
        "suspended": bool((job.get("spec") or {}).get("suspend")),
        "finished": condition(workload or {}, "Finished").get("status") == "True",
    }


def outcomes_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """Rows of :func:`job_outcome` with ``order`` filled in, as a DataFrame."""
    admitted = [r for r in rows if r["admitted"]]

    def key(r):
        # a watch's revision is exact; lastTransitionTime (seconds) is the fallback
        return (r["_revision"] is None, r["_revision"] or 0, r["_admitted_ts"] or 0.0)

    order = {id(r): i for i, r in enumerate(sorted(admitted, key=key), 1)}
    out = [{**{k: v for k, v in r.items() if not k.startswith("_")}, "order": order.get(id(r))}
           for r in rows]
    df = pd.DataFrame(out, columns=COLUMNS)
    for col in ("queue", "workload", "cluster_queue", "pending_message"):
        # None, not NaN, where a Job has no such thing (as lab.jobs() writes its queue)
        df[col] = pd.Series([r[col] for r in out], index=df.index, dtype=object)
    df["order"] = df["order"].astype("Int64")  # <NA> for a Job not admitted
    df["admitted_at"] = df["admitted_at"].astype(float)
    return df


def read_outcomes(client: KubeClient, jobs: list[tuple[str, str]] | None = None,
                  namespace: str | None = None) -> pd.DataFrame:
    """What Kueue decided for ``jobs`` ((namespace, name) pairs; default: every Job with a
    queue-name label), read after the fact (order from ``lastTransitionTime``)."""
    items = client.list("Job", namespace=namespace)["items"]
    if jobs is not None:
        want = set(jobs)
        items = [j for j in items if (j["metadata"]["namespace"], j["metadata"]["name"]) in want]
    else:
        items = [j for j in items if QUEUE_LABEL in (j["metadata"].get("labels") or {})]
    wls = workloads_by_job(client, namespace)
    return outcomes_table([job_outcome(j, wls.get(j["metadata"]["uid"])) for j in items])


class _AdmissionWatch:
    """Records, per Workload uid, the etcd revision and the time at which a watch first
    saw ``Admitted=True``."""

    def __init__(self, client: KubeClient):
        self.client = KubeClient(client.creds, timeout=client.timeout)  # its own connection pool
        self.seen: dict[str, tuple[int, float]] = {}
        self._stop = threading.Event()
        self._lock = threading.Lock()
        lst = self.client.list("Workload", api_version=API_VERSION)
        self._rv = lst["metadata"].get("resourceVersion")
        for w in lst["items"]:
            self._see(w)
        self._thread = threading.Thread(target=self._run, name="kueue-admissions", daemon=True)
        self._thread.start()

    def _see(self, w: dict) -> None:
        if condition(w, "Admitted").get("status") != "True":
            return
        with self._lock:
            self.seen.setdefault(w["metadata"]["uid"],
                                 (int(w["metadata"]["resourceVersion"]), time.time()))

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                for ev in self.client.watch("Workload", api_version=API_VERSION,
                                            resource_version=self._rv, timeout_seconds=1):
                    if ev.type in ("ADDED", "MODIFIED"):
                        self._see(ev.object)
                    self._rv = ev.object.get("metadata", {}).get("resourceVersion") or self._rv
                    if self._stop.is_set():
                        return
            except ApiError:  # 410 Gone: start again from a fresh list
                with contextlib.suppress(Exception):
                    lst = self.client.list("Workload", api_version=API_VERSION)
                    self._rv = lst["metadata"].get("resourceVersion")
                    for w in lst["items"]:
                        self._see(w)
            except Exception:  # the lab went away: nothing more to see
                if self._stop.wait(0.5):
                    return

    def get(self, uid: str) -> tuple[int, float] | None:
        with self._lock:
            return self.seen.get(uid)

    def close(self) -> None:
        self._stop.set()
        self._thread.join(3)
        self.client.close()


class KueueRun:
    """One scenario on a lab that runs Kueue (``gpu-lab up --with kueue``); see the module
    docstring. ``cleanup`` (on :meth:`close`): delete what it created and its nodes."""

    def __init__(self, lab: LocalCluster, src, *, time_scale: float = 1.0,
                 timeout: float = 60.0, cleanup: bool = True):
        self.lab, self.timeout, self.cleanup = lab, timeout, cleanup
        self.docs = load_documents(src)
        self.time_scale = time_scale
        self.client = lab.client()
        self.agent: NodeAgent | None = None
        self.jobs: list[tuple[str, str]] = []
        self._created: list[tuple[str, str, str, str | None]] = []  # apiVersion, kind, name, ns
        self._watch: _AdmissionWatch | None = None
        self.t0: float | None = None
        self._started = False

    # ------------------------------------------------------------------ run
    def start(self) -> KueueRun:
        if self._started:
            return self
        self._started = True
        self.lab.check_ready(health=False, agents=False)
        check(self.lab)
        nodes = [d for d in self.docs if d.get("kind") in _NODES]
        if nodes:
            self._start_nodes(nodes)
        rest = [d for d in self.docs if d.get("kind") not in _NODES]
        first = [d for d in rest if d.get("kind") in _FIRST]
        kq = sorted((d for d in rest if _is_kueue(d)),
                    key=lambda d: (KUEUE_ORDER.index(d["kind"]) if d["kind"] in KUEUE_ORDER
                                   else len(KUEUE_ORDER)))
        timed = [d for d in rest if d not in first and d not in kq]
        for d in first + kq:
            self._create(d)
        self._watch = _AdmissionWatch(self.client)
        at = [parse_duration(((d.get("metadata") or {}).get("annotations") or {})
                             .get(SUBMIT_AT_ANNOTATION, "0s"), SUBMIT_AT_ANNOTATION)
              for d in timed]
        self.t0 = time.time()
        for offset, d in sorted(zip(at, timed, strict=True), key=lambda p: p[0]):
            delay = self.t0 + offset * self.time_scale - time.time()
            if delay > 0:
                time.sleep(delay)
            created = self._create(d)
            if created.get("kind") == "Job":
                self.jobs.append((created["metadata"]["namespace"], created["metadata"]["name"]))
        return self

    def _start_nodes(self, docs: list[dict]) -> None:

        sc = parse_scenario(docs)
        self.agent = NodeAgent(self.client, sc.nodes, self.lab.dir / "nodes")
        self.agent.start()

    def _create(self, doc: dict) -> dict:
        meta = doc.get("metadata") or {}
        ns = meta.get("namespace")
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                created = self.client.create(doc, namespace=ns)
                break
            except ApiError as err:  # a new namespace's default ServiceAccount comes later
                if "serviceaccount" not in str(err).lower() or time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        cm = created["metadata"]
        self._created.append((created["apiVersion"], created["kind"], cm["name"],
                              cm.get("namespace")))
        return created

    def rows(self) -> list[dict[str, Any]]:
        wls = workloads_by_job(self.client)
        out = []
        for ns, name in self.jobs:
            job = self.client.get("Job", name, namespace=ns)
            w = wls.get(job["metadata"]["uid"])
            seen = self._watch.get(w["metadata"]["uid"]) if w and self._watch else None
            revision, seen_at = seen or (None, None)
            out.append(job_outcome(job, w, revision, seen_at, t0=self.t0))
        return out

    def outcomes(self) -> pd.DataFrame:
        """Per Job: what Kueue decided so far (see the module docstring)."""
        return outcomes_table(self.rows())

    def wait(self, settle: float = 2.0, until: float | None = None,
             pods_ready: bool = False) -> pd.DataFrame:
        """Until every Job has a Workload that is admitted (``pods_ready``: and its pods
        Ready) or pending with Kueue's message, unchanged for ``settle`` s; at least
        ``until`` s after the first Job. Raises :class:`GpuLabError` after ``timeout``."""
        self.start()
        deadline = time.monotonic() + self.timeout
        last, since = None, time.monotonic()
        while True:
            rows = self.rows()
            state = [(r["workload"], r["admitted"], r["pending_message"], r["pods_ready"],
                      r["finished"]) for r in rows]
            decided = all(r["workload"] and (
                (r["admitted"] and (r["pods_ready"] or r["finished"] or not pods_ready))
                or r["pending_message"]) for r in rows)
            if state != last:
                last, since = state, time.monotonic()
            late = until is not None and time.time() - (self.t0 or 0) < until
            if decided and not late and time.monotonic() - since >= settle:
                return outcomes_table(rows)
            if time.monotonic() > deadline:
                waiting = [f"{r['namespace']}/{r['name']}" for r in rows
                           if not (r["admitted"] or r["pending_message"])]
                raise GpuLabError(f"timed out after {self.timeout:.0f} s waiting for Kueue to "
                                  f"admit or hold {', '.join(waiting) or 'the Jobs'}")
            with contextlib.suppress(GpuLabError):
                check(self.lab)
            time.sleep(0.2)

    # ------------------------------------------------------------------ cleanup
    def close(self) -> None:
        if self._watch is not None:
            self._watch.close()
            self._watch = None
        if self.cleanup:
            self._delete_created()
        if self.agent is not None:
            self.agent.stop(delete_nodes=self.cleanup)
            self.agent = None
        self.client.close()

    def _delete_created(self, timeout: float = 30.0) -> None:
        """Delete what this run created, newest first, and wait until it is gone and the
        Jobs' pods have ended (the node agent still runs), so the lab can run the next."""
        for api_version, kind, name, ns in reversed(self._created):
            with contextlib.suppress(NotFound):
                self.client.delete(kind, name, namespace=ns, api_version=api_version,
                                   propagation_policy="Background")
        deadline = time.monotonic() + timeout
        jobs = {name for _, kind, name, _ in self._created if kind == "Job"}

        def left() -> bool:
            for api_version, kind, name, ns in self._created:
                with contextlib.suppress(NotFound):
                    self.client.get(kind, name, namespace=ns, api_version=api_version)
                    return True
            return any((p["metadata"].get("labels") or {}).get("batch.kubernetes.io/job-name")
                       in jobs for p in self.client.list("Pod")["items"])

        while left() and time.monotonic() < deadline:
            time.sleep(0.2)

    def __enter__(self) -> KueueRun:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()


def run_scenario(lab: LocalCluster, src, *, settle: float = 2.0, until: float | None = None,
                 pods_ready: bool = False, time_scale: float = 1.0,
                 timeout: float = 60.0) -> pd.DataFrame:
    """:class:`KueueRun` start, wait, read, clean up: per Job, what Kueue decided."""
    with KueueRun(lab, src, time_scale=time_scale, timeout=timeout) as run:
        return run.wait(settle=settle, until=until, pods_ready=pods_ready)


__all__ = [
    "COLUMNS",
    "KueueRun",
    "job_outcome",
    "outcomes_table",
    "read_outcomes",
    "run_scenario",
    "workloads_by_job",
]
