"""NVIDIA mig-parted configuration files: parse, validate, resolve per GPU.

The GPU Operator's MIG manager reads a mig-parted file and applies the config
named by the node label ``nvidia.com/mig.config``::

    version: v1
    mig-configs:
      all-balanced:
      - devices: all                  # or a list of GPU indexes: [0, 1]
        device-filter: ["0x20B010DE"] # optional: only GPUs with these PCI device IDs
        mig-enabled: true
        mig-devices: {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}

Structure rules and messages follow mig-parted's ``api/spec/v1/spec.go``
(``version`` must be ``v1``; ``mig-configs`` needs at least one config and
every config at least one entry; ``devices`` and ``mig-enabled`` are required;
``devices`` is ``all`` or a list of indexes; ``mig-devices`` is required when
``mig-enabled`` is true and must be empty when it is false; unknown fields are
errors). On top of that every entry that applies to the GPU model is checked
with ``mig.validate_layout``, which mig-parted itself only finds out when it
applies the config to the hardware.

The predefined configs are NVIDIA's ``deployments/systemd/config-default.yaml``
in NVIDIA/mig-parted (the GPU Operator ships the same set as its
``default-mig-parted-config`` ConfigMap), restricted to the entries that apply
to each model: ``all-disabled``, ``all-enabled`` (MIG on, no instances),
``all-<profile>`` with the profile's maximum count (``+me`` written ``.me`` in
the name, e.g. ``all-1g.5gb.me`` with one ``1g.5gb+me``; ``all-1g.10gb`` is 4
instances on an A100-40GB and 7 on the 80GB parts) and ``all-balanced``:

    A100-40GB        2x 1g.5gb  + 1x 2g.10gb + 1x 3g.20gb
    A100-80GB, H100  2x 1g.10gb + 1x 2g.20gb + 1x 3g.40gb
    H200-141GB       2x 1g.18gb + 1x 2g.35gb + 1x 3g.71gb

When entries overlap on a GPU the last one wins (mig-parted applies them in
order); GPUs no entry names keep MIG disabled.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..errors import ImpossibleLayout, MigError, MigPartedError
from .mig import GEOMETRIES, geometry, validate_layout

VERSION = "v1"
ENTRY_FIELDS = ("device-filter", "devices", "mig-enabled", "mig-devices")

BALANCED = {
    "A100-40GB": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1},
    "A100-80GB": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    "H100-80GB": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1},
    "H200-141GB": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1},
}


@dataclass(frozen=True)
class MigConfigEntry:
    """One entry of a named config: which GPUs, MIG on or off, which instances."""

    devices: str | tuple[int, ...]  # "all" or GPU indexes
    mig_enabled: bool
    mig_devices: dict[str, int] = field(default_factory=dict)
    device_filter: tuple[str, ...] | None = None

    def applies_to(self, model) -> bool:
        """Whether the entry's ``device-filter`` (if any) matches the model's PCI device ID."""
        if self.device_filter is None:
            return True
        return geometry(model).device_id.lower() in (f.lower() for f in self.device_filter)

    def gpus(self, gpu_count: int) -> tuple[int, ...]:
        if isinstance(self.devices, str):  # "all", the only string the parser accepts
            return tuple(range(gpu_count))
        return self.devices

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        if self.device_filter is not None:
            out["device-filter"] = list(self.device_filter)
        out["devices"] = self.devices if self.devices == "all" else list(self.devices)
        out["mig-enabled"] = self.mig_enabled
        if self.mig_enabled:
            out["mig-devices"] = dict(self.mig_devices)
        return out


@dataclass(frozen=True)
class MigPartedConfig:
    """A parsed mig-parted file: config name -> entries, in file order."""

    configs: dict[str, tuple[MigConfigEntry, ...]]
    version: str = VERSION

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.configs)

    def to_dict(self) -> dict[str, Any]:
        return {"version": self.version,
                "mig-configs": {n: [e.to_dict() for e in es] for n, es in self.configs.items()}}

    def to_yaml(self) -> str:
        return yaml.safe_dump(self.to_dict(), sort_keys=False)


def _fail(where: str, message: str):
    raise MigPartedError(f"{where}: {message}")


def parse(raw: Any, where: str = "mig-parted config") -> MigPartedConfig:
    """Check a mig-parted document's structure (a mapping, YAML text or a ``Path``)."""
    if isinstance(raw, MigPartedConfig):
        return raw
    if isinstance(raw, Path):
        try:
            raw = raw.read_text()
        except OSError as err:
            _fail(where, f"cannot read {raw}: {err.strerror or err}")
    if isinstance(raw, str):
        try:
            raw = yaml.safe_load(raw)
        except yaml.YAMLError as err:
            _fail(where, "not valid YAML: " + " ".join(str(err).split()))
    if not isinstance(raw, Mapping):
        _fail(where, "must be a mapping with version and mig-configs")
    if "version" not in raw and len(raw) > 0:
        _fail(where, "unable to parse with missing 'version' field")
    if raw.get("version") != VERSION:
        _fail(where, f"unknown version: {raw.get('version')}")
    for key in raw:
        if key not in ("version", "mig-configs"):
            _fail(where, f"unexpected field: {key}")
    configs = raw.get("mig-configs")
    if configs is None or (isinstance(configs, Mapping) and not configs):
        _fail(where, "at least one entry in 'mig-configs' is required")
    if not isinstance(configs, Mapping):
        _fail(f"{where}: mig-configs", "must be a mapping of config name to a list of entries")
    out: dict[str, tuple[MigConfigEntry, ...]] = {}
    for name, entries in configs.items():
        at = f"{where}: mig-configs.{name}"
        if not isinstance(name, str) or not name:
            _fail(f"{where}: mig-configs", f"config names must be strings, got {name!r}")
        if not entries:
            _fail(where, f"at least one entry in '{name}' is required")
        if not isinstance(entries, list):
            _fail(at, "must be a list of entries")
        out[name] = tuple(_entry(e, f"{at}[{i}]") for i, e in enumerate(entries))
    return MigPartedConfig(out)


