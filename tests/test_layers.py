"""The layers contract (pyproject.toml's [tool.importlinter], checked by `make lint` with
import-linter) is the one source of the README's layer picture."""

from __future__ import annotations

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
    assert drawn == picture(layers()), "README.md's layers picture differs from pyproject.toml's contract"


def test_every_package_of_gpu_lab_is_in_a_layer() -> None:
    named = {name.strip() for row in layers() for name in row.split("|")}
    rooms = {p.name for p in (ROOT / "gpu_lab").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    rooms |= {p.stem for p in (ROOT / "gpu_lab").glob("*.py") if p.stem != "__init__"}
    assert rooms - named == set(), f"not in any layer of the contract: {sorted(rooms - named)}"
