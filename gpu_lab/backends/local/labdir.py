"""A lab's directory: where everything it owns lives, and its state file.

::

    $GPU_LAB_HOME/clusters/<name>/         (default ~/.local/share/gpu-lab/clusters/<name>/)
        kubeconfig        admin (O=system:masters); ~/.kube/config is never touched
        state.json        ports, binaries, process start times
        pki/              CA, certificates, service-account keys (0600)
        config/           component kubeconfigs, kube-scheduler.yaml
        etcd/             etcd's data (survives down/up; ``down(purge=True)`` deletes the lab)
        logs/<component>.log
        pids/<component>.pid

A pid file alone proves nothing (the pid may be reused): a component counts as running
only when its process also carries the lab directory in its argv and, when state.json
recorded it, the same kernel start time (see :mod:`.processes`).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

from gpu_lab.errors import LocalClusterError

from .build import DEFAULT_VERSION
from .certs import Pki
from .components import APISERVER, HOST, canonical
from .labstate import STATE_VERSION, LabState

_NAME = re.compile(r"^[a-z0-9]([a-z0-9._-]{0,61}[a-z0-9])?$")


def default_home() -> Path:
    """``$GPU_LAB_HOME``, else ``$XDG_DATA_HOME/gpu-lab``, else ``~/.local/share/gpu-lab``."""
    env = os.environ.get("GPU_LAB_HOME")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_DATA_HOME")
    return (Path(xdg).expanduser() if xdg else Path.home() / ".local" / "share") / "gpu-lab"


class LabDir:
    """A named lab's directory and state; cheap to construct (nothing is created).

    ``root`` replaces the gpu-lab home (``$GPU_LAB_HOME``); the lab lives in
    ``<root>/clusters/<name>/``.
    """

    def __init__(
        self,
        name: str = "default",
        root: Path | str | None = None,
        version: str = DEFAULT_VERSION,
        binaries: dict[str, Path] | None = None,
    ):
        if not _NAME.match(name):
            raise LocalClusterError(
                f"invalid lab name {name!r}: use lower-case letters, digits, '-', '.', '_'"
            )
        self.name = name
        self.version = version
        home = Path(root).expanduser() if root is not None else default_home()
        self.dir = (home / "clusters" / name).absolute()
        self.state = LabState(self, binaries)

    # ------------------------------------------------------------------ paths

    @property
    def pki(self) -> Pki:
        return Pki(self.dir / "pki")

    @property
    def config_dir(self) -> Path:
        return self.dir / "config"

    @property
    def logs_dir(self) -> Path:
        return self.dir / "logs"

    @property
    def pids_dir(self) -> Path:
        return self.dir / "pids"

    @property
    def etcd_dir(self) -> Path:
        return self.dir / "etcd"

    @property
    def state_file(self) -> Path:
        return self.dir / "state.json"

    def kubeconfig(self) -> Path:
        """The admin kubeconfig of this lab (``<lab>/kubeconfig``)."""
        return self.dir / "kubeconfig"

    def log_path(self, component: str) -> Path:
        return self.logs_dir / f"{canonical(component)}.log"

    def pid_path(self, component: str) -> Path:
        return self.pids_dir / f"{canonical(component)}.pid"

    @property
    def _marker(self) -> str:
        """A string every component's argv contains: the lab directory."""
        return str(self.dir) + os.sep

    @property
    def _name_flag(self) -> str:
        """What a command line adds to address this lab (nothing for the default one)."""
        return "" if self.name == "default" else f" --name {self.name}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, dir={str(self.dir)!r})"

    def exists(self) -> bool:
        """Whether this lab was ever started (``up``) and not deleted (``down --purge``)."""
        return self.state_file.exists()

    # ------------------------------------------------------------------ state

    def ports(self) -> dict[str, int]:
        return dict(self.state.load()["ports"])

    def server(self) -> str | None:
        port = self.state.load()["ports"].get(APISERVER)
        return f"https://{HOST}:{port}" if port else None

    # ------------------------------------------------------------------ logs

    def logs(self, component: str, tail: int | None = 50) -> str:
        """The last ``tail`` lines of a component's log (all of it when ``tail`` is None)."""
        path = self.log_path(component)
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return ""
        lines = data.decode(errors="replace").splitlines()
        if tail is not None:
            lines = lines[-tail:] if tail > 0 else []
        return "\n".join(lines)

    def _log_tail(self, component: str, n: int = 5) -> str:
        lines = [ln for ln in self.logs(component, tail=200).splitlines() if ln.strip()]
        lines = [ln for ln in lines if not ln.startswith("=== gpu-lab")]
        return " | ".join(ln.strip() for ln in lines[-n:])

    def _purge(self) -> None:
        # refuse to delete anything that does not look like a lab directory
        if not (self.dir / ".lock").exists() or self.dir.parent.name != "clusters":
            raise LocalClusterError(f"refusing to delete {self.dir}: not a gpu-lab lab directory")
        shutil.rmtree(self.dir)


__all__ = ["STATE_VERSION", "LabDir", "default_home"]
