"""Timeline: a Gantt chart of pods (or Jobs) over simulated time, stranded GPU time in its own colour.

Reads ``lab.timeline()`` (one row per pod: created/started/finished, phase,
owner, ``stranded_s``) or ``lab.jobs()`` (admitted/started/finished, state), or
a ``gpu_lab.simulate`` result. The table records only how long a pod was
stranded, not when; the chart draws that time from the pod's start, where a
rendezvous waits for its peers.
"""

from __future__ import annotations

import math
from typing import Any

import altair as alt
import pandas as pd

from ..errors import GpuLabError
from ._common import DEAD_COLOUR, FREE_COLOUR, make_title, pod_label, text_chart
from .simtime import axis_title, time_unit

# Above this many pods one bar each stops being readable: one bar per owner instead.
MAX_ROWS = 60
PENDING, STRANDED = "Pending", "stranded (GPUs held idle)"
WAITING = "admitted, not started"
POD_STATES = [PENDING, STRANDED, "Running", "Succeeded", "Failed"]
POD_COLOURS = [FREE_COLOUR, "#f58518", "#4c78a8", "#54a24b", DEAD_COLOUR]
JOB_STATES = [WAITING, "Running", "Complete", "Failed", "Suspended", "Pending"]
JOB_COLOURS = [FREE_COLOUR, "#4c78a8", "#54a24b", DEAD_COLOUR, "#b279a2", "#9e765f"]
NO_OWNER = "(no owner)"
TIMELINE_COLUMNS = ("pod", "phase", "created_at", "started_at", "finished_at")
JOB_COLUMNS = ("name", "state", "admitted_at", "started_at", "finished_at")


def _num(x: Any) -> float:
    try:
        return float(x)
    except (TypeError, ValueError):
        return math.nan


def _column(df: pd.DataFrame, name: str) -> pd.Series:
    """A numeric column, zeros where missing or unparsable."""
    if name not in df.columns:
        return pd.Series(0.0, index=df.index)
    return pd.to_numeric(df[name], errors="coerce").fillna(0.0)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _end_of_run(df: pd.DataFrame, cols: tuple[str, ...], now: float | None) -> float:
    if now is not None:
        return float(now)
    times = pd.concat([pd.to_numeric(df[c], errors="coerce") for c in cols if c in df.columns])
    return float(times.max()) if times.notna().any() else 0.0


def _pod_segments(df: pd.DataFrame, now: float) -> list[dict]:
    rows = []
    for r in df.to_dict("records"):
        created, started = _num(r.get("created_at")), _num(r.get("started_at"))
        finished = _num(r.get("finished_at"))
        end = finished if not math.isnan(finished) else now
        label = pod_label(r.get("namespace"), r["pod"])
        owner = owner_raw if isinstance(owner_raw := r.get("owner"), str) else NO_OWNER
        gpus, stranded = _num(r.get("gpus")), _num(r.get("stranded_s"))
        base = {"row": label, "pod": label, "owner": owner,
                "node": node_raw if isinstance(node_raw := r.get("node"), str) else "",
                "gpus": 0 if math.isnan(gpus) else int(gpus), "phase": r.get("phase", ""),
                "reason": reason_raw if isinstance(reason_raw := r.get("reason"), str) else "",
                "stranded_s": 0.0 if math.isnan(stranded) else stranded, "created_at": created}
        waited_until = started if not math.isnan(started) else end
        if not math.isnan(created) and waited_until > created:
            rows.append({**base, "state": PENDING, "start": created, "end": waited_until})
        if math.isnan(started):
            continue
        stranded_end = min(started + base["stranded_s"], end)
        if stranded_end > started:
            rows.append({**base, "state": STRANDED, "start": started, "end": stranded_end})
        if end > stranded_end or (end == started and base["stranded_s"] == 0):
            state = r.get("phase") if r.get("phase") in POD_STATES else "Running"
            rows.append({**base, "state": state, "start": stranded_end, "end": end})
    return rows


