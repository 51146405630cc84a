"""mig-parted files: structure errors, geometry checks, NVIDIA's predefined configs, resolve."""

import pytest
import yaml

from gpu_lab.errors import MigPartedError
from gpu_lab.gpus.mig import MIG_MODELS, geometry, validate_layout
from gpu_lab.gpus.migparted import (
    BALANCED,
    MigConfigEntry,
    default_file,
    parse,
    predefined,
    predefined_names,
    resolve,
    validate,
)

CUSTOM = """
version: v1
mig-configs:
  two-halves:
  - devices: [0, 1]
    mig-enabled: true
    mig-devices: {"3g.40gb": 2}
  - devices: [2, 3]
    mig-enabled: false
  inference:
  - devices: all
    mig-enabled: true
    mig-devices: {"1g.10gb": 7}
"""


def test_parse_and_resolve_a_custom_file(tmp_path):
    cfg = parse(CUSTOM)
    assert cfg.names == ("two-halves", "inference")
    assert cfg.configs["two-halves"][0] == MigConfigEntry((0, 1), True, {"3g.40gb": 2})
    assert resolve("H100-80GB", 4, yaml.safe_load(CUSTOM), "two-halves") == [
        {"3g.40gb": 2}, {"3g.40gb": 2}, None, None]
    f = tmp_path / "mig.yaml"
    f.write_text(CUSTOM)
    assert resolve("H100-80GB", 2, str(f), "inference") == [{"1g.10gb": 7}] * 2
    assert parse(cfg.to_yaml()) == cfg  # round trip


def test_file_with_one_config_needs_no_name():
    doc = {"version": "v1", "mig-configs": {"only": [{"devices": "all", "mig-enabled": True,
                                                      "mig-devices": {"1g.5gb.me": 1, "1g.5gb": 6}}]}}
    assert resolve("A100-40GB", 1, doc) == [{"1g.5gb+me": 1, "1g.5gb": 6}]
    with pytest.raises(MigPartedError, match=r"the mig-parted file has 2 configs; name one \(known: two-halves, inference\)"):
        resolve("H100-80GB", 4, yaml.safe_load(CUSTOM))


@pytest.mark.parametrize("doc, message", [
    ({"mig-configs": {}}, "unable to parse with missing 'version' field"),
    ({"version": "v2", "mig-configs": {"a": []}}, "unknown version: v2"),
    ({"version": "v1"}, "at least one entry in 'mig-configs' is required"),
    ({"version": "v1", "mig-configs": {}}, "at least one entry in 'mig-configs' is required"),
    ({"version": "v1", "mig-configs": {"a": []}, "extra": 1}, "unexpected field: extra"),
    ({"version": "v1", "mig-configs": {"a": []}}, "at least one entry in 'a' is required"),
    ({"version": "v1", "mig-configs": {"a": [{"mig-enabled": False}]}},
     "mig-configs.a[0]: missing required field: devices"),
    ({"version": "v1", "mig-configs": {"a": [{"devices": "all"}]}},
     "mig-configs.a[0]: missing required field: mig-enabled"),
    ({"version": "v1", "mig-configs": {"a": [{"devices": "some", "mig-enabled": False}]}},
     "mig-configs.a[0]: invalid string input for 'devices': some"),
    ({"version": "v1", "mig-configs": {"a": [{"devices": [0, 0], "mig-enabled": False}]}},
     "mig-configs.a[0]: devices: GPU 0 is listed twice"),
    ({"version": "v1", "mig-configs": {"a": [{"devices": 3, "mig-enabled": False}]}},
     'mig-configs.a[0]: devices: must be "all" or a list of GPU indexes, got 3'),
    ({"version": "v1", "mig-configs": {"a": [{"devices": "all", "mig-enabled": "yes"}]}},
     "mig-configs.a[0]: mig-enabled: must be true or false, got 'yes'"),
    ({"version": "v1", "mig-configs": {"a": [{"devices": "all", "mig-enabled": True}]}},
     "mig-configs.a[0]: missing required field 'mig-devices' when 'mig-enabled' is true"),
    ({"version": "v1", "mig-configs": {"a": [{"devices": "all", "mig-enabled": False,
                                              "mig-devices": {"1g.5gb": 1}}]}},
     "mig-configs.a[0]: MIG devices included when 'mig-enabled' is false"),
    ({"version": "v1", "mig-configs": {"a": [{"devices": "all", "mig-enabled": True,
                                              "mig-devices": {"1g.5gb": -1}}]}},
     "mig-configs.a[0]: error validating values in 'mig-devices' field: invalid count for '1g.5gb': -1"),
    ({"version": "v1", "mig-configs": {"a": [{"devices": "all", "mig-enabled": True, "mig-devices": {},
                                              "migDevices": {}}]}},
     "mig-configs.a[0]: unexpected field: migDevices"),
    ([1, 2], "must be a mapping with version and mig-configs"),
])
def test_structure_errors_are_one_line(doc, message):
    with pytest.raises(MigPartedError) as exc:
        parse(doc)
    assert str(exc.value) == f"mig-parted config: {message}"


