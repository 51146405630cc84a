"""What every backend serves: the same calls, the same tables, the same JSON.

A lesson written against ``Session`` runs unchanged on the embedded simulator
and on a real control plane; only ``connect(backend)`` differs.
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import Any

import pandas as pd

from .tables import NodeRow, PodRow, document, nodes_frame, pods_frame

Source = str | Path | dict | list


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
        return pods_frame(self._pod_rows())

    def nodes(self) -> pd.DataFrame:
        """One row per node: capacity, allocatable and requested resources, GPU labels."""
        return nodes_frame(self._node_rows())

    @abc.abstractmethod
    def explain(self, pod: str) -> Any:
        """Why the pod is where it is (or pending): per-node filter and score tables."""

    @abc.abstractmethod
    def reset(self) -> None:
        """Forget every object; start from an empty cluster."""

    def to_dict(self) -> dict[str, Any]:
        """The ``gpu-lab run --json`` document."""
        return document(self.backend, self._pod_rows(), self._node_rows())
