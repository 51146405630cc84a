"""What ``gpu-lab run`` and ``explain`` print: fitted to 100 columns unless ``--wide``.

A device ID is a 40-character UUID; eight of them do not fit a terminal. By default a
pod's devices show as the first block of each ID (``GPU-322dc688``), at most three, then
``+N``; explain shows one line per node for the filters and the scores turned so that
plugins are rows. ``--wide`` prints everything, as the notebook's tables do.
"""

from __future__ import annotations

import textwrap
from typing import Any

import pandas as pd

WIDTH = 100
_MAX_IDS = 3
_MAX_NODES = 5


def short_id(device_id: str) -> str:
    """``GPU-322dc688-0cfe-...`` -> ``GPU-322dc688``; IDs without a UUID stay whole."""
    head, sep, rest = device_id.partition("-")
    return f"{head}-{rest.split('-')[0]}" if sep and "-" in rest else device_id


def devices_cell(devices: dict[str, list[str]], wide: bool) -> str:
    ids = [i for per in devices.values() for i in per]
    if not ids:
        return "-"
    if wide:
        return ",".join(ids)
    shown = [short_id(i) for i in ids[:_MAX_IDS]]
    return ",".join(shown) + (f",+{len(ids) - _MAX_IDS}" if len(ids) > _MAX_IDS else "")


def wrap(text: str, indent: str = "", width: int = WIDTH) -> str:
    return textwrap.fill(text, width, initial_indent=indent, subsequent_indent=indent + "  ",
                         break_on_hyphens=False, break_long_words=False)


def columns(rows: list[list[str]]) -> list[str]:
    """Rows as left-aligned columns two spaces apart, as kubectl prints them."""
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip() for r in rows]


def run_text(pods: pd.DataFrame, wide: bool = False) -> str:
    """The table of where every pod landed, then why each one that is not running waits."""
    if pods.empty:
        return "(none)"
    pods = pods.copy()
    pods["node"] = pods["node"].fillna("<pending>")
    pods["devices"] = pods["devices"].map(lambda d: devices_cell(d, wide))
    cols = ["namespace", "name", "node", "phase", "gpus", "devices"]
    lines = columns([[c.upper() for c in cols], *pods[cols].astype(str).values.tolist()])
    for _, row in pods[pods["phase"] != "Running"].iterrows():
        if row["message"]:
            head = f"{row['namespace']}/{row['name']} ({row['phase']}): {row['message']}"
            lines += ["", head if wide else wrap(head)]
    return "\n".join(lines)


def explain_text(exp: Any, wide: bool = False) -> str:
    """An explanation for a terminal: the summary, each node's filter verdict, the scores."""
    if wide:
        return str(exp)
    parts = [_wrapped_lines(exp.summary())]
    if not exp.filters.empty:
        parts += ["", "Filter (the first plugin that rejected each node):"]
        result = exp.filters["result"] if "result" in exp.filters.columns else None
        width = max(len(str(n)) for n in exp.filters.index)
        for node in exp.filters.index:
            verdict = str(result[node]) if result is not None else "passed"
            parts.append(wrap(f"{str(node):<{width}}  {verdict}", "  "))
    if not exp.scores.empty:
        parts += ["", *_scores_lines(exp)]
    return "\n".join(parts)


def _wrapped_lines(text: str) -> str:
    out = []
    for line in text.splitlines():
        indent = line[: len(line) - len(line.lstrip())]
        out.append(wrap(line.strip(), indent) if len(line) > WIDTH else line)
    return "\n".join(out)


def _scores_lines(exp: Any) -> list[str]:
    table = exp.scores
    nodes = [str(n) for n in table.index[:_MAX_NODES]]
    plugins = [p for p in dict.fromkeys(c[0] for c in table.columns) if p != "total"]
    rows = {p: [int(table.loc[n, (p, "weighted")]) for n in table.index[:_MAX_NODES]] for p in plugins}
    if ("total", "") in table.columns:
        rows["total"] = [int(table.loc[n, ("total", "")]) for n in table.index[:_MAX_NODES]]
    frame = pd.DataFrame(rows, index=nodes).T
    more = len(table.index) - len(nodes)
    head = "Score (weighted, best nodes first" + (f"; {more} more with --wide" if more else "") + "):"
    return [head, frame.to_string()]


__all__ = ["WIDTH", "columns", "devices_cell", "explain_text", "run_text", "short_id"]
