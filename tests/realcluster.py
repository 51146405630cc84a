"""The one rule for tests that run the real control plane: in CI they fail when the
binaries are missing (never a silent skip); elsewhere they skip with the reason."""

from __future__ import annotations

import os
import sys

import pytest

from gpu_lab.backends.local.build import DEFAULT_VERSION, find_binaries


def require_controlplane(what: str = "the real-cluster tests") -> dict:
    found = find_binaries(DEFAULT_VERSION)
    if found is None:
        msg = (f"control plane binaries for Kubernetes {DEFAULT_VERSION} not found "
               "(run `gpu-lab controlplane build`, see controlplane/README.md)")
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(f"{msg}; CI=true, so {what} must run")
        pytest.skip(msg)
    if not sys.platform.startswith("linux"):
        pytest.skip(f"{what} use /proc (Linux)")
    return found
