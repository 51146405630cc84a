"""Fixtures of the delivery tests (helpers live in delivery_support.py; the ``delivery`` marker
is registered in pyproject.toml, so that ``-m "not delivery"`` works on any selection)."""

from __future__ import annotations

from pathlib import Path

import pytest
from delivery_support import artifacts_dir


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where screenshots and reports go: $GPU_LAB_ARTIFACTS, else a temporary folder."""
    return artifacts_dir()
