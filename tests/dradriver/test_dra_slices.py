"""What NVIDIA's DRA driver publishes for a fake GPU node, and what its kubelet plugin gives a
pod's containers: pure functions, no cluster (tests/backends/local/test_dra_local.py runs them
against the real scheduler)."""

from __future__ import annotations

import pytest

from gpu_lab.dradriver import prepare as dra
from gpu_lab.dradriver import resourceslices as rs
from gpu_lab.errors import InvalidNodePool
from gpu_lab.gpus.labels import gpu_uuids
from gpu_lab.model.nodepool import expand_node_pool


def pool(spec: dict, name: str = "gpus"):
    doc = {"apiVersion": "gpulab.dev/v1alpha1", "kind": "NodePool", "metadata": {"name": name},
           "spec": {"count": 1, **spec}}
    return expand_node_pool(doc)[0]


def error(spec: dict) -> str:
    with pytest.raises(InvalidNodePool) as err:
        pool(spec)
    return str(err.value)


# ---------------------------------------------------------------------- NodePool spec.dra


def test_a_dra_pool_advertises_no_extended_resources_and_keeps_gfds_labels():
    node = pool({"gpu": {"model": "A100-40GB", "count": 2}, "dra": {}})
    assert not any(r.startswith("nvidia.com/") for r in node.capacity) and node.devices == {}
    assert node.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB"
    assert rs.is_dra_node(node)
    assert not rs.is_dra_node(pool({"gpu": {"model": "A100-40GB", "count": 2}}))


@pytest.mark.parametrize("spec, message", [
    ({"cpu": "8", "memory": "8Gi", "dra": {}},
     "spec.dra: the DRA driver needs GPUs (spec.gpu.model and spec.gpu.count)"),
    ({"gpu": {"model": "L4", "count": 1}, "dra": {"dynamicMIG": True}},
     "spec.dra.dynamicMIG: Invalid value: true: L4 GPUs do not support MIG"),
    ({"gpu": {"model": "H100", "count": 1}, "dra": {"dynamicMIG": "yes"}},
     "spec.dra.dynamicMIG: Invalid value: 'yes': must be true or false"),
    ({"gpu": {"model": "H100", "count": 1}, "dra": {"driver": "x"}},
     "spec.dra.driver: unknown field (known: dynamicMIG)"),
    ({"gpu": {"model": "H100", "count": 1}, "dra": "on"},
     "spec.dra: must be a mapping (known fields: dynamicMIG)"),
    ({"gpu": {"model": "H100", "count": 1}, "dra": {}, "devicePlugin": {"version": "v1"}},
     "spec.devicePlugin: Forbidden: the pool's GPUs are published by NVIDIA's DRA driver (spec.dra), "
     "which replaces the device plugin"),
    ({"gpu": {"model": "H100", "count": 1}, "dra": {"dynamicMIG": True}, "mig": {"config": "all-balanced"}},
     "spec.mig: Forbidden: with spec.dra.dynamicMIG the driver creates MIG devices when claims are "
     "allocated; remove spec.mig"),
])
def test_bad_dra_specs_are_refused_in_one_line(spec, message):
    assert error(spec) == f'NodePool "gpus" is invalid: {message}'


# ---------------------------------------------------------------------- slices


def devices_of(slices: list[dict]) -> dict[str, dict]:
    return {d["name"]: d for s in slices for d in s["spec"].get("devices") or []}


def test_whole_gpus_carry_nvidias_attributes_and_memory():
    node = pool({"gpu": {"model": "H100-80GB", "count": 2}, "dra": {}}, "h100")
    (one,) = rs.resource_slices(node, "uid-1")
    assert one["metadata"]["name"] == "h100-0-gpu.nvidia.com-0"
    assert one["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": "h100-0", "uid": "uid-1", "controller": True}]
    gpu1 = devices_of([one])["gpu-1"]
    assert gpu1["attributes"]["uuid"] == {"string": gpu_uuids("h100-0", 2)[1]}
    assert gpu1["attributes"]["productName"] == {"string": "NVIDIA H100 80GB HBM3"}
    assert gpu1["attributes"]["architecture"] == {"string": "Hopper"}
    assert gpu1["attributes"]["cudaComputeCapability"] == {"version": "9.0.0"}
    assert gpu1["capacity"] == {"memory": {"value": "81559Mi"}}
    assert "index" not in gpu1["attributes"]  # NVIDIA removed it (commit 36fc80ab)


