"""A lab's ticket cluster: a fresh session, and what the lab remembered of the incident on it."""

from __future__ import annotations

import weakref
from typing import Any, Generic, TypeVar

from ...connection import connect
from ...errors import LabCheckFailed

T = TypeVar("T")


def fresh_session(backend: str, options: dict[str, Any]):
    """``gpu_lab.connect(backend, **options)`` (``deterministic=True`` unless given), emptied
    where the backend keeps state between sessions."""
    options.setdefault("deterministic", True)
    lab = connect(backend, **options)
    if backend != "sim":
        lab.reset()
    return lab


class Incidents(Generic[T]):
    """The facts of each ticket session, kept beside it (weakly: gone with the session)."""

    def __init__(self, lab: str, builder: str):
        self._store: weakref.WeakKeyDictionary[Any, T] = weakref.WeakKeyDictionary()
        self._refusal = (f"Lab {lab}: this session is not the ticket's cluster: build it with "
                         f"lab = gpu_lab.labs.lab{lab}.{builder}(BACKEND) and pass that lab")

    def remember(self, lab: Any, incident: T) -> None:
        self._store[lab] = incident

    def of(self, lab: Any) -> T:
        try:
            return self._store[lab]
        except (KeyError, TypeError):
            raise LabCheckFailed(self._refusal) from None
