"""A failed GPU on a kind node: the fake plugin's control file in the node's container.

The plugin's DaemonSet pod mounts the node's ``/var/lib/kubelet/device-plugins``; the file
``gpu-lab-health`` there (written with ``docker exec``) names the failed GPUs, and the plugin
reports their devices Unhealthy to the node's real kubelet (``gpu_lab.kubelet.gpuhealth``).
"""

from __future__ import annotations

import subprocess

from ...deviceplugin.plugin import HEALTH_FILE
from ...errors import GpuLabError
from .manifests import DEFAULT_PLUGIN_DIR

PATH = f"{DEFAULT_PLUGIN_DIR}/{HEALTH_FILE}"


def read(container: str) -> str:
    """The control file's text on the node ('' when there is none yet)."""
    res = subprocess.run(["docker", "exec", container, "sh", "-c", f"cat {PATH} 2>/dev/null || true"],
                         capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        raise GpuLabError(f"reading {PATH} on kind node container {container}: {res.stderr.strip()}")
    return res.stdout


def write(container: str, text: str) -> None:
    """Replace the control file at once (the plugin never reads half a file)."""
    res = subprocess.run(["docker", "exec", "-i", container, "sh", "-c", f"cat > {PATH}.tmp && mv {PATH}.tmp {PATH}"],
                         input=text, capture_output=True, text=True, timeout=30)
    if res.returncode != 0:
        raise GpuLabError(f"writing {PATH} on kind node container {container}: {res.stderr.strip()}")
