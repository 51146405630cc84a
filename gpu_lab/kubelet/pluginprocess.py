"""One fake NVIDIA device-plugin process per simulated node.

``PluginProcess`` starts ``gpu_lab.deviceplugin.plugin`` as a child process (through
this module's ``main``, which adds one thing: the plugin stops by itself when the
process that started it goes away, even on SIGKILL, so no plugin outlives its node
agent), logs to a file, and can be killed (a crash: SIGKILL leaves its sockets behind,
as a crashed plugin does) or stopped (SIGTERM: the plugin removes its sockets).

    python -m gpu_lab.kubelet.pluginprocess --parent-pid PID -- --model H100-80GB ...
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from ..errors import GpuLabError

STOP_TIMEOUT_S = 5.0
PARENT_POLL_S = 0.5


class PluginProcess:
    """The fake device plugin of one node, as a child process."""

    def __init__(
        self,
        node_name: str,
        model: str,
        gpus: int,
        plugin_dir: Path,
        log_path: Path,
        config_path: Path | None = None,
        extra_args: list[str] | None = None,
    ):
        self.node_name, self.model, self.gpus = node_name, model, gpus
        self.extra_args = list(extra_args or [])
        self.plugin_dir, self.log_path, self.config_path = plugin_dir, log_path, config_path
        self.proc: subprocess.Popen | None = None
        self.starts = 0

    def argv(self) -> list[str]:
        args = [
            "--model", self.model,
            "--gpus", str(self.gpus),
            "--plugin-dir", str(self.plugin_dir),
            "--node-name", self.node_name,
        ]  # fmt: skip
        if self.config_path is not None:
            args += ["--config", str(self.config_path)]
        args += self.extra_args
        return [sys.executable, "-m", __name__, "--parent-pid", str(os.getpid()), "--", *args]

    def start(self) -> int:
        if self.alive:
            assert self.proc is not None  # alive means started
            return self.proc.pid
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        env.setdefault("GRPC_VERBOSITY", "ERROR")  # no gRPC INFO lines; the user's choice wins
        root = str(Path(__file__).resolve().parents[2])  # so `-m gpu_lab...` works anywhere
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
        with open(self.log_path, "ab") as log:
            log.write(f"=== gpu-lab: starting the device plugin of {self.node_name}\n".encode())
            log.flush()
            self.proc = subprocess.Popen(
                self.argv(), stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env
            )
        self.starts += 1
        return self.proc.pid

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc is not None else None

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self, sig: int = signal.SIGKILL, timeout: float = STOP_TIMEOUT_S) -> None:
        """Send ``sig`` and wait for the process to end (SIGKILL after ``timeout``)."""
        p = self.proc
        if p is None or p.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            p.send_signal(sig)
        try:
            p.wait(timeout)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                p.kill()
            p.wait(timeout)

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """SIGTERM: the plugin stops serving and removes its sockets."""
        self.kill(signal.SIGTERM, timeout)

    def log_tail(self, lines: int = 3) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return ""
        kept = [ln.strip() for ln in text.splitlines() if ln.strip() and not ln.startswith("===")]
        return " | ".join(kept[-lines:])


def _watch_parent(parent: int) -> None:
    """SIGTERM ourselves once ``parent`` is gone (we were re-parented)."""
    while True:
        time.sleep(PARENT_POLL_S)
        if os.getppid() != parent:
            os.kill(os.getpid(), signal.SIGTERM)
            return


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or args[0] != "--parent-pid" or args[2] != "--":
        print("usage: pluginprocess --parent-pid PID -- PLUGIN-ARGS...", file=sys.stderr)
        return 2
    try:
        parent = int(args[1])
    except ValueError:
        print(f"error: --parent-pid: not a number: {args[1]}", file=sys.stderr)
        return 2
    if os.getppid() != parent:
        return 1  # the agent died before we started
    threading.Thread(target=_watch_parent, args=(parent,), daemon=True).start()
    from ..deviceplugin import plugin  # a process entry: the parent watch starts first

    try:
        return plugin.main(args[3:])
    except GpuLabError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
