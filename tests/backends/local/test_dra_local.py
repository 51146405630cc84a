"""Dynamic Resource Allocation on the real control plane: NVIDIA's DRA driver played by the
node agent (ResourceSlices of driver gpu.nvidia.com, NVIDIA's DeviceClasses, claims
"prepared" on the pod), claims allocated by kube-scheduler v1.37.2's DynamicResources plugin,
template claims made by kube-controller-manager's resourceclaim controller, NoExecute device
taints enforced by its device-taint-eviction controller.

One lab in a private home, reset between cases; the scenarios are tests/backends/dra/*.yaml.
The messages are kube-apiserver's and kube-scheduler's own (also in the module's report).
Pods with template claims enter kube-scheduler's queue when the controller has made their
claims, in no fixed order: cases with several pods that compete assert on what they got
together, or create the pods one at a time.
"""

from __future__ import annotations

import http.client
import re
import subprocess
import time
from pathlib import Path

import pytest
import yaml
from realcluster import shared_lab

from gpu_lab.backends.local.components import APISERVER, CONTROLLER_MANAGER, SCHEDULER
from gpu_lab.dradriver import resourceslices as rs
from gpu_lab.gpus.labels import gpu_uuids
from gpu_lab.gpus.mig import geometry, is_valid_layout
from gpu_lab.kube import ApiError
from gpu_lab.model.documents import load_documents

pytestmark = pytest.mark.controlplane
DRA = Path(__file__).parents[1] / "dra"
AV = rs.API_VERSION
PREEMPTION = "preemption: 0/{n} nodes are available: {n} Preemption is not helpful for scheduling."
CANNOT = "0/{n} nodes are available: {n} cannot allocate all claims. " + PREEMPTION
#: on by default in v1.37.2 (pkg/features/kube_features.go); nothing in the lab's flags turns them off
GATES = ("DynamicResourceAllocation", "DRAPartitionableDevices", "DRAConsumableCapacity",
         "DRAExtendedResource", "DRAPrioritizedList", "DRADeviceTaints", "DRADeviceTaintRules")


@pytest.fixture(scope="module")
def lab(request):
    yield from shared_lab(request, "the DRA tests", timeout=60)


@pytest.fixture
def fresh(lab):
    lab.reset()
    return lab


def by_name(pods):
    return pods.set_index("name").sort_index()


def claim_of(lab, pod: str) -> dict:
    """The ResourceClaim reserved for ``pod`` (default namespace)."""
    uid = lab.client.get("Pod", pod, "default")["metadata"]["uid"]
    for c in lab.client.list("ResourceClaim", namespace="default", api_version=AV)["items"]:
        if any(r["uid"] == uid for r in (c.get("status") or {}).get("reservedFor") or []):
            return c
    raise AssertionError(f"no claim reserved for {pod}")


def allocated(claim: dict) -> list[tuple[str, str, str]]:
    """(request, pool, device) of each device the claim got."""
    results = claim["status"]["allocation"]["devices"]["results"]
    return [(r["request"], r["pool"], r["device"]) for r in results]


def slice_device(lab, pool: str, name: str) -> dict:
    for s in lab.client.list("ResourceSlice", api_version=AV)["items"]:
        if s["spec"]["pool"]["name"] == pool:
            for d in s["spec"].get("devices") or []:
                if d["name"] == name:
                    return d
    raise AssertionError(f"{pool} publishes no device {name}")


def docs(name: str) -> list[dict]:
    return load_documents(DRA / f"{name}.yaml")


def dump(documents) -> str:
    return yaml.safe_dump_all(documents, sort_keys=False)


# ---------------------------------------------------------------------- the cluster


def metrics(lab, component: str) -> str:
    cluster = lab.cluster
    port = cluster.state.load()["ports"][component]
    conn = http.client.HTTPSConnection("127.0.0.1", port, context=cluster._context("admin"), timeout=10)  # noqa: SLF001
    try:
        conn.request("GET", "/metrics")
        return conn.getresponse().read().decode()
    finally:
        conn.close()


