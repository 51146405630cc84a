"""The lessons, labs and solutions use only the public API: ``gpu_lab.__all__`` and the
public namespaces it lists (README, "The public API"). Every other module is private by that
rule, whatever its file name: a notebook that reached into one would break when it moves."""

from __future__ import annotations

import ast
from pathlib import Path

import nbformat
import pytest

import gpu_lab

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted(p for d in ("lessons", "labs", "solutions") for p in (REPO / d).glob("*.ipynb"))
NAMESPACES = {"gpus", "charts", "labs", "drill", "metrics", "errors"}


def _code(nb) -> str:
    """The notebook's code, IPython's magics and shell lines left out."""
    lines = [ln for c in nb.cells if c.cell_type == "code" for ln in c.source.splitlines()
             if not ln.lstrip().startswith(("%", "!"))]
    return "\n".join(lines)


def private_uses(source: str) -> list[str]:
    """``gpu_lab`` names ``source`` uses outside the public surface."""
    bad = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            bad += [a.name for a in node.names
                    if a.name.startswith("gpu_lab.") and a.name.split(".")[1] not in NAMESPACES]
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gpu_lab"):
            parts = (node.module or "").split(".")
            if len(parts) > 1 and parts[1] not in NAMESPACES:
                bad.append(node.module or "")
            elif len(parts) == 1:
                bad += [f"gpu_lab.{a.name}" for a in node.names if a.name not in gpu_lab.__all__]
        elif (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
              and node.value.id == "gpu_lab" and node.attr not in gpu_lab.__all__):
            bad.append(f"gpu_lab.{node.attr}")
    return sorted(set(bad))


def test_the_rule_sees_a_private_use():
    assert private_uses("import gpu_lab\ngpu_lab.sim.runner\nfrom gpu_lab.kube import KubeClient\n"
                        "import gpu_lab.charts\nfrom gpu_lab import connect, lazy\n") == [
        "gpu_lab.kube", "gpu_lab.lazy", "gpu_lab.sim"]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[f"{p.parent.name}/{p.name}" for p in NOTEBOOKS])
def test_notebook_uses_only_the_public_api(path):
    assert private_uses(_code(nbformat.read(path, as_version=4))) == []
