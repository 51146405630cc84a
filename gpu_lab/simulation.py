"""``gpu_lab.simulate``: run a scenario on the simulated clock and report what happened.

The scenario's objects are created at their ``gpulab.dev/submit-at`` times, pods
run for their ``gpulab.dev/duration``, controllers replace and retry, and the clock
runs until everything has finished or ``until`` (default 24 h): ``sim.outcome.Simulation``
says what happened. It opens a session, so it sits above the backends.
"""

from __future__ import annotations

from typing import Any

from .backends.sim import SimSession
from .connection import BACKENDS, connect
from .errors import NotSupported
from .sim.outcome import DEFAULT_UNTIL, Simulation, until_seconds


def simulate(scenario: Any, *, until: Any = DEFAULT_UNTIL, backend: str = "sim", seed: int | None = 0) -> Simulation:
    """Run ``scenario`` (YAML text, a path, dicts) on a fresh session's clock until ``until``."""
    seconds = until_seconds(until)
    if backend in BACKENDS and backend != "sim":  # before connecting: nothing is started for nothing
        raise NotSupported(f'simulate: not on the "{backend}" backend: it has no simulated clock '
                           "(use the sim backend)")
    lab = connect(backend, seed=seed, record=False)  # the session ends here: nobody asks explain
    assert isinstance(lab, SimSession)  # the one backend with a simulated clock (refused above)
    try:
        lab.apply(scenario)
        return lab._run_for(seconds)
    finally:
        lab.close()
