"""Checks of ``Session`` call arguments, shared by the backends: one line, never a traceback.

A notebook passes whatever a learner types (``advance("1h")``, ``label_node(1, ...)``);
each check names the call, what it takes, and what it got. Label changes are checked
as the API server checks a Node update (``metadata.labels`` rules, every error listed).
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import GpuLabError, InvalidObject
from . import validation as v


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def check_name(value: Any, call: str, what: str = "node") -> str:
    """A node name or a ``namespace/name`` pod reference: a non-empty string."""
    if not isinstance(value, str) or not value:
        example = '"namespace/name" or a name' if what == "pod" else "its name"
        raise GpuLabError(f"{call}: {what} must be {example} (a string), not {_shown(value)}")
    return value


def check_bool(value: Any, call: str, arg: str) -> bool:
    if not isinstance(value, bool):
        raise GpuLabError(f"{call}: {arg} must be True or False, not {_shown(value)}")
    return value


def check_seconds(seconds: Any, call: str = "advance") -> float | None:
    """``None`` or a finite, non-negative number of seconds (the clock only moves forward)."""
    if seconds is None:
        return None
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)):
        raise GpuLabError(f"{call}: seconds must be a number (e.g. 3600 for an hour) or None, "
                          f"not {_shown(seconds)}")
    if not math.isfinite(seconds):
        raise GpuLabError(f"{call}: seconds must be finite, not {seconds} ({call}() with no "
                          "argument runs until every timed pod has finished)")
    if seconds < 0:
        raise GpuLabError(f"{call}: seconds must be 0 or more, not {seconds} (the clock only moves forward)")
    return float(seconds)


def check_labels(node: str, labels: Any, call: str = "label_node") -> dict[str, str | None]:
    """``{key: value}`` to set and ``{key: None}`` to remove, as ``kubectl label`` takes them;
    keys and values the API server would refuse on the Node are refused here."""
    if not isinstance(labels, dict):
        raise GpuLabError(f'{call}: labels must be a dict such as {{"key": "value"}} (None removes a '
                          f"label), not {_shown(labels)}")
    errs: list[str] = []
    for key, value in labels.items():
        if not isinstance(key, str):
            errs.append(v.wrong_type("metadata.labels", key, "a string key"))
            continue
        errs += [v.invalid("metadata.labels", key, m) for m in v.is_qualified_name(key)]
        if value is None:
            continue
        if not isinstance(value, str):
            errs.append(v.wrong_type("metadata.labels", value, "a string (or None to remove the label)"))
            continue
        errs += [v.invalid("metadata.labels", value, m) for m in v.is_label_value(value)]
    if errs:
        raise InvalidObject("Node", node, v.dedupe(errs))
    return labels
