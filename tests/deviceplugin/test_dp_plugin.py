"""The fake plugin in-process: what it advertises, what Allocate answers, kubelet restarts."""

import shutil
import tempfile
import threading

import grpc
import pytest
import yaml

from gpu_lab.deviceplugin import stubs
from gpu_lab.deviceplugin.config import parse_config
from gpu_lab.deviceplugin.plugin import (
    FakeDevicePlugin,
    advertised_devices,
    main,
    resolve_mig_config,
    socket_name,
)
from gpu_lab.errors import DeviceAllocationError, GpuLabError
from gpu_lab.gpus.labels import gpu_node_state
from gpu_lab.kubelet.registration import KubeletServer
from gpu_lab.model.nodepool import expand_node_pool


def gpu_uuids(node, count, model="H100-80GB"):
    """The node's GPU UUIDs, from the one place that makes them."""
    return gpu_node_state(node, model, count).devices["nvidia.com/gpu"]


TS = {"timeSlicing": {"renameByDefault": True, "failRequestsGreaterThanOne": True,
                      "resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}


@pytest.fixture
def short_dir():
    d = tempfile.mkdtemp(prefix="gl", dir="/tmp")  # unix socket paths must stay < 108 bytes
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def pool(device_plugin):
    return yaml.safe_load(f"""
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {{name: h100}}
spec:
  count: 2
  gpu: {{model: H100-80GB, count: 8}}
  cpu: "96"
  memory: 1Ti
  devicePlugin: {device_plugin}
""")


MIXED = {"flags": {"migStrategy": "mixed"}}
SINGLE = {"flags": {"migStrategy": "single"}}
CUSTOM = {"version": "v1", "mig-configs": {
    "half": [{"devices": [0], "mig-enabled": True, "mig-devices": {"7g.40gb": 1}},
             {"devices": [1], "mig-enabled": False}],
    "all-3g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.20gb": 2}}],
}}


def a100_pool(device_plugin, mig=None, count=2):
    spec = {"count": count, "gpu": {"model": "A100-40GB", "count": 2}, "cpu": "32", "memory": "256Gi",
            "devicePlugin": device_plugin}
    if mig is not None:
        spec["mig"] = mig
    return {"apiVersion": "gpulab.dev/v1alpha1", "kind": "NodePool", "metadata": {"name": "a100"}, "spec": spec}


def nvidia_capacity(node):
    return {r: n for r, n in node.capacity.items() if r.startswith("nvidia.com/")}


@pytest.mark.parametrize("plugin_cfg", [
    {"version": "v1"},
    {"sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}},
    {"sharing": TS},
    {"sharing": {"mps": {"renameByDefault": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 3}]}}},
])
def test_plugin_advertises_the_same_ids_as_the_simulated_node(plugin_cfg):
    for node in expand_node_pool(pool(plugin_cfg)):
        assert advertised_devices("H100-80GB", 8, parse_config(plugin_cfg), node.name) == node.devices


MIG_CASES = {
    "whole-gpu": ({}, None),
    "time-slicing": ({"sharing": TS}, None),
    "single": (SINGLE, {"config": "all-1g.5gb"}),
    "single-time-sliced": ({**SINGLE, "sharing": {"timeSlicing": {"resources": [
        {"name": "nvidia.com/gpu", "replicas": 2}]}}}, {"config": "all-3g.20gb"}),
    "mixed": (MIXED, {"config": "all-balanced"}),
    "mixed-time-sliced-mig": ({**MIXED, "sharing": {"timeSlicing": {"renameByDefault": True, "resources": [
        {"name": "nvidia.com/mig-1g.5gb", "replicas": 3}]}}}, {"config": "all-balanced"}),
    "mixed-partly-mig": (MIXED, {"config": "half", "migParted": CUSTOM}),
    "mixed-mig-disabled": (MIXED, {"config": "all-disabled"}),
    "none-with-mig-enabled": ({}, {"config": "all-balanced"}),
    "single-file": (SINGLE, {"config": "all-3g", "migParted": CUSTOM}),
}


