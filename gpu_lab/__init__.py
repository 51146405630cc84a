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

from .errors import GpuLabError, InvalidObject

if _typing.TYPE_CHECKING:
    from .backends.base import Session
    from .model.scenario import Scenario, load_scenario
    from .sim.explain import Explanation

# Heavier parts (pandas, numpy) load on first use, so small entry points such as the
# device-plugin process start fast.
_LAZY = {
    "Session": ("backends.base", "Session"),
    "Scenario": ("model.scenario", "Scenario"),
    "load_scenario": ("model.scenario", "load_scenario"),
    "Explanation": ("sim.explain", "Explanation"),
}


def __getattr__(name: str) -> _typing.Any:
    if name in _LAZY:
        from importlib import import_module

        module, attr = _LAZY[name]
        value = getattr(import_module(f".{module}", __name__), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'gpu_lab' has no attribute {name!r}")

__version__ = "0.1.0"
BACKENDS = ("sim", "local", "kind", "kubeconfig")

__all__ = [
    "BACKENDS",
    "Explanation",
    "GpuLabError",
    "InvalidObject",
    "Scenario",
    "Session",
    "__version__",
    "connect",
    "load_scenario",
]


def connect(backend: str = "sim", *, seed: int | None = 0, deterministic: bool = False,
            record: bool = True, **options: _typing.Any) -> Session:
    """Open a session on a backend.

    ``sim`` (the default) is the embedded kube-scheduler model: instant, no
    cluster needed. ``seed`` fixes the random tie-break among equally scored
    nodes (as the real scheduler breaks ties at random); ``deterministic=True``
    picks the lowest node name instead. ``record=False`` keeps no per-pod
    explanation data (for large what-if studies).

    ``local`` starts (or reconnects to) a real control plane built from source
    (``gpu-lab controlplane build``) with simulated GPU nodes; ``options`` go to it
    (``name``, ``root``, ``timeout``). ``kubeconfig`` works on an existing cluster
    (``kubeconfig``, ``context``, ``namespace``): read-only for nodes, workloads only in
    a namespace gpu-lab creates.
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
        raise GpuLabError('backend "kind": create the cluster with `gpu-lab up --backend kind --scenario FILE`, '
                          'then connect("kubeconfig", kubeconfig=<its kubeconfig>)')
    raise GpuLabError(f'unknown backend "{backend}" (choose from {", ".join(BACKENDS)})')
