"""Helpers shared by the delivery tests (Binder, the real browser, the static edition).

They need tools beyond the package (repo2docker, Chromium, Playwright). Locally a missing
tool skips the test with the command that installs it; in CI (``CI=true``) it fails, so a
CI machine without the tool cannot pass by skipping.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LESSONS = sorted((REPO / "lessons").glob("[0-9][0-9]_*.ipynb"))


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("1", "true", "yes")


def need(ok: bool, what: str, fix: str) -> None:
    """Skip locally, fail loudly in CI, when a tool the test needs is missing."""
    if ok:
        return
    message = f"{what} is missing: {fix}"
    if in_ci():
        pytest.fail(f"CI=true and {message}", pytrace=False)
    pytest.skip(message)


def venv_tool(name: str) -> str | None:
    """A console script of this environment, else one on PATH."""
    here = Path(sys.executable).parent / name
    return str(here) if here.is_file() else shutil.which(name)


def artifacts_dir() -> Path:
    """Where screenshots and reports go: $GPU_LAB_ARTIFACTS, else a temporary folder."""
    root = os.environ.get("GPU_LAB_ARTIFACTS")
    path = Path(root) if root else Path(tempfile.gettempdir()) / "gpu-lab-artifacts"
    path.mkdir(parents=True, exist_ok=True)
    return path
