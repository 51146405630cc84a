"""Contention: what sharing one GPU does to a victim's latency, from gpu_lab.gpus' MODEL."""

from __future__ import annotations

import altair as alt
import pandas as pd

from ..errors import GpuLabError
from ..gpus import mps_latency, timeslice_latency
from ._common import make_title

SERIES = ("time-slicing, mean", "time-slicing, worst case", "MPS (every request)")


def contention_table(service_ms: float = 4.0, duty_cycle: float = 0.5,
                     max_sharers: int = 8) -> pd.DataFrame:
    """sharers, series, latency_ms, saturated: one row per point of the chart."""
    if isinstance(max_sharers, bool) or not isinstance(max_sharers, int) or max_sharers < 1:
        raise GpuLabError(f"max_sharers must be a positive integer, got {max_sharers!r}")
    rows = []
    for n in range(1, max_sharers + 1):
        ts = timeslice_latency(service_ms, duty_cycle, n_pods=n)
        mps = mps_latency(service_ms, n)
        rows += [
            {"sharers": n, "series": SERIES[0], "latency_ms": ts.mean_ms, "saturated": ts.saturated},
            {"sharers": n, "series": SERIES[1], "latency_ms": ts.worst_ms, "saturated": ts.saturated},
            {"sharers": n, "series": SERIES[2], "latency_ms": mps.mean_ms, "saturated": mps.saturated},
        ]
    return pd.DataFrame(rows)


def contention(service_ms: float = 4.0, duty_cycle: float = 0.5, max_sharers: int = 8, *,
               title: str | None = None) -> alt.Chart:
    """Victim latency (mean and worst) vs pods sharing one GPU: time-slicing and MPS.

    Every number comes from ``gpu_lab.gpus.timeslice_latency`` and ``mps_latency``:
    a contention MODEL (see ``gpu_lab.gpus`` sharing docs), not a measurement.
    Hollow points mark a saturated GPU (offered load above what it can serve:
    real queues grow, so those latencies are lower bounds).
    """
    df = contention_table(service_ms, duty_cycle, max_sharers)
    heading = title or "Victim latency vs pods sharing one GPU"
    sub = ["contention MODEL, not a measurement (gpu_lab.gpus.timeslice_latency / mps_latency)",
           f"one request needing {service_ms:g} ms of GPU alone; every pod busy "
           f"{duty_cycle:.0%} of the time; MPS shares capped at 100 // replicas % of the SMs"]
    if df["saturated"].any():
        sub.append("hollow points: GPU saturated, the model's latency is a lower bound")
    base = alt.Chart(df).encode(
        x=alt.X("sharers:O", title="pods sharing the GPU", axis=alt.Axis(labelAngle=0)),
        y=alt.Y("latency_ms:Q", title="victim latency per request (ms, modelled)"),
        color=alt.Color("series:N", sort=list(SERIES), title=None,
                        legend=alt.Legend(orient="top-left")),
    )
    lines = base.mark_line()
    points = base.mark_point(size=60).encode(
        fill=alt.condition(alt.datum.saturated, alt.value("white"),
                           alt.Color("series:N", sort=list(SERIES), legend=None)),
        tooltip=["sharers:O", "series:N", alt.Tooltip("latency_ms:Q", format=".2f"), "saturated:N"],
    )
    return alt.layer(lines, points).properties(width=460, height=280, title=make_title(heading, sub))
