"""The fake plugin in-process: what it advertises, what Allocate answers, kubelet restarts."""

import shutil
import tempfile
import threading

import grpc
import pytest
import yaml

from gpu_lab.deviceplugin import plugin as plugin_module
from gpu_lab.deviceplugin import stubs
from gpu_lab.deviceplugin.config import parse_config
from gpu_lab.deviceplugin.kubelet import KubeletServer
from gpu_lab.deviceplugin.manager import DeviceAllocationError
from gpu_lab.deviceplugin.plugin import (
    FakeDevicePlugin,
    advertised_devices,
    gpu_uuids,
    main,
    socket_name,
)
from gpu_lab.errors import GpuLabError
from gpu_lab.model.nodepool import expand_node_pool

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


@pytest.mark.parametrize("plugin_cfg", [
    {"version": "v1"},
    {"sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}},
    {"sharing": TS},
    {"sharing": {"mps": {"renameByDefault": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 3}]}}},
])
@pytest.mark.parametrize("shared_rule", [True, False])
def test_plugin_advertises_the_same_ids_as_the_simulated_node(plugin_cfg, shared_rule, monkeypatch):
    if not shared_rule:  # the plugin's own rule, used when gpu_node_state is not there
        monkeypatch.setattr(plugin_module, "_gpu_node_state", None)
    for node in expand_node_pool(pool(plugin_cfg)):
        assert advertised_devices("H100-80GB", 8, parse_config(plugin_cfg), node.name) == node.devices


def test_ids_sockets_and_refusals():
    ids = gpu_uuids("h100-0", 2)
    assert ids == gpu_uuids("h100-0", 2) and ids != gpu_uuids("h100-1", 2) and ids[0].startswith("GPU-")
    assert advertised_devices("T4", 2, parse_config({"sharing": TS}), "t4-0") == {
        "nvidia.com/gpu.shared": [f"{u}::{r}" for u in gpu_uuids("t4-0", 2) for r in range(2)]}
    assert advertised_devices("T4", 0) == {}
    assert socket_name("nvidia.com/gpu") == "nvidia-gpu.sock"
    assert socket_name("nvidia.com/gpu.shared") == "nvidia-gpu.shared.sock"
    assert socket_name("nvidia.com/mig-1g.10gb") == "nvidia-mig-1g.10gb.sock"
    with pytest.raises(GpuLabError, match='^flags.migStrategy: "mixed": MIG strategies are not supported yet'):
        advertised_devices("A100-40GB", 8, parse_config({"flags": {"migStrategy": "mixed"}}))
    with pytest.raises(GpuLabError, match="only supported on NVML-based systems"):
        FakeDevicePlugin("T4", 1, parse_config({"flags": {"plugin": {"deviceListStrategy": "cdi-cri"}}}), "/tmp/x")
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
        assert kubelet.manager.allocations("ns/big") == {}  # rolled back
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
