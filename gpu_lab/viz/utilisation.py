"""Utilisation: per pod, the GPU-hours it requested split into used and wasted.

Reads ``gpu_lab.metrics.waste(...)`` (one row per pod), a
``gpu_lab.metrics.utilisation(...)`` table or the ``GpuUse`` records
themselves. Waste is requested x (1 - declared utilisation) for a whole GPU;
see ``gpu_lab.metrics.utilisation`` for shared devices.
"""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd

from ..errors import GpuLabError
from ..metrics.utilisation import waste
from ._common import FREE_COLOUR, POD_COLOURS, make_title, pod_label, text_chart

USED, WASTED, UNKNOWN = "used", "wasted", "utilisation not declared"
STATES = [USED, WASTED, UNKNOWN]
COLOURS = [POD_COLOURS[0], "#e45756", FREE_COLOUR]
# More bars than this are a wall; the most wasteful pods are the ones to see.
MAX_PODS = 40
NEEDS = ("namespace", "pod", "gpu_hours_requested", "gpu_hours_used")


def _table(data: Any) -> pd.DataFrame:

    if isinstance(data, pd.DataFrame):
        missing = [c for c in NEEDS if c not in data.columns]
        if missing:
            raise GpuLabError(f"utilisation(): the table needs columns {', '.join(NEEDS)} "
                              f"(gpu_lab.metrics.waste or utilisation); missing {', '.join(missing)}")
        return data if "gpu_hours_wasted" in data.columns else waste(data)
    return waste(list(data))


def utilisation(data: Any, *, title: str | None = None) -> alt.Chart:
    """One bar per pod: GPU-hours requested, blue where used, red where wasted.

    Sorted by waste, most first (the top ``MAX_PODS``); each bar is labelled
    with the pod's declared utilisation and its GPUs. A pod that declares no
    utilisation shows its whole request in grey: unknown, not idle. The
    subtitle totals the waste in GPU-hours, percent and dollars.
    """
    df = _table(data).copy()
    heading = title or "GPU utilisation per pod"
    if df.empty:
        return text_chart(heading, ["no pod holds a GPU"])
    df["label"] = [pod_label(ns, p) for ns, p in zip(df["namespace"], df["pod"])]
    known = df["gpu_hours_wasted"].notna()
    df["rank"] = df["gpu_hours_wasted"].fillna(df["gpu_hours_requested"])
    df = df.sort_values(["rank", "label"], ascending=[False, True], kind="stable")
    note = []
    if known.any():
        req = df.loc[known, "gpu_hours_requested"].sum()
        wasted = df.loc[known, "gpu_hours_wasted"].sum()
        usd = df.loc[known, "waste_usd"].sum() if "waste_usd" in df.columns else float("nan")
        share = 100 * wasted / req if req else 0.0
        note.append(f"{wasted:,.2f} of {req:,.2f} GPU-hours requested wasted ({share:.0f} %)"
                    + (f", ${usd:,.2f}" if pd.notna(usd) else ""))
    if (~known).any():
        n = int((~known).sum())
        who = f"{n} pods declare" if n != 1 else "1 pod declares"
        note.append(f"{who} no utilisation (gpulab.dev/gpu-utilization)")
    if len(df) > MAX_PODS:
        note.append(f"the {MAX_PODS} most wasteful of {len(df)} pods")
        df = df.head(MAX_PODS)
    order = list(df["label"])
    rows = []
    for r in df.to_dict("records"):
        util = r.get("util_percent")
        gpus = r.get("gpus_requested")
        text = (f"{util:.0f} % busy" if pd.notna(util) else "not declared") + (
            f", {int(gpus)} GPU{'s' if gpus != 1 else ''}" if pd.notna(gpus) else "")
        parts = ([(USED, r["gpu_hours_used"]), (WASTED, r["gpu_hours_wasted"])]
                 if pd.notna(r["gpu_hours_wasted"]) else [(UNKNOWN, r["gpu_hours_requested"])])
        for state, hours in parts:
            # Time-sliced pods can use more than their replica's share: the bar shows the request.
            hours = min(hours, r["gpu_hours_requested"]) if state == USED else hours
            rows.append({"label": r["label"], "state": state, "gpu_hours": float(hours),
                         "requested": float(r["gpu_hours_requested"]), "util": util,
                         "node": r.get("node"), "model": r.get("model"), "text": text,
                         "order": STATES.index(state)})
    bars = pd.DataFrame(rows)
    base = alt.Chart(bars)
    stack = base.mark_bar().encode(
        x=alt.X("sum(gpu_hours):Q", title="GPU-hours requested"),
        y=alt.Y("label:N", sort=order, title=None),
        color=alt.Color("state:N", title=None, scale=alt.Scale(domain=STATES, range=COLOURS),
                        legend=alt.Legend(orient="top")),
        order=alt.Order("order:Q"),
        tooltip=["label:N", "node:N", "model:N", "state:N", alt.Tooltip("gpu_hours:Q", format=".2f"),
                 alt.Tooltip("requested:Q", format=".2f"), alt.Tooltip("util:Q", title="util %")],
    )
    # One label per pod, at the end of its bar: its used (or undeclared) part is the row to take.
    labels = base.transform_filter(alt.datum.state != WASTED).mark_text(
        align="left", dx=4).encode(x="requested:Q", y=alt.Y("label:N", sort=order), text="text:N")
    return alt.layer(stack, labels).properties(width=480, height=alt.Step(18),
                                               title=make_title(heading, note or None))