def test_static_mig_devices_are_named_and_sized_as_nvidias_driver_does():
    node = pool({"gpu": {"model": "A100-40GB", "count": 1}, "dra": {}, "mig": {"config": "all-balanced"}}, "mig")
    devices = devices_of(rs.resource_slices(node))
    assert list(devices) == ["gpu-0-mig-1g5gb-19-2", "gpu-0-mig-1g5gb-19-3", "gpu-0-mig-2g10gb-14-0",
                             "gpu-0-mig-3g20gb-9-4"]
    three = devices["gpu-0-mig-3g20gb-9-4"]
    assert three["attributes"]["type"] == {"string": "mig"}
    assert three["attributes"]["profile"] == {"string": "3g.20gb"}
    assert three["attributes"]["parentUUID"] == {"string": gpu_uuids("mig-0", 1)[0]}
    assert three["capacity"] == {
        "copyEngines": {"value": "3"}, "decoders": {"value": "2"}, "encoders": {"value": "0"},
        "jpegEngines": {"value": "0"}, "memory": {"value": "19968Mi"},
        "memorySlice4": {"value": "1"}, "memorySlice5": {"value": "1"}, "memorySlice6": {"value": "1"},
        "memorySlice7": {"value": "1"}, "multiprocessors": {"value": "42"}, "ofaEngines": {"value": "0"}}
    published = rs.published_devices(node)
    assert published["gpu-0-mig-3g20gb-9-4"].uuid == three["attributes"]["uuid"]["string"]


def test_dynamic_mig_shares_counters_between_every_placement_and_the_whole_gpu():
    node = pool({"gpu": {"model": "H100-80GB", "count": 1}, "dra": {"dynamicMIG": True}}, "h100")
    counters, devices = rs.resource_slices(node)
    assert "devices" not in counters["spec"] and counters["spec"]["pool"]["resourceSliceCount"] == 2
    (cset,) = counters["spec"]["sharedCounters"]
    assert cset["name"] == "gpu-0-counter-set"
    assert cset["counters"]["multiprocessors"] == {"value": "132"}
    assert cset["counters"]["copy-engines"] == {"value": "8"}
    assert [f"memory-slice-{i}" in cset["counters"] for i in range(8)] == [True] * 8
    by_name = devices_of([devices])
    assert len(by_name) == 26 and list(by_name) == sorted(by_name)
    assert by_name["gpu-0"]["consumesCounters"][0]["counters"] == cset["counters"]
    me = by_name["gpu-0-mig-1g10gb-me-20-6"]["consumesCounters"][0]["counters"]
    assert me["ofa-engines"] == {"value": "1"} and me["memory-slice-6"] == {"value": "1"}
    assert "memory-slice-5" not in me and "uuid" not in by_name["gpu-0-mig-1g10gb-me-20-6"]["attributes"]
    assert by_name["gpu-0-mig-4g40gb-5-0"]["consumesCounters"][0]["counters"]["memory-slice-3"] == {"value": "1"}


def test_dynamic_mig_on_ampere_offers_no_whole_gpu():
    node = pool({"gpu": {"model": "A100-40GB", "count": 1}, "dra": {"dynamicMIG": True}}, "a100")
    names = set(devices_of(rs.resource_slices(node)))
    assert "gpu-0" not in names and len(names) == 25
    assert names == set(rs.published_devices(node))


