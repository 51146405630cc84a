"""Helpers every chart shares: reading GPU columns off ``nodes()``, colours, titles."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import altair as alt
import pandas as pd

from ..errors import GpuLabError
from ..names import TERMINAL_PHASES

GPU_PREFIX = "nvidia.com/"
FREE = "free"
NOT_ALLOCATABLE = "not allocatable"
FREE_COLOUR = "#e4e4e4"
DEAD_COLOUR = "#c62828"
# Pod colours: Tableau 20 without its reds and greys, so no pod looks "free" or "dead".
POD_COLOURS = ["#4c78a8", "#f58518", "#54a24b", "#b79a20", "#439894", "#d67195", "#b279a2",
               "#9e765f", "#9ecae9", "#ffbf79", "#88d27a", "#f2cf5b", "#83bcb6", "#fcbfd2",
               "#d6a5c9", "#d8b5a5"]


def distinct_colours(n: int) -> list[str]:
    """``n`` different pod colours: ``POD_COLOURS`` first, then hues a golden angle apart in
    two lightnesses, skipping the reds (so no pod looks "dead") -- no colour repeats, however
    many pods a chart holds."""
    import colorsys

    out = list(POD_COLOURS[:n])
    k = 0
    while len(out) < n:
        hue = (k * 137.508) % 360
        k += 1
        if hue < 25 or hue > 335:  # red: taken by "not allocatable"
            continue
        light = 0.42 if k % 2 else 0.62
        r, g, b = colorsys.hls_to_rgb(hue / 360, light, 0.55)
        colour = f"#{round(r * 255):02x}{round(g * 255):02x}{round(b * 255):02x}"
        if colour not in out:
            out.append(colour)
    return out


def gpu_resources(nodes: pd.DataFrame) -> list[str]:
    """The ``nvidia.com/*`` resources ``nodes()`` has columns for, sorted."""
    found = set()
    for col in nodes.columns:
        if isinstance(col, str) and col.startswith(GPU_PREFIX):
            for suffix in (" allocatable", " capacity", " requested"):
                if col.endswith(suffix):
                    found.add(col[: -len(suffix)])
    return sorted(found)


def column(nodes: pd.DataFrame, name: str, fallback: str | None = None) -> pd.Series:
    """A numeric column, or ``fallback``'s, or zeros (older backends lack capacity columns)."""
    for c in (name, fallback):
        if c is not None and c in nodes.columns:
            return pd.to_numeric(nodes[c], errors="coerce").fillna(0).astype(int)
    return pd.Series(0, index=nodes.index, dtype=int)


def capacity(nodes: pd.DataFrame, resource: str) -> pd.Series:
    # The capacity column is newer than allocatable; without it a dead plugin cannot show.
    return column(nodes, f"{resource} capacity", f"{resource} allocatable")


def select_resources(nodes: pd.DataFrame, resource: str | Iterable[str] | None) -> list[str]:
    known = gpu_resources(nodes)
    if resource is None:
        return known
    wanted = [resource] if isinstance(resource, str) else list(resource)
    unknown = [r for r in wanted if r not in known]
    if unknown:
        raise GpuLabError(f"no node advertises {', '.join(unknown)} "
                          f"(GPU resources here: {', '.join(known) or 'none'})")
    return wanted


def active_pods(pods: pd.DataFrame) -> pd.DataFrame:
    """Pods that hold resources: bound to a node and not finished."""
    mask = pods["node"].notna() & ~pods["phase"].isin(TERMINAL_PHASES)
    return pods[mask]


def pending_gpu_pods(pods: pd.DataFrame) -> int:
    return int(((pods["phase"] == "Pending") & (pods["gpus"] > 0)).sum())


def held(pod: Any, resource: str) -> int:
    """How many devices of ``resource`` a pod holds: its device IDs, else its request."""
    devices = pod["devices"] if isinstance(pod["devices"], dict) else {}
    if resource in devices:
        return len(devices[resource])
    requests = pod["requests"] if isinstance(pod["requests"], dict) else {}
    try:
        return int(str(requests.get(resource, 0)))
    except ValueError:
        return 0


def pod_label(namespace: str, name: str) -> str:
    return name if namespace in ("default", None, "") else f"{namespace}/{name}"


def make_title(text: str, subtitle: str | list[str] | None = None) -> alt.TitleParams:
    if subtitle is None:
        return alt.TitleParams(text, anchor="start")
    lines = [subtitle] if isinstance(subtitle, str) else [s for s in subtitle if s]
    return alt.TitleParams(text, subtitle=lines, anchor="start")


def text_chart(heading: str, lines: list[str], width: int = 480) -> alt.Chart:
    """A chart that only says something (e.g. "no node was scored"), so a cell still shows a chart."""
    df = pd.DataFrame({"row": range(len(lines)), "line": lines})
    return alt.Chart(df).mark_text(align="left", baseline="top", fontSize=13, limit=width - 10).encode(
        y=alt.Y("row:O", axis=None), x=alt.value(5), text="line:N",
    ).properties(width=width, height=22 * len(lines) + 6, title=make_title(heading),
                 view=alt.ViewConfig(stroke=None))


def sessions(labs: Any) -> dict[str, Any]:
    """``{label: Session}``; a bare session becomes ``{"cluster": lab}``."""
    if hasattr(labs, "nodes") and hasattr(labs, "pods"):
        return {"cluster": labs}
    if not isinstance(labs, dict) or not labs:
        raise GpuLabError("give {label: session}, e.g. {'spread': lab1, 'packed': lab2}")
    return {str(k): v for k, v in labs.items()}
