"""The simulated clock on a chart axis: seconds shown in the unit that reads best (s, min or h)."""

from __future__ import annotations

import math
from collections.abc import Iterable

UNITS = (("h", 3600.0), ("min", 60.0), ("s", 1.0))


def time_unit(seconds: Iterable[float]) -> tuple[str, float]:
    """(unit, seconds per unit): hours from a 2-hour span up, minutes from 2 minutes, else seconds."""
    finite = [float(s) for s in seconds if s is not None and math.isfinite(float(s))]
    span = max(finite, default=0.0) - min(finite, default=0.0)
    for unit, size in UNITS:
        if span >= 2 * size:
            return unit, size
    return "s", 1.0


def axis_title(unit: str) -> str:
    return f"simulated time ({unit})"
