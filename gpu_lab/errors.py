"""Every exception gpu-lab raises that a user can meet, in one place.

All of them are :class:`GpuLabError` (except :class:`LabCheckFailed`, an
``AssertionError`` so a lab notebook's check cell fails like a test), and every message
is a single line that names the object and the field, in the API server's own words where
Kubernetes has them, so the CLI can print ``error: <message>`` and notebooks show
something a learner can act on.

The general ones are defined here. Those that belong to one part of gpu-lab (a GPU
layout, a kind cluster, a kubeconfig...) are defined beside the code that raises them and
served from here too, loaded on first use: ``from gpu_lab.errors import MigError``.
"""

from __future__ import annotations

from typing import Any


class GpuLabError(Exception):
    """Bad input or an impossible request; ``str(err)`` is one line."""

    def __init__(self, message: str):
        # One line for the CLI, but spacing inside the line stays as Kubernetes prints it.
        super().__init__(" ".join(str(message).splitlines()))


class InvalidObject(GpuLabError):
    """A manifest the API server would reject (``Pod "x" is invalid: ...``)."""

    def __init__(self, kind: str, name: str, errors: list[str]):
        self.kind, self.name, self.errors = kind, name, list(errors)
        # The API server's aggregate: one error bare, several in brackets.
        detail = self.errors[0] if len(self.errors) == 1 else "[" + ", ".join(self.errors) + "]"
        super().__init__(f'{kind} "{name}" is invalid: {detail}')


class NotSupported(GpuLabError):
    """A ``Session`` call this backend cannot serve; the message names the backend and why."""


class LocalClusterError(GpuLabError):
    """The local control plane could not be started, reached or stopped (one line)."""


class ApiError(GpuLabError):
    """The API server refused a request; ``str()`` is its message, ``code``/``reason`` its
    HTTP status and ``Status.reason`` (``NotFound``, ``AlreadyExists``, ``Conflict``...)."""

    def __init__(self, code: int, reason: str, message: str, status: dict | None = None):
        self.code, self.reason, self.status = code, reason, status or {}
        super().__init__(message or f"HTTP {code} {reason}")


class NotFound(ApiError):
    """HTTP 404: no such object (``pods "x" not found``)."""


class AlreadyExists(ApiError):
    """HTTP 409 ``AlreadyExists``: an object of that name exists."""


class Conflict(ApiError):
    """HTTP 409: the object changed meanwhile (an update on a stale resourceVersion)."""


class Unreachable(GpuLabError):
    """No answer from the API server (connection refused, TLS failure, timeout)."""


#: exceptions defined beside the code that raises them: name -> module (under gpu_lab)
_ELSEWHERE = {
    "QuantityError": "model.quantity",
    "InvalidNodePool": "model.nodepool",
    "Forbidden": "model.parse",
    "KubeconfigError": "kube.kubeconfig",
    "ExecCredentialError": "kube.execcredential",
    "BuildError": "backends.local.build",
    "GoNotFoundError": "backends.local.build",
    "KueueNotBuilt": "backends.local.kueuebuild",
    "NotPrepared": "dradriver.prepare",
    "KindError": "backends.kind.config",
    "NodeChangeRefused": "backends.kubeconfig.session",
    "NamespaceRefused": "backends.kubeconfig.session",
    "NodeAgentError": "kubelet.node",
    "DeviceAllocationError": "kubelet.devicemanager",
    "CelCompileError": "sim.dra.cel",
    "MigError": "gpus.mig",
    "MigNotSupported": "gpus.mig",
    "UnknownMigProfile": "gpus.mig",
    "ImpossibleLayout": "gpus.mig",
    "MigPartedError": "gpus.migparted",
    "PlanError": "gpus.planner",
    "DeviceListTooLarge": "gpus.labels",
    "NoDriver": "probe",
    "EditionError": "edition",
    "WorkshopInputError": "workshop",
    "WorkshopClusterError": "workshop",
    "BankError": "curriculum.drill.bank",
    "DrillError": "curriculum.drill.state",
    "LabCheckFailed": "curriculum.checks.feedback",
}


def __getattr__(name: str) -> Any:
    if name in _ELSEWHERE:
        from importlib import import_module

        value = getattr(import_module(f"gpu_lab.{_ELSEWHERE[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'gpu_lab.errors' has no attribute {name!r}")


__all__ = [
    "AlreadyExists",
    "ApiError",
    "Conflict",
    "GpuLabError",
    "InvalidObject",
    "LocalClusterError",
    "NotFound",
    "NotSupported",
    "Unreachable",
    *sorted(_ELSEWHERE),
]
