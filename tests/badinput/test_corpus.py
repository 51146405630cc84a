"""The bad-input corpus: every file in cases/ through the CLI and the Python API on the sim.

Each ``cases/NN_name.yaml`` has a sidecar ``NN_name.expected``: the first line ``exit: N``
(0 ran, 2 bad input), then the exact ``error: ...`` line the CLI prints (``{file}`` stands
for the path), if any. The Python API must raise ``gpu_lab.GpuLabError`` with the same
message, or apply cleanly where the CLI exits 0. All cases run in one subprocess under a
1 GiB address-space cap and a per-case time limit, so a runaway input (a billion
replicas, an alias bomb) fails here instead of on a learner's Binder pod.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
CASES = sorted((HERE / "cases").glob("*.yaml"))
MEMORY_CAP = 2**30  # bytes of address space
SECONDS = 60  # per case, each of CLI and API


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return env


def _expected(case: Path) -> tuple[int, str]:
    lines = (case.with_suffix(".expected")).read_text().splitlines()
    code = int(lines[0].removeprefix("exit:").strip())
    rel = str(case.relative_to(ROOT))
    return code, (lines[1].replace("{file}", rel) if len(lines) > 1 else "")


@pytest.fixture(scope="module")
def results() -> dict[str, dict]:
    files = [str(c.relative_to(ROOT)) for c in CASES]
    proc = subprocess.run([sys.executable, str(HERE / "driver.py"), str(MEMORY_CAP), str(SECONDS), *files],
                          cwd=ROOT, capture_output=True, text=True, env=_env(), timeout=30 * 60)
    got = {}
    for line in proc.stdout.splitlines():
        d = json.loads(line)
        got[Path(d["file"]).name] = d
    assert got, f"the driver printed nothing: {proc.stderr[-2000:]}"
    return got


def test_every_case_has_an_expectation():
    assert len(CASES) >= 40
    for case in CASES:
        assert case.with_suffix(".expected").exists(), case.name


@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_cli_and_api_answer_in_one_line(case: Path, results):
    code, message = _expected(case)
    got = results.get(case.name)
    assert got is not None, f"{case.name}: the driver died before this case (memory cap or crash)"
    assert got["rc"] == code, got
    stderr = got["stderr"].strip()
    assert stderr == message, got
    assert "\n" not in stderr and "Traceback" not in stderr
    if code == 0:
        assert got["api"] == "ok", got
    else:
        assert got["api"] == "GpuLabError: " + message.removeprefix("error: "), got


def test_memory_stays_small(results):
    """The whole corpus, bombs included, stays far below the cap."""
    assert max(d["maxrss_mb"] for d in results.values()) < 400


@pytest.mark.parametrize("name", ["01_timeslicing_replicas_bomb", "04_alias_bomb", "08_binary"])
def test_python_m_cli_exits_2_under_the_cap(name):
    """The real entry point (``python -m gpu_lab.cli run FILE``) in its own capped process."""
    case = HERE / "cases" / f"{name}.yaml"
    code, message = _expected(case)
    cap = f"import resource; resource.setrlimit(resource.RLIMIT_AS, ({MEMORY_CAP}, {MEMORY_CAP}))"
    proc = subprocess.run([sys.executable, "-c", f"{cap}; import runpy, sys; sys.argv = ['gpu-lab', 'run', "
                           f"{str(case.relative_to(ROOT))!r}]; runpy.run_module('gpu_lab.cli', run_name='__main__')"],
                          cwd=ROOT, capture_output=True, text=True, env=_env(), timeout=120)
    assert proc.returncode == code == 2
    assert proc.stderr.strip() == message


@pytest.mark.parametrize("path,message", [
    ("tests/badinput", 'the path "tests/badinput" is a directory: give one scenario file'),
    ("/dev/null", "no objects passed to apply"),
    ("no-such-scenario", 'the path "no-such-scenario" does not exist'),
    ("no-such-scenario.yaml", 'the path "no-such-scenario.yaml" does not exist'),
])
def test_paths_that_are_not_scenario_files(path, message):
    import gpu_lab

    proc = subprocess.run([sys.executable, "-m", "gpu_lab.cli", "run", path], cwd=ROOT,
                          capture_output=True, text=True, env=_env(), timeout=120)
    assert (proc.returncode, proc.stderr.strip()) == (2, f"error: {message}")
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        with pytest.raises(gpu_lab.GpuLabError) as info:
            gpu_lab.connect("sim").apply(path)
    finally:
        os.chdir(cwd)
    assert str(info.value) == message