def _by_owner(df: pd.DataFrame) -> pd.DataFrame:
    """One row per owner (a pod without one stands alone): first created to last finished."""
    df = df.copy()
    for col, default in (("namespace", "default"), ("owner", None), ("node", None), ("gpus", 0),
                         ("reason", ""), ("stranded_s", 0.0)):
        if col not in df.columns:
            df[col] = default
    df["key"] = [o if isinstance(o, str) else f"pod {p}" for o, p in zip(df["owner"], df["pod"])]
    out = []
    for (ns, key), g in df.groupby(["namespace", "key"], sort=False):
        g = g.sort_values("created_at")
        finished = pd.to_numeric(g["finished_at"], errors="coerce")
        out.append({"namespace": ns, "pod": key, "owner": key,
                    "node": ", ".join(sorted({n for n in g["node"] if isinstance(n, str)})),
                    "gpus": int(pd.to_numeric(g["gpus"], errors="coerce").fillna(0).sum()),
                    "phase": g["phase"].iloc[-1], "reason": g["reason"].iloc[-1],
                    "created_at": g["created_at"].min(), "started_at": g["started_at"].min(),
                    "finished_at": finished.max() if finished.notna().all() else math.nan,
                    # pods of one gang wait together: the longest wait, not the sum
                    "stranded_s": pd.to_numeric(g["stranded_s"], errors="coerce").fillna(0).max()})
    return pd.DataFrame(out)


def _job_segments(df: pd.DataFrame, now: float) -> list[dict]:
    rows = []
    for r in df.to_dict("records"):
        admitted, started = _num(r.get("admitted_at")), _num(r.get("started_at"))
        finished = _num(r.get("finished_at"))
        end = finished if not math.isnan(finished) else now
        label = pod_label(r.get("namespace"), r["name"])
        base = {"row": label, "job": label, "queue": _text(r.get("queue")), "gpus": r.get("gpus", 0),
                "phase": _text(r.get("state")), "reason": _text(r.get("reason")), "owner": "Job",
                "created_at": admitted}
        if not math.isnan(admitted) and (started if not math.isnan(started) else end) > admitted:
            rows.append({**base, "state": WAITING, "start": admitted,
                         "end": started if not math.isnan(started) else end})
        if not math.isnan(started):
            rows.append({**base, "state": r.get("state") if r.get("state") in JOB_STATES else "Running",
                         "start": started, "end": end})
    return rows


