"""What every backend serves: the same calls, the same tables, the same JSON.

A lesson written against ``Session`` runs unchanged on the embedded simulator
and on a real control plane; only ``connect(backend)`` differs.
"""

from __future__ import annotations

import abc
from pathlib import Path
from typing import Any

import pandas as pd

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
    def pods(self) -> pd.DataFrame:
        """One row per pod: namespace, name, node, phase, message, requests, devices."""

    @abc.abstractmethod
    def nodes(self) -> pd.DataFrame:
        """One row per node: capacity, allocatable and requested resources, GPU labels."""

    @abc.abstractmethod
    def explain(self, pod: str) -> Any:
        """Why the pod is where it is (or pending): per-node filter and score tables."""

    @abc.abstractmethod
    def reset(self) -> None:
        """Forget every object; start from an empty cluster."""

    @abc.abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """The ``gpu-lab run --json`` document."""