def test_every_component_runs_with_the_dra_gates_on_and_the_scheduler_has_dynamic_resources(lab, tmp_path):
    for component in (APISERVER, SCHEDULER, CONTROLLER_MANAGER):
        text = metrics(lab, component)
        for gate in GATES:
            assert re.search(rf'kubernetes_feature_enabled{{name="{gate}",stage="[A-Z]*"}} 1', text), (component, gate)
    served = {r["name"] for r in lab.client._discover(AV)}  # noqa: SLF001
    assert {"deviceclasses", "resourceclaims", "resourceclaimtemplates", "resourceslices",
            "devicetaintrules"} <= served
    # the profile kube-scheduler runs: its defaults written out by the binary itself
    state = lab.cluster.state.load()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\nkind: Config\ncurrent-context: x\n"
                          "clusters: [{name: x, cluster: {server: 'https://127.0.0.1:1'}}]\n"
                          "users: [{name: x, user: {}}]\ncontexts: [{name: x, context: {cluster: x, user: x}}]\n")
    (tmp_path / "c.yaml").write_text("apiVersion: kubescheduler.config.k8s.io/v1\nkind: KubeSchedulerConfiguration\n"
                                     f"clientConnection: {{kubeconfig: {kubeconfig}}}\n")
    argv = lab.cluster._argv(SCHEDULER, state)  # noqa: SLF001
    gates = next(a for a in argv if a.startswith("--feature-gates="))
    subprocess.run([argv[0], f"--config={tmp_path / 'c.yaml'}", f"--write-config-to={tmp_path / 'out.yaml'}",
                    "--secure-port=0", gates], check=True, capture_output=True, timeout=60)
    profile = yaml.safe_load((tmp_path / "out.yaml").read_text())["profiles"][0]
    assert {"name": "DynamicResources", "weight": 2} in profile["plugins"]["multiPoint"]["enabled"]
    args = next(a["args"] for a in profile["pluginConfig"] if a["name"] == "DynamicResources")
    assert args["filterTimeout"] == "10s"