def test_nvidias_device_classes():
    gpu, mig = rs.device_classes()
    assert gpu["metadata"]["name"] == "gpu.nvidia.com" and mig["metadata"]["name"] == "mig.nvidia.com"
    assert gpu["spec"] == {"selectors": [{"cel": {"expression": (
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'gpu'")}}],
        "extendedResourceName": "nvidia.com/gpu"}


# ---------------------------------------------------------------------- prepare


NODE = pool({"gpu": {"model": "A100-40GB", "count": 2}, "dra": {}}, "a100")
DEVICES = rs.published_devices(NODE)
UUIDS = gpu_uuids("a100-0", 2)


def a_pod(**status) -> dict:
    return {"metadata": {"name": "p", "namespace": "default", "uid": "pod-uid"},
            "spec": {"resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "t"}],
                     "containers": [{"name": "a", "resources": {"claims": [{"name": "gpus", "request": "one"}]}},
                                    {"name": "b", "resources": {"claims": [{"name": "gpus"}]}},
                                    {"name": "sidecar"}]},
            "status": status}


def a_claim(results, reserved=("pod-uid",)) -> dict:
    return {"metadata": {"name": "p-gpus-x", "uid": "claim-uid"},
            "status": {"allocation": {"devices": {"results": results}},
                       "reservedFor": [{"resource": "pods", "uid": u} for u in reserved]}}


def result(request, device, pool_name="a100-0", driver="gpu.nvidia.com"):
    return {"request": request, "driver": driver, "pool": pool_name, "device": device}


def test_each_container_gets_the_devices_of_the_requests_it_names():
    claim = a_claim([result("one", "gpu-0"), result("two", "gpu-1"), result("two", "x", driver="other.example.com")])
    pod = a_pod(resourceClaimStatuses=[{"name": "gpus", "resourceClaimName": "p-gpus-x"}])
    got = dra.prepare(pod, "a100-0", DEVICES, {"p-gpus-x": claim}.get)
    assert got.devices == {"a": {"gpu.nvidia.com": [UUIDS[0]]}, "b": {"gpu.nvidia.com": UUIDS}}
    assert got.env["b"] == {"NVIDIA_VISIBLE_DEVICES": ",".join(UUIDS)}
    assert got.cdi["a"] == ["k8s.gpu.nvidia.com/claim=claim-uid-gpu-0"]


def test_prioritized_list_results_count_for_the_request_they_belong_to():
    claim = a_claim([result("one/h100", "gpu-1")])
    pod = a_pod(resourceClaimStatuses=[{"name": "gpus", "resourceClaimName": "p-gpus-x"}])
    assert dra.prepare(pod, "a100-0", DEVICES, {"p-gpus-x": claim}.get).devices["a"] == {"gpu.nvidia.com": [UUIDS[1]]}


def test_the_extended_resource_claim_is_recorded_under_the_resource_name():
    pod = {"metadata": {"name": "p", "namespace": "default", "uid": "pod-uid"},
           "spec": {"containers": [{"name": "cuda"}]},
           "status": {"extendedResourceClaimStatus": {"resourceClaimName": "p-extended-resources-x", "requestMappings": [
               {"containerName": "cuda", "resourceName": "nvidia.com/gpu", "requestName": "container-0-request-0"}]}}}
    claim = a_claim([result("container-0-request-0", "gpu-1")])
    assert dra.uses_claims(pod)
    got = dra.prepare(pod, "a100-0", DEVICES, {"p-extended-resources-x": claim}.get)
    assert got.devices == {"cuda": {"nvidia.com/gpu": [UUIDS[1]]}}


@pytest.mark.parametrize("status, claims, message", [
    ({}, {}, 'pod "default/p": ResourceClaim not created yet'),
    ({"resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": "p-gpus-x"}]}, {},
     'fetch ResourceClaim p-gpus-x: resourceclaims.resource.k8s.io "p-gpus-x" not found'),
    ({"resourceClaimStatuses": [{"name": "gpus", "resourceClaimName": "p-gpus-x"}]},
     {"p-gpus-x": a_claim([result("one", "gpu-0")], reserved=("other",))},
     "pod p (pod-uid) is not allowed to use ResourceClaim p-gpus-x (claim-uid)"),
])
def test_claims_that_are_not_ready_are_reported_in_the_kubelets_words(status, claims, message):
    with pytest.raises(dra.NotPrepared) as err:
        dra.prepare(a_pod(**status), "a100-0", DEVICES, claims.get)
    assert str(err.value) == message


def test_a_template_that_made_no_claim_needs_nothing():
    pod = a_pod(resourceClaimStatuses=[{"name": "gpus"}])
    assert not dra.prepare(pod, "a100-0", DEVICES, {}.get)
