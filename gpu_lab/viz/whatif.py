"""What-if: the same chart for several versions of a cluster, one option at a time or side by side."""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import altair as alt

from ..connection import connect
from ..errors import GpuLabError
from ._common import make_title
from .export import to_svg
from .occupancy import occupancy

WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"


def _pending(lab: Any) -> int:
    return int((lab.pods()["phase"] == "Pending").sum())


class WhatIf:
    """Options ``{label: [manifest sources]}``, each applied to a fresh simulator and scheduled.

    Sessions are built on first use and kept. ``results`` is ``{label: pods
    pending}``; ``static()`` the side-by-side chart; ``widget()`` a selector with
    one chart at a time. Displayed in Jupyter it is the widget where a widget
    manager runs and the static chart (inline SVG, offline) everywhere else:
    nbval/nbclient runs, static HTML export, GitHub's viewer.
    """

    def __init__(self, options: Mapping[str, Any], chart: str | Callable[[Any], Any] = "occupancy",
                 title: str | None = None):
        if not isinstance(options, Mapping) or not options:
            raise GpuLabError("whatif: give {label: [manifest sources]}, e.g. "
                              "{'spread': [cluster, pods], 'packed': [cluster, profile, pods]}")
        if chart != "occupancy" and not callable(chart):
            raise GpuLabError('whatif: chart must be "occupancy" or a function lab -> chart')
        self.options = {str(k): self._sources(v) for k, v in options.items()}
        self.chart = chart
        self.title = title
        self._labs: dict[str, Any] = {}
        self._charts: dict[str, Any] = {}
        self._widget: Any = None

    @staticmethod
    def _sources(value: Any) -> list[Any]:
        # A single manifest (YAML text, path, dict) is a one-item list.
        if isinstance(value, (str, Path, dict)):
            return [value]
        return list(value)

    def session(self, label: str) -> Any:
        """The scheduled simulator session of one option (built once)."""
        if label not in self._labs:
            lab = connect("sim", deterministic=True)
            for src in self.options[label]:
                lab.apply(src)
            lab.schedule()
            self._labs[label] = lab
        return self._labs[label]

    @property
    def labels(self) -> list[str]:
        return list(self.options)

    @property
    def results(self) -> dict[str, int]:
        """``{label: number of pods pending}`` after scheduling."""
        return {label: _pending(self.session(label)) for label in self.options}

    def _heading(self, label: str) -> str:
        n = _pending(self.session(label))
        return f"{label}: {n} pod{'s' if n != 1 else ''} pending"

    def chart_for(self, label: str) -> Any:
        if label not in self._charts:
            lab = self.session(label)
            if isinstance(self.chart, str):  # "occupancy", the one chart named by a string
                c = occupancy(lab, title=self._heading(label))
            else:
                c = self.chart(lab).properties(title=self._heading(label))
            self._charts[label] = c
        return self._charts[label]

    def static(self) -> alt.HConcatChart:
        """Every option side by side, each titled with its pending count."""
        # Independent colours: each option has its own pods, and "free" must stay grey in each.
        charts = (self.chart_for(label) for label in self.options)
        return alt.hconcat(*charts).resolve_scale(color="independent").properties(
            title=make_title(self.title or "What if", "; ".join(
                f"{k}: {v} pending" for k, v in self.results.items())))

    def widget(self) -> Any:
        """A selector (buttons, or a dropdown for many options), the chart and "N pods pending"."""
        if self._widget is None:
            import ipywidgets as widgets

            labels = self.labels
            if len(labels) <= 5:
                # ToggleButtons cut every label to one fixed width; size them to the longest
                pick = widgets.ToggleButtons(options=labels, tooltips=labels,
                                             style={"button_width": button_width(labels)})
            else:
                pick = widgets.Dropdown(options=labels, description="option",
                                        layout=widgets.Layout(width=button_width(labels, 120)))
            line = widgets.HTML()
            out = widgets.Output()

            def show(label: str) -> None:
                n = _pending(self.session(label))
                line.value = f"<b>{n}</b> pod{'s' if n != 1 else ''} pending"
                # Set the output's content directly: works with or without a live kernel.
                out.outputs = ()
                out.append_display_data(self.chart_for(label))

            pick.observe(lambda change: show(change["new"]), names="value")
            show(labels[0])
            self._widget = widgets.VBox([pick, line, out])
        return self._widget

    def _static_html(self) -> str:
        items = "".join(f"<li>{html.escape(k)}: <b>{v}</b> pods pending</li>"
                        for k, v in self.results.items())
        return (f'<div class="gpu-lab-whatif">{to_svg(self.static())}'
                f"<ul>{items}</ul></div>")

    def __repr__(self) -> str:
        return "WhatIf(" + ", ".join(f"{k}: {v} pending" for k, v in self.results.items()) + ")"

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        # The frontend shows the richest type it can: the widget where a widget manager
        # runs; otherwise (no live kernel, exported HTML) the static chart in text/html.
        bundle: dict[str, Any] = {"text/plain": repr(self), "text/html": self._static_html()}
        try:
            view = self.widget()._repr_mimebundle_() or {}
        except ImportError:
            view = {}
        if WIDGET_VIEW in view:
            bundle[WIDGET_VIEW] = view[WIDGET_VIEW]
        return bundle


def button_width(labels: list[str], extra: int = 28) -> str:
    """A CSS width that holds the longest label in JupyterLab's UI font (about 8 px a
    character at 13 px, plus padding)."""
    return f"{max(len(label) for label in labels) * 8 + extra}px"


def whatif(options: Mapping[str, Any], *, chart: str | Callable[[Any], Any] = "occupancy",
           title: str | None = None) -> WhatIf:
    """Compare cluster variants: ``{label: [manifest sources applied in order]}``.

    Each option is applied to a fresh ``gpu_lab.connect("sim", deterministic=True)``
    and scheduled (lazily, once). ``chart`` is "occupancy" or a function
    ``lab -> chart``. In JupyterLab: a selector, the chart and "N pods pending";
    where widgets do not run, the options side by side (``.static()``).
    ``.results`` gives ``{label: pods pending}``.
    """
    return WhatIf(options, chart, title)
