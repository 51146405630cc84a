"""What a simulated run measures: a series of cluster levels over time and their integrals.

The session reports its levels (nodes, GPUs allocated, GPUs stranded, pending
pods, dollars per hour) whenever the clock moves; the recorder integrates each
level over the time it held, so GPU-hours and dollars are exact for the run, not
sampled.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import pandas as pd

SERIES_COLUMNS = ["time", "nodes", "gpu_nodes", "gpus_total", "gpus_allocated", "gpus_stranded",
                  "pods_pending", "cost_per_hour_usd"]


@dataclass
class Levels:
    nodes: int = 0
    gpu_nodes: int = 0
    gpus_total: int = 0
    gpus_allocated: int = 0
    gpus_stranded: int = 0
    pods_pending: int = 0
    cost_per_hour_usd: float = 0.0


class Recorder:
    def __init__(self) -> None:
        self.rows: list[dict] = []
        self._last_t = 0.0
        self._last: Levels | None = None
        self.gpu_seconds = 0.0
        self.stranded_gpu_seconds = 0.0
        self.node_seconds = 0.0
        self.dollars = 0.0

    def observe(self, t: float, levels: Levels) -> None:
        """The levels from time ``t`` on (the previous ones held until ``t``)."""
        if self._last is not None and t > self._last_t:
            dt = t - self._last_t
            self.gpu_seconds += self._last.gpus_allocated * dt
            self.stranded_gpu_seconds += self._last.gpus_stranded * dt
            self.node_seconds += self._last.nodes * dt
            self.dollars += self._last.cost_per_hour_usd * dt / 3600
        row = {"time": t, **asdict(levels)}
        if self.rows and self.rows[-1]["time"] == t:
            self.rows[-1] = row
        elif not self.rows or any(self.rows[-1][k] != v for k, v in row.items() if k != "time"):
            self.rows.append(row)
        self._last_t, self._last = max(t, self._last_t), levels

    def series(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=SERIES_COLUMNS)

    def totals(self) -> dict[str, float]:
        return {"gpu_hours_allocated": round(self.gpu_seconds / 3600, 4),
                "gpu_hours_stranded": round(self.stranded_gpu_seconds / 3600, 4),
                "node_hours": round(self.node_seconds / 3600, 4),
                "cost_usd": round(self.dollars, 2)}
