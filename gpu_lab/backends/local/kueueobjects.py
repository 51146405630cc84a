"""Kueue in ``LocalSession.apply``: its objects, the Jobs it queues, and when its verdicts
are final.

In a lab that runs Kueue (``gpu-lab up --with kueue``) the ``kueue.x-k8s.io`` objects of a
scenario are created through the API server as they are, in an order where what an object
names exists first, before the Jobs; Kueue's CRDs and webhooks judge them. In a lab
without Kueue they are refused in one line, as ``kubectl`` refuses a kind the cluster does
not serve. Kueue's manager ``Configuration`` is not an API object: it is accepted when it
asks for what the lab's Kueue runs with.

A Job labelled ``kueue.x-k8s.io/queue-name`` is suspended by Kueue's webhook: the Job
controller makes its pods only once Kueue admits it, so ``apply`` waits for no pods of
such Jobs and ``schedule`` waits for Kueue's verdict on each of them instead (see
:meth:`KueueJobs.settled`).

Order. Kueue orders a ClusterQueue's pending Workloads by priority, then by their
``creationTimestamp``, which has whole seconds, then by UID (random). Each queued Job is
therefore created in a later second than the previous one's Workload, so that Kueue sees
them in the file's order, as the simulator does. Each Job reaches Kueue alone, as with
``gpulab.dev/submit-at`` of 0s, 1s, 2s ... in file order on the sim (which otherwise
submits a whole file at one instant): a higher-priority Job later in the file goes first
only among those still waiting, and a ClusterQueue may lend its quota before the Job that
would have used it arrives.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import math
import time
from typing import Any

from ...errors import GpuLabError
from ...kube import ApiError, KubeClient
from ...model.duration import go_duration_string
from ...model.kueue.configuration import parse_configuration, parse_go_duration
from ..apiobjects import condition
from .cluster import LocalCluster
from .kueue import API_GROUP, API_VERSION, enabled, settings
from .kueuescenario import JOB_UID_LABEL, KUEUE_ORDER, QUEUE_LABEL

CONFIG_GROUP = "config.kueue.x-k8s.io"
NAMESPACED = {"LocalQueue", "Workload"}
#: how long Kueue's verdicts must stay the same before a wait takes them as final: a Job's
#: Workload is created and tried within milliseconds; one behind a StrictFIFO head that
#: does not fit gets no condition at all, so only time tells that nothing else will happen
STABLE_S = 2.0


def group(doc: Any) -> str:
    return str(doc.get("apiVersion", "")).split("/")[0] if isinstance(doc, dict) else ""


def is_kueue(doc: Any) -> bool:
    return group(doc) in (API_GROUP, CONFIG_GROUP)


def order(doc: dict) -> int:
    kind = doc.get("kind")
    return KUEUE_ORDER.index(kind) if kind in KUEUE_ORDER else len(KUEUE_ORDER)


def namespace_of(doc: dict) -> str | None:
    if doc.get("kind") not in NAMESPACED:
        return None
    return (doc.get("metadata") or {}).get("namespace", "default")


def queued(doc: dict) -> bool:
    """A Job Kueue's webhook suspends (the label, on a lab that runs Kueue)."""
    return doc.get("kind") == "Job" and labelled(doc)


def labelled(obj: dict) -> bool:
    return bool(((obj.get("metadata") or {}).get("labels") or {}).get(QUEUE_LABEL))


def check(lab: LocalCluster, docs: list[dict]) -> list[dict]:
    """The API objects to create (in creation order); refuse what this lab cannot take."""
    if not docs:
        return []
    if not enabled(lab):
        d = docs[0]
        raise GpuLabError(f'no matches for kind "{d.get("kind")}" in version "{d.get("apiVersion")}": '
                          f"this lab does not run Kueue; `gpu-lab up{lab._name_flag} --with kueue` "
                          "starts it")
    for d in docs:
        if group(d) == CONFIG_GROUP:
            _check_configuration(lab, d)
    return sorted((d for d in docs if group(d) == API_GROUP), key=order)


def _check_configuration(lab: LocalCluster, doc: dict) -> None:
    """Kueue reads its Configuration when it starts: the lab's must be the one asked for."""
    st = settings(lab)
    assert st is not None  # check() refused the documents of a lab without Kueue
    want = parse_configuration(doc, str(doc.get("apiVersion")).split("/")[-1])
    have = parse_go_duration(st.pods_ready_timeout), st.block_admission
    if want is not None and (want.timeout, want.block_admission) == have:
        return
    asked = ("no waitForPodsReady" if want is None else
             f"waitForPodsReady timeout {go_duration_string(want.timeout)}, "
             f"blockAdmission {str(want.block_admission).lower()}")
    fix = (f"`gpu-lab up{lab._name_flag} --with kueue --kueue-pods-ready-timeout "
           f"{go_duration_string(want.timeout)}` restarts it with that timeout"
           if want is not None and want.timeout != have[0] else
           "kueue.enable(lab, KueueSettings(...)) restarts it with other settings")
    raise GpuLabError(f"Configuration: {asked} is not what this lab's Kueue runs with "
                      f"(waitForPodsReady timeout {st.pods_ready_timeout}, blockAdmission "
                      f"{str(st.block_admission).lower()}); Kueue reads it when it starts: {fix}")


