"""The one rule for tests that run the real control plane: in CI they fail when the
binaries are missing (never a silent skip); elsewhere they skip with the reason. And the
one way a test module gets a real lab: the session's, emptied for it."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import gpu_lab
from gpu_lab.backends.local import kueuebuild
from gpu_lab.backends.local.build import DEFAULT_VERSION, find_binaries


def _missing(msg: str, what: str) -> None:
    if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
        pytest.fail(f"{msg}; CI=true, so {what} must run")
    pytest.skip(msg)


def require_controlplane(what: str = "the real-cluster tests") -> dict:
    found = find_binaries(DEFAULT_VERSION)
    if found is None:
        _missing(f"control plane binaries for Kubernetes {DEFAULT_VERSION} not found "
                 "(run `gpu-lab controlplane build`, see controlplane/README.md)", what)
    if not sys.platform.startswith("linux"):
        pytest.skip(f"{what} use /proc (Linux)")
    return found


def require_kueue(what: str = "the Kueue tests") -> kueuebuild.KueueInstall:
    """The control plane and a built Kueue, by the same rule."""
    require_controlplane(what)
    found = kueuebuild.find_kueue()
    if found is None:
        _missing(f"Kueue {kueuebuild.DEFAULT_VERSION} not built "
                 "(run `gpu-lab controlplane build --with kueue`, see controlplane/README.md)", what)
    return found


def shared_lab(request, what: str, *, timeout: float = 90) -> Iterator:
    """The test session's local lab (``shared_local`` in conftest.py: one control plane per
    run, or per xdist worker), emptied with ``reset()`` for the module that asks: for module
    fixtures, ``yield from`` it. The lab is never the user's."""
    require_controlplane(what)
    lab = request.getfixturevalue("shared_local")
    _repair_if_broken(lab, request.node.name)
    lab.reset()
    before, lab.timeout = lab.timeout, timeout
    try:
        yield lab
    finally:
        lab.timeout = before


def _repair_if_broken(lab, module: str) -> None:
    """A component of the shared lab that died since the last module (the scheduler once,
    under load, cause not yet known) fails this module loudly, with the logs kept, and is
    restarted first, so one crash fails one module instead of every module after it."""
    from gpu_lab.errors import LocalClusterError

    try:
        lab.cluster.check_ready(agents=False)
    except LocalClusterError as err:
        kept = keep_logs(lab.cluster.logs_dir, f"broken-before-{module}")
        lab.cluster.up(progress=None, agents=False)
        pytest.fail(f"the shared lab was broken before {module}: {err}; restarted for the modules "
                    f"after this one; its logs: {kept or 'not kept (set GPU_LAB_ARTIFACTS)'}")


def keep_logs(src: Path, label: str, limit: int = 16 * 2**20) -> Path | None:
    """The lab's component logs (their last ``limit`` bytes each) copied to
    $GPU_LAB_ARTIFACTS/lab-logs-<worker>-<label>, where CI keeps them; None without it."""
    root = os.environ.get("GPU_LAB_ARTIFACTS")
    if not root:
        return None
    dest = Path(root) / f"lab-logs-{os.environ.get('PYTEST_XDIST_WORKER', 'main')}-{label}"
    dest.mkdir(parents=True, exist_ok=True)
    for log in sorted(src.glob("*")) if src.is_dir() else []:
        if log.is_file():
            with open(log, "rb") as f:
                f.seek(max(0, log.stat().st_size - limit))
                (dest / log.name).write_bytes(f.read())
    return dest


def require_kind(what: str = "the kind tests") -> None:
    """A Docker engine and the images of ``gpu-lab kind build``, by the same rule."""
    from gpu_lab.backends.kind import build as kind_build
    from gpu_lab.errors import GpuLabError

    try:
        kind_build.require_docker()
    except (GpuLabError, OSError) as err:
        _missing(str(err), what)
    missing = kind_build.images_ready()
    if missing or kind_build.tool_path("kind") is None or kind_build.tool_path("kubectl") is None:
        _missing(f"kind images or tools not built ({', '.join(missing) or 'kind, kubectl'}): "
                 "run `gpu-lab kind build`", what)


def refused_alike(text: str, local) -> None:
    """The simulator refuses the manifest ``text`` in the words the real API server refuses it."""
    import yaml

    from gpu_lab.kube import ApiError
    from gpu_lab.model.documents import load_documents
    from gpu_lab.model.scenario import parse_scenario

    with pytest.raises(gpu_lab.GpuLabError) as ours:
        parse_scenario(load_documents(text))
    with pytest.raises(ApiError) as theirs:
        local.client.create(yaml.safe_load(text), namespace="default")
    assert str(ours.value) == str(theirs.value)


#: workers of the session's kind cluster: as many nodes as the largest kind scenario of the
#: suite has (the kind cluster module's four GPU workers); every module reshapes it to its
#: own scenario (``KindCluster.up``: the workers join again under the scenario's node names)
KIND_WORKERS = 4
KIND_NAME = "gpu-lab"  # the name lesson 01 connects to on kind (the default)


def kind_workers() -> list[dict]:
    """The session cluster's first shape: KIND_WORKERS small GPU nodes."""
    return [{"apiVersion": "gpulab.dev/v1alpha1", "kind": "NodePool", "metadata": {"name": "worker"},
             "spec": {"count": KIND_WORKERS, "cpu": "2", "memory": "8Gi", "gpu": {"model": "L4", "count": 1}}}]


def run_lesson_on(lesson, backend: str, home, monkeypatch, cleanup) -> None:
    """Change the lesson's one BACKEND line to ``backend``, run every cell in a private
    gpu-lab home (the kernel inherits it), clean up, and fail on any cell's error: the
    lesson's promise that the same cells run unchanged on another backend."""
    import nbformat
    from nbclient import NotebookClient

    from gpu_lab.edition import kernel_config

    nb = nbformat.read(lesson, as_version=4)
    first = [c for c in nb.cells if c.cell_type == "code" and 'BACKEND = "sim"' in c.source]
    assert len(first) == 1, f"{lesson.name} must have exactly one BACKEND line to change"
    first[0].source = first[0].source.replace('BACKEND = "sim"', f'BACKEND = "{backend}"')
    monkeypatch.setenv("GPU_LAB_HOME", str(home))
    try:
        NotebookClient(nb, timeout=900, kernel_name="python3", config=kernel_config(),
                       resources={"metadata": {"path": str(lesson.parent)}}).execute()
    finally:
        cleanup()
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert not errors