def test_the_agent_publishes_nvidias_slices_and_device_classes(fresh):
    fresh.apply(DRA / "one_gpu.yaml")
    node = fresh.client.get("Node", "a100-0")
    assert not any(k.startswith("nvidia.com/") for k in node["status"]["allocatable"])
    assert node["metadata"]["labels"]["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB"
    (published,) = fresh.client.list("ResourceSlice", api_version=AV)["items"]
    assert published["metadata"]["ownerReferences"][0]["uid"] == node["metadata"]["uid"]
    spec = published["spec"]
    assert (spec["driver"], spec["nodeName"], spec["pool"]) == (
        "gpu.nvidia.com", "a100-0", {"name": "a100-0", "generation": 1, "resourceSliceCount": 1})
    assert [d["name"] for d in spec["devices"]] == ["gpu-0", "gpu-1"]
    assert spec["devices"][0]["attributes"] == {
        "architecture": {"string": "Ampere"}, "brand": {"string": "Nvidia"},
        "cudaComputeCapability": {"version": "8.0.0"}, "cudaDriverVersion": {"version": "13.0.0"},
        "driverVersion": {"version": "580.95.5"}, "productName": {"string": "NVIDIA A100-SXM4-40GB"},
        "type": {"string": "gpu"}, "uuid": {"string": gpu_uuids("a100-0", 2)[0]}}
    assert spec["devices"][0]["capacity"] == {"memory": {"value": "40Gi"}}
    classes = {c["metadata"]["name"]: c["spec"] for c in fresh.client.list("DeviceClass", api_version=AV)["items"]}
    assert classes["gpu.nvidia.com"]["extendedResourceName"] == "nvidia.com/gpu"
    assert classes["mig.nvidia.com"]["selectors"] == [{"cel": {"expression": (
        "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == 'mig'")}}]


# ---------------------------------------------------------------------- allocation


def test_a_claim_for_one_gpu_is_allocated_and_the_pod_runs_with_it(fresh):
    fresh.apply(DRA / "one_gpu.yaml")
    pod = by_name(fresh.schedule()).loc["train"]
    uuid = gpu_uuids("a100-0", 2)[0]
    assert (pod["node"], pod["phase"], pod["devices"]) == ("a100-0", "Running", {"gpu.nvidia.com": [uuid]})
    claim = claim_of(fresh, "train")
    assert claim["metadata"]["name"].startswith("train-gpu-")  # made from the template
    assert allocated(claim) == [("gpu", "a100-0", "gpu-0")]
    ann = fresh.client.get("Pod", "train", "default")["metadata"]["annotations"]
    assert yaml.safe_load(ann["gpulab.dev/env"]) == {"trainer": {"NVIDIA_VISIBLE_DEVICES": uuid}}
    assert yaml.safe_load(ann["gpulab.dev/cdi-devices"]) == {
        "trainer": [f"k8s.gpu.nvidia.com/claim={claim['metadata']['uid']}-gpu-0"]}


def test_cel_on_memory_picks_the_gpu_with_at_least_40gi(fresh):
    fresh.apply(DRA / "cel_memory.yaml")
    pod = by_name(fresh.schedule()).loc["big"]
    assert (pod["node"], pod["phase"]) == ("a100-0", "Running")
    ((_, pool, device),) = allocated(claim_of(fresh, "big"))
    assert pool == "a100-0"
    assert slice_device(fresh, pool, device)["capacity"]["memory"] == {"value": "40Gi"}
    assert slice_device(fresh, "l4-0", "gpu-0")["capacity"]["memory"] == {"value": "23034Mi"}


def test_one_claim_shared_by_two_pods(fresh):
    fresh.apply(DRA / "shared_claim.yaml")
    pods = by_name(fresh.schedule())
    assert (pods["phase"] == "Running").all() and pods["node"].nunique() == 1
    assert pods.loc["reader", "devices"] == pods.loc["writer", "devices"]
    claim = fresh.client.get("ResourceClaim", "shared-gpu", "default", api_version=AV)
    assert sorted(r["name"] for r in claim["status"]["reservedFor"]) == ["reader", "writer"]
    assert len(allocated(claim)) == 1


def test_two_mig_devices_on_the_same_gpu_with_match_attribute(fresh):
    fresh.apply(DRA / "mig_same_gpu.yaml")
    pods = by_name(fresh.schedule())
    assert pods.loc["pair", "phase"] == "Running"
    devices = [slice_device(fresh, pool, d) for _, pool, d in allocated(claim_of(fresh, "pair"))]
    assert len(devices) == 2
    assert {d["attributes"]["profile"]["string"] for d in devices} == {"1g.5gb"}
    assert len({d["attributes"]["parentUUID"]["string"] for d in devices}) == 1
    assert sorted(pods.loc["pair", "devices"]["gpu.nvidia.com"]) == sorted(
        d["attributes"]["uuid"]["string"] for d in devices)
    # three on one GPU: each has two 1g.5gb, so the node's four do not help
    assert (pods.loc["trio", "phase"], pods.loc["trio", "message"]) == ("Pending", CANNOT.format(n=1))


def test_a_prioritized_list_h100_else_two_a100s(fresh):
    fresh.apply(DRA / "prioritized_list.yaml")
    pods = by_name(fresh.schedule())
    got = {}
    for name, pod in pods.iterrows():
        if pod["phase"] == "Running":
            got[name] = sorted(allocated(claim_of(fresh, name)))
    assert sorted(got.values()) == [
        [("gpu/h100", "h100-0", "gpu-0")],
        [("gpu/two-a100", "a100-0", "gpu-0"), ("gpu/two-a100", "a100-0", "gpu-1")],
    ]
    (waiting,) = [name for name in pods.index if name not in got]
    assert pods.loc[waiting, "message"] == CANNOT.format(n=2)


def test_the_first_choice_wins_when_both_are_free(fresh):
    documents = docs("prioritized_list")
    fresh.apply(dump(documents[:4]))  # the pools, the template and the pod "first"
    fresh.schedule()
    assert allocated(claim_of(fresh, "first")) == [("gpu/h100", "h100-0", "gpu-0")]


def test_a_noexecute_device_taint_drains_the_gpu(fresh):
    fresh.apply(DRA / "one_gpu.yaml")
    fresh.schedule()
    assert allocated(claim_of(fresh, "train")) == [("gpu", "a100-0", "gpu-0")]
    fresh.apply(DRA / "device_taint.yaml")  # returns once the controller has evicted
    assert fresh.pods().empty
    events = [e for e in fresh.client.list("Event", namespace="default")["items"]
              if e["involvedObject"]["name"] == "train" and e["reason"] == "DeviceTaintManagerEviction"]
    assert [(e["message"], e["source"]["component"]) for e in events] == [
        ("Marking for deletion", "device-taint-eviction-controller")]
    fresh.apply(dump([d for d in docs("one_gpu") if d["kind"] == "Pod"]))
    assert by_name(fresh.schedule()).loc["train", "phase"] == "Running"
    assert allocated(claim_of(fresh, "train")) == [("gpu", "a100-0", "gpu-1")]


def test_nvidia_gpu_requests_are_served_through_dra_on_a_node_without_the_device_plugin(fresh):
    fresh.apply(DRA / "extended_resource.yaml")
    pod = by_name(fresh.schedule()).loc["legacy"]
    uuid = gpu_uuids("a100-0", 2)[0]
    assert (pod["node"], pod["phase"], pod["devices"]) == ("a100-0", "Running", {"nvidia.com/gpu": [uuid]})
    status = fresh.client.get("Pod", "legacy", "default")["status"]["extendedResourceClaimStatus"]
    assert status["requestMappings"] == [{"containerName": "cuda", "resourceName": "nvidia.com/gpu",
                                          "requestName": "container-0-request-0"}]
    claim = fresh.client.get("ResourceClaim", status["resourceClaimName"], "default", api_version=AV)
    assert claim["metadata"]["annotations"] == {"resource.kubernetes.io/extended-resource-claim": "true"}
    assert claim["spec"]["devices"]["requests"][0]["exactly"]["deviceClassName"] == "gpu.nvidia.com"
    assert allocated(claim) == [("container-0-request-0", "a100-0", "gpu-0")]


def test_the_device_plugin_and_dra_serve_nvidia_gpu_side_by_side(fresh):
    fresh.apply(DRA / "side_by_side.yaml")
    pods = by_name(fresh.schedule())
    assert (pods["phase"] == "Running").all()
    assert sorted(pods["node"]) == ["dra-0", "plugin-0"]
    for _, pod in pods.iterrows():  # the same GPU IDs on both paths
        assert pod["devices"] == {"nvidia.com/gpu": gpu_uuids(pod["node"], 1)}
    (via_dra,) = pods.index[pods["node"] == "dra-0"]
    assert fresh.client.get("Pod", via_dra, "default")["status"]["extendedResourceClaimStatus"]
    assert fresh.client.get("Node", "plugin-0")["status"]["allocatable"]["nvidia.com/gpu"] == "1"


def test_a_finished_pod_gives_its_gpu_back(fresh):
    fresh.apply(DRA / "job_takes_turns.yaml")
    assert sorted(fresh.schedule()["phase"]) == ["Pending", "Running"]
    fresh.advance(30)
    assert sorted(fresh.schedule()["phase"]) == ["Running", "Succeeded"]
    fresh.advance(30)
    assert list(fresh.schedule()["phase"]) == ["Succeeded"] * 2


# ---------------------------------------------------------------------- partitionable MIG


def mig_pod(name: str, template: str, claim: str = "mig") -> str:
    return dump([{"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        "resourceClaims": [{"name": claim, "resourceClaimTemplateName": template}],
        "containers": [{"name": "c", "image": "app", "resources": {"claims": [{"name": claim}]}}]}}])


