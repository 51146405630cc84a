"""The plugin's Allocate answer as data (``gpu_lab.allocate_response``) and the CDI spec a
node's runtime resolves its CDI names against (``gpu_lab.cdi_spec``, ``gpu_lab.cdi_edits``)."""

import pytest

import gpu_lab
from gpu_lab.gpus.labels import gpu_uuids

U = gpu_uuids("h100-0", 8)


def answer(strategy, ids=U[2:4], **flags):
    config = {"version": "v1", "flags": {**flags, "plugin": {"deviceListStrategy": strategy,
                                                             **flags.pop("plugin", {})}}}
    return gpu_lab.allocate_response(ids, model="H100-80GB", gpus=8, node="h100-0", device_plugin=config)


def test_each_list_strategy_fills_its_own_field():
    env = answer("envvar")
    assert env["envs"] == {"NVIDIA_VISIBLE_DEVICES": f"{U[2]},{U[3]}"} and not env["mounts"]
    mounts = answer("volume-mounts")
    assert mounts["envs"] == {"NVIDIA_VISIBLE_DEVICES": "/var/run/nvidia-container-devices"}
    assert [m["container_path"] for m in mounts["mounts"]] == [
        f"/var/run/nvidia-container-devices/{u}" for u in U[2:4]]
    cri = answer("cdi-cri")
    assert cri["cdi_devices"] == [f"k8s.device-plugin.nvidia.com/gpu={u}" for u in U[2:4]] and not cri["envs"]
    (key, value), = answer("cdi-annotations")["annotations"].items()
    assert key.startswith("cdi.k8s.io/nvidia-device-plugin_") and value.count("=") == 2
    specs = answer("envvar", plugin={"passDeviceSpecs": True})
    assert [d["container_path"] for d in specs["devices"]] == ["/dev/nvidia2", "/dev/nvidia3"]
    with pytest.raises(gpu_lab.GpuLabError, match="^unknown device: GPU-nope"):
        gpu_lab.allocate_response(["GPU-nope"], model="H100-80GB", gpus=8, node="h100-0")


def test_the_spec_has_one_device_per_gpu_and_the_common_edits():
    spec = gpu_lab.cdi_spec("H100-80GB", 8, "h100-0")
    assert spec["kind"] == "k8s.device-plugin.nvidia.com/gpu"
    assert [d["name"] for d in spec["devices"]] == [*U, "all"]
    assert spec["devices"][3]["containerEdits"]["deviceNodes"] == [{"path": "/dev/nvidia3"}]
    assert spec["containerEdits"]["env"] == ["NVIDIA_VISIBLE_DEVICES=void"]
    by_index = gpu_lab.cdi_spec("H100-80GB", 8, "h100-0", {"version": "v1", "flags": {
        "plugin": {"deviceIDStrategy": "index"}}})
    assert [d["name"] for d in by_index["devices"]] == [*map(str, range(8)), "all"]


def test_the_plugins_cdi_names_resolve_in_its_nodes_spec_and_elsewhere_fail():
    names = answer("cdi-cri")["cdi_devices"]
    edits = gpu_lab.cdi_edits(gpu_lab.cdi_spec("H100-80GB", 8, "h100-0"), names)
    assert edits["deviceNodes"] == [{"path": "/dev/nvidia2"}, {"path": "/dev/nvidia3"},
                                    {"path": "/dev/nvidiactl"}, {"path": "/dev/nvidia-uvm"},
                                    {"path": "/dev/nvidia-uvm-tools"}]
    assert edits["env"] == ["NVIDIA_VISIBLE_DEVICES=void"]
    other = gpu_lab.cdi_spec("H100-80GB", 8, "h100-1")  # another node: other UUIDs
    with pytest.raises(gpu_lab.GpuLabError, match="^unresolvable CDI devices k8s.device-plugin"):
        gpu_lab.cdi_edits(other, names)
