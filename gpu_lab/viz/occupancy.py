"""Occupancy: every GPU slot of every node, coloured by the pod that holds it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import altair as alt
import pandas as pd

from ._common import (
    DEAD_COLOUR,
    FREE,
    FREE_COLOUR,
    NOT_ALLOCATABLE,
    POD_COLOURS,
    active_pods,
    capacity,
    column,
    distinct_colours,
    held,
    make_title,
    pending_gpu_pods,
    pod_label,
    select_resources,
)

# Above this many GPU nodes one row per node stops being readable (lesson 05 has
# hundreds), so the chart sums slots per pool instead and says so.
MAX_NODES = 48
# A legend with more pods than this is a wall of text; tooltips still name each pod.
MAX_LEGEND = 24
IN_USE = "in use"


def slots(lab: Any, resource: str | Iterable[str] | None = None) -> tuple[pd.DataFrame, int]:
    """One row per GPU slot (node, pool, resource, slot, holder, state) and the pending GPU pods."""
    nodes, pods = lab.nodes(), lab.pods()
    resources = select_resources(nodes, resource)
    running = active_pods(pods)
    by_node: dict[str, list[dict]] = {}
    for pod in running.sort_values(["namespace", "name"]).to_dict("records"):
        by_node.setdefault(pod["node"], []).append(pod)
    caps = {r: capacity(nodes, r) for r in resources}
    allocs = {r: column(nodes, f"{r} allocatable") for r in resources}
    rows = []
    for i, node in zip(nodes.index, nodes.to_dict("records")):
        here = by_node.get(node["name"], [])
        for r in resources:
            cap, alloc = int(caps[r][i]), int(allocs[r][i])
            holders = [pod_label(p["namespace"], p["name"]) for p in here for _ in range(held(p, r))]
            n = max(cap, alloc, len(holders))
            free = max(min(alloc, n) - len(holders), 0)
            states = ([(h, IN_USE) for h in holders] + [(FREE, FREE)] * free
                      + [(NOT_ALLOCATABLE, NOT_ALLOCATABLE)] * (n - len(holders) - free))
            for k, (who, state) in enumerate(states):
                rows.append({"node": node["name"], "pool": node["pool"] if isinstance(node.get("pool"), str) else "(no pool)",
                             "resource": r, "slot": k, "holder": who, "state": state,
                             "pod": who if state == IN_USE else ""})
    df = pd.DataFrame(rows, columns=["node", "pool", "resource", "slot", "holder", "state", "pod"])
    df["device"] = df["resource"].str.replace("nvidia.com/", "", regex=False)
    return df, pending_gpu_pods(pods)


def resources_short(resources: list[str]) -> list[str]:
    return [r.replace("nvidia.com/", "") for r in resources]


def occupancy(lab: Any, *, resource: str | Iterable[str] | None = None,
              title: str | None = None) -> alt.Chart:
    """One row per GPU node, one cell per GPU slot, coloured by the pod holding it.

    Slots are the devices of ``nvidia.com/gpu`` and ``nvidia.com/mig-*`` (every
    ``nvidia.com/*`` resource; ``resource=`` keeps one or a list). Free slots are
    light grey; slots the node has in capacity but not in allocatable (a dead
    device plugin) are red and crossed. The subtitle counts pending GPU pods.
    Which cell a pod gets is cosmetic: the scheduler counts devices, the kubelet
    picks IDs. Clusters over ``MAX_NODES`` GPU nodes are summed per pool.
    """
    df, pending = slots(lab, resource)
    heading = title or "GPU occupancy"
    resources = sorted(df["resource"].unique())
    note = [f"{pending} GPU pod{'s' if pending != 1 else ''} pending",
            "one cell per device of " + ", ".join(resources_short(resources)) if resources
            else "no GPU nodes"]
    if df["node"].nunique() > MAX_NODES:
        return _by_pool(df, heading, note)
    order = list(dict.fromkeys(df["node"]))
    pods = sorted(df.loc[df["state"] == IN_USE, "holder"].unique())
    domain = pods + [FREE] + ([NOT_ALLOCATABLE] if (df["state"] == NOT_ALLOCATABLE).any() else [])
    colours = distinct_colours(len(pods)) + [FREE_COLOUR, DEAD_COLOUR]
    legend: alt.Legend | None = alt.Legend(title="held by", columns=1 if len(domain) <= 12 else 2)
    if len(pods) > MAX_LEGEND:
        legend, note = None, note + [f"{len(pods)} pods: hover a cell to see its pod"]
    base = alt.Chart(df)
    cells = base.mark_rect(stroke="white", strokeWidth=1.5).encode(
        x=alt.X("slot:O", title="GPU slot", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("node:N", sort=order, title=None),
        color=alt.Color("holder:N", scale=alt.Scale(domain=domain, range=colours[:len(domain)]),
                        legend=legend),
        tooltip=[alt.Tooltip("node:N"), alt.Tooltip("resource:N"), alt.Tooltip("slot:O"),
                 alt.Tooltip("pod:N"), alt.Tooltip("state:N")],
    )
    # A cross on dead slots so they read as broken even in greyscale print.
    crosses = base.transform_filter(alt.datum.state == NOT_ALLOCATABLE).mark_text(
        text="✕", color="white", fontWeight="bold").encode(
        x="slot:O", y=alt.Y("node:N", sort=order))
    chart = alt.layer(cells, crosses).properties(width=alt.Step(22), height=alt.Step(22))
    if len(resources) > 1:
        chart = chart.facet(column=alt.Column("device:N", title=None, sort=resources_short(resources)))
        chart = chart.resolve_scale(x="independent")
    return chart.properties(title=make_title(heading, note))


def _by_pool(df: pd.DataFrame, heading: str, note: list[str]) -> alt.Chart:
    """Hundreds of nodes: GPU slots summed per pool and state."""
    nodes = df["node"].nunique()
    agg = (df.groupby(["pool", "resource", "state"]).size().rename("slots").reset_index())
    agg["nodes"] = agg["pool"].map(df.groupby("pool")["node"].nunique())
    states = [IN_USE, FREE, NOT_ALLOCATABLE]
    note = note + [f"{nodes} GPU nodes: slots summed per pool (one row per node up to {MAX_NODES})"]
    chart = alt.Chart(agg).mark_bar().encode(
        x=alt.X("sum(slots):Q", title="GPU slots"),
        y=alt.Y("pool:N", title=None),
        color=alt.Color("state:N", scale=alt.Scale(domain=states,
                                                    range=[POD_COLOURS[0], FREE_COLOUR, DEAD_COLOUR])),
        order=alt.Order("state_rank:Q"),
        tooltip=["pool:N", "resource:N", "state:N", "slots:Q", "nodes:Q"],
    ).transform_calculate(
        state_rank=f"indexof({states!r}, datum.state)",
    ).properties(width=480)
    if df["resource"].nunique() > 1:
        chart = chart.encode(row=alt.Row("resource:N", title=None))
    return chart.properties(title=make_title(heading, note))
