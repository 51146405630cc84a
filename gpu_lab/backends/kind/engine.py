"""The Docker engine the kind backend runs on, and the opt-in sandbox runtime.

``gpu-lab kind engine`` reports what the kind backend needs (docker client, a running engine,
whether this machine needs the sandbox runtime); ``gpu-lab kind engine --daemon-json PATH``
writes (or updates) dockerd's ``daemon.json`` with the sandbox runtime, only where it is
needed: when this process's capability bounding set lacks CAP_SYS_RESOURCE, the one
capability a ``--privileged`` container cannot get here (see ``runc_shim``). On a normal
Docker host it writes nothing and says so.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from ...errors import KindError

CAP_SYS_RESOURCE = 24  # linux/capability.h
RUNTIME_NAME = "gpu-lab-runc"


def bounding_set(status: str | None = None) -> int | None:
    """CapBnd of this process (``/proc/self/status``), or None where it cannot be read."""
    if status is None:
        try:
            status = Path("/proc/self/status").read_text()
        except OSError:
            return None
    for line in status.splitlines():
        if line.startswith("CapBnd:"):
            return int(line.split()[1], 16)
    return None


def needs_sandbox_runtime(status: str | None = None) -> bool:
    """Whether privileged containers fail here for want of CAP_SYS_RESOURCE."""
    caps = bounding_set(status)
    return caps is not None and not caps & (1 << CAP_SYS_RESOURCE)


def shim_source() -> Path:
    return Path(__file__).with_name("runc_shim.py")


def install_shim(dest_dir: Path) -> Path:
    """Copy the runtime to ``dest_dir/gpu-lab-runc`` (outside the repo: dockerd keeps using
    it while the clone changes)."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    dest = dest_dir / RUNTIME_NAME
    shutil.copyfile(shim_source(), dest)
    dest.chmod(0o755)
    return dest


def daemon_config(existing: dict, shim: Path) -> dict:
    """``existing`` daemon.json plus the sandbox runtime as the default one."""
    out = dict(existing)
    runtimes = dict(out.get("runtimes") or {})
    runtimes[RUNTIME_NAME] = {"path": str(shim)}
    out["runtimes"] = runtimes
    out["default-runtime"] = RUNTIME_NAME
    return out


def write_daemon_json(path: Path, shim_dir: Path, force: bool = False) -> str:
    """Install the runtime and register it in ``path`` where this machine needs it."""
    if not force and not needs_sandbox_runtime():
        return "no sandbox runtime needed (CAP_SYS_RESOURCE is in the bounding set): daemon.json untouched"
    shim = install_shim(shim_dir)
    try:
        existing = json.loads(path.read_text()) if path.exists() else {}
    except ValueError:
        raise KindError(f"{path} is not valid JSON: fix or remove it first") from None
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(daemon_config(existing, shim), indent=2) + "\n")
    return f"{path}: default runtime {RUNTIME_NAME} ({shim}); restart dockerd to use it"


def engine_report() -> list[tuple[str, bool, str]]:
    """(what, ok, detail) lines for ``gpu-lab kind engine``."""
    rows: list[tuple[str, bool, str]] = []
    docker = shutil.which("docker")
    rows.append(("docker client", docker is not None, docker or "not on PATH (Debian: apt-get install docker.io)"))
    if docker:
        try:
            res = subprocess.run(["docker", "info", "--format", "{{.ServerVersion}} {{.DefaultRuntime}}"],
                                 capture_output=True, text=True, timeout=30)
            ok = res.returncode == 0
            detail = res.stdout.strip() if ok else (res.stderr.strip().splitlines() or ["no answer"])[-1]
        except subprocess.TimeoutExpired:
            ok, detail = False, "docker info did not answer in 30 s"
        rows.append(("Docker engine", ok, detail))
        if ok and needs_sandbox_runtime():
            rows.append(("sandbox runtime", RUNTIME_NAME in detail,
                         "default" if RUNTIME_NAME in detail else
                         "needed here (no CAP_SYS_RESOURCE): gpu-lab kind engine --daemon-json "
                         "/etc/docker/daemon.json, then restart dockerd"))
    for tool in ("debootstrap", "gcc", "go"):
        path = shutil.which(tool)
        rows.append((tool, path is not None, path or "not on PATH (needed by gpu-lab kind build)"))
    return rows
