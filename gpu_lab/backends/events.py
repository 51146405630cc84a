"""The ``events()`` table every backend serves: what ``kubectl get events`` shows.

A backend gives one ``EventRow`` per Event object (the sim's ``sim.events.EventLog``, a real
cluster's core/v1 Events); the columns, the filters and the order (oldest first) are decided
here once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pandas as pd

from ..model.arguments import check_name

EVENT_COLUMNS = ["namespace", "object", "type", "reason", "message", "count"]


@dataclass
class EventRow:
    namespace: str
    kind: str
    name: str
    type: str
    reason: str
    message: str
    count: int
    time: float  # when it was first seen (seconds; only the order matters)
    order: int = 0  # among equal times (a real Event's resourceVersion)
    last: float | None = None  # when it was last seen, if after ``time`` (the sim's; kubectl's LAST SEEN)


def events_frame(rows: list[EventRow], namespace: str | None, kind: str | None, name: str | None) -> pd.DataFrame:
    """The rows that match every filter given, oldest first (a stable sort: equal times keep
    the order the backend recorded them in)."""
    for value, arg in ((namespace, "namespace"), (kind, "kind"), (name, "name")):
        if value is not None:
            check_name(value, "events", arg)
    picked = [r for r in rows
              if (namespace is None or r.namespace == namespace)
              and (kind is None or r.kind.lower() == kind.lower())
              and (name is None or r.name == name)]
    picked.sort(key=lambda r: (r.time, r.order))
    return pd.DataFrame([{"namespace": r.namespace, "object": f"{r.kind}/{r.name}", "type": r.type,
                          "reason": r.reason, "message": r.message, "count": r.count} for r in picked],
                        columns=EVENT_COLUMNS)


def _timestamp(text: str | None) -> float:
    import datetime as dt

    if not text:
        return float("inf")  # unknown: after every known one
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return float("inf")


def event_row(e: dict[str, Any]) -> EventRow:
    """A core/v1 Event as ``kubectl get events`` prints it: the count the API server keeps
    (``series.count`` for an event of the events.k8s.io API, which has no count; 1 for a
    singleton), first seen at ``eventTime`` (the newer API's, to the microsecond) or ``firstTimestamp``."""
    obj = e.get("involvedObject") or {}
    meta = e.get("metadata") or {}
    series = e.get("series") or {}
    count = series.get("count") or e.get("count") or 1
    first = e.get("eventTime") or e.get("firstTimestamp") or meta.get("creationTimestamp")  # eventTime: µs
    rv = str(meta.get("resourceVersion", ""))
    return EventRow(meta.get("namespace", ""), obj.get("kind", ""), obj.get("name", ""), e.get("type", ""),
                    e.get("reason", ""), e.get("message", ""), int(count), _timestamp(first),
                    int(rv) if rv.isdigit() else 0)
