"""Binder: repo2docker accepts ``binder/`` as it is, and an environment built only from
``binder/``'s files runs every lesson within Binder's memory budget.

Binder cannot be reached from CI, so this checks the two halves it is made of:

1. ``repo2docker --no-build`` (from PyPI) reads the repository and writes its Dockerfile;
   that file must install ``binder/requirements.txt`` and run ``binder/postBuild``.
2. A virtual environment gets exactly what that Dockerfile does: ``pip install -r
   binder/requirements.txt`` and then ``binder/postBuild`` from the repository root. Its
   Python runs every lesson (nbclient, cwd = lessons/) on the sim, with no control plane
   visible (as on Binder), and reports each kernel's peak memory: it must stay under 1 GB
   (Binder gives 1-2 GB). The environment up to ``postBuild`` is kept in gpu-lab's cache,
   keyed by what decides it (runtime.txt, requirements.txt, postBuild, the package's
   dependencies, this Python), and made afresh when any of them changes or it is a day old:
   resolving it costs about a minute of CPU (pip reads tens of thousands of index links), on
   a two-core machine four under the suite's load. ``postBuild`` runs every time, so the
   lessons import the checked-out code (asserted).
3. The static reading edition (``gpu-lab edition``) is rendered from those executed
   lessons, so each lesson executes once for both.

Slow (minutes: a venv and its installs; pip's cache makes reruns faster). Marked
``delivery``; fails in CI when repo2docker is missing.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from delivery_support import LESSONS, REPO, check_site, need, parse_page, venv_tool

from gpu_lab import edition
from gpu_lab.deviceplugin.stubs import cache_root

pytestmark = pytest.mark.delivery

BUDGET_MIB = 1024
BINDER = REPO / "binder"
ENV_MAX_AGE_S = 24 * 3600  # a kept environment is made afresh after this: upstream releases


def test_binder_folder_holds_only_what_repo2docker_reads():
    names = {p.name for p in BINDER.iterdir()}
    assert {"requirements.txt", "postBuild"} <= names
    assert os.access(BINDER / "postBuild", os.X_OK), "postBuild must be executable"
    reqs = (BINDER / "requirements.txt").read_text()
    for pkg in ("jupyterlab", "altair", "ipywidgets", "vl-convert-python", "ipykernel"):
        assert pkg in reqs, f"binder/requirements.txt lacks {pkg}"
    assert "pip install" in (BINDER / "postBuild").read_text()


def test_repo2docker_accepts_the_repository(artifacts):
    exe = venv_tool("repo2docker")
    need(exe is not None, "repo2docker",
         f"{sys.executable} -m pip install jupyter-repo2docker (in the dev extra)")
    res = subprocess.run(
        [exe, "--no-build", "--debug", "--user-id", "1000", "--user-name", "jovyan", str(REPO)],
        capture_output=True, text=True, timeout=300)
    text = res.stdout + res.stderr
    (artifacts / "binder.Dockerfile.txt").write_text(text)
    assert res.returncode == 0, text[-3000:]
    assert "FROM " in text
    assert 'pip install --no-cache-dir -r "binder/requirements.txt"' in text
    assert "./binder/postBuild" in text
    runtime = (BINDER / "runtime.txt").read_text().strip()  # python-3.11
    assert f"python={runtime.split('-', 1)[1]}" in text, "runtime.txt's Python was not used"


def _sh(cmd, **kw):
    res = subprocess.run(cmd, capture_output=True, text=True, **kw)
    assert res.returncode == 0, f"{cmd} failed:\n{(res.stdout + res.stderr)[-4000:]}"
    return res


@pytest.fixture(scope="module")
def binder_run(tmp_path_factory, artifacts):
    """An environment made as repo2docker makes it (kept a day, see above), and every lesson
    executed once in it (nbclient, cwd = lessons/, no control plane visible): the report and
    the executed notebooks, which the static edition below renders."""
    tmp_path = tmp_path_factory.mktemp("binder")
    started = time.monotonic()
    env_dir, made = _binder_env()
    py = env_dir / "bin" / "python"
    env = _env_of(env_dir)
    _sh([str(BINDER / "postBuild")], cwd=REPO, env=env, timeout=1800)  # as repo2docker runs it
    installed = time.monotonic() - started

    # As on Binder: no control plane binaries, so lessons take their sim path only.
    env["GPU_LAB_CACHE"] = str(tmp_path / "no-cache")
    report_path = artifacts / "binder-lessons.json"
    executed = tmp_path / "executed"
    res = subprocess.run([str(py), str(Path(__file__).with_name("run_lessons.py")),
                          "--save", str(executed), str(report_path), *map(str, LESSONS)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=3600)
    report = json.loads(report_path.read_text()) if report_path.exists() else {}
    lines = [f"binder env {'made' if made else 'kept'}, postBuild run, in {installed:.0f}s; "
             f"report: {report_path}"]
    lines += [f"  {name:32} peak {r['peak_mib']} MiB  {r['seconds']}s"
              + (f"  ERROR {r['error'][:300]}" if r["error"] else "")
              for name, r in report.items()]
    print("\n".join(lines))
    return {"res": res, "report": report, "lines": lines, "env_dir": env_dir, "executed": executed}


def _env_of(env_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.update(PATH=f"{env_dir / 'bin'}:{env.get('PATH', '')}", VIRTUAL_ENV=str(env_dir),
               PIP_DISABLE_PIP_VERSION_CHECK="1")
    return env


def _env_key() -> str:
    """What decides the environment before postBuild: Binder's files, the package's
    dependencies (postBuild installs them) and the Python."""
    # [project]'s dependencies list, as written (tomllib is Python 3.11+, the package 3.10+)
    found = re.search(r"^dependencies = \[(.*?)^\]", (REPO / "pyproject.toml").read_text(), re.S | re.M)
    assert found, "pyproject.toml: no [project] dependencies list"
    deps = [ln.split("#")[0].strip() for ln in found.group(1).splitlines() if ln.split("#")[0].strip()]
    h = hashlib.sha256()
    for name in ("runtime.txt", "requirements.txt", "postBuild"):
        h.update((BINDER / name).read_bytes())
    h.update(json.dumps(sorted(deps)).encode())
    h.update(sys.version.encode())
    return h.hexdigest()[:16]


def _binder_env() -> tuple[Path, bool]:
    """(the environment, whether it was made now): ``venv`` and ``pip install -r
    binder/requirements.txt``, kept under the cache key for a day."""
    root = cache_root() / "binder-env"
    root.mkdir(parents=True, exist_ok=True)
    env_dir, done = root / _env_key(), root / f"{_env_key()}.done"
    with open(root / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two runs on one machine make it once
        if done.exists() and time.time() - done.stat().st_mtime < ENV_MAX_AGE_S and env_dir.is_dir():
            return env_dir, False
        done.unlink(missing_ok=True)
        shutil.rmtree(env_dir, ignore_errors=True)
        for old in root.iterdir():  # environments of other keys: not used again
            if old.name != ".lock":
                shutil.rmtree(old, ignore_errors=True) if old.is_dir() else old.unlink()
        _sh([sys.executable, "-m", "venv", str(env_dir)], timeout=300)
        _sh([str(env_dir / "bin" / "python"), "-m", "pip", "install", "-q", "-r",
             str(BINDER / "requirements.txt")], env=_env_of(env_dir), timeout=1800)
        done.touch()
        return env_dir, True


@pytest.mark.slow
def test_env_from_binder_runs_every_lesson(binder_run):
    res, report, lines = binder_run["res"], binder_run["report"], binder_run["lines"]
    assert res.returncode == 0, "\n".join(lines) + "\n" + (res.stdout + res.stderr)[-4000:]
    assert set(report) == {p.name for p in LESSONS}
    for name, r in report.items():
        assert r["gpu_lab"].startswith(str(binder_run["env_dir"])), f"{name} imported {r['gpu_lab']}"
        assert r["peak_mib"] < BUDGET_MIB, f"{name}: peak {r['peak_mib']} MiB >= {BUDGET_MIB}"
    # postBuild installed this checkout: the kept environment holds no older gpu-lab
    installed = Path(next(iter(report.values()))["gpu_lab"]).parent
    for src in sorted((REPO / "gpu_lab").rglob("*.py")):
        copy = installed / src.relative_to(REPO / "gpu_lab")
        assert copy.read_bytes() == src.read_bytes(), f"{copy} is not the checkout's {src.name}"


@pytest.mark.slow
def test_the_static_edition_renders_every_lesson_offline(binder_run, tmp_path):
    """The whole reading edition, rendered from that one execution of every lesson on the sim:
    links resolve, every page has a chart, nothing loads from the network."""
    assert binder_run["res"].returncode == 0, "the lessons did not all execute (test above)"
    pages = edition.build(tmp_path, LESSONS, progress=print, executed=binder_run["executed"])
    images = check_site(tmp_path, LESSONS)
    for page in pages:
        print(f"{page.html_name}: {images[page.html_name]} images")
        assert images[page.html_name] >= 1, f"{page.html_name} has no chart"
    links = parse_page(tmp_path / "00_start_here.html").links
    assert "01_device_plugin.html" in links  # lesson-to-lesson links point at pages
    assert "executed in" not in (tmp_path / "index.html").read_text(encoding="utf-8")
