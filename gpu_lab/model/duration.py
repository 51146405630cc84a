"""Go-style durations in gpu-lab annotations (``gpulab.dev/duration: 1h30m``)."""

from __future__ import annotations

import re

from ..errors import GpuLabError

DURATION_ANNOTATION = "gpulab.dev/duration"
SUBMIT_AT_ANNOTATION = "gpulab.dev/submit-at"  # created at this simulated time


def parse_duration(text: str, what: str = f"annotation {DURATION_ANNOTATION}") -> float:
    """Go-style durations ("90s", "5m", "1h30m", "1.5h"), as the simulator reads them.
    ``what`` names the field in the error (an annotation name is prefixed "annotation ")."""
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", str(text).strip())
    if not parts or "".join(n + u for n, u in parts) != str(text).strip():
        if "/" in what and not what.startswith("annotation "):
            what = f"annotation {what}"
        raise GpuLabError(f'{what}: invalid duration "{text}" (use e.g. 90s, 5m, 1h30m)')
    scale = {"ms": 0.001, "s": 1, "m": 60, "h": 3600}
    return sum(float(n) * scale[u] for n, u in parts)


def go_duration_string(seconds: float) -> str:
    """Go's ``time.Duration.String`` from whole milliseconds up (300 -> "5m0s"), as Kubernetes and
    Kueue print durations in their messages."""
    if seconds == 0:
        return "0s"
    sign, rest = ("-" if seconds < 0 else ""), abs(seconds)
    if rest < 1:
        ms = rest * 1000
        return f"{sign}{ms:g}ms"
    h, rest = divmod(rest, 3600)
    m, sec = divmod(rest, 60)
    text = f"{sec:g}s"
    if h or m:
        text = f"{int(m)}m{text}"
    if h:
        text = f"{int(h)}h{text}"
    return sign + text
