"""Every exception gpu-lab raises that a user can meet, in one place.

All of them are :class:`GpuLabError` (except :class:`LabCheckFailed`, an
``AssertionError`` so a lab notebook's check cell fails like a test), and every message
is a single line that names the object and the field, in the API server's own words where
Kubernetes has them, so the CLI can print ``error: <message>`` and notebooks show
something a learner can act on.

Every one is defined here, the bottom layer, whichever part of gpu-lab raises it (a GPU
layout, a kind cluster, a kubeconfig...): each says which, so nothing below has to import
from above to raise or catch one (``from gpu_lab.errors import MigError``).
"""

from __future__ import annotations


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







# raised by gpu_lab.model.quantity
class QuantityError(GpuLabError):
    pass


# raised by gpu_lab.model.nodepool
class InvalidNodePool(InvalidObject):
    """A NodePool with errors; ``errors`` lists them all, in spec field order.

    The API server's aggregate, as for Pods: one error bare
    (``NodePool "x" is invalid: <error>``), several in brackets
    (``NodePool "x" is invalid: [<e1>, <e2>]``).
    """

    def __init__(self, name: str, errors: list[str]):
        self.kind, self.name, self.errors = "NodePool", name, list(errors)
        if len(self.errors) == 1:
            message = f'NodePool "{name}" is invalid: {self.errors[0]}'
        else:
            message = f'NodePool "{name}" is invalid: [' + ", ".join(self.errors) + "]"
        GpuLabError.__init__(self, message)


# raised by gpu_lab.model.parse
class Forbidden(InvalidObject):
    """An admission plugin's refusal, worded ``pods "x" is forbidden: <reason>``."""

    def __init__(self, resource: str, name: str, reason: str):
        GpuLabError.__init__(self, f'{resource} "{name}" is forbidden: {reason}' if name
                             else f"{resource} is forbidden: {reason}")
        self.kind, self.name, self.errors = resource, name, [reason]


# raised by gpu_lab.kube.kubeconfig
class KubeconfigError(GpuLabError):
    """A kubeconfig that cannot be used (one line)."""


# raised by gpu_lab.kube.execcredential
class ExecCredentialError(GpuLabError):
    """An exec credential plugin that cannot be configured, run or understood (one line)."""


# raised by gpu_lab.backends.local.build
class BuildError(GpuLabError):
    """The control plane binaries could not be built (one-line message)."""


# raised by gpu_lab.backends.local.build
class GoNotFoundError(BuildError):
    """No ``go`` on PATH and no usable binaries either."""


# raised by gpu_lab.backends.local.kueuebuild
class KueueNotBuilt(BuildError):
    """No Kueue manager of the wanted version in the cache (one line naming the fix)."""


# raised by gpu_lab.dradriver.prepare
class NotPrepared(GpuLabError):
    """A claim of the pod cannot be prepared yet (the kubelet's message)."""


# raised by gpu_lab.backends.kind.config
class KindError(GpuLabError):
    """The kind backend cannot go on (one line, naming what is missing or wrong)."""


# raised by gpu_lab.backends.kubeconfig.session
class NodeChangeRefused(GpuLabError):
    """A change to a node gpu-lab does not own, without ``allow_node_changes``."""


# raised by gpu_lab.backends.kubeconfig.session
class NamespaceRefused(GpuLabError):
    """An object outside gpu-lab's namespace, or a namespace gpu-lab did not create."""


# raised by gpu_lab.kubelet.node
class NodeAgentError(GpuLabError):
    """The node agent cannot start or do what it was asked (one line)."""


# raised by gpu_lab.kubelet.devicemanager
class DeviceAllocationError(GpuLabError, RuntimeError):
    """The device manager cannot give a container its devices.

    ``str(err)`` is the device manager's message; ``admission_message`` is what
    the kubelet writes on the pod it rejects (reason ``UnexpectedAdmissionError``).
    """

    reason = "UnexpectedAdmissionError"

    @property
    def admission_message(self) -> str:
        return f"Allocate failed due to {self}, which is unexpected"


