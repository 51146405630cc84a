"""The layers contract (pyproject.toml's [tool.importlinter], checked by `make lint` with
import-linter) is the one source of the README's layer picture."""

from __future__ import annotations

import ast
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
BEGIN = "<!-- layers: generated from pyproject.toml's [tool.importlinter]; tests/test_layers.py checks it -->"
END = "<!-- end of layers -->"


def layers() -> list[str]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["type"] == "layers"]
    assert contract["containers"] == ["gpu_lab"]
    return list(contract["layers"])


def picture(rows: list[str]) -> str:
    """Top to bottom, each row a layer; a module imports only from its row or those below."""
    body = "\n  ↓\n".join("   ".join(r.strip() for r in row.split("|")) for row in rows)
    return f"{BEGIN}\n```\n{body}\n```\n{END}"


def test_the_readme_draws_the_layers_contract() -> None:
    readme = (ROOT / "README.md").read_text()
    assert BEGIN in readme and END in readme, "README.md has no layers picture"
    drawn = readme[readme.index(BEGIN):readme.index(END) + len(END)]
    assert drawn == picture(layers()), ("README.md's layers picture differs from pyproject.toml's contract: "
                                       "`python tests/test_layers.py` redraws it")


def test_every_package_of_gpu_lab_is_in_a_layer() -> None:
    named = {name.strip() for row in layers() for name in row.split("|")}
    rooms = {p.name for p in (ROOT / "gpu_lab").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    rooms |= {p.stem for p in (ROOT / "gpu_lab").glob("*.py") if p.stem != "__init__"}
    assert rooms - named == set(), f"not in any layer of the contract: {sorted(rooms - named)}"



#: the only gpu_lab imports inside functions (besides the command modules, ``cli.py``,
#: whose handlers load what their subcommand runs, so ``gpu-lab --help`` starts fast):
#: each one keeps a heavy dependency out of a path that does not need it
LAZY_IMPORTS = {
    ("connection.py", "connect"): "each backend's session loads when chosen (kubernetes, gRPC)",
    ("connection.py", "backend_available"): "the local and kind build modules, likewise",
    ("kubelet/agentprocess.py", "start"): "the node agent (gRPC) loads only to start one",
    ("kubelet/pluginprocess.py", "main"): "a process entry: the parent watch starts first",
    ("workshop.py", "run"): "altair loads only for --chart",
}


def in_function_imports() -> dict[tuple[str, str], list[int]]:
    found: dict[tuple[str, str], list[int]] = {}
    for path in sorted((ROOT / "gpu_lab").rglob("*.py")):
        rel = path.relative_to(ROOT / "gpu_lab").as_posix()
        for fn in ast.walk(ast.parse(path.read_text())):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            for node in ast.walk(fn):
                ours = (isinstance(node, ast.ImportFrom)
                        and (node.level > 0 or (node.module or "").startswith("gpu_lab"))) or (
                    isinstance(node, ast.Import) and any(a.name.startswith("gpu_lab") for a in node.names))
                if ours:
                    found.setdefault((rel, fn.name), []).append(node.lineno)
    return found


def test_in_function_imports_are_only_the_listed_lazy_ones() -> None:
    found = in_function_imports()
    unlisted = {f"gpu_lab/{f}:{lines[0]} in {fn}()" for (f, fn), lines in found.items()
                if (f, fn) not in LAZY_IMPORTS and Path(f).name != "cli.py"}
    assert not unlisted, ("imports inside functions hide import cycles; move them to the top "
                          f"(or list a heavy dependency in LAZY_IMPORTS): {sorted(unlisted)}")
    stale = set(LAZY_IMPORTS) - set(found)
    assert not stale, f"LAZY_IMPORTS lists imports that are gone: {sorted(stale)}"

if __name__ == "__main__":  # `python tests/test_layers.py` redraws the README's picture
    path = ROOT / "README.md"
    text = path.read_text()
    start, end = text.index(BEGIN), text.index(END) + len(END)
    path.write_text(text[:start] + picture(layers()) + text[end:])
