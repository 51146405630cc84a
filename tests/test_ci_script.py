""".ci/run's own steps: every Python module it runs before the virtual environment exists is a
command that answers (a module without a ``__main__`` block exits 0 doing nothing: the
control-plane build was once skipped that way on a fresh machine, and the tests found no
binaries twenty minutes later)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
CI_RUN = REPO / ".ci" / "run"
# `python3 -m MODULE`: the system Python, before `make setup` has made .venv
SYSTEM_PYTHON_MODULE = re.compile(r"\bpython3 -m ([\w.]+)")


def modules() -> list[str]:
    return sorted(set(SYSTEM_PYTHON_MODULE.findall(CI_RUN.read_text(encoding="utf-8"))))


def test_the_ci_script_runs_the_control_plane_build_with_the_system_python():
    assert "gpu_lab.backends.local.buildcli" in modules(), (
        f".ci/run no longer builds the control plane with `python3 -m ...buildcli`: {modules()}")


@pytest.mark.parametrize("module", modules())
def test_each_module_is_a_command_with_the_standard_library_alone(module):
    # -S: no site-packages (neither the venv's nor the system's), as on a fresh machine
    done = subprocess.run([sys.executable, "-S", "-m", module, "--help"], cwd=REPO,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, f"python3 -m {module} --help failed:\n{done.stderr[-2000:]}"
    assert done.stdout.startswith("usage:"), (
        f"python3 -m {module} --help printed no usage: the module is not a command "
        f"(no __main__ block?); it printed {done.stdout[:200]!r}")
