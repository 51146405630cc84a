"""``Session.kubectl`` on the real backends (local, kind, kubeconfig): the real kubectl
v1.37 the lab's build made (``gpu-lab controlplane build`` puts it in the binary cache beside
the control plane; ``PATH`` is the fallback), run read-only against the lab's kubeconfig and,
where the backend has one, its namespace."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from ...errors import GpuLabError
from ..local.build import DEFAULT_VERSION, output_dirs
from .command import check_read_only, split
from .output import KubectlOutput

TIMEOUT_S = 60.0
BUILD_HINT = "gpu-lab controlplane build --components kubectl"
NAMESPACE_FLAGS = ("-n", "--namespace", "-A", "--all-namespaces")


@dataclass(frozen=True)
class Target:
    kubeconfig: Path
    context: str | None = None
    namespace: str | None = None  # None: the kubeconfig context's (default)


def find_kubectl() -> Path:
    """The cached kubectl of the lab's Kubernetes version, else kubectl on PATH."""
    cached = output_dirs(DEFAULT_VERSION)["kubectl"] / "kubectl"
    if cached.is_file():
        return cached
    on_path = shutil.which("kubectl")
    if on_path:
        return Path(on_path)
    raise GpuLabError(f"kubectl {DEFAULT_VERSION} not found (not in {cached.parent}, not on PATH): "
                      f"run `{BUILD_HINT}`")


def argv_for(command: str, target: Target, kubectl: Path) -> list[str]:
    args = check_read_only(split(command))
    argv = [str(kubectl), "--kubeconfig", str(target.kubeconfig)]
    if target.context:
        argv += ["--context", target.context]
    if target.namespace and not any(a.split("=", 1)[0] in NAMESPACE_FLAGS for a in args):
        argv += ["--namespace", target.namespace]
    return [*argv, *args]


def run_kubectl(command: str, target: Target) -> KubectlOutput:
    argv = argv_for(command, target, find_kubectl())
    try:
        res = subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S,
                             stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise GpuLabError(f"kubectl {command}: no answer in {TIMEOUT_S:g} s") from None
    return KubectlOutput(command, (res.stdout + res.stderr).rstrip("\n"), res.returncode)
