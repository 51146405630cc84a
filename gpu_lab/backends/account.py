"""What a real kube-scheduler says about a pod: its PodScheduled condition and events.

Both real-cluster backends (``local`` and ``kubeconfig``) explain a pod this way; the
sim adds per-plugin filter and score tables, and the local backend adds the real
kube-scheduler's own scores from its log (``local/schedulerlog.py``).
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..sim.explain import Explanation
from .apiobjects import condition, pod_row

SCHEDULER_EVENTS = ("Scheduled", "FailedScheduling", "Preempted", "Preempting")
ONLY_THE_SIM_HAS_TABLES = ("per-plugin tables: the sim computes them, and the local and kind backends "
                           "read kube-scheduler's own scores from its log; here only the decision and "
                           "reasons are known")


def event_time(e: dict[str, Any]) -> str:
    return (e.get("lastTimestamp") or e.get("eventTime") or e.get("firstTimestamp")
            or (e.get("metadata") or {}).get("creationTimestamp") or "")


def scheduler_account(client, namespace: str, name: str) -> Explanation:
    """The pod's PodScheduled condition and the scheduler's events about it, oldest first;
    a pending pod without a message of its own gets the last FailedScheduling one."""
    obj = client.get("Pod", name, namespace=namespace)
    row = pod_row(obj)
    events = client.list("Event", namespace=namespace,
                         field_selector=f"involvedObject.kind=Pod,involvedObject.name={name}")["items"]
    events = sorted((e for e in events if e.get("reason") in SCHEDULER_EVENTS), key=event_time)
    notes = [f"{e.get('reason')}: {e.get('message')}" for e in events]
    message = row.message
    if not row.node and not message:
        failed = [e for e in events if e.get("reason") == "FailedScheduling"]
        message = failed[-1].get("message", "") if failed else ""
    cond = condition(obj, "PodScheduled")
    if cond:
        notes.insert(0, f"PodScheduled={cond.get('status')}" + (f" ({cond['reason']})" if cond.get("reason") else ""))
    notes.append(ONLY_THE_SIM_HAS_TABLES)
    return Explanation(f"{namespace}/{name}", row.node, message, (obj.get("spec") or {}).get("schedulerName", ""),
                       pd.DataFrame(), pd.DataFrame(), notes)
