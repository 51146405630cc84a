"""The committed form of a notebook: no outputs, no execution counts, JupyterLab's metadata.

Lessons, labs and solutions are committed in this form, so what a learner's run leaves in a
notebook never reaches a diff or a commit:

* ``make setup`` installs this module as a git *clean filter* for ``*.ipynb``
  (``.gitattributes``): git diffs and commits the cleaned text, so the outputs, execution
  counts and kernel Python version that JupyterLab's autosave writes are no change (``git
  status`` may list such a file until ``git add`` refreshes the index, which then stages
  nothing);
* ``make test`` checks that every committed notebook already is in this form
  (``python -m gpu_lab.curriculum.notebooks check``), so a clone without the filter
  cannot commit outputs unnoticed.

The metadata is what JupyterLab 4 writes for the ``python3`` kernel, less the Python
version (which differs from machine to machine).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

#: what JupyterLab writes for the python3 kernel (ipykernel)
KERNELSPEC = {"display_name": "Python 3 (ipykernel)", "language": "python", "name": "python3"}
LANGUAGE_INFO = {
    "codemirror_mode": {"name": "ipython", "version": 3},
    "file_extension": ".py",
    "mimetype": "text/x-python",
    "name": "python",
    "nbconvert_exporter": "python",
    "pygments_lexer": "ipython3",
}
# Cell metadata that records a run or a view, not the lesson: dropped.
_VOLATILE_CELL_METADATA = ("execution", "scrolled", "collapsed", "ExecuteTime")
# Notebook metadata that records a run: dropped (widget state, the kernel's Python version).
_VOLATILE_METADATA = ("widgets",)


def committed_form(nb: dict[str, Any]) -> dict[str, Any]:
    """``nb`` (parsed JSON) in committed form; the input is not changed."""
    out = dict(nb)
    meta = {k: v for k, v in (nb.get("metadata") or {}).items() if k not in _VOLATILE_METADATA}
    meta["kernelspec"] = dict(KERNELSPEC)
    meta["language_info"] = json.loads(json.dumps(LANGUAGE_INFO))
    out["metadata"] = meta
    cells = []
    used: set[str] = set()
    for i, cell in enumerate(nb.get("cells") or []):
        cell = dict(cell)
        if not cell.get("id") or cell["id"] in used:  # nbformat 4.5 requires unique ids
            cell["id"] = f"cell-{i}"
        used.add(cell["id"])
        cell["metadata"] = {k: v for k, v in (cell.get("metadata") or {}).items()
                            if k not in _VOLATILE_CELL_METADATA}
        if cell.get("cell_type") == "code":
            cell["outputs"] = []
            cell["execution_count"] = None
        cells.append(cell)
    out["cells"] = cells
    return out


def dumps(nb: dict[str, Any]) -> str:
    """JSON as nbformat (and so JupyterLab) writes it: sorted keys, one-space indent."""
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def clean(text: str) -> str:
    """The committed text of a notebook's text (text that is not JSON passes unchanged:
    a git filter must never lose a file)."""
    try:
        nb = json.loads(text)
    except ValueError:
        return text
    if not isinstance(nb, dict) or "cells" not in nb:
        return text
    return dumps(committed_form(nb))


def problems(paths: Iterable[Path | str]) -> list[str]:
    """One line per notebook that is not in committed form, saying what differs."""
    out = []
    for path in map(Path, paths):
        text = path.read_text(encoding="utf-8")
        if clean(text) == text:
            continue
        nb = json.loads(text)
        what = []
        if any(c.get("outputs") or c.get("execution_count") for c in nb.get("cells", [])):
            what.append("outputs or execution counts")
        if committed_form(nb)["metadata"] != nb.get("metadata"):
            what.append("metadata")
        if not what:
            what.append("cell metadata or formatting")
        out.append(f"{path}: {' and '.join(what)} differ from the committed form")
    return out


def main(argv: list[str] | None = None) -> int:
    """``clean`` (a git filter: stdin to stdout), ``check PATH...`` or ``fix PATH...``."""
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["clean"] and len(args) == 1:
        sys.stdout.write(clean(sys.stdin.read()))
        return 0
    if args[:1] in (["check"], ["fix"]) and len(args) > 1:
        found = problems(args[1:])
        if args[0] == "fix":
            for path in map(Path, args[1:]):
                path.write_text(clean(path.read_text(encoding="utf-8")), encoding="utf-8")
            return 0
        for line in found:
            print(line, file=sys.stderr)
        if found:
            print(f"{len(found)} notebook(s) not in committed form: "
                  f"python -m gpu_lab.curriculum.notebooks fix {' '.join(args[1:])}", file=sys.stderr)
        return 1 if found else 0
    print("usage: python -m gpu_lab.curriculum.notebooks clean | check PATH... | fix PATH...",
          file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