def _entry(raw: Any, at: str) -> MigConfigEntry:
    if not isinstance(raw, Mapping):
        _fail(at, "must be a mapping with devices, mig-enabled and mig-devices")
    for key in ("devices", "mig-enabled"):
        if key not in raw:
            _fail(at, f"missing required field: {key}")
    for key in raw:
        if key not in ENTRY_FIELDS:
            _fail(at, f"unexpected field: {key}")
    devices = raw["devices"]
    if isinstance(devices, str):
        if devices != "all":
            _fail(at, f"invalid string input for 'devices': {devices}")
    elif isinstance(devices, list) and all(isinstance(d, int) and not isinstance(d, bool) for d in devices):
        if any(d < 0 for d in devices):
            _fail(at, f"devices: GPU indexes must be >= 0, got {devices}")
        if len(set(devices)) != len(devices):
            _fail(at, f"devices: GPU {next(d for d in devices if devices.count(d) > 1)} is listed twice")
        devices = tuple(devices)
    else:
        _fail(at, f"devices: must be \"all\" or a list of GPU indexes, got {devices!r}")
    enabled = raw["mig-enabled"]
    if not isinstance(enabled, bool):
        _fail(at, f"mig-enabled: must be true or false, got {enabled!r}")
    mig_devices = raw.get("mig-devices")
    if enabled and mig_devices is None:
        _fail(at, "missing required field 'mig-devices' when 'mig-enabled' is true")
    if mig_devices is not None and not isinstance(mig_devices, Mapping):
        _fail(at, "mig-devices: must be a mapping of MIG profile to count")
    counts: dict[str, int] = {}
    for profile, n in (mig_devices or {}).items():
        if not isinstance(profile, str):
            _fail(at, f"mig-devices: profile names must be strings, got {profile!r}")
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            _fail(at, f"error validating values in 'mig-devices' field: invalid count for '{profile}': {n!r}")
        if n:
            counts[profile] = n
    if not enabled and counts:
        _fail(at, "MIG devices included when 'mig-enabled' is false")
    filt = raw.get("device-filter")
    if filt is not None:
        if isinstance(filt, str):
            filt = (filt,)
        elif isinstance(filt, list) and all(isinstance(f, str) for f in filt):
            filt = tuple(filt)
        else:
            _fail(at, f"device-filter: must be a device ID or a list of them, got {filt!r}")
    return MigConfigEntry(devices, enabled, counts, filt)


def validate(config: Any, model, gpu_count: int | None = None,
             where: str = "mig-parted config") -> MigPartedConfig:
    """Parse, then check every entry of every config that applies to ``model`` (``assert`` for a whole file).

    With ``gpu_count`` the GPU indexes are checked too. Errors name the config
    and the entry: ``mig-configs.custom[0].mig-devices: only one 4g.20gb ...``.
    """
    parsed = parse(config, where)
    geom = geometry(model)
    for name, entries in parsed.configs.items():
        for i, e in enumerate(entries):
            _check_entry(e, geom.model, gpu_count, f"{where}: mig-configs.{name}[{i}]")
    return parsed


