"""The units a parallel run hands to its workers (tests/conftest.py explains why), read from
each module's source: the controller that hands them out sees only test ids."""

from __future__ import annotations

import ast
import functools
from pathlib import Path


@functools.cache
def module_unit(path: Path) -> str | None:
    """``"group:NAME"`` for a module whose module-level ``pytestmark`` has
    ``xdist_group("NAME")``, ``"spread"`` for one with ``spread``, else None (the module)."""
    if path.suffix != ".py":  # a lesson notebook: its cells share one kernel, one unit
        return None
    try:
        tree = ast.parse(path.read_text())
    except (OSError, SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "pytestmark" for t in node.targets):
            for sub in ast.walk(node.value):
                if isinstance(sub, ast.Call) and getattr(sub.func, "attr", "") == "xdist_group" \
                        and sub.args and isinstance(sub.args[0], ast.Constant):
                    return f"group:{sub.args[0].value}"
                if isinstance(sub, ast.Attribute) and sub.attr == "spread":
                    return "spread"
    return None


def unit_of(nodeid: str, rootdir: Path) -> str:
    """The unit a worker gets for the test ``nodeid``: its group, itself, or its module."""
    module = nodeid.split("::", 1)[0].split("@", 1)[0]
    unit = module_unit(rootdir / module)
    if unit == "spread":
        return nodeid
    return unit or module
