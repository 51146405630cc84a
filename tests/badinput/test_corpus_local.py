"""The bad-input corpus on the real control plane: the same one-line answer as on the sim.

The local backend validates with the simulator's code before anything reaches the API
server, so a bad scenario must be refused there with the very same message, leave nothing
behind, and a good one (a UTF-16 file, numeric label keys) must apply. The corpus is
defined in test_corpus.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from realcluster import shared_lab
from test_corpus import CASES, ROOT, _expected

import gpu_lab


@pytest.fixture(scope="module")
def local(request):
    yield from shared_lab(request, "the real-cluster tests")


@pytest.mark.controlplane
@pytest.mark.parametrize("case", CASES, ids=[c.stem for c in CASES])
def test_local_answers_like_the_sim(case: Path, local):
    code, message = _expected(case)
    cwd = os.getcwd()
    os.chdir(ROOT)  # the expected messages name the file relative to the repository
    try:
        local.reset()
        if code == 0:
            local.apply(str(case.relative_to(ROOT)))
            local.schedule()
            return
        with pytest.raises(gpu_lab.GpuLabError) as info:
            local.apply(str(case.relative_to(ROOT)))
    finally:
        os.chdir(cwd)
    assert str(info.value) == message.removeprefix("error: ")
    # nothing half-applied: the lab is still empty
    assert local.pods().empty and local.nodes().empty