def seconds(text: str | None) -> float:
    """An API timestamp (RFC 3339) in epoch seconds; NaN for none."""
    if not text:
        return math.nan
    return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def workload_of(client: KubeClient, job: dict) -> dict | None:
    """The Workload Kueue made for ``job`` (None until its reconciler has made it)."""
    meta = job["metadata"]
    with contextlib.suppress(ApiError):
        items = client.list("Workload", namespace=meta["namespace"], api_version=API_VERSION,
                            label_selector=f"{JOB_UID_LABEL}={meta['uid']}")["items"]
        return items[0] if items else None
    return None


def workloads_by_job(client: KubeClient) -> dict[str, dict]:
    """Every Workload keyed by the uid of the Job that owns it ({} without Kueue's CRDs)."""
    out: dict[str, dict] = {}
    with contextlib.suppress(ApiError):
        for w in client.list("Workload", api_version=API_VERSION)["items"]:
            uid = (w["metadata"].get("labels") or {}).get(JOB_UID_LABEL)
            uid = next((r.get("uid") for r in w["metadata"].get("ownerReferences") or []
                        if r.get("kind") == "Job"), uid)
            if uid:
                out[uid] = w
    return out


def pending_message(workload: dict | None) -> str:
    """Kueue's message on a Workload without quota (QuotaReserved=False), else ""."""
    reserved = condition(workload or {}, "QuotaReserved")
    return reserved.get("message", "") if reserved.get("status") == "False" else ""


def admitted(workload: dict | None) -> bool:
    return condition(workload or {}, "Admitted").get("status") == "True"


def _finished(job: dict) -> bool:
    return any(c.get("type") in ("Complete", "Failed") and c.get("status") == "True"
               for c in (job.get("status") or {}).get("conditions") or [])


def _wanted(job: dict) -> int:
    """Pods the Job controller keeps active once the Job runs (parallelism, less what the
    completions still need)."""
    spec, status = job.get("spec") or {}, job.get("status") or {}
    parallelism = spec.get("parallelism", 1)
    completions = spec.get("completions")
    if completions is None:
        return 0 if status.get("succeeded") else parallelism
    return max(0, min(parallelism, completions - (status.get("succeeded") or 0)))


class KueueJobs:
    """The Jobs Kueue queues in one session: created one second apart, then waited on."""

    def __init__(self, client: KubeClient, timeout: float):
        self.client, self.timeout = client, timeout
        self._last_second: float | None = None  # the previous queued Job's Workload's
        self._state: tuple = ()
        self._since = 0.0

    def create(self, create, doc: dict) -> dict:
        """``create(doc)`` a queued Job in a later second than the previous one's Workload,
        and wait until Kueue has made its Workload."""
        if self._last_second is not None:
            time.sleep(max(0.0, self._last_second + 1.0 - time.time()))
        job = create(doc)
        deadline = time.monotonic() + self.timeout
        while (w := workload_of(self.client, job)) is None:
            if time.monotonic() > deadline:
                raise GpuLabError(f"timed out after {self.timeout:.0f} s waiting for Kueue to make "
                                  f"the Workload of job {job['metadata']['name']}")
            time.sleep(0.1)
        self._last_second = math.floor(seconds(w["metadata"]["creationTimestamp"]))
        return job

    def reset(self) -> None:
        self._last_second, self._state, self._since = None, (), 0.0

    def settled(self) -> bool:
        """Every queued Job has a Workload; an admitted one runs with all its pods made (or
        has finished), and Kueue's verdicts have not changed for ``STABLE_S``."""
        jobs = [j for j in self.client.list("Job")["items"] if labelled(j)]  # items have no kind
        if not jobs:
            return True
        wls = workloads_by_job(self.client)
        state, ready = [], True
        for j in jobs:
            w = wls.get(j["metadata"]["uid"])
            done = condition(w or {}, "Finished").get("status") == "True"
            if _finished(j):
                ready &= w is None or done  # Kueue has yet to release its quota
            elif w is None:
                ready = False
            elif admitted(w) and ((j.get("spec") or {}).get("suspend")
                                  or ((j.get("status") or {}).get("active") or 0) < _wanted(j)):
                ready = False  # Kueue's Job reconciler or the Job controller still at work
            state.append((j["metadata"]["uid"], admitted(w), pending_message(w), done))
        state_t = tuple(sorted(state))
        if state_t != self._state:
            self._state, self._since = state_t, time.monotonic()
        return ready and time.monotonic() - self._since >= STABLE_S


def seen(client: KubeClient, docs: list[dict]) -> bool:
    """Kueue has taken in the ClusterQueues and LocalQueues created (each has its Active
    condition, True or not), so the Jobs that follow meet them in its cache."""
    for d in docs:
        if d.get("kind") in ("ClusterQueue", "LocalQueue"):
            with contextlib.suppress(ApiError):
                obj = client.get(d["kind"], d["metadata"]["name"], namespace=namespace_of(d),
                                 api_version=API_VERSION)
                if condition(obj, "Active"):
                    continue
            return False
    return True


def left(client: KubeClient) -> bool:
    """Kueue objects still there: a ClusterQueue or ResourceFlavor in use keeps Kueue's
    finalizer until its Workloads are gone, and a scenario may create one of the same name."""
    for kind in ("Workload", "LocalQueue", "ClusterQueue", "ResourceFlavor", "Cohort",
                 "WorkloadPriorityClass"):  # what LocalSession.reset deletes
        with contextlib.suppress(ApiError):
            if client.list(kind, api_version=API_VERSION)["items"]:
                return True
    return False


__all__ = ["KueueJobs", "admitted", "check", "is_kueue", "left", "namespace_of", "pending_message",
           "queued", "seconds", "seen", "workload_of", "workloads_by_job"]
