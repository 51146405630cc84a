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

from .errors import GpuLabError, InvalidObject, NotSupported
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


def __getattr__(name: str) -> _typing.Any:
    if name in _NAMESPACES:
        from importlib import import_module

        value = import_module(f".{_NAMESPACES[name]}", __name__)
        globals()[name] = value
        return value
    if name in _LAZY:
        from importlib import import_module

        module, attr = _LAZY[name]
        value = getattr(import_module(f".{module}", __name__), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'gpu_lab' has no attribute {name!r}")

__version__ = _VERSION
BACKENDS = ("sim", "local", "kind", "kubeconfig")

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
    "backend_available",
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


def backend_available(backend: str) -> tuple[bool, str]:
    """Whether ``connect(backend)`` can work on this machine, and if not, what to do.

    ``sim`` always can; ``local`` needs the control-plane binaries (``gpu-lab
    controlplane build``). Lessons use it to run a real-scheduler cell only where
    the control plane is built.
    """
    if backend == "sim":
        return True, "the embedded scheduler needs nothing"
    if backend == "local":
        from .backends.local.build import find_binaries

        if find_binaries() is None:
            return False, "the control plane is not built: run `gpu-lab controlplane build` (needs Go)"
        return True, "the control-plane binaries are built"
    if backend == "kind":
        from .backends.kind import build as kind_build

        try:
            missing = kind_build.images_ready()
        except (OSError, GpuLabError):
            missing = ["a Docker engine"]
        if missing:
            return False, f"needs {', '.join(missing)}: run `gpu-lab kind build` (Docker, Go, debootstrap)"
        return True, "the kind images are built"
    if backend == "kubeconfig":
        return False, f'backend "{backend}": needs a cluster you create or own (see the README)'
    return False, f'unknown backend "{backend}" (choose from {", ".join(BACKENDS)})'



def connect(backend: str = "sim", *, seed: int | None = 0, deterministic: bool = False,
            record: bool | str = True, **options: _typing.Any) -> Session:
    """Open a session on a backend.

    ``sim`` (the default) is the embedded kube-scheduler model: instant, no
    cluster needed. ``seed`` fixes the random tie-break among equally scored
    nodes (as the real scheduler breaks ties at random); ``deterministic=True``
    picks the lowest node name instead. ``record`` is what ``explain`` keeps: every
    cycle's tables (True; past ten million pod-node cells the sim keeps no more and
    replays the session's calls for the pod asked about), none (False, for large
    what-if studies), or one pod's (``"namespace/name"``).

    ``local`` starts (or reconnects to) a real control plane built from source
    (``gpu-lab controlplane build``) with simulated GPU nodes; ``options`` go to it
    (``name``, ``root``, ``timeout``). ``kubeconfig`` works on an existing cluster
    (``kubeconfig``, ``context``, ``namespace``): read-only for nodes, workloads only in
    a namespace gpu-lab creates. ``kind`` runs on a kind cluster gpu-lab makes from the
    scenario's nodes (``name``, ``namespace``; images from ``gpu-lab kind build``): real
    kubelets, the fake NVIDIA device plugin registered with each.
    """
    if backend == "sim":
        from .backends.sim import SimSession

        return SimSession(seed=seed, deterministic=deterministic, record=record)
    if backend == "local":
        from .backends.local.session import LocalSession

        return LocalSession(**options)
    if backend == "kubeconfig":
        from .backends.kubeconfig.session import KubeconfigSession

        return KubeconfigSession(**options)
    if backend == "kind":
        from .backends.kind.session import KindSession

        return KindSession(**options)
    raise GpuLabError(f'unknown backend "{backend}" (choose from {", ".join(BACKENDS)})')
