"""A workshop at a glance: GPUs each participant's pods request against their quota."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd

from ..errors import GpuLabError
from ._common import make_title, text_chart

NEEDED = ("namespace", "running", "pending", "gpus_requested", "gpu_quota")


def _table(status_table: Any) -> pd.DataFrame:
    df = status_table if isinstance(status_table, pd.DataFrame) else pd.DataFrame(status_table)
    missing = [c for c in NEEDED if c not in df.columns] if not df.empty else []
    if missing:
        raise GpuLabError(
            f"workshop() needs the table of `gpu-lab workshop status` (missing {', '.join(missing)})")
    return df


def workshop(status_table: Any, *, title: str | None = None) -> alt.Chart:
    """One bar per participant: the GPUs their live pods request, with their quota as a
    black tick and ``running/pending`` pods as text. ``status_table`` is what
    ``gpu_lab.workshop.status()`` returns (or ``gpu-lab workshop status --json``'s rows)."""
    df = _table(status_table)
    heading = title or "Workshop: GPUs per participant"
    if df.empty:
        return text_chart(heading, ["no participants: run `gpu-lab workshop provision`"])
    data = pd.DataFrame({
        "participant": df["namespace"].astype(str),
        "order": range(len(df)),
        "gpus_requested": df["gpus_requested"].astype(int),
        "gpu_quota": pd.to_numeric(df["gpu_quota"], errors="coerce"),
        "running": df["running"].astype(int),
        "pending": df["pending"].astype(int),
    })
    data["over"] = data["gpus_requested"] > data["gpu_quota"].fillna(float("inf"))
    data["label"] = [f"{r} running, {p} pending" for r, p in zip(data["running"], data["pending"])]
    data["text_x"] = data[["gpus_requested", "gpu_quota"]].max(axis=1).fillna(0)
    data["state"] = ["over quota" if o else "requested" for o in data["over"]]
    y = alt.Y("participant:N", sort=alt.SortField("order"), title=None)
    top = float(max(data["gpus_requested"].max(), data["gpu_quota"].fillna(0).max(), 1))
    x_scale = alt.Scale(domain=[0, top * 1.6])
    base = alt.Chart(data)
    bars = base.mark_bar(height=14).encode(
        y=y,
        x=alt.X("gpus_requested:Q", title="GPUs (requested by live pods; tick = quota)",
                scale=x_scale, axis=alt.Axis(tickMinStep=1, format="d")),
        color=alt.Color("state:N", scale=alt.Scale(domain=["requested", "over quota"],
                                                    range=["#4c78a8", "#e45756"]),
                        legend=alt.Legend(title=None, orient="bottom")),
        tooltip=["participant", "gpus_requested", "gpu_quota", "running", "pending"],
    )
    ticks = base.transform_filter("isValid(datum.gpu_quota)").mark_tick(
        color="black", thickness=3, size=22).encode(y=y, x=alt.X("gpu_quota:Q", scale=x_scale))
    text = base.mark_text(align="left", dx=6, fontSize=11).encode(
        y=y, x=alt.X("text_x:Q", scale=x_scale), text="label:N")
    quota_total = int(data["gpu_quota"].fillna(0).sum())
    subtitle = (f"{len(data)} participant(s) · {int(data['gpus_requested'].sum())} of "
                f"{quota_total} quota GPU(s) requested · {int(data['running'].sum())} pod(s) "
                f"running, {int(data['pending'].sum())} pending")
    return (bars + ticks + text).properties(
        width=420, height=max(60, 24 * len(data)), title=make_title(heading, subtitle))
