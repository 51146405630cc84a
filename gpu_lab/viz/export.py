"""Saving charts as PNG or SVG, offline, through vl-convert (no browser, no network)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import altair as alt

from ..errors import GpuLabError
from ._svg import Diagram

FORMATS = (".png", ".svg")


def _vl_version() -> str | None:
    """The Vega-Lite version Altair writes, as vl-convert names it ("6.4"), if it has it."""
    import vl_convert as vlc

    major_minor = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    known = vlc.get_vegalite_versions() if hasattr(vlc, "get_vegalite_versions") else []
    return major_minor if major_minor in known else None


def to_svg(chart: Any) -> str:
    import vl_convert as vlc

    # allowed_base_urls=[]: a chart that points at remote data fails instead of fetching it.
    return vlc.vegalite_to_svg(chart.to_dict(), vl_version=_vl_version(), allowed_base_urls=[])


def to_png(chart: Any, scale: float = 2.0) -> bytes:
    import vl_convert as vlc

    return vlc.vegalite_to_png(chart.to_dict(), vl_version=_vl_version(), scale=scale,
                               allowed_base_urls=[])


def save(chart: Any, path: str | Path) -> Path:
    """Write ``chart`` (or a diagram) to ``path`` as PNG or SVG, chosen by the suffix;
    returns the path."""
    if isinstance(chart, Diagram):
        return chart.save(path)
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise GpuLabError(f'cannot save a chart as "{path.name}": use a .png or .svg file name')
    if suffix == ".png":
        path.write_bytes(to_png(chart))
    else:
        path.write_text(to_svg(chart), encoding="utf-8")
    return path


def offline_renderer(spec: dict, **_metadata: Any) -> dict:
    """Altair renderer that draws charts as inline SVG through vl-convert.

    Altair's default renderer emits HTML that loads vega-embed from a CDN, so a lesson's
    charts would stay blank offline (a laptop on a plane, a locked-down workshop room).
    An SVG in the notebook output renders in JupyterLab, in nbconvert's HTML and on
    GitHub alike; hovering tooltips are what it gives up.
    """
    import vl_convert as vlc

    svg = vlc.vegalite_to_svg(spec, vl_version=_vl_version(), allowed_base_urls=[])
    return {"image/svg+xml": svg, "text/plain": "<chart>"}


def use_offline_renderer() -> None:
    """Register and enable ``offline_renderer`` as Altair's renderer "gpu-lab"."""
    if "gpu-lab" not in alt.renderers.names():
        alt.renderers.register("gpu-lab", offline_renderer)
    alt.renderers.enable("gpu-lab")
