"""``gpu-lab doctor``: real checks, with PATH and the package metadata swapped to simulate a
machine that has (or lacks) each piece."""

from __future__ import annotations

import importlib.metadata as metadata
import json
import stat
import sys
from pathlib import Path

import pytest

import gpu_lab
from gpu_lab import cli, doctor
from gpu_lab.backends.local import build


def _script(bindir: Path, name: str, body: str) -> Path:
    path = bindir / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


class _NoNvml:
    """A pynvml stand-in on a machine without the driver library."""

    class NVMLError(Exception):
        pass

    def nvmlInit(self):
        raise self.NVMLError("NVML Shared Library Not Found")


@pytest.fixture
def bare(tmp_path, monkeypatch):
    """A machine with nothing on PATH and an empty binary cache."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    monkeypatch.setenv("PATH", str(bindir))
    monkeypatch.setenv("GPU_LAB_CACHE", str(tmp_path / "cache"))
    return bindir


def _by_name(report):
    return {c.name: c for c in report.checks}


def test_bare_machine_still_runs_the_sim_curriculum(bare):
    report = doctor.diagnose(nvml=_NoNvml())
    checks = _by_name(report)
    assert report.sim_ready  # this venv has the packages; nothing else is needed for sim
    for c in build.ALL:
        assert not checks[c].ok
        assert 'connect("local")' in checks[c].disables
        assert "controlplane build" in checks[c].fix
    assert not checks["kueue"].ok and checks["kueue"].fix.split("#")[0].rstrip().endswith(
        "controlplane build --with kueue")
    assert "gpu-lab up --with kueue" in checks["kueue"].disables
    assert not checks["go"].ok and "go.dev" in checks["go"].fix
    assert not checks["docker"].ok and checks["docker"].detail == "not on PATH"
    assert not checks["kind"].ok and checks["kind"].fix.startswith("sudo gpu-lab kind build")
    gpu = checks["nvidia driver"]
    assert not gpu.ok and "NVML Shared Library Not Found" in gpu.detail
    assert "simulated GPUs" in gpu.disables
    assert not any(c.required for c in report.checks if not c.ok)


def test_missing_package_makes_it_not_ready_with_the_fix(bare, monkeypatch, capsys):
    real = metadata.version

    def version(dist):
        if dist == "vl-convert-python":
            raise metadata.PackageNotFoundError(dist)
        if dist == "pandas":
            return "1.5.3"  # too old
        return real(dist)

    monkeypatch.setattr(doctor.metadata, "version", version)
    assert doctor.main([], nvml=_NoNvml()) == 1
    out = capsys.readouterr().out
    assert "MISSING  vl-convert-python" in out
    assert "installed 1.5.3, needs >= 2.0" in out
    assert "Not ready" in out
    assert f"{sys.executable} -m pip install" in out
    assert "charts" in out  # what the missing renderer disables


def test_present_pieces_are_found_and_versioned(bare, monkeypatch):
    # fake binaries that answer --version exactly as the real ones do
    etcd = build.etcd_version_for().lstrip("v")
    _script(bare, "etcd", f'echo "etcd Version: {etcd}"')
    for c in build.KUBE_COMPONENTS:
        _script(bare, c, f'echo "Kubernetes {build.DEFAULT_VERSION}"')
    _script(bare, "go", 'echo "go9.0.1"')
    _script(bare, "docker", 'case "$1" in version) echo 28.2.2;; *) exit 1;; esac')
    _script(bare, "kind", 'echo "kind v9.9.9 go1.26 linux/amd64"')
    _script(bare, "nvidia-smi", 'echo "NVIDIA H100 80GB HBM3, 570.86.15, 81559 MiB"\n'
                                'echo "NVIDIA H100 80GB HBM3, 570.86.15, 81559 MiB"')
    report = doctor.diagnose(nvml=_NoNvml())
    checks = _by_name(report)
    for c in build.ALL:
        assert checks[c].ok, checks[c]
        assert checks[c].detail == str(bare / c)
    assert checks["kube-scheduler"].version == build.DEFAULT_VERSION
    assert checks["go"].ok and checks["go"].version == "9.0.1"
    assert checks["docker"].ok and checks["docker"].version == "28.2.2"
    assert checks["kind"].ok and checks["kind"].version == "9.9.9"
    images = [c for c in report.checks if c.name.startswith("image gpu-lab/")]
    assert [c.name for c in images] == ["image gpu-lab/kind-node:v1.37.2",
                                        f"image gpu-lab/fake-device-plugin:{gpu_lab.__version__}"]
    assert not any(c.ok for c in images)  # the fake docker answers no image inspect
    assert all(c.fix.startswith("sudo gpu-lab kind build") for c in images)
    gpu = checks["nvidia driver"]
    assert gpu.ok and gpu.version == "570.86.15"
    assert gpu.detail.startswith("2 GPU(s): NVIDIA H100 80GB HBM3")
    # Kueue is a cache entry with its manifests, not a binary on PATH: absent here
    assert [c.name for c in report.checks if not c.ok and c.group != "kind"] == ["kueue"]


def test_wrong_versions_are_not_accepted(bare):
    for c in build.ALL:
        _script(bare, c, 'echo "Kubernetes v1.0.0"; echo "etcd Version: 0.0.1"')
    _script(bare, "go", 'echo "go1.2"')
    _script(bare, "docker", 'echo "Cannot connect to the Docker daemon" >&2; exit 1')
    checks = _by_name(doctor.diagnose(nvml=_NoNvml()))
    assert not any(checks[c].ok for c in build.ALL)
    assert not checks["go"].ok and "older than" in checks["go"].detail
    assert not checks["docker"].ok
    assert "daemon not reachable: Cannot connect" in checks["docker"].detail
    assert "start the Docker daemon" in checks["docker"].fix


def test_cli_json(bare, capsys):
    assert cli.main(["doctor", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["sim_ready"] is True
    names = {c["name"]: c for c in doc["checks"]}
    assert {"pandas", "numpy", "altair", "ipywidgets", "vl-convert-python", "jupyterlab",
            "grpcio", "kube-scheduler", "go", "docker", "kind", "nvidia driver"} <= set(names)
    assert names["pandas"]["status"] == "ok" and names["pandas"]["version"]
    assert "kube-scheduler" in doc["missing"]
    assert {"status", "disables", "fix", "required"} <= set(names["go"])


def test_doctor_minimums_are_pyprojects():
    """Each package doctor checks names the minimum pyproject.toml declares (and a dependency
    pyproject declares is not described by doctor as unused)."""
    import re
    from pathlib import Path

    import tomllib

    from gpu_lab.doctor import PACKAGES

    project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text())["project"]
    declared = {}
    for spec in [*project["dependencies"], *(d for ds in project["optional-dependencies"].values() for d in ds)]:
        m = re.match(r"([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s*>=\s*([0-9][0-9.]*)", spec)
        if m:
            declared[m.group(1).lower()] = m.group(2)
    checked = {dist: minimum for dist, minimum, _required, _purpose in PACKAGES}
    for dist, minimum in checked.items():
        if dist in declared:
            assert minimum == declared[dist], f"{dist}: doctor checks >= {minimum}, pyproject says >= {declared[dist]}"
    for dist, _minimum, _required, purpose in PACKAGES:
        assert not purpose.startswith("nothing"), f"{dist} is a dependency; doctor says it is unused"
    assert "kubernetes" in checked and "cryptography" in checked
