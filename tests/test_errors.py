"""gpu_lab.errors serves every exception a user can meet."""

import ast
from pathlib import Path

import pytest

import gpu_lab
from gpu_lab import errors

PACKAGE = Path(gpu_lab.__file__).parent


def _user_facing_classes() -> set[str]:
    """Public classes anywhere in the package that derive from GpuLabError (or are
    LabCheckFailed), found in the source."""
    bases: dict[str, set[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                names = {b.id if isinstance(b, ast.Name) else getattr(b, "attr", "") for b in node.bases}
                bases.setdefault(node.name, set()).update(names)
    found = {"GpuLabError", "LabCheckFailed"}
    while True:
        more = {n for n, b in bases.items() if b & found} - found
        if not more:
            return found
        found |= more


def test_every_gpulab_error_is_served_from_gpu_lab_errors():
    missing = _user_facing_classes() - set(errors.__all__)
    assert not missing, f"add to gpu_lab.errors: {sorted(missing)}"


@pytest.mark.parametrize("name", errors.__all__)
def test_each_name_is_an_exception(name):
    value = getattr(errors, name)
    assert isinstance(value, type) and issubclass(value, Exception), name
    assert issubclass(value, errors.GpuLabError) or name == "LabCheckFailed", name


def test_the_client_layer_raises_the_same_classes():
    from gpu_lab import kube

    assert kube.NotFound is errors.NotFound and kube.ApiError is errors.ApiError
    from gpu_lab.errors import LocalClusterError

    assert LocalClusterError is errors.LocalClusterError