def timeline(data: Any, *, by: str | None = None, now: float | None = None,
             title: str | None = None) -> alt.Chart:
    """Bars over simulated time: one per pod, grouped by owner (or one per Job, or per owner).

    ``data``: ``lab.timeline()``, ``lab.jobs()``, a session (its timeline) or
    a ``gpu_lab.simulate`` result (its pod timeline). Pods: grey while
    Pending, orange while they held GPUs that could not progress (``stranded_s``, drawn from the start), then
    coloured by phase. ``by="owner"``: one bar per Job/ReplicaSet (automatic
    above ``MAX_ROWS`` pods). ``now``: where unfinished bars end (default: the
    simulation's end, else the latest time in the table). The time axis is in
    seconds, minutes or hours, whichever reads best.
    """
    until = getattr(data, "until_s", None)
    if not isinstance(data, pd.DataFrame):
        table = getattr(data, "timeline", None)  # a simulate() result, or a session's method
        data = table() if callable(table) else table
    if not isinstance(data, pd.DataFrame):
        raise GpuLabError("timeline(): give lab.timeline(), lab.jobs() or a gpu_lab.simulate result")
    if by not in (None, "pod", "owner"):
        raise GpuLabError(f'timeline(): by must be "pod" or "owner", not {by!r}')
    jobs = all(c in data.columns for c in JOB_COLUMNS) and "pod" not in data.columns
    if not jobs:
        missing = [c for c in TIMELINE_COLUMNS if c not in data.columns]
        if missing:
            raise GpuLabError(f"timeline(): the table needs columns {', '.join(TIMELINE_COLUMNS)} "
                              f"(lab.timeline()) or {', '.join(JOB_COLUMNS)} (lab.jobs()); "
                              f"missing {', '.join(missing)}")
    cols = (("admitted_at" if jobs else "created_at"), "started_at", "finished_at")
    unfinished = pd.to_numeric(data["finished_at"], errors="coerce").isna().any() if len(data) else False
    end = _end_of_run(data, cols, now if now is not None else (until if unfinished else None))
    heading = title or ("Jobs over time" if jobs else "Pods over time")
    note: list[str] = []
    if jobs:
        segs, states, colours, what = _job_segments(data, end), JOB_STATES, JOB_COLOURS, "job"
        never = int(pd.to_numeric(data["admitted_at"], errors="coerce").isna().sum())
        note.append(f"{len(data)} job{'s' if len(data) != 1 else ''}"
                    + (f"; {never} never admitted (no bar)" if never else ""))
    else:
        stranded_h = float((_column(data, "stranded_s") * _column(data, "gpus")).sum()) / 3600
        note.append(f"{len(data)} pod{'s' if len(data) != 1 else ''}; {stranded_h:.2f} GPU-hours stranded")
        if by == "owner" or (by is None and len(data) > MAX_ROWS):
            if by is None:
                note.append(f"one bar per owner (one per pod up to {MAX_ROWS} pods)")
            data = _by_owner(data)
            what = "owner"
        else:
            what = "pod"
        segs, states, colours = _pod_segments(data, end), POD_STATES, POD_COLOURS
    df = pd.DataFrame(segs)
    if df.empty:
        return text_chart(heading, note + [f"no {what} was created or admitted yet"])
    unit, size = time_unit(list(df["start"]) + list(df["end"]))
    df["from"], df["to"] = df["start"] / size, df["end"] / size
    # Owned pods first, grouped by owner; pods without one last.
    df["unowned"] = df["owner"] == NO_OWNER
    df = df.sort_values(["unowned", "owner", "created_at", "row"], kind="stable").drop(columns="unowned")
    order = list(dict.fromkeys(df["row"]))
    tips = [alt.Tooltip(f"{c}:N") for c in ("row", "owner", "node", "queue", "state", "reason")
            if c in df.columns]
    tips += [alt.Tooltip("from:Q", title=f"from ({unit})", format=".2f"),
             alt.Tooltip("to:Q", title=f"to ({unit})", format=".2f")]
    tips += [alt.Tooltip(f"{c}:Q") for c in ("gpus", "stranded_s") if c in df.columns]
    present = [s for s in states if s in set(df["state"])]
    colour_of = dict(zip(states, colours))
    # A cross after the last bar of what failed: a stranded worker that timed out is all orange.
    df["failed_end"] = (~df.sort_values("start", kind="stable").duplicated("row", keep="last")
                        & df["phase"].isin(["Failed"]))
    if df["failed_end"].any():
        note.append("✕ failed")
    base = alt.Chart(df.drop(columns=["created_at"]))
    bars = base.mark_bar(height=alt.RelativeBandSize(0.8)).encode(
        x=alt.X("from:Q", title=axis_title(unit)), x2="to:Q",
        y=alt.Y("row:N", sort=order, title=None),
        color=alt.Color("state:N", scale=alt.Scale(domain=present, range=[colour_of[s] for s in present]),
                        legend=alt.Legend(title=None, orient="top")),
        tooltip=tips,
    )
    crosses = base.transform_filter(alt.datum.failed_end).mark_text(
        text="✕", color=DEAD_COLOUR, fontWeight="bold", align="left", dx=2).encode(
        x="to:Q", y=alt.Y("row:N", sort=order), tooltip=tips)
    chart = alt.layer(bars, crosses).properties(width=560, height=alt.Step(16))
    owners = df["owner"].nunique()
    if what == "pod" and 1 < owners <= 24:
        # Facet rows keep each owner's pods together under its name.
        return chart.facet(row=alt.Row("owner:N", title=None, sort=list(dict.fromkeys(df["owner"])),
                                       header=alt.Header(labelAngle=0, labelAlign="left"))).resolve_scale(
            y="independent").properties(title=make_title(heading, note))
    return chart.properties(title=make_title(heading, note))