def test_yaml_errors_and_missing_files(tmp_path):
    with pytest.raises(MigPartedError, match=r"^mig-parted config: not valid YAML: "):
        parse("version: v1\nmig-configs: {a: [\n")
    with pytest.raises(MigPartedError, match="cannot read"):
        resolve("A100-40GB", 1, str(tmp_path / "missing.yaml"), "a")


@pytest.mark.parametrize("devices, message", [
    ({"4g.20gb": 2}, "mig-configs.bad[0].mig-devices: only one 4g.20gb fits on an A100-40GB (max 1 instance: "
                     "it can only start at memory slice 0); asked for 2"),
    ({"1g.5gb": 8}, "mig-configs.bad[0].mig-devices: 1g.5gb x8 needs 8 compute slices; an A100-40GB has 7"),
    ({"7g.40gb": 1, "1g.5gb": 1}, "mig-configs.bad[0].mig-devices: 7g.40gb uses the whole GPU and cannot be "
                                  "combined with other instances (asked for 7g.40gb + 1g.5gb)"),
    ({"1g.20gb": 1}, 'mig-configs.bad[0].mig-devices: unknown MIG profile "1g.20gb" for A100-40GB (valid: '
                     "7g.40gb, 4g.20gb, 3g.20gb, 2g.10gb, 1g.10gb, 1g.5gb+me, 1g.5gb)"),
])
def test_every_entry_is_checked_against_the_geometry(devices, message):
    doc = {"version": "v1", "mig-configs": {"bad": [{"devices": "all", "mig-enabled": True, "mig-devices": devices}]}}
    with pytest.raises(MigPartedError) as exc:
        validate(doc, "A100-40GB")
    assert str(exc.value) == f"mig-parted config: {message}"


def test_gpu_indexes_are_checked_against_the_node():
    doc = yaml.safe_load(CUSTOM)
    with pytest.raises(MigPartedError) as exc:
        resolve("H100-80GB", 2, doc, "two-halves")
    assert str(exc.value) == ("mig-parted config: mig-configs.two-halves[1]: devices: GPU 2 does not exist "
                              "(the node has 2 GPUs, 0-1)")


def test_device_filter_picks_the_entry_for_the_model():
    doc = default_file().to_dict()
    for model in MIG_MODELS:
        assert resolve(model, 2, doc, "all-balanced") == [BALANCED[model]] * 2
    assert resolve("A100-40GB", 1, doc, "all-1g.10gb") == [{"1g.10gb": 4}]
    assert resolve("A100-80GB", 1, doc, "all-1g.10gb") == [{"1g.10gb": 7}]
    with pytest.raises(MigPartedError, match=r'MIG config "all-1g.5gb" has no entry for H100-80GB \(device ID 0x233010DE\)'):
        resolve("H100-80GB", 1, doc, "all-1g.5gb")


def test_later_entries_win_and_unnamed_gpus_keep_mig_disabled():
    doc = {"version": "v1", "mig-configs": {"c": [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"7g.80gb": 1}},
        {"devices": [1], "mig-enabled": False},
    ], "d": [{"devices": [0], "mig-enabled": True, "mig-devices": {}}]}}
    assert resolve("H100-80GB", 3, doc, "c") == [{"7g.80gb": 1}, None, {"7g.80gb": 1}]
    assert resolve("H100-80GB", 2, doc, "d") == [{}, None]


