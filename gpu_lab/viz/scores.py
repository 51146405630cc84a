"""Scores: how each score plugin's weighted points add up to the node the scheduler chose."""

from __future__ import annotations

from typing import Any

import altair as alt
import pandas as pd

from ._common import make_title, text_chart

CHOSEN = "chosen"


def score_table(explanation: Any) -> pd.DataFrame:
    """Long form of ``explanation.scores``: node, plugin, raw, normalized, weighted, total, chosen."""
    table = explanation.scores
    rows = []
    if table is None or table.empty:
        return pd.DataFrame(columns=["node", "plugin", "raw", "normalized", "weighted", "total",
                                     "chosen", "rank"])
    plugins = [p for p in dict.fromkeys(c[0] for c in table.columns) if p != "total"]
    for rank, (node, row) in enumerate(table.iterrows()):
        weighted = {p: int(row[(p, "weighted")]) for p in plugins}
        total = int(row[("total", "")]) if ("total", "") in table.columns else sum(weighted.values())
        for p in plugins:
            # the real scheduler logs weighted scores only: no raw column there (local)
            raw = int(row[(p, "raw")]) if (p, "raw") in table.columns else None
            rows.append({"node": str(node), "plugin": p, "raw": raw,
                         "normalized": row[(p, "normalized")], "weighted": weighted[p],
                         "total": total, "chosen": str(node) == explanation.node, "rank": rank})
    return pd.DataFrame(rows)


def scores(explanation: Any, *, title: str | None = None) -> alt.Chart:
    """Stacked weighted score per plugin for each feasible node, total labelled, chosen node marked.

    Nodes run best first (the explanation's order). A pending pod, or a pod the
    scheduler placed without scoring (one feasible node, a nominated node), gets
    a text chart saying no node was scored and why.
    """
    pod = getattr(explanation, "pod", "pod")
    heading = title or f"Scores for {pod}"
    df = score_table(explanation)
    if df.empty:
        lines = ["No node was scored."]
        if explanation.node:
            lines.append(f"The pod was bound to {explanation.node} without scoring.")
        if explanation.message:
            lines += _wrap(explanation.message)
        for n in getattr(explanation, "notes", []) or []:
            lines += _wrap(n)
        return text_chart(heading, lines)
    same = _uniform(explanation)
    df["uniform"] = df["plugin"].isin(same)
    order = list(dict.fromkeys(df["node"]))
    totals = df.drop_duplicates("node")[["node", "total", "chosen"]].copy()
    totals["label"] = [f"{t} (chosen)" if c else str(t) for t, c in zip(totals["total"], totals["chosen"])]
    y = alt.Y("node:N", sort=order, title=None)
    bars = alt.Chart(df).mark_bar(stroke="black").encode(
        x=alt.X("weighted:Q", stack="zero", title="weighted score (normalized x weight)"),
        y=y,
        # a plugin that scored every node alike is grey: it moved no total against another
        color=alt.condition(alt.datum.uniform, alt.value("#d9d9d9"),
                            alt.Color("plugin:N", title="score plugin",
                                      legend=alt.Legend(orient="bottom", direction="vertical"))),
        order=alt.Order("plugin:N"),
        opacity=alt.condition(alt.datum.chosen, alt.value(1.0), alt.value(0.45)),
        strokeWidth=alt.condition(alt.datum.chosen, alt.value(1.5), alt.value(0)),
        tooltip=["node:N", "plugin:N", "raw:Q", "normalized:Q", "weighted:Q", "total:Q"],
    )
    label = alt.Chart(totals).encode(x=alt.X("total:Q"), y=y, text="label:N")
    labels = alt.layer(
        label.transform_filter(alt.datum.chosen).mark_text(align="left", dx=4, fontWeight="bold"),
        label.transform_filter(~alt.datum.chosen).mark_text(align="left", dx=4),
    )
    chosen = explanation.node or "none"
    sub = [f"chosen node: {chosen}; total = sum of the weighted scores (feasible nodes, best first)"]
    sub += list(getattr(explanation, "notes", []) or [])
    tied = explanation.tie() if hasattr(explanation, "tie") else []
    if tied:
        sub.append(f"tie at the top between {', '.join(tied)}: broken by the scheduler's random pick")
    if same:
        sub.append(f"grey: the same on every node (no say in the choice): {', '.join(same)}")
    return alt.layer(bars, labels).properties(
        width=420, height=alt.Step(28), title=make_title(heading, sub))


def _uniform(explanation: Any) -> list[str]:
    return explanation.uniform_plugins() if hasattr(explanation, "uniform_plugins") else []


def _wrap(text: str, width: int = 80) -> list[str]:
    import textwrap

    return textwrap.wrap(str(text), width) or [""]
