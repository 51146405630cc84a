"""Lesson 01 run unchanged on kind: the plugin's outage, the 5-minute grace period (real
minutes here) and the recovery on real kubelets, with every assertion of the lesson. On the
session's shared kind cluster (tests/conftest.py), like the other kind modules."""

from __future__ import annotations

from pathlib import Path

import pytest
from realcluster import run_lesson_on

pytestmark = [pytest.mark.kind, pytest.mark.xdist_group("kind")]

LESSONS = Path(__file__).parents[3] / "lessons"


@pytest.mark.parametrize("lesson", ["01_device_plugin.ipynb"])
def test_lesson_runs_unchanged_on_kind(lesson, shared_kind, monkeypatch):
    """The lesson's `connect("kind")` finds the session's kind cluster (its name, in its home)
    and reshapes it to the lesson's nodes."""
    shared_kind.reset()
    run_lesson_on(LESSONS / lesson, "kind", shared_kind.cluster.dir.parents[1], monkeypatch,
                  shared_kind.reset)
