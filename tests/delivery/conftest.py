"""Marker and fixtures of the delivery tests (helpers live in delivery_support.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from delivery_support import artifacts_dir


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "delivery: Binder, real-browser and static-edition checks (minutes; need "
        "repo2docker, Chromium, Playwright; fail in CI when those are missing)")


@pytest.fixture(scope="session")
def artifacts() -> Path:
    """Where screenshots and reports go: $GPU_LAB_ARTIFACTS, else a temporary folder."""
    return artifacts_dir()