def test_overlapping_mig_partitions_are_refused_by_the_scheduler(fresh):
    documents = docs("mig_partitions")
    fresh.apply(dump([d for d in documents if d["kind"] != "Pod"]))
    slices = fresh.client.list("ResourceSlice", api_version=AV)["items"]
    assert sorted(len(s["spec"].get("devices") or []) for s in slices) == [0, 26]  # counters, devices
    steps = [("a", "mig-3g", "gpu-0-mig-3g40gb-9-0"), ("b", "mig-4g", None),
             ("c", "mig-3g", "gpu-0-mig-3g40gb-9-4"), ("whole", "whole-gpu", None)]
    for name, template, device in steps:
        fresh.apply(mig_pod(name, template, "gpu" if template == "whole-gpu" else "mig"))
        pod = by_name(fresh.schedule()).loc[name]
        if device is None:  # 4g.40gb only starts at memory slice 0, which "a" holds
            assert (pod["phase"], pod["message"]) == ("Pending", CANNOT.format(n=1))
        else:
            assert pod["phase"] == "Running"
            assert allocated(claim_of(fresh, name)) == [("mig", "h100-0", device)]


def test_within_one_claim_the_allocator_finds_the_placement_that_fits(fresh):
    documents = docs("mig_partitions")
    claim = {"apiVersion": AV, "kind": "ResourceClaimTemplate", "metadata": {"name": "4g-and-3g"},
             "spec": {"spec": {"devices": {"requests": [
                 {"name": p, "exactly": {"deviceClassName": "mig.nvidia.com", "selectors": [{"cel": {
                     "expression": f"device.attributes['gpu.nvidia.com'].profile == '{p}.40gb'"}}]}}
                 for p in ("3g", "4g")]}}}}
    fresh.apply(dump([documents[0], claim]) + "---\n" + mig_pod("both", "4g-and-3g"))
    assert by_name(fresh.schedule()).loc["both", "phase"] == "Running"
    assert sorted(allocated(claim_of(fresh, "both"))) == [
        ("3g", "h100-0", "gpu-0-mig-3g40gb-9-4"), ("4g", "h100-0", "gpu-0-mig-4g40gb-5-0")]


