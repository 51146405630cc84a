"""Autoscaling over simulated time: nodes and GPUs per run, and what each run cost.

``nodes_over_time`` reads the ``series`` of ``gpu_lab.simulate`` (one row per
change: nodes, gpu_nodes, gpus_total, gpus_allocated, gpus_stranded, ...) for
one run or several labelled runs (e.g. ``{"spread": a, "pack": b}``), drawn
as steps: a level holds until the next row. ``cost_comparison`` bars each
run's dollars and node-hours from its ``metrics``. (``cost.cost`` charts a
monthly fleet price from a snapshot of sessions, a different quantity, so it
is not reused here.)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import altair as alt
import pandas as pd

from ..errors import GpuLabError
from ._common import POD_COLOURS, make_title
from .simtime import axis_title, time_unit

SERIES_NEEDS = ("time", "gpu_nodes", "gpus_total", "gpus_allocated", "gpus_stranded")
GPU_MEASURES = {"gpus_total": "GPUs on nodes", "gpus_allocated": "GPUs allocated",
                "gpus_stranded": "GPUs stranded"}
RUN_COLUMNS = ["option", "cost_usd", "node_hours", "gpu_hours_allocated", "gpu_hours_stranded",
               "makespan_s"]


def _runs(data: Any, what: str) -> dict[str, Any]:
    """``{label: run}`` from one run (a simulation, its series or its metrics) or a mapping of runs."""
    if isinstance(data, pd.DataFrame) or hasattr(data, what):
        return {"run": data}
    if isinstance(data, Mapping) and data:
        if what == "metrics" and "cost_usd" in data:  # a single metrics dict
            return {"run": data}
        return {str(k): v for k, v in data.items()}
    raise GpuLabError(f"give a simulation, its {what}, or {{label: simulation}}, "
                      "e.g. {'spread': sim1, 'pack': sim2}")


def _series(run: Any, label: str) -> tuple[pd.DataFrame, float | None]:
    df = run.series if hasattr(run, "series") else run
    if not isinstance(df, pd.DataFrame):
        raise GpuLabError(f"nodes_over_time(): {label}: not a simulation series")
    missing = [c for c in SERIES_NEEDS if c not in df.columns]
    if missing:
        raise GpuLabError(f"nodes_over_time(): {label}: the series needs columns {', '.join(SERIES_NEEDS)} "
                          f"(gpu_lab.simulate(...).series); missing {', '.join(missing)}")
    return df.sort_values("time", kind="stable"), getattr(run, "until_s", None)


def _long(series: dict[str, Any]) -> tuple[pd.DataFrame, float]:
    frames, ends = [], []
    parsed = {label: _series(run, label) for label, run in series.items()}
    for df, until in parsed.values():
        ends.append(until if until is not None else (df["time"].max() if len(df) else 0.0))
    end = max(ends, default=0.0)
    for label, (df, _) in parsed.items():
        if df.empty:
            continue
        # The last level holds to the end of the run: repeat it there so the step reaches it.
        last = df.iloc[[-1]].copy()
        last["time"] = max(end, float(df["time"].iloc[-1]))
        df = pd.concat([df, last], ignore_index=True)
        for col in ("gpu_nodes", *GPU_MEASURES):
            frames.append(pd.DataFrame({"option": label, "time": df["time"].astype(float),
                                        "measure": "GPU nodes" if col == "gpu_nodes" else GPU_MEASURES[col],
                                        "value": pd.to_numeric(df[col], errors="coerce")}))
    if not frames:
        raise GpuLabError("nodes_over_time(): the series is empty (nothing was simulated)")
    return pd.concat(frames, ignore_index=True), end


def nodes_over_time(series: Any, *, title: str | None = None) -> alt.VConcatChart:
    """GPU nodes (top) and GPUs total/allocated/stranded (bottom) over simulated time.

    ``series``: ``gpu_lab.simulate(...)`` (or its ``.series``), or
    ``{label: simulation}`` to compare runs, e.g. two scheduler profiles; each
    run has its colour, each GPU measure its dash. Steps: a level holds until
    the next change, and the last one to the end of the run.
    """
    runs = _runs(series, "series")
    df, end = _long(runs)
    unit, size = time_unit([0.0, end])
    df["t"] = df["time"] / size
    options = list(runs)
    colour: Any = alt.Color("option:N",  # a channel: this, or one fixed alt.value below title=None, sort=options,
                       scale=alt.Scale(domain=options, range=POD_COLOURS[:len(options)]))
    if len(options) == 1:
        colour = alt.value(POD_COLOURS[0])
    x = alt.X("t:Q", title=axis_title(unit), scale=alt.Scale(domain=[0, end / size]))
    tips = [alt.Tooltip("option:N"), alt.Tooltip("measure:N"), alt.Tooltip("value:Q"),
            alt.Tooltip("t:Q", title=f"from ({unit})", format=".2f")]
    base = alt.Chart(df).mark_line(interpolate="step-after", strokeWidth=2)
    nodes = base.transform_filter(alt.datum.measure == "GPU nodes").encode(
        x=x, y=alt.Y("value:Q", title="GPU nodes"), color=colour, tooltip=tips,
    ).properties(width=560, height=160)
    measures = list(GPU_MEASURES.values())
    gpus = base.transform_filter(alt.datum.measure != "GPU nodes").encode(
        x=x, y=alt.Y("value:Q", title="GPUs"), color=colour,
        strokeDash=alt.StrokeDash("measure:N", title=None, sort=measures,
                                  scale=alt.Scale(domain=measures, range=[[2, 2], [1, 0], [6, 3]])),
        detail="option:N", tooltip=tips,
    ).properties(width=560, height=200)
    totals = []
    for label, run in runs.items():
        m = getattr(run, "metrics", None)
        if isinstance(m, Mapping) and "node_hours" in m:
            totals.append(f"{label}: {m['node_hours']:g} node-hours, ${m.get('cost_usd', 0):,.2f}")
    heading = title or "Nodes and GPUs over time"
    return alt.vconcat(nodes, gpus).properties(title=make_title(heading, "; ".join(totals) or None))


def run_costs(runs: Any) -> pd.DataFrame:
    """One row per run: dollars, node-hours, GPU-hours allocated and stranded, makespan.

    ``runs``: ``{label: simulation or its metrics dict}`` (a single one is "run").
    """
    out = []
    for label, run in _runs(runs, "metrics").items():
        m = run.metrics if hasattr(run, "metrics") else run
        if not isinstance(m, Mapping) or "cost_usd" not in m or "node_hours" not in m:
            raise GpuLabError(f"run_costs(): {label}: needs cost_usd and node_hours "
                              "(gpu_lab.simulate(...).metrics)")
        out.append({"option": label, **{c: m.get(c) for c in RUN_COLUMNS[1:]}})
    return pd.DataFrame(out, columns=RUN_COLUMNS)


def cost_comparison(runs: Any, *, title: str | None = None) -> alt.HConcatChart:
    """Dollars and node-hours per run, side by side, each bar labelled.

    ``runs``: ``{label: simulation or metrics}`` or a ``run_costs`` table. The
    subtitle states the difference between the cheapest and the dearest run.
    """
    table = runs if isinstance(runs, pd.DataFrame) else run_costs(runs)
    missing = [c for c in ("option", "cost_usd", "node_hours") if c not in table.columns]
    if missing:
        raise GpuLabError(f"cost_comparison(): the table needs columns option, cost_usd and node_hours "
                          f"(missing {', '.join(missing)}); build it with charts.run_costs")
    df = table.copy()
    df["dollars"] = [f"${v:,.0f}" if pd.notna(v) else "unknown" for v in df["cost_usd"]]
    df["hours"] = [f"{v:,.1f}" if pd.notna(v) else "unknown" for v in df["node_hours"]]
    order = list(df["option"])
    tips = [c for c in RUN_COLUMNS if c in df.columns]
    x = alt.X("option:N", sort=order, title=None, axis=alt.Axis(labelAngle=0))

    def panel(field: str, label: str, axis_title: str, fmt: str, colour: str) -> alt.LayerChart:
        base = alt.Chart(df).encode(x=x, y=alt.Y(f"{field}:Q", title=axis_title, axis=alt.Axis(format=fmt)))
        return alt.layer(base.mark_bar(color=colour).encode(tooltip=tips),
                         base.mark_text(dy=-6).encode(text=f"{label}:N")).properties(
            width=alt.Step(70), height=220)

    sub = None
    costs = df["cost_usd"].dropna()
    if len(costs) > 1 and costs.max() - costs.min() >= 0.005:
        lo, hi = df.loc[costs.idxmin()], df.loc[costs.idxmax()]
        sub = (f"{hi['option']} costs ${hi['cost_usd'] - lo['cost_usd']:,.2f} more than {lo['option']} "
               f"({hi['node_hours'] - lo['node_hours']:,.1f} node-hours)")
    elif len(costs) > 1:
        sub = f"every run costs the same: ${costs.iloc[0]:,.2f}"
    return alt.hconcat(panel("cost_usd", "dollars", "USD over the run", "$,.0f", POD_COLOURS[0]),
                       panel("node_hours", "hours", "node-hours", ",.0f", POD_COLOURS[1])).properties(
        title=make_title(title or "Cost per run", sub))
