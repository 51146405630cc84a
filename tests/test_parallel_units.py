"""The units a parallel run hands to its workers (tests/conftest.py): a module, a group of
modules that share a fixture, or single tests of a module marked ``spread``."""

from __future__ import annotations

from parallel import module_unit, unit_of


def _module(root, name, text):
    (root / name).write_text(text)
    module_unit.cache_clear()
    return name


def test_a_module_is_one_unit(tmp_path):
    name = _module(tmp_path, "test_plain.py", "def test_a(): pass\n")
    assert unit_of(f"{name}::test_a", tmp_path) == unit_of(f"{name}::test_b[x]", tmp_path) == name


def test_modules_of_one_xdist_group_are_one_unit(tmp_path):
    a = _module(tmp_path, "test_a.py", 'import pytest\npytestmark = [pytest.mark.kind, pytest.mark.xdist_group("kind")]\n')
    b = _module(tmp_path, "test_b.py", 'import pytest\npytestmark = pytest.mark.xdist_group("kind")\n')
    assert unit_of(f"{a}::test_1", tmp_path) == unit_of(f"{b}::test_2", tmp_path) == "group:kind"


def test_each_test_of_a_spread_module_is_a_unit(tmp_path):
    name = _module(tmp_path, "test_s.py", "import pytest\npytestmark = pytest.mark.spread\n")
    assert unit_of(f"{name}::test_a[01]", tmp_path) == f"{name}::test_a[01]"
    assert unit_of(f"{name}::test_a[02]", tmp_path) == f"{name}::test_a[02]"


def test_a_notebook_and_a_missing_file_are_modules(tmp_path):
    assert unit_of("lessons/00_start_here.ipynb::Cell 3", tmp_path) == "lessons/00_start_here.ipynb"
    assert unit_of("tests/gone.py::test_x", tmp_path) == "tests/gone.py"


def test_the_suites_kind_modules_share_one_unit():
    from pathlib import Path

    root = Path(__file__).parents[1]
    module_unit.cache_clear()
    units = {unit_of(f"{m}::t", root) for m in ("tests/backends/kind/test_kind_cluster.py",
                                               "tests/fidelity/test_kind_differential.py",
                                               "tests/backends/kind/test_lesson_on_kind.py")}
    assert units == {"group:kind"}