#: layouts for the agreement check: the scheduler's verdict must equal validate_layout's
LAYOUTS = {
    "H100-80GB": [("7g.80gb",), ("4g.40gb", "3g.40gb"), ("4g.40gb", "2g.20gb", "1g.20gb"),
                  ("1g.10gb",) * 7, ("1g.10gb+me",) + ("1g.10gb",) * 6,
                  ("4g.40gb", "4g.40gb"), ("1g.20gb",) * 5, ("1g.10gb+me", "1g.10gb+me"),
                  ("3g.40gb", "3g.40gb", "1g.10gb"), ("7g.80gb", "1g.10gb")],
    "A100-40GB": [("3g.20gb", "3g.20gb"), ("2g.10gb",) * 3 + ("1g.10gb",), ("1g.5gb",) * 7,
                  ("1g.5gb",) * 8, ("2g.10gb",) * 4, ("4g.20gb", "3g.20gb", "1g.5gb")],
}


def layout_claim(i: int, layout: tuple[str, ...]) -> list[dict]:
    counts = {p: layout.count(p) for p in dict.fromkeys(layout)}
    requests = [{"name": f"r{j}", "exactly": {
        "deviceClassName": "mig.nvidia.com", "count": n, "selectors": [{"cel": {
            "expression": f"device.attributes['gpu.nvidia.com'].profile == '{p}'"}}]}}
        for j, (p, n) in enumerate(counts.items())]
    template = {"apiVersion": AV, "kind": "ResourceClaimTemplate", "metadata": {"name": f"layout-{i}"},
                "spec": {"spec": {"devices": {"requests": requests, "constraints": [
                    {"matchAttribute": "gpu.nvidia.com/parentUUID"}]}}}}
    return [template, *load_documents(mig_pod(f"layout-{i}", f"layout-{i}"))]


def test_partitions_the_scheduler_allows_are_exactly_our_mig_geometry(fresh):
    documents, expected, valid = [], {}, {}
    for model, layouts in LAYOUTS.items():
        pool = model.split("-")[0].lower()
        valid[model] = [lay for lay in layouts if is_valid_layout(model, lay)]
        # a GPU per valid layout, so that each fits on one even when the others came first
        documents.append({"apiVersion": "gpulab.dev/v1alpha1", "kind": "NodePool", "metadata": {"name": pool},
                          "spec": {"count": 1, "gpu": {"model": model, "count": len(valid[model])},
                                   "dra": {"dynamicMIG": True}}})
        for layout in layouts:
            i = len(expected)
            documents += layout_claim(i, layout)
            expected[f"layout-{i}"] = (model, layout, "Running" if layout in valid[model] else "Pending")
    assert {v[2] for v in expected.values()} == {"Running", "Pending"}
    fresh.apply(dump(documents))
    pods = by_name(fresh.schedule())
    got = {name: (*expected[name][:2], pods.loc[name, "phase"]) for name in expected}
    assert got == expected
    a100 = fresh.client.list("ResourceSlice", api_version=AV, field_selector="spec.nodeName=a100-0")["items"]
    names = {d["name"] for s in a100 for d in s["spec"].get("devices") or []}
    assert "gpu-0" not in names and len(names) == len(valid["A100-40GB"]) * sum(
        len(p.starts) for p in geometry("A100-40GB").profiles)  # Ampere in MIG mode: no whole GPU


# ---------------------------------------------------------------------- bad input


