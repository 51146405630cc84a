"""A lab's state file and the records it keeps: ports, binaries, which process is whose.

``state.json`` is written whole and atomically; ``lock()`` serialises the commands that
change a lab (``up``, ``down``, ``restart``) across processes. A component counts as
running only when its pid file, its recorded start time and its argv (which carries the
lab directory) all agree (see :mod:`gpu_lab.processes`): a pid alone may be reused.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpu_lab.errors import LocalClusterError

from ... import processes as procs
from .build import find_binaries
from .components import COMPONENTS

if TYPE_CHECKING:
    from .labdir import LabDir

STATE_VERSION = 1


def _quiet(_msg: str) -> None:
    return None


class LabState:
    """``<lab>/state.json``, its lock, and the process records read against it."""

    def __init__(self, lab: LabDir, binaries: dict[str, Path] | None = None):
        self._lab = lab
        self._binaries = {k: Path(v) for k, v in (binaries or {}).items()}

    def load(self) -> dict[str, Any]:
        try:
            state = json.loads(self._lab.state_file.read_text())
        except (OSError, ValueError):
            state = {}
        if not isinstance(state, dict):
            state = {}
        state.setdefault("ports", {})
        state.setdefault("processes", {})
        state.setdefault("binaries", {})
        return state

    def save(self, state: dict[str, Any]) -> None:
        lab = self._lab
        state["name"] = lab.name
        state["version"] = lab.version
        state["state_version"] = STATE_VERSION
        lab.dir.mkdir(parents=True, exist_ok=True)
        tmp = lab.state_file.with_name(f".state.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, lab.state_file)

    @contextlib.contextmanager
    def lock(self, say: Callable[[str], object] = _quiet) -> Iterator[None]:
        """One ``up``/``down``/``restart`` at a time per lab (across processes)."""
        lab = self._lab
        lab.dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        with open(lab.dir / ".lock", "a") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                say(f"waiting for another gpu-lab command on lab {lab.name!r} to finish")
                fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def resolve_binaries(self, state: dict) -> dict[str, Path]:
        """Binaries to run: those given to the lab, else what the build cache (or PATH) has
        for its version; recorded in ``state``."""
        version = self._lab.version
        if not all(c in self._binaries for c in COMPONENTS):
            found = find_binaries(version)
            if found is None:
                raise LocalClusterError(
                    f"control plane binaries for Kubernetes {version} not found: "
                    "run `gpu-lab controlplane build` (needs Go), see controlplane/README.md"
                )
            self._binaries = {**found, **self._binaries}
        state["binaries"] = {c: str(p) for c, p in self._binaries.items()}
        return dict(self._binaries)

    def record(self, state: dict, component: str) -> tuple[int | None, int | None]:
        """(pid, start time) from the pid file; the start time only if ``state`` agrees."""
        try:
            text = self._lab.pid_path(component).read_text().strip()
            pid = int(text) if text else None
        except (OSError, ValueError):
            pid = None
        entry = state["processes"].get(component) or {}
        started = entry.get("start_time") if entry.get("pid") == pid else None
        return pid, started

    def is_running(self, state: dict, component: str) -> bool:
        pid, started = self.record(state, component)
        return procs.is_ours(pid, component, self._lab._marker, started)


__all__ = ["STATE_VERSION", "LabState"]