@pytest.mark.parametrize("case", list(MIG_CASES))
def test_plugin_and_node_pool_agree_on_resources_ids_and_counts(case):
    """Whole GPUs, time-slicing, MIG single and mixed: the plugin serves what the NodePool node shows."""
    dp, mig = MIG_CASES[case]
    for node in expand_node_pool(a100_pool(dp, mig)):
        kw = {}
        if mig is not None:
            kw = {"mig_config": mig.get("migParted", mig["config"]),
                  "mig_config_name": mig["config"] if "migParted" in mig else None}
        plugin = FakeDevicePlugin("A100-40GB", 2, parse_config(dp), "/tmp/unused", node.name, **kw)
        assert plugin.devices == node.devices
        assert {r: len(s.order) for r, s in plugin.servers.items()} == nvidia_capacity(node)
        layouts = None if mig is None else resolve_mig_config("A100-40GB", 2, kw["mig_config"],
                                                              kw["mig_config_name"])
        assert advertised_devices("A100-40GB", 2, parse_config(dp), node.name, layouts) == node.devices
        assert list(plugin.warnings) == node.raw.get("warnings", [])


def test_mig_strategies_advertise_nvidia_resource_names():
    layouts = resolve_mig_config("A100-40GB", 2, "all-balanced")
    mixed = advertised_devices("A100-40GB", 2, parse_config(MIXED), "a100-0", layouts)
    assert {r: len(ids) for r, ids in mixed.items()} == {
        "nvidia.com/mig-3g.20gb": 2, "nvidia.com/mig-2g.10gb": 2, "nvidia.com/mig-1g.5gb": 4}
    assert all(d.startswith("MIG-") for ids in mixed.values() for d in ids)
    single = advertised_devices("A100-40GB", 2, parse_config(SINGLE), "a100-0",
                                resolve_mig_config("A100-40GB", 2, "all-1g.5gb"))
    assert list(single) == ["nvidia.com/gpu"] and len(single["nvidia.com/gpu"]) == 14  # 7 instances x 2 GPUs
    # none: MIG-enabled GPUs stay whole GPUs (and the plugin warns)
    plugin = FakeDevicePlugin("A100-40GB", 2, None, "/tmp/unused", "a100-0", mig_layouts=layouts)
    assert plugin.devices == {"nvidia.com/gpu": gpu_uuids("a100-0", 2, "A100-40GB")}
    assert "no usable CUDA device" in plugin.warnings[0]
    assert {socket_name(r) for r in mixed} == {
        "nvidia-mig-3g.20gb.sock", "nvidia-mig-2g.10gb.sock", "nvidia-mig-1g.5gb.sock"}


