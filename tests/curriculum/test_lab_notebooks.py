"""Every solution passes its checks; every unmodified lab stops at its stubs and passes none.

Each notebook is executed with nbclient in its own folder (as nbval and JupyterLab do).
"""

from __future__ import annotations

import re
from pathlib import Path

import nbformat
import pytest

from gpu_lab.edition import kernel_config

nbclient = pytest.importorskip("nbclient")

# 18 notebook runs of ~12 s each, independent of each other: let a parallel run share them out
pytestmark = pytest.mark.spread

REPO = Path(__file__).resolve().parents[2]
SOLUTIONS, LABS = REPO / "solutions", REPO / "labs"
NOTEBOOK = re.compile(r"^\d\d_.+\.ipynb$")
EXPECTED = ("01", "02", "03", "04", "05", "06", "07", "08", "09", "11")
# How an unmodified check cell may fail: the check itself, a stub, or a name the stub never set.
CHECK_FAILURES = {"LabCheckFailed", "NotImplementedError", "NameError"}


def notebooks(folder: Path) -> list[Path]:
    return sorted(p for p in folder.glob("*.ipynb") if NOTEBOOK.match(p.name))


def execute(path: Path, *, allow_errors: bool) -> nbformat.NotebookNode:
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3", allow_errors=allow_errors,
                                     config=kernel_config(), resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    return nb


def errors(cell) -> list[str]:
    return [o.get("ename", "") for o in cell.get("outputs", []) if o.get("output_type") == "error"]


def is_check(cell) -> bool:
    return cell.cell_type == "code" and "check" in cell.metadata.get("tags", [])


def ids(paths):
    return [p.name for p in paths]


def test_every_lesson_with_a_lab_has_its_solution():
    found = {p.name[:2] for p in notebooks(SOLUTIONS)}
    missing = [n for n in EXPECTED if n not in found]
    assert not missing, (f"solutions/ lacks lab(s) {', '.join(missing)}: the curriculum has one lab per "
                         f"lesson 01-09 and 11 (found: {', '.join(ids(notebooks(SOLUTIONS))) or 'none'})")


@pytest.mark.parametrize("path", notebooks(SOLUTIONS), ids=ids(notebooks(SOLUTIONS)))
def test_solution_runs_and_passes_every_check(path):
    nb = execute(path, allow_errors=False)  # raises CellExecutionError naming the failing cell
    checks = [c for c in nb.cells if is_check(c)]
    assert checks, f"{path.name}: no check cell (code cell tagged 'check')"
    for cell in checks:
        assert not errors(cell)


@pytest.mark.parametrize("path", notebooks(LABS), ids=ids(notebooks(LABS)))
def test_unmodified_lab_stops_at_its_stubs_and_passes_no_check(path):
    nb = execute(path, allow_errors=True)
    code = [(i, c) for i, c in enumerate(nb.cells) if c.cell_type == "code"]
    raised = [(i, errors(c)[0]) for i, c in code if errors(c)]
    assert raised, f"{path.name}: ran without any error; a lab must leave work to do"
    first_cell, first_error = raised[0]
    assert first_error == "NotImplementedError", (
        f"{path.name}: the first error (cell {first_cell}) is {first_error}, not the stub's "
        "NotImplementedError: the code before the first stub must run")
    checks = [(i, c) for i, c in code if is_check(c)]
    assert checks, f"{path.name}: no check cell (code cell tagged 'check')"
    for i, cell in checks:
        got = errors(cell)
        assert got, f"{path.name}: check cell {i} passes on the unmodified lab: {cell.source!r}"
        assert got[0] in CHECK_FAILURES, (
            f"{path.name}: check cell {i} fails with {got[0]}, expected one of "
            f"{', '.join(sorted(CHECK_FAILURES))}")
