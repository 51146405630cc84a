"""``lab.jobs()`` on the local backend: one row per Job, read from the API server.

The columns are the simulator's (``backends.sim.JOB_COLUMNS``). What the sim's clock
records, a real cluster writes into status: the Job's conditions and counts, its pods'
start times, and, for a Job Kueue queues, its Workload's conditions (``Admitted``, and
``QuotaReserved=False`` with Kueue's message while it waits). Times are seconds since the
session started, at the API server's resolution (whole seconds), NaN when not yet.
"""

from __future__ import annotations

import math
from collections.abc import Set as AbstractSet

import pandas as pd

from ...kube import KubeClient
from ...model.quantity import parse_quantity, value
from ..apiobjects import condition
from ..sim import JOB_COLUMNS
from .kueueobjects import admitted, pending_message, seconds, workloads_by_job
from .kueuescenario import QUEUE_LABEL

#: the Job controller's label on its pods (batch/v1, since v1.27)
CONTROLLER_UID = "batch.kubernetes.io/controller-uid"


def template_gpus(template: dict) -> int:
    """GPUs one pod of the template asks for (``nvidia.com/*``, limits count as requests)."""
    total = 0
    for c in (template.get("spec") or {}).get("containers") or []:
        res = c.get("resources") or {}
        asked = {**(res.get("limits") or {}), **(res.get("requests") or {})}
        total += sum(value(parse_quantity(v)) for r, v in asked.items() if r.startswith("nvidia.com/"))
    return int(total)


def _started(pods: list[dict]) -> float:
    """When the first of the Job's pods started running (NaN: none did)."""
    times = []
    for p in pods:
        for cs in (p.get("status") or {}).get("containerStatuses") or []:
            state = cs.get("state") or {}
            at = (state.get("running") or state.get("terminated") or {}).get("startedAt")
            if at:
                times.append(seconds(at))
    return min(times, default=math.nan)


def _state(job: dict, started: float) -> str:
    if condition(job, "Complete").get("status") == "True":
        return "Complete"
    if condition(job, "Failed").get("status") == "True":
        return "Failed"
    if (job.get("spec") or {}).get("suspend"):
        return "Suspended"
    active = (job.get("status") or {}).get("active") or 0
    return "Running" if active and not math.isnan(started) else "Pending"


def job_rows(client: KubeClient, t0: float, namespaces: AbstractSet[str], kueue: bool) -> pd.DataFrame:
    """Every Job outside ``namespaces`` (the system's), oldest first; ``t0``: the session's
    start (epoch seconds); ``kueue``: the lab runs Kueue (a queue-name label is its)."""
    jobs = [j for j in client.list("Job")["items"] if j["metadata"].get("namespace") not in namespaces]
    jobs.sort(key=lambda j: (j["metadata"].get("creationTimestamp", ""), j["metadata"]["namespace"],
                             j["metadata"]["name"]))
    pods: dict[str, list[dict]] = {}
    for p in client.list("Pod")["items"] if jobs else []:
        uid = (p["metadata"].get("labels") or {}).get(CONTROLLER_UID)
        if uid:
            pods.setdefault(uid, []).append(p)
    wls = workloads_by_job(client) if kueue and jobs else {}
    rows = []
    for j in jobs:
        meta, spec, status = j["metadata"], j.get("spec") or {}, j.get("status") or {}
        w = wls.get(meta["uid"])
        started = _started(pods.get(meta["uid"], []))
        failed = condition(j, "Failed")
        failed = failed if failed.get("status") == "True" else {}
        if w is not None:  # Kueue's: admitted when its Workload is
            admitted_at = (seconds(condition(w, "Admitted").get("lastTransitionTime"))
                           if admitted(w) else math.nan)
        else:  # the Job controller's own: from when it first ran unsuspended
            admitted_at = seconds(status.get("startTime"))
        finished = (seconds(status.get("completionTime")) if condition(j, "Complete").get("status") == "True"
                    else seconds(failed.get("lastTransitionTime")))
        queue = (meta.get("labels") or {}).get(QUEUE_LABEL) if kueue else None
        rows.append({
            "namespace": meta["namespace"], "name": meta["name"], "state": _state(j, started),
            "queue": queue or None,
            "gpus": template_gpus(spec.get("template") or {}) * spec.get("parallelism", 1),
            "succeeded": status.get("succeeded") or 0, "failed": status.get("failed") or 0,
            "reason": failed.get("reason", ""),
            "message": failed.get("message") if failed else pending_message(w),
            "admitted_at": admitted_at - t0, "started_at": started - t0, "finished_at": finished - t0,
        })
    return pd.DataFrame(rows, columns=JOB_COLUMNS)


__all__ = ["job_rows", "template_gpus"]
