"""MIG geometry: where GPU instances sit on the 8 memory slices of a GPU."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import altair as alt
import pandas as pd

from ..errors import GpuLabError
from ..gpus import get_model, validate_mig_layout
from ..gpus import mig_profiles as _profiles
from ._common import FREE, FREE_COLOUR, distinct_colours, make_title

SLICES = 8
WHOLE = "whole GPU"
WHOLE_COLOUR = "#79706e"


def _x(title: str = "memory slice") -> alt.X:
    # Ticks in the middle of each slice, labelled 0..7, on a 0..8 scale where bars span [start, end).
    return alt.X("start:Q", title=title, scale=alt.Scale(domain=[0, SLICES], nice=False),
                 axis=alt.Axis(values=[i + 0.5 for i in range(SLICES)], labelExpr="floor(datum.value)",
                               grid=False, ticks=False))


def _placement(item: Any, model: Any) -> Any:
    """A Placement from a Placement, a list of profile names or a {profile: count} mapping."""
    if item is None or hasattr(item, "slots"):
        return item
    if model is None:
        raise GpuLabError("mig_layout: give model= to draw profile names (or pass Placements)")
    return validate_mig_layout(model, item)


def _rows(layouts: Any, model: Any) -> list[tuple[str, Any, list[str]]]:
    """(row label, Placement or None for a whole GPU, who holds each slot in start order)."""
    if hasattr(layouts, "gpus") and hasattr(layouts, "profile_of"):  # a MigPlan
        out = []
        for g in layouts.gpus:
            who = [f"{s}#{r}" for s, r, _ in g.replicas]
            if g.placement is None:
                out.append((f"GPU {g.index}", None, who))
                continue
            queue: dict[str, list[str]] = {}
            for s, r, p in g.replicas:
                queue.setdefault(p, []).append(f"{s}#{r}")
            # Replicas of one profile are interchangeable: hand them out in start order.
            holders = []
            for slot in g.placement.slots:
                waiting = queue.get(slot.profile, [])
                holders.append(waiting.pop(0) if waiting else "")
            out.append((f"GPU {g.index}", g.placement, holders))
        return out
    if hasattr(layouts, "slots"):
        return [("GPU", layouts, [])]
    if isinstance(layouts, Mapping) and not all(isinstance(v, int) for v in layouts.values()):
        return [(str(k), _placement(v, model), []) for k, v in layouts.items()]
    if isinstance(layouts, Mapping) or (isinstance(layouts, (list, tuple))
                                        and all(isinstance(v, str) for v in layouts)):
        return [("GPU", _placement(layouts, model), [])]  # one layout by profile names/counts
    if isinstance(layouts, (list, tuple)):
        return [(f"GPU {i}", _placement(v, model), []) for i, v in enumerate(layouts)]
    raise GpuLabError("mig_layout: give a Placement, a list or {label: Placement}, or a MigPlan")


def layout_table(layouts: Any, model: Any = None) -> pd.DataFrame:
    """One row per drawn bar: gpu, start, end, profile, compute, who, label."""
    rows = []
    for gpu, placement, who in _rows(layouts, model):
        if placement is None:
            holder = ", ".join(who)
            rows.append({"gpu": gpu, "start": 0, "end": SLICES, "profile": WHOLE, "compute": 7,
                         "who": holder, "label": f"whole GPU (MIG off){': ' + holder if holder else ''}"})
            continue
        for k, s in enumerate(placement.slots):
            holder = who[k] if k < len(who) else ""
            rows.append({"gpu": gpu, "start": s.start, "end": s.start + s.size, "profile": s.profile,
                         "compute": s.compute, "who": holder,
                         "label": s.profile + (f"\n{holder}" if holder else "")})
        for i in placement.free_memory_slices:
            rows.append({"gpu": gpu, "start": i, "end": i + 1, "profile": FREE, "compute": 0,
                         "who": "", "label": ""})
    return pd.DataFrame(rows, columns=["gpu", "start", "end", "profile", "compute", "who", "label"])


def mig_layout(layouts: Any, *, model: Any = None, title: str | None = None) -> alt.Chart:
    """Memory slices 0..7 across, one row per GPU, each GPU instance a bar labelled with its profile.

    ``layouts``: a ``Placement``, a list of them, ``{label: Placement}``, or a
    ``MigPlan`` (rows per planned GPU, bars labelled with the service replica;
    a GPU with MIG disabled is one full-width "whole GPU" bar). Profile-name
    lists or ``{profile: count}`` mappings work too with ``model=``.
    """
    df = layout_table(layouts, model)
    order = list(dict.fromkeys(df["gpu"]))
    used = [p for p in dict.fromkeys(df["profile"]) if p not in (FREE, WHOLE)]
    names = _model_profiles(layouts, model)
    used.sort(key=lambda p: names.index(p) if p in names else len(names))
    domain = used + [p for p in (WHOLE, FREE) if p in set(df["profile"])]
    colours = {FREE: FREE_COLOUR, WHOLE: WHOLE_COLOUR}
    palette = distinct_colours(len(domain))
    rng = [colours.get(p, palette[k]) for k, p in enumerate(domain)]
    y = alt.Y("gpu:N", sort=order, title=None)
    base = alt.Chart(df)
    bars = base.mark_rect(stroke="white", strokeWidth=2).encode(
        x=_x(), x2="end:Q", y=y,
        color=alt.Color("profile:N", scale=alt.Scale(domain=domain, range=rng), title="profile"),
        tooltip=["gpu:N", "profile:N", alt.Tooltip("start:Q", title="first memory slice"),
                 alt.Tooltip("end:Q", title="ends before slice"),
                 alt.Tooltip("compute:Q", title="compute slices"), alt.Tooltip("who:N", title="runs")],
    )
    text = base.transform_filter(alt.datum.label != "").transform_calculate(
        mid="(datum.start + datum.end) / 2").mark_text(lineBreak="\n", fontSize=10, color="black").encode(
        x=alt.X("mid:Q", scale=alt.Scale(domain=[0, SLICES], nice=False)), y=y, text="label:N")
    what = _model_name(layouts, model)
    heading = title or f"MIG layout{' on ' + what if what else ''}"
    sub = ["x: the GPU's 8 memory slices; each bar is one GPU instance (grey: free slice)"]
    return alt.layer(bars, text).properties(width=480, height=alt.Step(40),
                                            title=make_title(heading, sub))


def _model_name(layouts: Any, model: Any) -> str | None:
    """The GPU model to name in the title: model=, the plan's or the first Placement's."""
    if model is not None:
        return get_model(model).name
    if hasattr(layouts, "model"):
        return str(layouts.model)
    items = layouts.values() if isinstance(layouts, Mapping) else layouts
    return next((str(v.model) for v in items if hasattr(v, "model")), None)


def _model_profiles(layouts: Any, model: Any) -> list[str]:
    name = _model_name(layouts, model)
    try:
        return [p.name for p in _profiles(name)] if name else []
    except GpuLabError:
        return []


def mig_profiles(model: Any, *, title: str | None = None) -> alt.Chart:
    """Each MIG profile of ``model``: every place an instance of it may sit on one GPU.

    One row per profile (largest first); one bar per allowed start, as wide as
    the profile's memory slices. A 4g instance only starts at slice 0 and a 3g
    at 0 or 4, so 4g + 3g fit (0-3 and 4-7) but 4g + 4g do not.
    """
    gpu = get_model(model)
    profiles = _profiles(gpu)
    rows = []
    for p in profiles:
        row = f"{p.name} ({p.compute_slices}/7 compute, max {p.max_instances})"
        for s in p.starts:
            rows.append({"profile": p.name, "row": row, "start": s, "end": s + p.memory_slices,
                         "memory_slices": p.memory_slices, "compute": p.compute_slices,
                         "max_instances": p.max_instances, "memory_gib": round(p.memory_gib, 2),
                         "label": f"@{s}"})
    df = pd.DataFrame(rows)
    order = list(dict.fromkeys(df["row"]))
    y = alt.Y("row:N", sort=order, title=None)
    lane = alt.Chart(pd.DataFrame({"row": order, "start": 0, "end": SLICES})).mark_rect(
        color=FREE_COLOUR).encode(x=_x(), x2="end:Q", y=y)
    bars = alt.Chart(df).mark_rect(stroke="white", strokeWidth=2).encode(
        x=_x(), x2="end:Q", y=y,
        color=alt.Color("profile:N", sort=[p.name for p in profiles], legend=None),
        tooltip=["profile:N", alt.Tooltip("start:Q", title="may start at slice"),
                 alt.Tooltip("memory_slices:Q", title="memory slices"),
                 alt.Tooltip("compute:Q", title="compute slices"), "max_instances:Q", "memory_gib:Q"],
    )
    text = alt.Chart(df).transform_calculate(mid="(datum.start + datum.end) / 2").mark_text(
        fontSize=10).encode(x=alt.X("mid:Q", scale=alt.Scale(domain=[0, SLICES], nice=False)),
                            y=y, text="label:N")
    sub = ["each bar: one allowed place for an instance (start slice, width = its memory slices)"]
    four = next((p.name for p in profiles if p.compute_slices == 4), None)
    three = next((p.name for p in profiles if p.compute_slices == 3), None)
    if four and three:
        sub.append(f"{four} only starts at 0 and {three} at 0 or 4: {four} + {three} fit, "
                   f"{four} + {four} do not")
    heading = title or f"MIG profiles of the {gpu.name}: allowed start slices"
    return alt.layer(lane, bars, text).properties(width=480, height=alt.Step(30),
                                                  title=make_title(heading, sub))
