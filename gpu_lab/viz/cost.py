"""Fleet cost: what the GPU nodes a cluster cannot give back cost per month."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd

from ..errors import GpuLabError
from ..gpus.pricing import model_of_product
from ._common import active_pods, capacity, gpu_resources, make_title, sessions

COLUMNS = ["option", "nodes", "gpus", "gpus_used", "dollars_per_month"]
GPU_COUNT_LABEL = "nvidia.com/gpu.count"


_model = model_of_product


def _physical_gpus(lab: Any, node: str, fallback: int, plain: bool) -> int:
    """``nvidia.com/gpu.count`` (every physical GPU, MIG or not), else the whole-GPU resource.

    ``plain``: the node advertises only unshared whole GPUs, so its capacity is the
    count and describing it (slow on hundreds of nodes) is not needed.
    """
    if plain:
        return fallback
    describe = getattr(lab, "describe_node", None)
    if describe is not None:
        try:
            labels = describe(node).labels or {}
            if GPU_COUNT_LABEL in labels:
                return int(labels[GPU_COUNT_LABEL])
        except (GpuLabError, NotImplementedError, AttributeError, ValueError, KeyError):
            pass
    return fallback


def fleet_cost(labs: Any, *, hours: float = 730) -> pd.DataFrame:
    """Per option: the GPU nodes that must stay, their GPUs, and what they cost for ``hours``.

    ``labs`` is ``{label: Session}`` (a bare session is labelled "cluster").

    * ``nodes``: GPU nodes holding at least one running pod (any pod): the nodes
      a cluster autoscaler could not remove. Idle GPU nodes cost nothing here.
    * ``gpus``: physical GPUs on those nodes, from the ``nvidia.com/gpu.count``
      label (so a MIG node counts its GPUs, not its instances); without that
      label, the node's ``nvidia.com/gpu`` capacity.
    * ``gpus_used``: GPU devices requested by the running pods on those nodes
      (a MIG instance or a time-slicing replica counts as one).
    * ``dollars_per_month``: sum over those nodes of gpus x the model's
      ``price_per_hour`` (``gpu_lab.gpus``, AWS on-demand reference) x ``hours``
      (730 = one month); NaN if a node's GPU model is not in the catalog.
    """
    out = []
    for label, lab in sessions(labs).items():
        nodes, pods = lab.nodes(), lab.pods()
        running = active_pods(pods)
        busy = set(running["node"])
        resources = gpu_resources(nodes)
        whole = capacity(nodes, "nvidia.com/gpu")
        devices = sum((capacity(nodes, r) for r in resources), start=pd.Series(0, index=nodes.index))
        counted: list[str] = []
        gpus = 0
        dollars = 0.0
        for i, node in nodes.iterrows():
            is_gpu_node = devices[i] > 0 or isinstance(node.get("product"), str)
            if node["name"] not in busy or not is_gpu_node:
                continue
            product = node.get("product")
            plain = (int(whole[i]) == int(devices[i]) and isinstance(product, str)
                     and (known := _model(product)) is not None and known.product == product)
            count = _physical_gpus(lab, node["name"], int(whole[i]), plain)
            model = _model(node.get("product"))
            counted.append(node["name"])
            gpus += count
            dollars += count * model.price_per_hour * hours if model else float("nan")
        used = int(running.loc[running["node"].isin(counted), "gpus"].sum())
        n_nodes = len(counted)
        out.append({"option": label, "nodes": n_nodes, "gpus": gpus, "gpus_used": used,
                    "dollars_per_month": round(dollars, 2)})
    return pd.DataFrame(out, columns=COLUMNS)


def cost(table: pd.DataFrame, *, title: str | None = None) -> alt.Chart:
    """Bars of ``dollars_per_month`` per option of a ``fleet_cost`` table, each labelled."""
    missing = [c for c in ("option", "dollars_per_month") if c not in table.columns]
    if missing:
        raise GpuLabError(f"cost(): the table needs columns option and dollars_per_month "
                          f"(missing {', '.join(missing)}); build it with charts.fleet_cost")
    df = table.copy()
    df["label"] = [f"${v:,.0f}" if pd.notna(v) else "unknown price" for v in df["dollars_per_month"]]
    order = list(df["option"])
    tips = [c for c in ("option", "nodes", "gpus", "gpus_used") if c in df.columns]
    base = alt.Chart(df).encode(
        x=alt.X("option:N", sort=order, title=None, axis=alt.Axis(labelAngle=0)),
        y=alt.Y("dollars_per_month:Q", title="USD per month", axis=alt.Axis(format="$,.0f")),
    )
    bars = base.mark_bar(color="#4c78a8").encode(
        tooltip=tips + [alt.Tooltip("dollars_per_month:Q", format="$,.2f")])
    labels = base.mark_text(dy=-6).encode(text="label:N")
    heading = title or "GPU fleet cost per month"
    sub = ["GPU nodes holding a running pod x GPUs x on-demand price (gpu_lab.gpus catalog)"]
    return alt.layer(bars, labels).properties(width=alt.Step(70), height=240,
                                              title=make_title(heading, sub))
