"""The CDI spec a node's runtime resolves NVIDIA's CDI device names against.

Under ``deviceListStrategy: cdi-annotations`` or ``cdi-cri`` NVIDIA's plugin answers
``Allocate`` with names such as ``k8s.device-plugin.nvidia.com/gpu=GPU-...`` instead of
``NVIDIA_VISIBLE_DEVICES``; the container runtime (containerd 1.7+, CRI-O 1.24+) looks each
name up in the CDI spec files under ``/var/run/cdi`` and applies the device's
``containerEdits`` and the spec's common ones. NVIDIA's plugin writes that file at start
(``/var/run/cdi/k8s.device-plugin.nvidia.com-gpu.json``, from NVML through nvidia-ctk's
library). ``cdi_spec`` builds the same document for a gpu-lab node, in the CDI format
(cdi.k8s.io): one device per GPU named as ``deviceIDStrategy`` names it (UUID or index),
with its ``/dev/nvidia<i>`` node, and the common edits every NVIDIA container gets
(``/dev/nvidiactl``, ``/dev/nvidia-uvm``, ``/dev/nvidia-uvm-tools``, and
``NVIDIA_VISIBLE_DEVICES=void`` so the toolkit's legacy hook does nothing more). Left out,
because a fake node has no driver: the driver's libraries and binaries (mounts) and the
``nvidia-cdi-hook`` hooks (symlinks, ``ldconfig``) that NVIDIA's spec carries.
``cdi_edits`` is what a runtime makes of a list of names: the merged edits, or the error
it fails the container with.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import GpuLabError
from ..gpus.catalog import GpuModel, get_model
from .config import DevicePluginConfig, parse_config
from .response import CDI_VENDOR, device_info

CDI_VERSION = "0.5.0"
CDI_KIND = f"{CDI_VENDOR}/gpu"
CDI_SPEC_FILE = f"/var/run/cdi/{CDI_VENDOR}-gpu.json"  # cdi's GenerateNameForSpec: <vendor>-<class>
CONTROL_NODES = ("/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools")


def cdi_spec(model: GpuModel | str, gpus: int, node: str = "node",
             config: DevicePluginConfig | Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The CDI spec NVIDIA's plugin would write on ``node`` (whole GPUs; see the module)."""
    cfg = config if isinstance(config, DevicePluginConfig) else parse_config(config)
    info = device_info(get_model(model), gpus, node)
    whole = [(uuid, d) for uuid, d in info.items() if d.index.isdigit()]
    devices = []
    for uuid, d in whole:
        name = d.index if cfg.device_id_strategy == "index" else uuid
        devices.append({"name": name, "containerEdits": {"deviceNodes": [{"path": f"/dev/nvidia{d.gpu}"}]}})
    if whole:
        devices.append({"name": "all", "containerEdits": {
            "deviceNodes": [{"path": f"/dev/nvidia{d.gpu}"} for _, d in whole]}})
    return {
        "cdiVersion": CDI_VERSION,
        "kind": CDI_KIND,
        "devices": devices,
        "containerEdits": {
            "env": ["NVIDIA_VISIBLE_DEVICES=void"],
            "deviceNodes": [{"path": p} for p in CONTROL_NODES],
        },
    }


def cdi_edits(spec: Mapping[str, Any], names: Iterable[str]) -> dict[str, list]:
    """What a CDI-enabled runtime applies for ``names`` (``vendor/class=device``): the named
    devices' edits, then the spec's common ones. Raises ``GpuLabError`` with the runtime's
    words when a name does not resolve."""
    by_name = {d["name"]: d.get("containerEdits", {}) for d in spec.get("devices", [])}
    out: dict[str, list] = {"env": [], "deviceNodes": []}
    missing = []
    for qualified in names:
        kind, _, device = qualified.partition("=")
        if kind != spec.get("kind") or device not in by_name:
            missing.append(qualified)
            continue
        for key in out:
            out[key] += [e for e in by_name[device].get(key, []) if e not in out[key]]
    if missing:
        raise GpuLabError(f"unresolvable CDI devices {', '.join(missing)}")
    for key in out:
        out[key] += [e for e in spec.get("containerEdits", {}).get(key, []) if e not in out[key]]
    return out
