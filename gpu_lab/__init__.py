"""gpu-lab: learn Kubernetes GPU scheduling by doing it.

The public API is what ``__all__`` lists; everything else is private.

>>> import gpu_lab
>>> lab = gpu_lab.connect("sim", seed=0)
>>> lab.apply("scenario.yaml")          # doctest: +SKIP
>>> lab.schedule()                      # doctest: +SKIP
>>> lab.explain("default/train-0")      # doctest: +SKIP
"""

from __future__ import annotations

import typing as _typing

from .connection import BACKENDS, backend_available, connect
from .errors import GpuLabError, InvalidObject, NotSupported
from .lazy import lazy_getattr as _lazy_getattr
from .names import VERSION as _VERSION

if _typing.TYPE_CHECKING:
    from .backends.base import Session
    from .backends.description import NodeDescription
    from .model.scenario import Scenario, load_scenario
    from .sim.explain import Explanation
    from .sim.outcome import Simulation
    from .simulation import simulate

# Heavier parts (pandas, numpy) load on first use, so small entry points such as the
# device-plugin process start fast.
_LAZY = {
    "Session": ("backends.base", "Session"),
    "NodeDescription": ("backends.description", "NodeDescription"),
    "visible_devices_env": ("deviceplugin.deviceids", "visible_devices_env"),
    "allocate_response": ("deviceplugin.response", "plugin_answer"),
    "cdi_spec": ("deviceplugin.cdispec", "cdi_spec"),
    "cdi_edits": ("deviceplugin.cdispec", "cdi_edits"),
    "Scenario": ("model.scenario", "Scenario"),
    "load_scenario": ("model.scenario", "load_scenario"),
    "Explanation": ("sim.explain", "Explanation"),
    "simulate": ("simulation", "simulate"),
    "Simulation": ("sim.outcome", "Simulation"),
}


# Public namespaces, each with its own ``__all__``: GPU facts (catalog, MIG, sharing
# model), charts, lab checks, the interview drill and GPU utilisation (DCGM's names).
# ``errors`` (every exception a user can meet) is one too; it is imported above.
_NAMESPACES = {
    "gpus": "gpus",
    "charts": "viz",
    "labs": "curriculum.checks",
    "drill": "curriculum.drill",
    "metrics": "metrics",
}


__getattr__ = _lazy_getattr(__name__, {
    **{name: (module, None) for name, module in _NAMESPACES.items()}, **_LAZY})

__version__ = _VERSION

__all__ = [
    "BACKENDS",
    "Explanation",
    "GpuLabError",
    "InvalidObject",
    "NodeDescription",
    "NotSupported",
    "Scenario",
    "Session",
    "Simulation",
    "__version__",
    "allocate_response",
    "backend_available",
    "cdi_edits",
    "cdi_spec",
    "charts",
    "connect",
    "drill",
    "errors",
    "gpus",
    "labs",
    "load_scenario",
    "metrics",
    "simulate",
    "visible_devices_env",
]