def test_cel_that_does_not_compile_is_refused_by_the_api_server(fresh):
    with pytest.raises(ApiError) as err:
        fresh.apply(DRA / "bad_cel.yaml")
    assert str(err.value) == (
        'ResourceClaimTemplate.resource.k8s.io "bad-cel" is invalid: spec.spec.devices.requests[0].exactly.'
        "selectors[0].cel.expression: Invalid value: \"device.attributes['gpu.nvidia.com'].productName ==\": "
        "compilation failed: ERROR: <input>:1:51: Syntax error: mismatched input '<EOF>' expecting {'[', '{', "
        "'(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}"
        "  | device.attributes['gpu.nvidia.com'].productName ==  | " + "." * 50 + "^")
    assert "\n" not in str(err.value)


def test_a_claim_for_a_missing_device_class_pends_with_the_schedulers_words(fresh):
    fresh.apply(DRA / "missing_class.yaml")
    pod = by_name(fresh.schedule()).loc["orphan"]
    assert (pod["phase"], pod["reason"], pod["message"]) == (
        "Pending", "Unschedulable",
        "0/1 nodes are available: request gpu: device class tpu.example.com does not exist. " + PREEMPTION.format(n=1))


def test_more_devices_than_any_node_has(fresh):
    fresh.apply(DRA / "too_many_devices.yaml")
    pod = by_name(fresh.schedule()).loc["greedy"]
    assert (pod["phase"], pod["message"]) == ("Pending", CANNOT.format(n=2))


def test_cel_that_fails_at_run_time_is_a_scheduler_error(fresh):
    documents = docs("one_gpu")
    documents[1]["spec"]["spec"]["devices"]["requests"][0]["exactly"]["selectors"] = [
        {"cel": {"expression": "device.attributes['gpu.nvidia.com'].profile == '1g.5gb'"}}]
    fresh.apply(dump(documents))
    pod = by_name(fresh.schedule()).loc["train"]
    assert (pod["phase"], pod["reason"]) == ("Pending", "SchedulerError")
    assert re.fullmatch(
        r'running "DynamicResources" filter plugin: claim default/train-gpu-[a-z0-9]{5}: selector #0 on device '
        r"gpu\.nvidia\.com/a100-0/gpu-0: CEL runtime error: no such key: profile\. consider using CEL optional "
        r"chaining \(\.\? followed by orValue\(\)\) or guarding the check with has\(\) for optional fields",
        pod["message"])


def test_a_missing_template_keeps_the_pod_out_of_the_queue_and_schedule_returns(fresh):
    documents = [d for d in docs("one_gpu") if d["kind"] != "ResourceClaimTemplate"]
    fresh.apply(dump(documents))
    pod = by_name(fresh.schedule()).loc["train"]
    assert (pod["phase"], pod["message"]) == ("Pending", "")
    uid = fresh.client.get("Pod", "train", "default")["metadata"]["uid"]
    assert {e["message"] for e in fresh.client.list("Event", namespace="default")["items"]
            if e["reason"] == "FailedResourceClaimCreation" and e["involvedObject"]["uid"] == uid} == {
        'PodResourceClaim gpu: resource claim template "one-gpu": '
        'resourceclaimtemplate.resource.k8s.io "one-gpu" not found'}


def test_a_pod_bound_past_the_scheduler_waits_for_its_claim_in_the_kubelets_words(fresh):
    documents = docs("shared_claim")[:3]  # the pool, the claim (never allocated) and "writer"
    documents[2]["spec"]["nodeName"] = "a100-0"  # no scheduler: nothing allocates the claim
    fresh.apply(dump(documents))
    pod = fresh.client.get("Pod", "writer", "default")
    claim = fresh.client.get("ResourceClaim", "shared-gpu", "default", api_version=AV)
    want = (f"Failed to prepare dynamic resources: prepare dynamic resources: pod writer "
            f"({pod['metadata']['uid']}) is not allowed to use ResourceClaim shared-gpu ({claim['metadata']['uid']})")
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        events = [e for e in fresh.client.list("Event", namespace="default")["items"]
                  if e["involvedObject"].get("uid") == pod["metadata"]["uid"]]
        if events:
            break
        time.sleep(0.2)
    assert [(e["reason"], e["message"], e["source"]["component"]) for e in events] == [
        ("FailedPrepareDynamicResources", want, "kubelet")]
    assert fresh.client.get("Pod", "writer", "default")["status"].get("phase") == "Pending"

