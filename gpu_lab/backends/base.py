"""What every backend serves: the same calls, the same tables, the same JSON.

A lesson written against ``Session`` runs unchanged on the embedded simulator
and on a real control plane; only ``connect(backend)`` differs.
"""

from __future__ import annotations

import abc
import gc
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pandas as pd

from .tables import NodeRow, PodRow, document, nodes_frame, pods_frame

Source = str | Path | dict | list


@contextmanager
def collector_paused() -> Iterator[None]:
    """Keep Python's cyclic garbage collector out of a scheduling run or a table build.

    A scheduling run allocates no reference cycles (tests/sim/test_caches.py checks
    it), so what it frees goes at once by reference counting; anything else is
    only collected a little later. A collector pass in the middle would re-scan the
    long-lived cluster objects (every parsed manifest): on 10,000 pods one full
    pass costs about as much as scheduling 1,000 of them.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()



class Session(abc.ABC):
    backend: str = ""

    @abc.abstractmethod
    def apply(self, src: Source) -> list[str]:
        """Create the objects in a manifest (YAML text, a path, dicts); returns "kind/name" refs."""

    @abc.abstractmethod
    def schedule(self) -> pd.DataFrame:
        """Let the scheduler place every pending pod it can; returns ``pods()``."""

    @abc.abstractmethod
    def _pod_rows(self) -> list[PodRow]:
        """What the backend knows of each pod it shows."""

    @abc.abstractmethod
    def _node_rows(self) -> list[NodeRow]:
        """What the backend knows of each node."""

    def pods(self) -> pd.DataFrame:
        """One row per pod: namespace, name, node, phase, message, requests, devices."""
        with collector_paused():
            return pods_frame(self._pod_rows())

    def nodes(self) -> pd.DataFrame:
        """One row per node: capacity, allocatable and requested resources, GPU labels."""
        with collector_paused():
            return nodes_frame(self._node_rows())

    @abc.abstractmethod
    def explain(self, pod: str) -> Any:
        """Why the pod is where it is (or pending): per-node filter and score tables."""

    @abc.abstractmethod
    def reset(self) -> None:
        """Forget every object; start from an empty cluster."""

    def to_dict(self) -> dict[str, Any]:
        """The ``gpu-lab run --json`` document."""
        with collector_paused():
            return document(self.backend, self._pod_rows(), self._node_rows())
