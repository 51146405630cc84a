"""Fragmentation: free GPUs in total vs the largest job that still fits on one node."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd

from ._common import column, make_title, pending_gpu_pods, sessions

MEASURES = ("free in total", "largest job that fits")


def fragmentation_table(labs: Any, resource: str = "nvidia.com/gpu") -> pd.DataFrame:
    """option, free (sum over schedulable nodes), largest (most free on one node), nodes, pending."""
    rows = []
    for label, lab in sessions(labs).items():
        nodes = lab.nodes()
        alloc = column(nodes, f"{resource} allocatable")
        used = column(nodes, f"{resource} requested")
        # A cordoned node takes no new pod, so its free GPUs help no job.
        ok = ~nodes["unschedulable"].fillna(False).astype(bool) if "unschedulable" in nodes else True
        free = (alloc - used).clip(lower=0)[ok & (alloc > 0)]
        rows.append({"option": label, "free": int(free.sum()),
                     "largest": int(free.max()) if len(free) else 0,
                     "nodes": int(len(free)), "pending": pending_gpu_pods(lab.pods())})
    return pd.DataFrame(rows, columns=["option", "free", "largest", "nodes", "pending"])


def fragmentation(labs: Any, *, resource: str = "nvidia.com/gpu", title: str | None = None) -> alt.Chart:
    """For each option: free ``resource`` in total vs the largest job (GPUs on one node) that fits.

    ``labs`` is ``{label: Session}`` (a bare session is labelled "cluster").
    Free = allocatable - requested on schedulable nodes; the largest job is the
    most free on any one node, ignoring taints and selectors. A wide gap between
    the two bars is fragmentation: GPUs are free, but not together.
    """
    table = fragmentation_table(labs, resource)
    long = table.melt(id_vars=["option", "nodes", "pending"], value_vars=["free", "largest"],
                      var_name="key", value_name="gpus")
    long["measure"] = long["key"].map({"free": MEASURES[0], "largest": MEASURES[1]})
    order = list(table["option"])
    base = alt.Chart(long).encode(
        x=alt.X("option:N", sort=order, title=None, axis=alt.Axis(labelAngle=0)),
        xOffset=alt.XOffset("measure:N", sort=list(MEASURES)),
        y=alt.Y("gpus:Q", title=f"{resource} (count)"),
    )
    bars = base.mark_bar().encode(
        color=alt.Color("measure:N", sort=list(MEASURES), title=None,
                        scale=alt.Scale(range=["#4c78a8", "#f58518"]),
                        legend=alt.Legend(orient="top")),
        tooltip=["option:N", "measure:N", "gpus:Q", alt.Tooltip("nodes:Q", title="GPU nodes"),
                 alt.Tooltip("pending:Q", title="GPU pods pending")],
    )
    labels = base.mark_text(dy=-6).encode(text="gpus:Q")
    heading = title or "Free GPUs vs the largest job that still fits"
    sub = [f"free = allocatable - requested {resource} on schedulable nodes; "
           "largest job = most free on one node (taints and selectors ignored)"]
    return alt.layer(bars, labels).properties(width=alt.Step(44), height=240,
                                              title=make_title(heading, sub))
