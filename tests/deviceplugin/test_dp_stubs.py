"""Stubs generated from our proto: cache location, concurrent generation, wire names."""

import threading

from gpu_lab.deviceplugin import stubs


def test_cache_root_honours_gpu_lab_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("GPU_LAB_CACHE", str(tmp_path))
    assert stubs.cache_root() == tmp_path
    assert stubs.stub_dir() == tmp_path / "stubs" / stubs.stub_key()
    monkeypatch.delenv("GPU_LAB_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert stubs.cache_root() == tmp_path / "xdg" / "gpu-lab"


def test_concurrent_generation_leaves_one_complete_folder(tmp_path):
    dest = tmp_path / "stubs" / "k"
    errors = []

    def gen():
        try:
            stubs.generate(dest)
        except Exception as err:  # pragma: no cover - reported below
            errors.append(err)

    threads = [threading.Thread(target=gen) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert sorted(p.name for p in dest.iterdir()) == ["v1beta1.proto", "v1beta1_pb2.py", "v1beta1_pb2_grpc.py"]
    assert [p.name for p in dest.parent.iterdir()] == ["k"]  # no temporary folders left


def test_wire_names_and_field_numbers_match_the_published_api():
    pb2, pb2_grpc = stubs.load()
    fd = pb2.DESCRIPTOR
    assert fd.package == "v1beta1"
    services = {s.full_name: [m.name for m in s.methods] for s in fd.services_by_name.values()}
    assert services == {
        "v1beta1.Registration": ["Register"],
        "v1beta1.DevicePlugin": ["GetDevicePluginOptions", "ListAndWatch", "GetPreferredAllocation",
                                 "Allocate", "PreStartContainer"],
    }
    streaming = {m.name for m in fd.services_by_name["DevicePlugin"].methods if m.server_streaming}
    assert streaming == {"ListAndWatch"}
    fields = {name: {f.name: f.number for f in m.fields} for name, m in fd.message_types_by_name.items()}
    assert fields["RegisterRequest"] == {"version": 1, "endpoint": 2, "resource_name": 3, "options": 4}
    assert fields["DevicePluginOptions"] == {"pre_start_required": 1, "get_preferred_allocation_available": 2}
    assert fields["Device"] == {"ID": 1, "health": 2, "topology": 3}
    assert fields["ContainerPreferredAllocationRequest"] == {
        "available_deviceIDs": 1, "must_include_deviceIDs": 2, "allocation_size": 3}
    assert fields["ContainerAllocateResponse"] == {"envs": 1, "mounts": 2, "devices": 3, "annotations": 4,
                                                   "cdi_devices": 5}
    assert fields["ContainerAllocateRequest"] == {"devices_ids": 1}
    assert fields["ContainerPreferredAllocationResponse"] == {"deviceIDs": 1}
    # bytes a Go kubelet would send for RegisterRequest{version, endpoint, resource_name}
    req = pb2.RegisterRequest(version="v1beta1", endpoint="nvidia-gpu.sock", resource_name="nvidia.com/gpu")
    assert req.SerializeToString() == (b"\n\x07v1beta1\x12\x0fnvidia-gpu.sock\x1a\x0envidia.com/gpu")
    assert hasattr(pb2_grpc, "DevicePluginServicer") and hasattr(pb2_grpc, "RegistrationStub")