@pytest.mark.parametrize(("cfg", "mig", "message"), [
    (SINGLE, "all-balanced", "^the device plugin cannot start: migStrategy single: more than one MIG device "
                             "type present on node"),
    (MIXED, "all-enabled", "^the device plugin cannot start: migStrategy mixed: GPUs 0, 1 have MIG enabled "
                           "but no MIG devices"),
    ({"sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}}, "all-balanced",
     "^the device plugin cannot start: MPS sharing is not supported for MIG devices"),
])
def test_plugin_refuses_to_start_where_nvidia_does(cfg, mig, message):
    with pytest.raises(GpuLabError, match=message):
        FakeDevicePlugin("A100-40GB", 2, parse_config(cfg), "/tmp/unused", "n", mig_config=mig)


def test_mig_config_errors_are_one_line(tmp_path, capsys):
    with pytest.raises(GpuLabError, match="^--mig-config: T4 GPUs do not support MIG"):
        FakeDevicePlugin("T4", 1, parse_config(MIXED), "/tmp/unused", mig_config="all-balanced")
    with pytest.raises(GpuLabError, match='^--mig-config: unknown MIG config "all-9g" for A100-40GB'):
        FakeDevicePlugin("A100-40GB", 1, parse_config(MIXED), "/tmp/unused", mig_config="all-9g")
    with pytest.raises(GpuLabError, match="^--mig-config: the mig-parted file has 2 configs; name one"):
        FakeDevicePlugin("A100-40GB", 2, parse_config(MIXED), "/tmp/unused", mig_config=CUSTOM)
    with pytest.raises(GpuLabError, match="^--mig-config-name needs --mig-config FILE"):
        FakeDevicePlugin("A100-40GB", 2, None, "/tmp/unused", mig_config_name="half")
    capsys.readouterr()
    bad = tmp_path / "mig.yaml"
    bad.write_text("version: v1\nmig-configs:\n  two-4g: [{devices: all, mig-enabled: true, "
                   "mig-devices: {4g.20gb: 2}}]\n")
    assert main(["--model", "A100-40GB", "--gpus", "1", "--config", "/dev/null", "--mig-config", str(bad),
                 "--plugin-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: --mig-config: mig-parted config: mig-configs.two-4g[0].mig-devices: ")
    assert err.count("\n") == 1


def test_ids_sockets_and_refusals():
    ids = gpu_uuids("h100-0", 2)
    assert ids == gpu_uuids("h100-0", 2) and ids != gpu_uuids("h100-1", 2) and ids[0].startswith("GPU-")
    assert advertised_devices("T4", 2, parse_config({"sharing": TS}), "t4-0") == {
        "nvidia.com/gpu.shared": [f"{u}::{r}" for u in gpu_uuids("t4-0", 2) for r in range(2)]}
    assert advertised_devices("T4", 0) == {}
    assert socket_name("nvidia.com/gpu") == "nvidia-gpu.sock"
    assert socket_name("nvidia.com/gpu.shared") == "nvidia-gpu.shared.sock"
    assert socket_name("nvidia.com/mig-1g.10gb") == "nvidia-mig-1g.10gb.sock"
    assert socket_name("nvidia.com/mig-1g.5gb.me") == "nvidia-mig-1g.5gb.me.sock"
    with pytest.raises(GpuLabError, match="socket path too long"):
        FakeDevicePlugin("T4", 1, None, "/tmp/" + "d" * 100)


def test_main_reports_a_bad_config_in_one_line(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("version: v1\nsharing:\n  timeSlicing:\n    resources: [{name: nvidia.com/gpu, replicas: 1}]\n")
    assert main(["--model", "T4", "--gpus", "1", "--config", str(cfg), "--plugin-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert err == f"error: {cfg}: sharing.timeSlicing.resources[0].replicas: number of replicas must be >= 2\n"
    assert main(["--model", "X9", "--gpus", "1", "--plugin-dir", str(tmp_path)]) == 1
    assert capsys.readouterr().err.startswith("error: ")


def _response(cfg, ids, node="n0", gpus=2):
    p = FakeDevicePlugin("H100-80GB", gpus, parse_config(cfg), "/tmp/unused", node)
    srv = next(iter(p.servers.values()))
    return srv, srv.container_response(ids(srv) if callable(ids) else ids)


def test_allocate_answers_follow_the_config():
    u = gpu_uuids("n0", 2)
    _, r = _response({}, u)
    assert dict(r.envs) == {"NVIDIA_VISIBLE_DEVICES": ",".join(u)} and not r.mounts and not r.devices
    _, r = _response({"flags": {"plugin": {"deviceIDStrategy": "index", "passDeviceSpecs": True}}}, [u[1]])
    assert dict(r.envs) == {"NVIDIA_VISIBLE_DEVICES": "1"}
    assert [(d.container_path, d.host_path, d.permissions) for d in r.devices] == [
        ("/dev/nvidia1", "/dev/nvidia1", "rw")]
    _, r = _response({"flags": {"plugin": {"deviceListStrategy": "volume-mounts"}}}, u[:1])
    assert r.envs["NVIDIA_VISIBLE_DEVICES"] == "/var/run/nvidia-container-devices"
    assert [(m.host_path, m.container_path) for m in r.mounts] == [
        ("/dev/null", f"/var/run/nvidia-container-devices/{u[0]}")]
    mps = {"sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}}
    srv, r = _response(mps, [f"{u[0]}::1"])
    assert dict(r.envs) == {"NVIDIA_VISIBLE_DEVICES": u[0],
                            "CUDA_MPS_PIPE_DIRECTORY": "/mps/nvidia.com/gpu/pipe"}
    assert srv.validate([f"{u[0]}::0", f"{u[1]}::0"]) == "maximum request size for shared resources is 1; found 2"
    srv, _ = _response({"sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}}, [])
    assert srv.validate([f"{u[0]}::0", f"{u[1]}::0"]) is None  # time-slicing allows > 1 by default
    assert srv.validate(["GPU-nope"]) == "unknown device: GPU-nope"


def test_cdi_strategies_name_nvidias_cdi_devices():
    u = gpu_uuids("n0", 2)
    _, r = _response({"flags": {"plugin": {"deviceListStrategy": "cdi-cri"}}}, u)
    assert [d.name for d in r.cdi_devices] == [f"k8s.device-plugin.nvidia.com/gpu={g}" for g in u]
    assert not r.envs and not r.annotations   # no envvar strategy: no NVIDIA_VISIBLE_DEVICES
    _, r = _response({"flags": {"plugin": {"deviceListStrategy": ["envvar", "cdi-annotations"],
                                           "deviceIDStrategy": "index"}}}, [u[1]])
    assert dict(r.envs) == {"NVIDIA_VISIBLE_DEVICES": "1"} and not r.cdi_devices
    ((key, value),) = r.annotations.items()
    prefix = "cdi.k8s.io/nvidia-device-plugin_"
    assert key.startswith(prefix) and len(key) == len(prefix) + 36  # a fresh UUID per response
    assert value == "k8s.device-plugin.nvidia.com/gpu=1"
    _, again = _response({"flags": {"plugin": {"deviceListStrategy": "cdi-annotations"}}}, [u[1]])
    assert list(again.annotations) != [key]
    _, r = _response({"flags": {"gdsEnabled": True, "plugin": {"deviceListStrategy": "cdi-annotations",
                                                               "cdiAnnotationPrefix": "custom.cdi/"}}}, [u[0]])
    ((key, value),) = r.annotations.items()
    assert key.startswith("custom.cdi/nvidia-device-plugin_")
    assert value == f"k8s.device-plugin.nvidia.com/gpu={u[0]},k8s.device-plugin.nvidia.com/gds=all"
    assert r.envs["NVIDIA_GDS"] == "enabled"


def test_mig_allocate_answers_ids_indexes_device_nodes_and_parent_health():
    mig = {"mig_config": "all-balanced"}
    gpus = gpu_uuids("a100-0", 2, "A100-40GB")
    (node,) = expand_node_pool(a100_pool(MIXED, {"config": "all-balanced"}, count=1))
    p = FakeDevicePlugin("A100-40GB", 2, parse_config(MIXED), "/tmp/unused", "a100-0", **mig)
    one = p.servers["nvidia.com/mig-1g.5gb"]
    ids = node.devices["nvidia.com/mig-1g.5gb"]  # 2 on GPU 0, then 2 on GPU 1
    r = one.container_response([ids[0], ids[3]])
    assert dict(r.envs) == {"NVIDIA_VISIBLE_DEVICES": f"{ids[0]},{ids[3]}"}

    cfg = {**MIXED, "flags": {**MIXED["flags"], "plugin": {"deviceIDStrategy": "index", "passDeviceSpecs": True}}}
    p = FakeDevicePlugin("A100-40GB", 2, parse_config(cfg), "/tmp/unused", "a100-0", **mig)
    one, three = p.servers["nvidia.com/mig-1g.5gb"], p.servers["nvidia.com/mig-3g.20gb"]
    r = one.container_response([ids[0], ids[3]])
    # all-balanced on an A100-40GB: 2g.10gb at slice 0, 1g.5gb at 2 and 3, 3g.20gb at 4 (by first slice)
    assert dict(r.envs) == {"NVIDIA_VISIBLE_DEVICES": "0:1,1:2"}
    assert [d.host_path for d in r.devices] == ["/dev/nvidia0", "/dev/nvidia1"]
    r = three.container_response([node.devices["nvidia.com/mig-3g.20gb"][1]])
    assert dict(r.envs) == {"NVIDIA_VISIBLE_DEVICES": "1:3"}

    # A GPU UUID names every MIG device on it, across resources; a MIG UUID names itself.
    p.set_health(gpus[0], False)
    bad = {r: [d for d, ok in h.items() if not ok] for r, h in p.health().items()}
    assert bad == {"nvidia.com/mig-3g.20gb": node.devices["nvidia.com/mig-3g.20gb"][:1],
                   "nvidia.com/mig-2g.10gb": node.devices["nvidia.com/mig-2g.10gb"][:1],
                   "nvidia.com/mig-1g.5gb": ids[:2]}
    p.apply_health_file(f"{ids[3]} Unhealthy\n")
    assert {r: [d for d, ok in h.items() if not ok] for r, h in p.health().items()} == {
        "nvidia.com/mig-3g.20gb": [], "nvidia.com/mig-2g.10gb": [], "nvidia.com/mig-1g.5gb": [ids[3]]}
    assert one.validate([ids[0], "MIG-nope"]) == "unknown device: MIG-nope"


def test_time_sliced_mig_replicas_allocate_their_mig_uuid():
    dp = {**MIXED, "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/mig-1g.5gb", "replicas": 2}]}}}
    p = FakeDevicePlugin("A100-40GB", 1, parse_config(dp), "/tmp/unused", "a100-0", mig_config="all-1g.5gb")
    srv = p.servers["nvidia.com/mig-1g.5gb"]
    assert len(srv.order) == 14 and srv.order[1] == srv.order[0].replace("::0", "::1")
    mig = srv.order[0].split("::")[0]
    assert dict(srv.container_response([srv.order[1]]).envs) == {"NVIDIA_VISIBLE_DEVICES": mig}
    assert srv.ids_for(mig) == srv.order[:2]


def test_register_rejects_bad_version_and_resource_name(short_dir):
    pb2, pb2_grpc = stubs.load()
    with KubeletServer(short_dir) as kubelet, grpc.insecure_channel("unix:" + kubelet.socket_path) as ch:
        stub = pb2_grpc.RegistrationStub(ch)
        with pytest.raises(grpc.RpcError) as exc:
            stub.Register(pb2.RegisterRequest(version="v1alpha", endpoint="x.sock", resource_name="nvidia.com/gpu"),
                          timeout=5)
        assert exc.value.details() == ('requested API version "v1alpha" is not supported by kubelet. '
                                       'Supported version is ["v1beta1"]')
        with pytest.raises(grpc.RpcError) as exc:
            stub.Register(pb2.RegisterRequest(version="v1beta1", endpoint="x.sock", resource_name="gpu"), timeout=5)
        assert exc.value.details() == 'the ResourceName "gpu" is invalid'
        assert kubelet.manager.capacity() == {}


def test_time_sliced_round_trip_and_kubelet_restart(short_dir):
    """In one process, over real unix sockets: shared resource, NVIDIA's refusal, re-registration."""
    res = "nvidia.com/gpu.shared"
    kubelet = KubeletServer(short_dir).start()
    plugin = FakeDevicePlugin("T4", 2, parse_config({"sharing": TS}), short_dir, "t4-0", poll=0.02)
    stop = threading.Event()
    loop = threading.Thread(target=plugin.serve_forever, args=(stop,), daemon=True)
    loop.start()
    try:
        assert kubelet.wait_for(lambda: kubelet.manager.allocatable().get(res) == 4, 5)
        assert kubelet.connected() == {res: "nvidia-gpu.shared.sock"}
        u = gpu_uuids("t4-0", 2)
        with pytest.raises(DeviceAllocationError) as exc:
            kubelet.allocate("ns/big", "c", res, 2)
        assert str(exc.value) == ('rpc error: code = Unknown desc = invalid allocation request for '
                                  '"nvidia.com/gpu.shared": invalid request: maximum request size for shared '
                                  'resources is 1; found 2')
        assert exc.value.admission_message.startswith("Allocate failed due to rpc error: code = Unknown")
        assert kubelet.manager.pods.allocations("ns/big") == {}  # rolled back
        a = kubelet.allocate("ns/a", "c", res, 1)
        b = kubelet.allocate("ns/b", "c", res, 1)
        assert (a.device_ids, b.device_ids) == ([f"{u[0]}::0"], [f"{u[1]}::0"])  # spread like NVIDIA
        assert a.envs == {"NVIDIA_VISIBLE_DEVICES": u[0]} and b.envs == {"NVIDIA_VISIBLE_DEVICES": u[1]}

        # kubelet restart: a new server wipes the folder and recreates kubelet.sock; the plugin re-registers
        kubelet.stop()
        assert kubelet.manager.allocatable() == {res: 0}
        kubelet = KubeletServer(short_dir).start()
        assert kubelet.wait_for(lambda: kubelet.manager.allocatable().get(res) == 4, 5)
        assert plugin.registrations == 2
    finally:
        stop.set()
        loop.join(5)
        plugin.stop()
        kubelet.stop()


def test_plugin_started_before_the_kubelet_registers_when_it_appears(short_dir):
    plugin = FakeDevicePlugin("T4", 1, None, short_dir, "t4-0", poll=0.02)
    assert plugin.start() is False  # no kubelet.sock yet
    stop = threading.Event()
    loop = threading.Thread(target=plugin.serve_forever, args=(stop,), daemon=True)
    loop.start()
    kubelet = KubeletServer(short_dir).start()
    try:
        assert kubelet.wait_for(lambda: kubelet.manager.allocatable().get("nvidia.com/gpu") == 1, 5)
        assert kubelet.manager.devices == {"nvidia.com/gpu": gpu_uuids("t4-0", 1)}
    finally:
        stop.set()
        loop.join(5)
        plugin.stop()
        kubelet.stop()
