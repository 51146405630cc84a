"""The exception types gpu-lab raises: bad input, and calls a backend cannot serve.

Every message is a single line that names the object and the field, in the
API server's own words where Kubernetes has them, so the CLI can print
``error: <message>`` and notebooks show something a learner can act on.
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
