"""Opening a session: ``connect(backend)`` and whether a backend can run here.

Each backend's session module is imported when that backend is chosen, so a notebook on
the sim never loads the Kubernetes client, gRPC or Docker helpers of the others.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import GpuLabError

if TYPE_CHECKING:
    from .backends.base import Session

BACKENDS = ("sim", "local", "kind", "kubeconfig")


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
            record: bool | str = True, **options: Any) -> Session:
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