# NVIDIA/mig-parted deployments/systemd/config-default.yaml, for each model.
NVIDIA_DEFAULTS = {
    "A100-40GB": {"all-1g.5gb": {"1g.5gb": 7}, "all-1g.5gb.me": {"1g.5gb+me": 1}, "all-1g.10gb": {"1g.10gb": 4},
                  "all-2g.10gb": {"2g.10gb": 3}, "all-3g.20gb": {"3g.20gb": 2}, "all-4g.20gb": {"4g.20gb": 1},
                  "all-7g.40gb": {"7g.40gb": 1},
                  "all-balanced": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}},
    "H100-80GB": {"all-1g.10gb": {"1g.10gb": 7}, "all-1g.10gb.me": {"1g.10gb+me": 1}, "all-1g.20gb": {"1g.20gb": 4},
                  "all-2g.20gb": {"2g.20gb": 3}, "all-3g.40gb": {"3g.40gb": 2}, "all-4g.40gb": {"4g.40gb": 1},
                  "all-7g.80gb": {"7g.80gb": 1},
                  "all-balanced": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}},
    "H200-141GB": {"all-1g.18gb": {"1g.18gb": 7}, "all-1g.18gb.me": {"1g.18gb+me": 1}, "all-1g.35gb": {"1g.35gb": 4},
                   "all-2g.35gb": {"2g.35gb": 3}, "all-3g.71gb": {"3g.71gb": 2}, "all-4g.71gb": {"4g.71gb": 1},
                   "all-7g.141gb": {"7g.141gb": 1},
                   "all-balanced": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}},
}


@pytest.mark.parametrize("model", sorted(NVIDIA_DEFAULTS))
def test_predefined_configs_are_nvidias(model):
    names = predefined_names(model)
    assert names[:2] == ("all-disabled", "all-enabled") and names[-1] == "all-balanced"
    assert set(names) == {"all-disabled", "all-enabled", *NVIDIA_DEFAULTS[model]}
    for name, layout in NVIDIA_DEFAULTS[model].items():
        assert resolve(model, 8, name) == [layout] * 8
    assert resolve(model, 2, "all-disabled") == [None, None]
    assert resolve(model, 2, "all-enabled") == [{}, {}]


@pytest.mark.parametrize("model", MIG_MODELS)
def test_every_predefined_config_is_valid_and_balanced_fills_the_gpu(model):
    validate(predefined(model), model, 8)
    balanced = validate_layout(model, BALANCED[model])
    assert (balanced.compute_slices_used, balanced.memory_slices_used) == (7, 8)
    assert len(predefined_names(model)) == len(geometry(model).profiles) + 3


def test_unknown_config_name_lists_the_known_ones():
    with pytest.raises(MigPartedError) as exc:
        resolve("A100-80GB", 8, "all-1g.5gb")
    assert str(exc.value) == ('unknown MIG config "all-1g.5gb" for A100-80GB (known: all-disabled, all-enabled, '
                              "all-1g.10gb, all-1g.10gb.me, all-1g.20gb, all-2g.20gb, all-3g.40gb, all-4g.40gb, "
                              "all-7g.80gb, all-balanced)")


def test_mig_on_a_gpu_without_mig():
    with pytest.raises(Exception, match="T4 GPUs do not support MIG"):
        resolve("T4", 1, "all-disabled")


def test_only_the_selected_config_is_checked():
    # NVIDIA's own file lists all-1g.20gb without a device filter; it must not spoil an A100-40GB.
    doc = {"version": "v1", "mig-configs": {
        "all-1g.20gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.20gb": 4}}],
        "all-1g.5gb": [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.5gb": 7}}]}}
    assert resolve("A100-40GB", 1, doc, "all-1g.5gb") == [{"1g.5gb": 7}]
    with pytest.raises(MigPartedError, match='unknown MIG profile "1g.20gb" for A100-40GB'):
        resolve("A100-40GB", 1, doc, "all-1g.20gb")
    with pytest.raises(MigPartedError, match='unknown MIG profile "1g.20gb"'):
        validate(doc, "A100-40GB")