def _check_entry(e: MigConfigEntry, model: str, gpu_count: int | None, at: str) -> None:
    if not e.applies_to(model):
        return
    if gpu_count is not None and not isinstance(e.devices, str):  # not "all": GPU indexes
        over = [d for d in e.devices if d >= gpu_count]
        if over:
            _fail(at, f"devices: GPU {over[0]} does not exist (the node has {gpu_count} GPU"
                  f"{'s' if gpu_count != 1 else ''}{f', 0-{gpu_count - 1}' if gpu_count > 1 else ''})")
    if e.mig_enabled:
        try:
            validate_layout(model, e.mig_devices)
        except ImpossibleLayout as err:
            _fail(f"{at}.mig-devices", str(err))
        except MigError as err:
            _fail(f"{at}.mig-devices", str(err))


def _all_name(profile: str) -> str:
    return "all-" + profile.replace("+", ".")


def predefined(model) -> MigPartedConfig:
    """NVIDIA's default configs as they apply to ``model`` (no device filters needed)."""
    geom = geometry(model)
    configs: dict[str, tuple[MigConfigEntry, ...]] = {
        "all-disabled": (MigConfigEntry("all", False),),
        "all-enabled": (MigConfigEntry("all", True, {}),),
    }
    for p in reversed(geom.profiles):  # small to large, as NVIDIA's file lists them
        configs[_all_name(p.name)] = (MigConfigEntry("all", True, {p.name: p.max_instances}),)
    configs["all-balanced"] = (MigConfigEntry("all", True, dict(BALANCED[geom.model])),)
    return MigPartedConfig(configs)


def predefined_names(model) -> tuple[str, ...]:
    return predefined(model).names


def default_file() -> MigPartedConfig:
    """One file for every catalogued MIG model, with device filters, like NVIDIA's default."""
    configs: dict[str, list[MigConfigEntry]] = {}
    for model, geom in GEOMETRIES.items():
        for name, entries in predefined(model).configs.items():
            generic = name in ("all-disabled", "all-enabled")
            for e in entries:
                entry = e if generic else MigConfigEntry(e.devices, e.mig_enabled, e.mig_devices,
                                                         (geom.device_id,))
                if entry not in configs.setdefault(name, []):
                    configs[name].append(entry)
    return MigPartedConfig({n: tuple(es) for n, es in configs.items()})


def _is_file(arg: Any) -> bool:
    return isinstance(arg, (Mapping, MigPartedConfig, Path)) or (
        isinstance(arg, str) and ("\n" in arg or arg.endswith((".yaml", ".yml", ".json"))))


def resolve(model, gpu_count: int, config_name_or_file: Any, name: str | None = None
            ) -> list[dict[str, int] | None]:
    """The MIG layout of each GPU of a node: ``None`` (MIG disabled), ``{}`` or ``{profile: n}``.

    ``config_name_or_file`` is either the name of a predefined config or a
    mig-parted file (mapping, YAML text, ``Path`` or a ``.yaml`` path); with a
    file, ``name`` picks the config (it may be omitted when the file has one).
    The selected config's entries that apply to the model are validated
    against its geometry and GPU count; other configs in the file are not (a
    file may serve several GPU models, as NVIDIA's default does).
    """
    geom = geometry(model)
    if isinstance(gpu_count, bool) or not isinstance(gpu_count, int) or gpu_count < 0:
        raise MigPartedError(f"GPU count must be a non-negative integer, got {gpu_count!r}")
    if _is_file(config_name_or_file):
        src = config_name_or_file
        if isinstance(src, str) and "\n" not in src:
            src = Path(src)
        parsed = parse(src)
        if name is None:
            if len(parsed.configs) != 1:
                raise MigPartedError(f"the mig-parted file has {len(parsed.configs)} configs; "
                                     f"name one (known: {', '.join(parsed.names)})")
            name = parsed.names[0]
    else:
        if name is not None:
            raise MigPartedError("give a config name or a file plus a name, not two names")
        parsed, name = predefined(geom.model), config_name_or_file
    if name not in parsed.configs:
        raise MigPartedError(f'unknown MIG config "{name}" for {geom.model} '
                             f"(known: {', '.join(parsed.names)})")
    for i, e in enumerate(parsed.configs[name]):  # only the selected config, as mig-parted asserts it
        _check_entry(e, geom.model, gpu_count, f"mig-parted config: mig-configs.{name}[{i}]")
    layouts: list[dict[str, int] | None] = [None] * gpu_count
    matched = False
    for e in parsed.configs[name]:
        if not e.applies_to(geom.model):
            continue
        matched = True
        for g in e.gpus(gpu_count):
            layouts[g] = {geom.profile(p).name: n for p, n in e.mig_devices.items()} if e.mig_enabled else None
    if not matched:
        raise MigPartedError(f'MIG config "{name}" has no entry for {geom.model} '
                             f"(device ID {geom.device_id})")
    return [copy.deepcopy(x) for x in layouts]
