"""Inside one node: its GPUs by NUMA node, coloured by the pod that holds each one.

Which GPU a pod holds comes from ``pods()["devices"]`` and the node's GPU UUIDs
(``gpu_lab.gpus.gpu_uuids``, the formula every gpu-lab backend uses); which NUMA node a
GPU hangs off is gpu-lab's model of the machine (``gpu_lab.gpus.gpu_numa``), so the chart
draws gpu-lab nodes, not a cluster of your own.
"""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd

from ..errors import GpuLabError
from ..gpus.labels import gpu_uuids
from ..gpus.topology import gpu_numa
from ._common import FREE, FREE_COLOUR, active_pods, distinct_colours, make_title, pod_label

COUNT_LABEL = "nvidia.com/gpu.count"  # GPU Feature Discovery's: the GPUs installed


def numa_slots(lab: Any, node: str, numa_nodes: int | None = None) -> pd.DataFrame:
    """One row per GPU of ``node``: index, NUMA node, holder ("free" when none), UUID."""
    count = int(lab.describe_node(node).labels.get(COUNT_LABEL, 0))
    if not count:
        raise GpuLabError(f'node "{node}" has no GPUs (no {COUNT_LABEL} label)')
    uuids = gpu_uuids(node, count)
    holder = dict.fromkeys(uuids, FREE)
    for p in active_pods(lab.pods()).to_dict("records"):
        if p["node"] != node or not isinstance(p.get("devices"), dict):
            continue
        for d in p["devices"].get("nvidia.com/gpu", []):
            if d in holder:
                holder[d] = pod_label(p["namespace"], p["name"])
    numa = gpu_numa(count, numa_nodes)
    return pd.DataFrame([{"gpu": g, "numa": f"NUMA node {numa[g]}", "holder": holder[u], "uuid": u}
                         for g, u in enumerate(uuids)])


def numa_layout(lab: Any, node: str, *, numa_nodes: int | None = None,
                title: str | None = None) -> alt.Chart:
    """``node``'s whole GPUs side by side per NUMA node, each cell coloured by its pod.

    A pod whose colour appears under two NUMA nodes spans sockets: its GPUs talk over the
    CPUs' interconnect on a PCIe-only machine (on an NVSwitch board over NVLink, while its
    host memory traffic still crosses). The subtitle names such pods.
    """
    df = numa_slots(lab, node, numa_nodes)
    pods = sorted(h for h in df["holder"].unique() if h != FREE)
    spans = [p for p in pods if df.loc[df["holder"] == p, "numa"].nunique() > 1]
    note = [f"{len(pods)} pod{'s' if len(pods) != 1 else ''} on {node}",
            ("spanning NUMA nodes: " + ", ".join(spans)) if spans else "no pod spans NUMA nodes"]
    domain = pods + [FREE]
    colours = distinct_colours(len(pods)) + [FREE_COLOUR]
    chart = alt.Chart(df).mark_rect(stroke="white", strokeWidth=1.5).encode(
        x=alt.X("gpu:O", title="GPU index", axis=alt.Axis(labelAngle=0)),
        color=alt.Color("holder:N", scale=alt.Scale(domain=domain, range=colours), title="held by"),
        tooltip=["gpu:O", "numa:N", "holder:N", "uuid:N"],
    ).properties(width=alt.Step(30), height=30)
    chart = chart.facet(column=alt.Column("numa:N", title=None)).resolve_scale(x="independent")
    return chart.properties(title=make_title(title or f"{node}: GPUs by NUMA node", note))