# raised by gpu_lab.sim.dra.cel
class CelCompileError(GpuLabError):
    """An expression the API server refuses; ``detail`` is its ``field.Invalid`` detail."""

    def __init__(self, detail: str):
        self.detail = detail
        super().__init__(detail)


# raised by gpu_lab.gpus.mig
class MigError(GpuLabError):
    """Base for MIG input errors (unknown GPU/profile, GPU without MIG)."""


# raised by gpu_lab.gpus.mig
class MigNotSupported(MigError):
    """The GPU model has no MIG (T4, L4, A10G, L40S)."""


# raised by gpu_lab.gpus.mig
class UnknownMigProfile(MigError):
    """A profile name the GPU model does not offer."""


# raised by gpu_lab.gpus.mig
class ImpossibleLayout(GpuLabError):
    """Known profiles that cannot share one GPU; ``reason`` says why."""

    def __init__(self, model: str, profiles: tuple[str, ...], reason: str):
        self.model, self.profiles, self.reason = model, profiles, reason
        super().__init__(reason)


# raised by gpu_lab.gpus.migparted
class MigPartedError(GpuLabError):
    """A malformed or invalid mig-parted file, or an unknown config name."""


# raised by gpu_lab.gpus.planner
class PlanError(GpuLabError):
    """Bad services input or a service no GPU of the model can hold."""


# raised by gpu_lab.gpus.labels
class DeviceListTooLarge(GpuLabError):
    """A resource with more devices than a ListAndWatch response can carry."""

    def __init__(self, resource: str, devices: int, replicas: int, size: int, limit: int):
        self.resource, self.devices, self.replicas, self.size = resource, devices, replicas, size
        super().__init__(
            f"{devices} {resource} devices x {replicas} replicas make a ListAndWatch response of "
            f"{size} bytes, which the kubelet refuses (grpc: received message larger than max "
            f"({size} vs. {limit})), so the node would advertise no {resource}")


# raised by gpu_lab.probe
class NoDriver(GpuLabError):
    """No NVML: the package is missing or the driver/library cannot be loaded."""

    def __init__(self, detail: str):
        super().__init__(f"no NVIDIA driver found: {detail}")


# raised by gpu_lab.edition
class EditionError(GpuLabError):
    """A lesson failed to execute or render (one line naming it)."""


# raised by gpu_lab.workshop
class WorkshopInputError(GpuLabError):
    """Bad arguments (exit 2)."""


# raised by gpu_lab.workshop
class WorkshopClusterError(GpuLabError):
    """The cluster refused, or is in a state provisioning cannot continue from (exit 1)."""


# raised by gpu_lab.curriculum.drill.bank
class BankError(GpuLabError):
    """The question bank (or a file given in its place) does not validate."""


# raised by gpu_lab.curriculum.drill.state
class DrillError(BankError):
    """A drill action out of order (scoring a card twice, moving past the end, ...)."""


# raised by gpu_lab.curriculum.checks.feedback
class LabCheckFailed(AssertionError):
    """A lab requirement is not met; the message lists what is missing and why."""


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
    "QuantityError",
    "InvalidNodePool",
    "Forbidden",
    "KubeconfigError",
    "ExecCredentialError",
    "BuildError",
    "GoNotFoundError",
    "KueueNotBuilt",
    "NotPrepared",
    "KindError",
    "NodeChangeRefused",
    "NamespaceRefused",
    "NodeAgentError",
    "DeviceAllocationError",
    "CelCompileError",
    "MigError",
    "MigNotSupported",
    "UnknownMigProfile",
    "ImpossibleLayout",
    "MigPartedError",
    "PlanError",
    "DeviceListTooLarge",
    "NoDriver",
    "EditionError",
    "WorkshopInputError",
    "WorkshopClusterError",
    "BankError",
    "DrillError",
    "LabCheckFailed",
]
