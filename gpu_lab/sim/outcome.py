"""What a run on the simulated clock came to: ``Simulation``, the result ``gpu_lab.simulate`` returns.

It holds the Jobs (state, admitted/started/finished times), every pod's timeline, the
cluster's levels over time, and totals integrated over the run: GPU-hours
allocated, GPU-hours stranded (held by workers of a rendezvous Job that could not
progress), node-hours and dollars (catalog prices or the pool's ``pricePerHour``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from ..errors import GpuLabError
from ..model.duration import parse_duration

DEFAULT_UNTIL = "24h"
UNFINISHED = ("Pending", "Running", "Suspended")


def until_seconds(until: Any) -> float:
    """``"24h"``-style Go duration or a number of seconds, positive."""
    if isinstance(until, bool):
        raise GpuLabError(f"simulate: until must be a duration such as 24h or a number of seconds, not {until!r}")
    if isinstance(until, (int, float)):
        if not math.isfinite(until) or until <= 0:
            raise GpuLabError(f"simulate: until must be a positive number of seconds, not {until}")
        return float(until)
    if not isinstance(until, str):
        raise GpuLabError(f"simulate: until must be a duration such as 24h or a number of seconds, not {until!r}")
    seconds = parse_duration(until, "--until")
    if seconds <= 0:
        raise GpuLabError(f'--until: must be more than 0, not "{until}"')
    return seconds


@dataclass
class Simulation:
    backend: str
    until_s: float
    jobs: pd.DataFrame
    timeline: pd.DataFrame
    series: pd.DataFrame
    metrics: dict[str, Any] = field(default_factory=dict)  # totals over [0, until_s]

    def to_dict(self) -> dict[str, Any]:
        """The ``gpu-lab simulate --json`` document (times in seconds, null when not reached)."""
        def clean(v):
            return None if isinstance(v, float) and math.isnan(v) else v

        jobs = [{k: clean(v) for k, v in row.items()} for row in self.jobs.to_dict("records")]
        series = [{k: clean(v) for k, v in row.items()} for row in self.series.to_dict("records")]
        return {"backend": self.backend, "until_s": self.until_s, "jobs": jobs, "metrics": dict(self.metrics),
                "series": series}

    def __repr__(self) -> str:
        m = self.metrics
        states = self.jobs["state"].value_counts().to_dict() if not self.jobs.empty else {}
        makespan = "never (something did not finish)" if m.get("makespan_s") is None else f"{m['makespan_s']:g} s"
        return (f"Simulation on {self.backend} for {self.until_s:g} s: jobs {states or 'none'}; "
                f"{m['gpu_hours_allocated']:g} GPU-hours allocated, {m['gpu_hours_stranded']:g} stranded; "
                f"{m['node_hours']:g} node-hours, ${m['cost_usd']:,.2f}; makespan {makespan}")


def makespan(jobs: pd.DataFrame, timeline: pd.DataFrame) -> float | None:
    """When the last thing finished, or None when a Job or a pod had not finished by the end."""
    if not jobs.empty and jobs["state"].isin(UNFINISHED).any():
        return None
    if not timeline.empty and timeline["phase"].isin(("Pending", "Running")).any():
        return None
    ends = [*jobs["finished_at"].dropna(), *timeline["finished_at"].dropna()]
    return float(max(ends)) if ends else 0.0


def job_counts(jobs: pd.DataFrame) -> dict[str, int]:
    states = jobs["state"] if not jobs.empty else pd.Series(dtype=object)
    return {"jobs_complete": int((states == "Complete").sum()), "jobs_failed": int((states == "Failed").sum()),
            "jobs_pending": int(states.isin(UNFINISHED).sum())}
