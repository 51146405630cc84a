"""NVIDIA's device-plugin config file: defaults, fields, one-line errors."""

import pytest

from gpu_lab.deviceplugin.config import DevicePluginConfig, load_config, parse_config
from gpu_lab.errors import GpuLabError
from gpu_lab.gpus.labels import Sharing

FULL = """
version: v1
flags:
  migStrategy: none
  failOnInitError: false
  plugin:
    passDeviceSpecs: true
    deviceListStrategy: [envvar, volume-mounts]
    deviceIDStrategy: index
sharing:
  timeSlicing:
    renameByDefault: true
    failRequestsGreaterThanOne: true
    resources:
    - name: nvidia.com/gpu
      replicas: 10
"""


def test_empty_file_and_none_give_nvidias_defaults(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text("")
    for cfg in (parse_config(None), parse_config({}), load_config(f), load_config(None)):
        assert cfg == DevicePluginConfig()
        assert (cfg.version, cfg.mig_strategy, cfg.fail_on_init_error) == ("v1", "none", True)
        assert (cfg.pass_device_specs, cfg.device_list_strategy, cfg.device_id_strategy) == (
            False, ("envvar",), "uuid")
        assert cfg.sharing == Sharing()


def test_full_file(tmp_path):
    f = tmp_path / "c.yaml"
    f.write_text(FULL)
    cfg = load_config(f)
    assert cfg.fail_on_init_error is False and cfg.pass_device_specs is True
    assert cfg.device_list_strategy == ("envvar", "volume-mounts")
    assert cfg.device_id_strategy == "index"
    assert cfg.sharing == Sharing("time-slicing", 10, True, True)
    assert cfg.sharing.resource == "nvidia.com/gpu.shared"


def test_json_is_accepted_like_nvidias_loader(tmp_path):
    f = tmp_path / "c.json"
    f.write_text('{"version": "v1", "flags": {"migStrategy": "mixed"}}')
    assert load_config(f).mig_strategy == "mixed"


def test_mps_always_fails_requests_greater_than_one():
    cfg = parse_config({"sharing": {"mps": {"failRequestsGreaterThanOne": False,
                                            "resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}})
    assert cfg.sharing == Sharing("mps", 4, False, True)


def test_known_nvidia_fields_without_meaning_here_are_accepted():
    cfg = parse_config({"flags": {"mpsRoot": "/run/nvidia/mps", "gdsEnabled": True, "gfd": {"oneshot": True},
                                  "plugin": {"cdiAnnotationPrefix": "x/"}}, "resources": {}})
    assert cfg.gds_enabled is True and cfg.mps_root == "/run/nvidia/mps"


TS = {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}


@pytest.mark.parametrize("raw, message", [
    ({"version": "v2"}, "config: version: unknown version: v2"),
    ([], "config: must be a mapping (version, flags, sharing)"),
    ({"flag": {}}, "config: flag: unknown field (known: version, flags, resources, sharing)"),
    ({"flags": {"migStategy": "none"}}, "config: flags.migStategy: unknown field (known: migStrategy, "
     "failOnInitError, mpsRoot, nvidiaDriverRoot, gdsEnabled, mofedEnabled, useNodeFeatureAPI, plugin, gfd)"),
    ({"flags": {"migStrategy": "auto"}},
     'config: flags.migStrategy: Unsupported value: "auto": supported values: "none", "single", "mixed"'),
    ({"flags": {"failOnInitError": "yes"}},
     "config: flags.failOnInitError: Invalid value: 'yes': must be true or false"),
    ({"flags": "none"}, "config: flags: must be a mapping"),
    ({"flags": {"plugin": {"deviceListStrategy": "env"}}},
     "config: flags.plugin.deviceListStrategy: invalid strategy: env (known: envvar, volume-mounts, "
     "cdi-annotations, cdi-cri)"),
    ({"flags": {"plugin": {"deviceListStrategy": []}}},
     "config: flags.plugin.deviceListStrategy: invalid deviceListStrategy: []"),
    ({"flags": {"plugin": {"deviceIDStrategy": "serial"}}},
     "config: flags.plugin.deviceIDStrategy: invalid --device-id-strategy option: serial (known: uuid, index)"),
    ({"sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 1}]}}},
     "config: sharing.timeSlicing.resources[0].replicas: number of replicas must be >= 2"),
    ({"sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 0}]}}},
     "config: sharing.timeSlicing.resources[0].replicas: number of replicas must be >= 2"),
    ({"sharing": {"timeSlicing": TS, "mps": TS}}, "config: sharing: timeSlicing and mps are mutually exclusive"),
    ({"flags": {"migStrategy": "mixed"}, "sharing": {"mps": TS}},
     "config: flags.migStrategy: using --mig-strategy=mixed is not supported with MPS"),
])
def test_errors_are_one_line(raw, message):
    with pytest.raises(GpuLabError) as exc:
        parse_config(raw)
    assert str(exc.value) == message
    assert "\n" not in str(exc.value)


def test_file_errors_name_the_file(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("version: v1\nflags: {migStrategy: [\n")
    with pytest.raises(GpuLabError, match=r"^.*bad\.yaml: error parsing config file: .*\(line \d+, column \d+\)$"):
        load_config(bad)
    with pytest.raises(GpuLabError, match=r"missing\.yaml: error opening config file: No such file"):
        load_config(tmp_path / "missing.yaml")
    v2 = tmp_path / "v2.yaml"
    v2.write_text("version: v2\n")
    with pytest.raises(GpuLabError) as exc:
        load_config(v2)
    assert str(exc.value) == f"{v2}: version: unknown version: v2"
