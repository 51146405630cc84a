"""Labs are generated from their solutions: ``gpu-lab labs generate`` and ``gpu-lab labs check``.

``solutions/NN_topic.ipynb`` is the one source of a lab. Its answers sit between lines
``### BEGIN SOLUTION`` and ``### END SOLUTION`` in code cells; ``generate`` writes
``labs/NN_topic.ipynb`` with each such block replaced, at the block's indentation, by
``raise NotImplementedError("Your turn: <the block's first comment line>")``, every
``### BEGIN HIDDEN TESTS`` .. ``### END HIDDEN TESTS`` block removed, outputs and execution
counts cleared, metadata normalised and a first markdown cell saying where the lab comes
from. The output depends only on the solution's text, byte for byte, so ``check`` can
compare the committed labs with what ``generate`` would write (CI runs it).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

import nbformat

from ..errors import GpuLabError
from .notebooks import KERNELSPEC, LANGUAGE_INFO

__all__ = ["check", "find_solutions", "generate", "lab_text", "main", "transform_source"]

NOTEBOOK = re.compile(r"^\d\d_[^/\\]+\.ipynb$")
BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
_MARKERS = (BEGIN_SOLUTION, END_SOLUTION, BEGIN_HIDDEN, END_HIDDEN)
# Anything that looks like a marker but is not exactly one (a typo would leak an answer).
_LOOKS_LIKE_MARKER = re.compile(r"^#+\s*(BEGIN|END)\s+(SOLUTION|HIDDEN\s*TESTS?)\b", re.IGNORECASE)
_COMMENT = re.compile(r"^\s*#+\s?(.*?)\s*$")
DEFAULT_HINT = "write this part"
NOTE = ("Generated from solutions/{name} by `gpu-lab labs generate`: "
        "edit the solution, not this file.")
# Cell metadata a lab keeps; everything else (execution times, scroll state...) is dropped.
_CELL_METADATA = ("tags", "editable", "deletable")


def transform_source(source: str, where: str = "cell") -> str:
    """The lab version of one code cell's source.

    Raises ``GpuLabError`` (one line naming ``where``) for a marker without its partner,
    nested markers, or a line that looks like a marker but is not exactly one.
    """
    out: list[str] = []
    block: str | None = None  # "solution" / "hidden" while inside one
    indent, hint, start = "", None, 0
    for number, line in enumerate(source.split("\n"), 1):
        text = line.strip()
        if text in _MARKERS:
            if text in (BEGIN_SOLUTION, BEGIN_HIDDEN):
                if block is not None:
                    raise GpuLabError(f"{where}: line {number}: {text!r} inside the "
                                      f"{_begin(block)!r} block opened at line {start}; "
                                      "markers do not nest")
                block = "solution" if text == BEGIN_SOLUTION else "hidden"
                indent, hint, start = line[: len(line) - len(line.lstrip())], None, number
                continue
            wanted = "solution" if text == END_SOLUTION else "hidden"
            if block != wanted:
                opened = f" (the open block is {_begin(block)!r} from line {start})" if block else ""
                raise GpuLabError(f"{where}: line {number}: {text!r} without "
                                  f"{_begin(wanted)!r} before it{opened}")
            if block == "solution":
                message = json.dumps(f"Your turn: {hint or DEFAULT_HINT}", ensure_ascii=False)
                out.append(f"{indent}raise NotImplementedError({message})")
            block = None
            continue
        if _LOOKS_LIKE_MARKER.match(text):
            raise GpuLabError(f"{where}: line {number}: {text!r} is not a marker; write exactly "
                              f"{BEGIN_SOLUTION!r}, {END_SOLUTION!r}, {BEGIN_HIDDEN!r} or {END_HIDDEN!r}")
        if block is None:
            out.append(line)
        elif block == "solution" and hint is None and (m := _COMMENT.match(line)) and m.group(1):
            hint = m.group(1)
    if block is not None:
        raise GpuLabError(f"{where}: line {start}: {_begin(block)!r} is never closed "
                          f"(no {_end(block)!r} after it)")
    return "\n".join(out)


def _begin(block: str) -> str:
    return BEGIN_SOLUTION if block == "solution" else BEGIN_HIDDEN


def _end(block: str) -> str:
    return END_SOLUTION if block == "solution" else END_HIDDEN


def lab_text(solution: Path) -> str:
    """The exact text ``generate`` writes for one solution notebook."""
    solution = Path(solution)
    text = solution.read_text(encoding="utf-8")
    try:
        src = nbformat.reads(text, as_version=4)
    except Exception as e:  # a notebook that nbformat cannot read
        raise GpuLabError(f"{solution}: not a readable notebook ({' '.join(str(e).split())})") from e
    cells = [nbformat.v4.new_markdown_cell(NOTE.format(name=solution.name), id="generated-note")]
    used = {"generated-note"}
    for i, cell in enumerate(src.cells):
        where = f"{solution}: cell {i}"
        source = cell.source
        metadata = {k: cell.metadata[k] for k in _CELL_METADATA if k in cell.get("metadata", {})}
        if cell.cell_type == "code":
            new = nbformat.v4.new_code_cell(transform_source(source, where))
        else:
            if any(_LOOKS_LIKE_MARKER.match(line.strip()) for line in source.split("\n")):
                raise GpuLabError(f"{where}: solution markers belong in code cells, "
                                  f"not in a {cell.cell_type} cell")
            new = (nbformat.v4.new_markdown_cell(source) if cell.cell_type == "markdown"
                   else nbformat.v4.new_raw_cell(source))
            if cell.get("attachments"):
                new["attachments"] = cell["attachments"]
        cell_id = cell.get("id")
        if not cell_id or cell_id in used:
            cell_id = f"cell-{i}"
        used.add(cell_id)
        new["id"] = cell_id
        new["metadata"] = metadata
        cells.append(new)
    nb = nbformat.v4.new_notebook(cells=cells, metadata={
        "kernelspec": dict(KERNELSPEC), "language_info": json.loads(json.dumps(LANGUAGE_INFO))})
    nb.nbformat, nb.nbformat_minor = 4, 5
    nbformat.validate(nb)
    text = nbformat.writes(nb)  # JSON with sorted keys, one-space indent
    return text if text.endswith("\n") else text + "\n"


def find_solutions(solutions_dir: Path) -> list[Path]:
    """``solutions/NN_*.ipynb``, in name order."""
    solutions_dir = Path(solutions_dir)
    if not solutions_dir.is_dir():
        raise GpuLabError(f"{solutions_dir}: no such directory")
    return sorted(p for p in solutions_dir.iterdir() if p.is_file() and NOTEBOOK.match(p.name))


def _lab_files(labs_dir: Path) -> list[Path]:
    if not labs_dir.is_dir():
        return []
    return sorted(p for p in labs_dir.iterdir() if p.is_file() and NOTEBOOK.match(p.name))


def _generated(path: Path) -> bool:
    """Whether a lab file was written by ``generate`` (its first cell is the note)."""
    try:
        nb = nbformat.reads(path.read_text(encoding="utf-8"), as_version=4)
    except Exception:
        return False
    return bool(nb.cells) and nb.cells[0].source.startswith("Generated from solutions/")


def generate(solutions_dir: Path | str, labs_dir: Path | str) -> list[Path]:
    """Write ``labs_dir/NN_x.ipynb`` for every ``solutions_dir/NN_x.ipynb``; return the lab paths.

    Every lab is rendered before anything is written, so a bad marker leaves ``labs_dir``
    as it was. Files whose text is already right are left untouched; a generated lab whose
    solution is gone is deleted (a lab without the generated note is never touched).
    """
    solutions_dir, labs_dir = Path(solutions_dir), Path(labs_dir)
    rendered = {s.name: lab_text(s) for s in find_solutions(solutions_dir)}
    labs_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in rendered.items():
        path = labs_dir / name
        if not path.is_file() or path.read_bytes() != text.encode("utf-8"):
            path.write_bytes(text.encode("utf-8"))
        written.append(path)
    for path in _lab_files(labs_dir):
        if path.name not in rendered and _generated(path):
            path.unlink()
    return written


def check(solutions_dir: Path | str, labs_dir: Path | str) -> list[str]:
    """Where ``labs_dir`` differs from what ``generate`` would write: one line per file."""
    solutions_dir, labs_dir = Path(solutions_dir), Path(labs_dir)
    problems = []
    names = set()
    for solution in find_solutions(solutions_dir):
        names.add(solution.name)
        path = labs_dir / solution.name
        if not path.is_file():
            problems.append(f"{path}: missing (generated from {solution})")
        elif path.read_bytes() != lab_text(solution).encode("utf-8"):
            problems.append(f"{path}: stale (differs from what {solution} generates)")
    for path in _lab_files(labs_dir):
        if path.name not in names:
            why = ("its solution is gone" if _generated(path)
                   else "written by hand; labs are generated: move it to solutions/ with markers")
            problems.append(f"{path}: extra (no {solutions_dir / path.name}; {why})")
    return problems


# ------------------------------------------------------------------------------ CLI
class _Usage(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2, instead of argparse's usage block
        raise _Usage(message)


def _default_root() -> Path:
    """The current directory if it holds solutions/, else the repository this package sits in."""
    here = Path.cwd()
    for candidate in (here, *here.parents):
        if (candidate / "solutions").is_dir():
            return candidate
    repo = Path(__file__).resolve().parents[2]
    return repo if (repo / "solutions").is_dir() else here


def _show(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="gpu-lab labs", description="Generate labs/ from solutions/, or check they agree.")
    sub = p.add_subparsers(dest="action", metavar="{generate,check}")
    for name, text in (("generate", "write labs/NN_*.ipynb from solutions/NN_*.ipynb"),
                       ("check", "exit 1 when labs/ differs from what generate would write")):
        sp = sub.add_parser(name, help=text, description=text)
        sp.add_argument("--solutions", type=Path, help="solutions directory (default: ./solutions)")
        sp.add_argument("--labs", type=Path, help="labs directory (default: ./labs)")
    return p


def main(argv: list[str] | None = None) -> int:
    """``gpu-lab labs generate|check [--solutions DIR] [--labs DIR]``: 0 ok, 1 drift, 2 bad input."""
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = _parser()
    try:
        args = parser.parse_args(argv)
        if args.action is None:
            raise _Usage("choose an action: gpu-lab labs generate | gpu-lab labs check")
    except _Usage as e:
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    except SystemExit as e:  # --help
        return int(e.code or 0)
    root = _default_root()
    solutions = args.solutions if args.solutions is not None else Path(_show(root / "solutions"))
    labs = args.labs if args.labs is not None else Path(_show(root / "labs"))
    try:
        if not find_solutions(solutions):
            raise GpuLabError(f"{solutions}: no NN_*.ipynb solution notebooks")
        if args.action == "generate":
            for path in generate(solutions, labs):
                print(f"wrote {_show(path)}")
            return 0
        problems = check(solutions, labs)
    except GpuLabError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if not problems:
        print(f"{_show(labs)} agrees with {_show(solutions)}")
        return 0
    fix = "gpu-lab labs generate"
    if args.solutions is not None or args.labs is not None:
        fix += f" --solutions {_show(solutions)} --labs {_show(labs)}"
    for line in problems:
        print(f"{line}: run `{fix}`" if ": extra (" not in line or "solution is gone" in line
              else line)
    return 1
