"""NVIDIA's device-plugin config file (``version: v1``), read the way the plugin reads it.

The format is NVIDIA/k8s-device-plugin's ``api/config/v1`` (checked against
v0.15.0)::

    version: v1
    flags:
      migStrategy: none              # none | single | mixed
      failOnInitError: true
      plugin:
        passDeviceSpecs: false
        deviceListStrategy: envvar   # or a list of: envvar, volume-mounts, cdi-annotations, cdi-cri
        deviceIDStrategy: uuid       # uuid | index
    sharing:
      timeSlicing:                   # or mps: {renameByDefault, resources}; never both
        renameByDefault: false
        failRequestsGreaterThanOne: false
        resources:
        - name: nvidia.com/gpu
          replicas: 10

Rules taken from NVIDIA's code: a missing ``version`` means ``v1`` and any
other value is ``unknown version``; flags left out get the plugin's defaults
(migStrategy ``none``, failOnInitError ``true``, passDeviceSpecs ``false``,
deviceListStrategy ``envvar``, deviceIDStrategy ``uuid``); each shared
resource needs ``replicas >= 2`` ("number of replicas must be >= 2", there is
no replicas: 1); MPS always fails requests for more than one replica, whatever
``failRequestsGreaterThanOne`` says (``NewConfig`` forces it); MPS with
``migStrategy: mixed`` is refused. NVIDIA's README says time-slicing and MPS
are exclusive, and we refuse a file that sets both rather than silently
preferring MPS as the code does. The ``sharing:`` block is read by
``gpu_lab.gpus.labels.parse_sharing``, the same reader NodePools use, so a
plugin and a simulated node agree on what a config means.

NVIDIA ignores keys it does not know; we name them instead (a typo such as
``migStategy`` would otherwise silently mean ``none``). Every key NVIDIA's
v0.15 format defines is accepted, including those the fake plugin has no use
for (``mpsRoot``, ``gdsEnabled``, ``gfd``, ``resources``, ...).

Every error is one line: ``<file>: <field>: <what is wrong>``.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Container
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import GpuLabError
from ..gpus.labels import MIG_STRATEGIES, Sharing, parse_sharing

VERSION = "v1"
#: the CDI annotation prefix of the container-device-interface library (cdi.AnnotationPrefix)
CDI_ANNOTATION_PREFIX = "cdi.k8s.io/"
DEVICE_LIST_STRATEGIES = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")
DEVICE_ID_STRATEGIES = ("uuid", "index")
DEFAULT_MPS_ROOT = "/run/nvidia/mps"  # the Helm chart's default for flags.mpsRoot

_TOP = ("version", "flags", "resources", "sharing")
_FLAGS = ("migStrategy", "failOnInitError", "mpsRoot", "nvidiaDriverRoot", "gdsEnabled",
          "mofedEnabled", "useNodeFeatureAPI", "plugin", "gfd")
_PLUGIN = ("passDeviceSpecs", "deviceListStrategy", "deviceIDStrategy", "cdiAnnotationPrefix",
           "nvidiaCTKPath", "containerDriverRoot")


@dataclass(frozen=True)
class DevicePluginConfig:
    """A parsed config; ``raw`` keeps the mapping as given (MIG support reads its resources)."""

    version: str = VERSION
    mig_strategy: str = "none"
    fail_on_init_error: bool = True
    pass_device_specs: bool = False
    device_list_strategy: tuple[str, ...] = ("envvar",)
    device_id_strategy: str = "uuid"
    nvidia_driver_root: str = "/"
    mps_root: str = DEFAULT_MPS_ROOT
    gds_enabled: bool = False
    mofed_enabled: bool = False
    cdi_annotation_prefix: str = CDI_ANNOTATION_PREFIX
    sharing: Sharing = field(default_factory=Sharing)
    raw: dict = field(default_factory=dict, compare=False, repr=False)


def parse_config(raw: Any, where: str = "config") -> DevicePluginConfig:
    """Check a config mapping (``None`` or empty means all defaults) and return it parsed."""

    def fail(path: str, message: str):
        raise GpuLabError(f"{where}: {path}: {message}" if path else f"{where}: {message}")

    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        fail("", "must be a mapping (version, flags, sharing)")
    _known(raw, _TOP, "", fail)
    ver = raw.get("version") or VERSION
    if ver != VERSION:
        fail("version", f"unknown version: {ver}")
    flags = _mapping(raw.get("flags"), "flags", fail)
    _known(flags, _FLAGS, "flags.", fail)
    plugin = _mapping(flags.get("plugin"), "flags.plugin", fail)
    _known(plugin, _PLUGIN, "flags.plugin.", fail)

    strategy = flags.get("migStrategy")
    strategy = "none" if strategy is None else strategy
    if strategy not in MIG_STRATEGIES:
        supported = ", ".join(f'"{s}"' for s in MIG_STRATEGIES)
        fail("flags.migStrategy", f'Unsupported value: "{strategy}": supported values: {supported}')

    lists = plugin.get("deviceListStrategy")
    lists = ["envvar"] if lists is None else [lists] if isinstance(lists, str) else lists
    if not isinstance(lists, list) or not lists or not all(isinstance(s, str) for s in lists):
        fail("flags.plugin.deviceListStrategy", f"invalid deviceListStrategy: {json.dumps(lists)}")
    for s in lists:
        if s not in DEVICE_LIST_STRATEGIES:
            fail("flags.plugin.deviceListStrategy",
                 f"invalid strategy: {s} (known: {', '.join(DEVICE_LIST_STRATEGIES)})")
    id_strategy = plugin.get("deviceIDStrategy")
    id_strategy = "uuid" if id_strategy is None else id_strategy
    if id_strategy not in DEVICE_ID_STRATEGIES:
        fail("flags.plugin.deviceIDStrategy",
             f"invalid --device-id-strategy option: {id_strategy} (known: uuid, index)")
    root = _string(flags, "nvidiaDriverRoot", "/", "flags.", fail)
    mps_root = _string(flags, "mpsRoot", DEFAULT_MPS_ROOT, "flags.", fail)

    try:
        sharing = parse_sharing(raw.get("sharing"), "sharing")
    except GpuLabError as err:
        raise GpuLabError(f"{where}: {err}") from None
    if sharing.strategy == "mps":
        if strategy == "mixed":
            fail("flags.migStrategy", "using --mig-strategy=mixed is not supported with MPS")
        sharing = dataclasses.replace(sharing, fail_requests_greater_than_one=True)

    return DevicePluginConfig(
        version=VERSION,
        mig_strategy=strategy,
        fail_on_init_error=_bool(flags, "failOnInitError", True, "flags.", fail),
        pass_device_specs=_bool(plugin, "passDeviceSpecs", False, "flags.plugin.", fail),
        device_list_strategy=tuple(dict.fromkeys(lists)),
        device_id_strategy=id_strategy,
        nvidia_driver_root=root,
        mps_root=mps_root,
        gds_enabled=_bool(flags, "gdsEnabled", False, "flags.", fail),
        mofed_enabled=_bool(flags, "mofedEnabled", False, "flags.", fail),
        cdi_annotation_prefix=_string(plugin, "cdiAnnotationPrefix", CDI_ANNOTATION_PREFIX, "flags.plugin.", fail),
        sharing=sharing,
        raw=raw,
    )


def load_config(path: str | Path | None) -> DevicePluginConfig:
    """Read a config file (YAML or JSON, as NVIDIA's plugin accepts); ``None`` gives the defaults."""
    if path is None:
        return parse_config(None)
    p = Path(path)
    try:
        text = p.read_text()
    except OSError as err:
        raise GpuLabError(f"{p}: error opening config file: {err.strerror or err}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        at = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise GpuLabError(f"{p}: error parsing config file: {problem}{at}") from None
    return parse_config(raw, str(p))


def _mapping(val: Any, path: str, fail) -> dict:
    if val is None:
        return {}
    if not isinstance(val, dict):
        fail(path, "must be a mapping")
    return val


def _known(block: dict, known: tuple[str, ...], prefix: str, fail) -> None:
    for key in block:
        if key not in known:
            fail(f"{prefix}{key}", f"unknown field (known: {', '.join(known)})")


def _string(block: dict, key: str, default: str, prefix: str, fail) -> str:
    val = block.get(key)
    if val is None or val == "":
        return default
    if not isinstance(val, str):
        fail(f"{prefix}{key}", f"Invalid value: {val!r}: must be a string")
    return val


def _bool(block: dict, key: str, default: bool, prefix: str, fail) -> bool:
    val = block.get(key)
    if val is None:
        return default
    if not isinstance(val, bool):
        fail(f"{prefix}{key}", f"Invalid value: {val!r}: must be true or false")
    return val


def allocation_problem(config: DevicePluginConfig, ids: list[str], known: Container[str]) -> str | None:
    """NVIDIA's ``ValidateRequest`` for one container: why Allocate must refuse, or None.

    Unknown device IDs are refused; so is more than one replica of a shared GPU
    when MPS is used or time-slicing sets ``failRequestsGreaterThanOne``. The
    plugin and the simulator both ask this, so they refuse the same requests.
    """
    for d in ids:
        if d not in known:
            return f"unknown device: {d}"
    sharing = config.sharing
    replicated = any("::" in d for d in ids)
    limit = sharing.strategy == "mps" or sharing.fail_requests_greater_than_one
    if replicated and len(ids) > 1 and limit:
        return f"maximum request size for shared resources is 1; found {len(ids)}"
    return None


def allocation_refusal(resource: str, problem: str) -> str:
    """The error NVIDIA's ``Allocate`` answers (gRPC ``Unknown``) with when it refuses."""
    return f'invalid allocation request for "{resource}": invalid request: {problem}'
