import copy
import re

import pytest
import yaml

from gpu_lab.errors import GpuLabError, InvalidNodePool, InvalidObject
from gpu_lab.model.nodepool import expand_node_pool, node_from_manifest
from gpu_lab.model.objects import Taint
from gpu_lab.model.quantity import QUANTITY_PATTERN
from gpu_lab.names import stable_uid

H100_POOL = yaml.safe_load("""
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: h100}
spec:
  count: 2
  gpu: {model: H100-80GB, count: 8}
  cpu: "96"
  memory: 1024Gi
  labels: {team: research}
  taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
  devicePlugin: {version: v1, flags: {migStrategy: none}}
""")

GPU_UUID = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def pool(**spec):
    doc = copy.deepcopy(H100_POOL)
    for k, v in spec.items():
        if v is None:
            doc["spec"].pop(k, None)
        else:
            doc["spec"][k] = v
    return doc


def error(doc) -> str:
    with pytest.raises(GpuLabError) as exc:
        expand_node_pool(doc)
    return str(exc.value)


def test_h100_pool_expands_to_named_nodes():
    nodes = expand_node_pool(H100_POOL)
    assert [n.name for n in nodes] == ["h100-0", "h100-1"]
    n = nodes[1]
    assert n.pool == "h100"
    assert n.labels == {
        "kubernetes.io/hostname": "h100-1",
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "gpulab.dev/pool": "h100",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
        "nvidia.com/gpu.memory": "81559",
        "nvidia.com/gpu.count": "8",
        "nvidia.com/gpu.family": "hopper",
        "nvidia.com/gpu.compute.major": "9",
        "nvidia.com/gpu.compute.minor": "0",
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gpu.mode": "compute",
        "nvidia.com/mig.capable": "true",
        "nvidia.com/mps.capable": "false",
        "team": "research",
    }
    assert n.capacity == {
        "cpu": 96_000,
        "memory": 1024 * 2**30,
        "ephemeral-storage": 100 * 2**30,
        "pods": 110,
        "nvidia.com/gpu": 8,
    }
    assert n.allocatable == n.capacity and n.allocatable is not n.capacity
    assert n.taints == [Taint("nvidia.com/gpu", "present", "NoSchedule")]
    assert not n.unschedulable


def test_gpu_uuids_are_stable_and_distinct():
    a, b = expand_node_pool(H100_POOL)
    ids = a.devices["nvidia.com/gpu"]
    assert list(a.devices) == ["nvidia.com/gpu"]
    assert len(ids) == 8 and all(GPU_UUID.match(u) for u in ids)
    assert ids[3] == "GPU-" + stable_uid("h100-0", "3")
    assert len(set(ids) | set(b.devices["nvidia.com/gpu"])) == 16
    assert expand_node_pool(H100_POOL)[0].devices == a.devices  # same input, same IDs


def test_raw_keeps_a_copy_of_the_pool_spec():
    doc = copy.deepcopy(H100_POOL)
    n = expand_node_pool(doc)[0]
    assert n.raw["nodePool"] == H100_POOL["spec"]
    doc["spec"]["labels"]["team"] = "changed"
    assert n.raw["nodePool"]["labels"]["team"] == "research"


def test_optional_fields():
    doc = pool(pods=64, ephemeralStorage="500Gi", instanceType="p5.48xlarge", cpu="7500m", memory="1.5Ti")
    n = expand_node_pool(doc)[0]
    assert n.capacity["pods"] == 64
    assert n.capacity["ephemeral-storage"] == 500 * 2**30
    assert n.capacity["cpu"] == 7500
    assert n.capacity["memory"] == 3 * 2**39
    assert n.labels["node.kubernetes.io/instance-type"] == "p5.48xlarge"
    assert n.labels["nvidia.com/gpu.machine"] == "p5.48xlarge"


def test_user_labels_go_on_top():
    doc = pool(labels={"gpulab.dev/pool": "other", "nvidia.com/gpu.product": "custom", "x": ""})
    n = expand_node_pool(doc)[0]
    assert n.labels["gpulab.dev/pool"] == "other"
    assert n.labels["nvidia.com/gpu.product"] == "custom"
    assert n.labels["x"] == ""
    assert n.pool == "h100"


@pytest.mark.parametrize("gpu", [None, {"count": 0}, {"model": "T4", "count": 0}])
def test_cpu_pool(gpu):
    n = expand_node_pool(pool(gpu=gpu, taints=None, devicePlugin=None))[0]
    assert not any(k.startswith("nvidia.com/") for k in n.labels)
    assert "nvidia.com/gpu" not in n.capacity
    assert n.devices == {}
    assert n.taints == []


def test_zero_nodes():
    assert expand_node_pool(pool(count=0)) == []


def test_time_slicing_multiplies_capacity_and_devices():
    plugin = {"version": "v1", "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 4}]}}}
    doc = pool(gpu={"model": "T4", "count": 2}, devicePlugin=plugin)
    doc["metadata"]["name"] = "t4"
    n = expand_node_pool(doc)[0]
    assert n.capacity["nvidia.com/gpu"] == 8
    assert n.labels["nvidia.com/gpu.product"] == "Tesla-T4-SHARED"
    assert n.labels["nvidia.com/gpu.count"] == "2"
    assert n.labels["nvidia.com/gpu.replicas"] == "4"
    assert n.labels["nvidia.com/gpu.sharing-strategy"] == "time-slicing"
    ids = n.devices["nvidia.com/gpu"]
    first = "GPU-" + stable_uid("t4-0", "0")
    assert ids[:5] == [f"{first}::0", f"{first}::1", f"{first}::2", f"{first}::3",
                       "GPU-" + stable_uid("t4-0", "1") + "::0"]
    assert len(ids) == len(set(ids)) == 8
    assert n.raw["nodePool"]["devicePlugin"] == plugin


def test_rename_by_default_advertises_gpu_shared():
    sharing = {"timeSlicing": {"renameByDefault": True, "resources": [{"name": "nvidia.com/gpu", "replicas": 10}]}}
    n = expand_node_pool(pool(devicePlugin={"sharing": sharing}))[0]
    assert n.capacity["nvidia.com/gpu.shared"] == 80
    assert "nvidia.com/gpu" not in n.capacity
    assert list(n.devices) == ["nvidia.com/gpu.shared"] and len(n.devices["nvidia.com/gpu.shared"]) == 80
    assert n.labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3"


MIG_UUID = re.compile(r"^MIG-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def test_mig_mixed_strategy_pool():
    n = expand_node_pool(pool(devicePlugin={"flags": {"migStrategy": "mixed"}}, mig={"config": "all-balanced"}))[0]
    assert {r: q for r, q in n.capacity.items() if r.startswith("nvidia.com/")} == {
        "nvidia.com/mig-3g.40gb": 8, "nvidia.com/mig-2g.20gb": 8, "nvidia.com/mig-1g.10gb": 16}
    assert n.allocatable == n.capacity
    assert "nvidia.com/gpu" not in n.capacity
    assert n.labels["nvidia.com/mig.config"] == "all-balanced"
    assert n.labels["nvidia.com/mig.config.state"] == "success"
    assert n.labels["nvidia.com/mig.strategy"] == "mixed"
    assert n.labels["nvidia.com/mig-1g.10gb.count"] == "16"
    assert n.labels["nvidia.com/mig-1g.10gb.memory"] == "9984"
    assert n.labels["nvidia.com/mig-3g.40gb.product"] == "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb"
    assert n.labels["nvidia.com/gpu.count"] == "8" and n.labels["nvidia.com/gpu.replicas"] == "0"
    assert n.labels["team"] == "research"
    ids = [i for ids in n.devices.values() for i in ids]
    assert len(ids) == len(set(ids)) == 32 and all(MIG_UUID.match(i) for i in ids)
    assert list(n.devices) == ["nvidia.com/mig-3g.40gb", "nvidia.com/mig-2g.20gb", "nvidia.com/mig-1g.10gb"]
    other = expand_node_pool(pool(devicePlugin={"flags": {"migStrategy": "mixed"}}, mig={"config": "all-balanced"}))[1]
    assert not set(ids) & {i for ids in other.devices.values() for i in ids}
    assert "warnings" not in n.raw


def test_mig_single_strategy_pool():
    doc = pool(gpu={"model": "A100-40GB", "count": 8}, devicePlugin={"flags": {"migStrategy": "single"}},
               mig={"config": "all-1g.5gb"})
    n = expand_node_pool(doc)[0]
    assert n.capacity["nvidia.com/gpu"] == 56
    assert n.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"
    assert n.labels["nvidia.com/gpu.count"] == "56"
    assert n.labels["nvidia.com/gpu.memory"] == "4864"
    assert n.labels["nvidia.com/mig.strategy"] == "single"
    assert n.labels["nvidia.com/mig.config"] == "all-1g.5gb"
    assert all(MIG_UUID.match(i) for i in n.devices["nvidia.com/gpu"])


def test_mig_parted_file_in_the_pool():
    parted = {"version": "v1", "mig-configs": {"llm": [
        {"devices": [0, 1], "mig-enabled": True, "mig-devices": {"4g.40gb": 1, "3g.40gb": 1}},
        {"devices": [2, 3, 4, 5, 6, 7], "mig-enabled": False}]}}
    n = expand_node_pool(pool(devicePlugin={"flags": {"migStrategy": "mixed"}}, mig={"migParted": parted}))[0]
    assert {r: q for r, q in n.capacity.items() if r.startswith("nvidia.com/")} == {
        "nvidia.com/gpu": 6, "nvidia.com/mig-4g.40gb": 2, "nvidia.com/mig-3g.40gb": 2}
    assert n.labels["nvidia.com/mig.config"] == "llm"
    assert n.devices["nvidia.com/gpu"][0] == "GPU-" + stable_uid("h100-0", "2")
    assert n.labels["nvidia.com/gpu.replicas"] == "1"


def test_mig_with_strategy_none_keeps_whole_gpus_and_warns():
    n = expand_node_pool(pool(mig={"config": "all-1g.10gb"}))[0]
    assert n.capacity["nvidia.com/gpu"] == 8
    assert not any(k.startswith("nvidia.com/mig-") for k in n.capacity)
    assert n.raw["warnings"][0].startswith("migStrategy none: GPUs 0, 1, 2, 3, 4, 5, 6, 7 have MIG enabled")


def test_mig_time_sliced_instances():
    plugin = {"flags": {"migStrategy": "mixed"},
              "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/mig-1g.10gb", "replicas": 4}]}}}
    n = expand_node_pool(pool(devicePlugin=plugin, mig={"config": "all-1g.10gb"}))[0]
    assert n.capacity["nvidia.com/mig-1g.10gb"] == 8 * 7 * 4
    assert n.labels["nvidia.com/mig-1g.10gb.product"] == "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb-SHARED"


def test_mig_all_disabled_is_accepted():
    n = expand_node_pool(pool(mig={"config": "all-disabled"}))[0]
    assert n.labels["nvidia.com/mig.config"] == "all-disabled"
    assert n.labels["nvidia.com/mig.config.state"] == "success"
    assert n.capacity["nvidia.com/gpu"] == 8


KNOWN = "A100-40GB, A100-80GB, A10G, H100-80GB, H200-141GB, L4, L40S, T4"


@pytest.mark.parametrize(
    "spec, message",
    [
        ({"gpu": {"model": "X100", "count": 8}},
         f'NodePool "h100" is invalid: spec.gpu.model: unknown GPU model "X100" (known: {KNOWN})'),
        ({"gpu": {"count": 8}}, 'NodePool "h100" is invalid: spec.gpu.model: Required value'),
        ({"gpu": {"model": "H100", "count": 8, "type": "sxm"}},
         'NodePool "h100" is invalid: spec.gpu.type: unknown field (known: model, count, numaNodes)'),
        ({"gpu": {"model": "H100", "count": -1}},
         'NodePool "h100" is invalid: spec.gpu.count: Invalid value: -1: must be greater than or equal to 0'),
        ({"gpu": {"model": "H100", "count": 1.5}},
         'NodePool "h100" is invalid: spec.gpu.count: Invalid value: 1.5: must be an integer'),
        ({"gpu": {"model": "H100"}}, 'NodePool "h100" is invalid: spec.gpu.count: Required value'),
        ({"count": -1}, 'NodePool "h100" is invalid: spec.count: Invalid value: -1: must be greater than or equal to 0'),
        ({"count": "2"}, "NodePool \"h100\" is invalid: spec.count: Invalid value: '2': must be an integer"),
        ({"count": True}, 'NodePool "h100" is invalid: spec.count: Invalid value: True: must be an integer'),
        ({"count": None}, 'NodePool "h100" is invalid: spec.count: Required value'),
        ({"pods": -5}, 'NodePool "h100" is invalid: spec.pods: Invalid value: -5: must be greater than or equal to 0'),
        ({"cpu": "ninety"},
         f"NodePool \"h100\" is invalid: spec.cpu: quantities must match the regular expression '{QUANTITY_PATTERN}'"),
        ({"cpu": None, "gpu": None}, 'NodePool "h100" is invalid: spec.cpu: Required value'),  # no GPU to size from
        ({"memory": None, "gpu": None}, 'NodePool "h100" is invalid: spec.memory: Required value'),  # no GPU to size from
        ({"memory": "-1Gi"}, 'NodePool "h100" is invalid: spec.memory: Invalid value: "-1Gi": must be greater than or equal to 0'),
        ({"ephemeralStorage": "lots"},
         f"NodePool \"h100\" is invalid: spec.ephemeralStorage: quantities must match the regular expression '{QUANTITY_PATTERN}'"),
        ({"gpus": 8}, 'NodePool "h100" is invalid: spec.gpus: unknown field (known: count, autoscaling, gpu, cpu, '
                      "memory, ephemeralStorage, pods, instanceType, pricePerHour, zones, systemReserved, labels, taints, devicePlugin, "
                      "mig, dra, topologyManagerPolicy)"),
        ({"taints": [{"key": "gpu", "effect": "NoRun"}]},
         'NodePool "h100" is invalid: spec.taints[0].effect: Unsupported value: "NoRun": '
         'supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"'),
        ({"taints": [{"value": "x", "effect": "NoSchedule"}]}, 'NodePool "h100" is invalid: spec.taints[0].key: Required value'),
        ({"taints": [{"key": "gpu"}]}, 'NodePool "h100" is invalid: spec.taints[0].effect: Required value'),
        ({"taints": [{"key": "gpu", "effect": "NoSchedule"}, {"key": "gpu", "value": "y", "effect": "NoSchedule"}]},
         'NodePool "h100" is invalid: spec.taints[1]: Duplicate value: "gpu:NoSchedule": taints must be unique by key and effect pair'),
        ({"taints": {"key": "gpu"}}, 'NodePool "h100" is invalid: spec.taints: must be a list of {key, value, effect}'),
        ({"labels": {"spot": True}},
         'NodePool "h100" is invalid: spec.labels[spot]: Invalid value: True: must be a string (quote it in YAML)'),
        ({"labels": {"bad key": "x"}}, 'NodePool "h100" is invalid: spec.labels: Invalid value: "bad key": name part must be '
         "no more than 63 characters and must consist of alphanumeric characters, '-', '_' or '.', and must start "
         "and end with an alphanumeric character (regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
        ({"labels": {"Example.COM/x": "y"}},
         'NodePool "h100" is invalid: spec.labels: Invalid value: "Example.COM/x": prefix part must be a lowercase RFC 1123 subdomain'),
        ({"instanceType": "p5 48xlarge"}, 'NodePool "h100" is invalid: spec.instanceType: Invalid value: "p5 48xlarge": a valid '
         "label value must be no more than 63 characters and must consist of alphanumeric characters, '-', '_' or '.', "
         "and must start and end with an alphanumeric character (regex used for validation is "
         "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
        ({"mig": {"config": "all-1g.5gb"}},
         'NodePool "h100" is invalid: spec.mig.config: unknown MIG config "all-1g.5gb" for H100-80GB (known: all-disabled, '
         "all-enabled, all-1g.10gb, all-1g.10gb.me, all-1g.20gb, all-2g.20gb, all-3g.40gb, all-4g.40gb, "
         "all-7g.80gb, all-balanced)"),
        ({"mig": {}}, 'NodePool "h100" is invalid: spec.mig.config: Required value'),
        ({"mig": {"config": 7}}, 'NodePool "h100" is invalid: spec.mig.config: Invalid value: 7: must be a string'),
        ({"mig": {"migParted": {"version": "v1"}}},
         'NodePool "h100" is invalid: spec.mig.migParted: at least one entry in \'mig-configs\' is required'),
        ({"mig": {"migParted": {"version": "v1", "mig-configs": {"two": [
            {"devices": "all", "mig-enabled": True, "mig-devices": {"4g.40gb": 2}}]}}}},
         'NodePool "h100" is invalid: spec.mig.migParted: mig-configs.two[0].mig-devices: only one 4g.40gb fits on an '
         "H100-80GB (max 1 instance: it can only start at memory slice 0); asked for 2"),
        ({"mig": {"migParted": {"version": "v1", "mig-configs": {"a": [
            {"devices": [8], "mig-enabled": False}]}}}},
         'NodePool "h100" is invalid: spec.mig.migParted: mig-configs.a[0]: devices: GPU 8 does not exist (the node has '
         "8 GPUs, 0-7)"),
        ({"devicePlugin": {"flags": {"migStrategy": "single"}}, "mig": {"config": "all-balanced"}},
         'NodePool "h100" is invalid: spec.devicePlugin.flags.migStrategy: single: config "all-balanced" creates 1g.10gb, '
         "2g.20gb, 3g.40gb; every GPU must have instances of one profile (use mixed)"),
        ({"devicePlugin": {"flags": {"migStrategy": "mixed"}}, "mig": {"config": "all-enabled"}},
         'NodePool "h100" is invalid: spec.devicePlugin.flags.migStrategy: mixed: config "all-enabled" leaves GPU 0 with '
         "MIG enabled and no MIG devices; the device plugin would fail to start"),
        ({"devicePlugin": {"flags": {"migStrategy": "single"}}, "mig": {"migParted": {"version": "v1",
          "mig-configs": {"half": [{"devices": [0], "mig-enabled": True, "mig-devices": {"7g.80gb": 1}}]}}}},
         'NodePool "h100" is invalid: spec.devicePlugin.flags.migStrategy: single: config "half" leaves GPU 1 without MIG; '
         "every GPU must have MIG enabled with one profile (use mixed)"),
        ({"devicePlugin": {"sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}},
          "mig": {"config": "all-7g.80gb"}},
         'NodePool "h100" is invalid: spec.devicePlugin.sharing.mps: MPS sharing is not supported for MIG devices (config '
         '"all-7g.80gb" enables MIG); use time-slicing or all-disabled'),
        ({"devicePlugin": {"flags": {"migStrategy": "mixed"},
                           "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}}},
         'NodePool "h100" is invalid: spec.devicePlugin.flags.migStrategy: using --mig-strategy=mixed is not supported with MPS'),
        ({"gpu": None, "mig": {"config": "all-disabled"}},
         'NodePool "h100" is invalid: spec.mig: MIG needs GPUs (spec.gpu.model and spec.gpu.count)'),
        ({"mig": {"config": "all balanced"}},
         'NodePool "h100" is invalid: spec.mig.config: Invalid value: "all balanced": a valid label value must be no more '
         "than 63 characters and must consist of alphanumeric characters, '-', '_' or '.', and must start and end "
         "with an alphanumeric character (regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"),
        ({"devicePlugin": {"flags": {"migStrategy": "some"}}},
         'NodePool "h100" is invalid: spec.devicePlugin.flags.migStrategy: Unsupported value: "some": '
         'supported values: "none", "single", "mixed"'),
        ({"devicePlugin": {"version": "v2"}}, 'NodePool "h100" is invalid: spec.devicePlugin.version: unknown version: v2'),
        ({"devicePlugin": {"sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 1}]}}}},
         'NodePool "h100" is invalid: spec.devicePlugin.sharing.timeSlicing.resources[0].replicas: number of replicas must be >= 2'),
        ({"gpu": {"model": "T4", "count": 1}, "mig": {"config": "all-disabled"}},
         'NodePool "h100" is invalid: spec.mig: T4 GPUs do not support MIG'),
        ({"mig": {"config": "all-disabled", "profile": "x"}},
         'NodePool "h100" is invalid: spec.mig.profile: unknown field (known: config, migParted)'),
    ],
)
def test_bad_pools(spec, message):
    assert error(pool(**spec)) == message


def test_spec_is_required():
    doc = copy.deepcopy(H100_POOL)
    del doc["spec"]
    assert error(doc) == 'NodePool "h100" is invalid: spec: Required value'


@pytest.mark.parametrize(
    "change, message",
    [
        ({"metadata": {}}, "NodePool: metadata.name: Required value"),
        ({"kind": "Node"}, 'NodePool "h100": apiVersion/kind must be gpulab.dev/v1alpha1/NodePool, got gpulab.dev/v1alpha1/Node'),
        ({"metadata": {"name": "H100"}},
         'NodePool "H100" is invalid: metadata.name: Invalid value: "H100": a lowercase RFC 1123 label must consist of lower case '
         "alphanumeric characters or '-', and must start and end with an alphanumeric character "
         "(regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"),
        ({"metadata": {"name": "a" * 62}},
         f'NodePool "{"a" * 62}" is invalid: metadata.name: Invalid value: "{"a" * 62}": node name "{"a" * 62}-1" must be no '
         "more than 63 characters"),
    ],
)
def test_bad_documents(change, message):
    doc = copy.deepcopy(H100_POOL)
    doc.update(change)
    assert error(doc) == message


def test_document_must_be_a_mapping():
    assert error(["not", "a", "pool"]) == "NodePool: the document must be a mapping"


NODE = yaml.safe_load("""
apiVersion: v1
kind: Node
metadata:
  name: n1
  labels: {nvidia.com/gpu.product: Tesla-T4, kubernetes.io/hostname: n1}
  annotations: {note: hand-written}
spec:
  unschedulable: true
  taints: [{key: dedicated, value: ml, effect: NoExecute}]
status:
  capacity: {cpu: "7500m", memory: 64Gi, nvidia.com/gpu: "4", ephemeral-storage: "100G", hugepages-2Mi: "0"}
""")


def test_node_from_manifest():
    n = node_from_manifest(NODE)
    assert n.name == "n1"
    assert n.labels == {"nvidia.com/gpu.product": "Tesla-T4", "kubernetes.io/hostname": "n1",
                        "kubernetes.io/os": "linux"}
    assert n.annotations == {"note": "hand-written"}
    assert n.unschedulable is True
    assert n.taints == [Taint("dedicated", "ml", "NoExecute")]
    assert n.capacity == {
        "cpu": 7500,
        "memory": 64 * 2**30,
        "nvidia.com/gpu": 4,
        "ephemeral-storage": 100 * 10**9,
        "hugepages-2Mi": 0,
        "pods": 110,
    }
    assert n.allocatable == n.capacity and n.allocatable is not n.capacity
    assert n.pool is None and n.devices == {}
    assert n.raw is NODE


def test_manifest_allocatable_and_rounding():
    doc = copy.deepcopy(NODE)
    doc["status"]["capacity"]["pods"] = "250"
    doc["status"]["allocatable"] = {"cpu": "0.0015", "memory": "1.5", "nvidia.com/gpu": 3}
    n = node_from_manifest(doc)
    assert n.capacity["pods"] == 250
    # MilliValue / Value round up, as the scheduler reads them
    assert n.allocatable == {"cpu": 2, "memory": 2, "nvidia.com/gpu": 3, "pods": 110}


def test_minimal_manifest():
    n = node_from_manifest({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "bare"}})
    assert n.capacity == n.allocatable == {"pods": 110}
    # the labels every kubelet sets, nothing else
    assert n.labels == {"kubernetes.io/hostname": "bare", "kubernetes.io/os": "linux"}
    assert n.taints == [] and not n.unschedulable


def manifest_error(**status) -> str:
    doc = copy.deepcopy(NODE)
    doc["status"] = status
    with pytest.raises(GpuLabError) as exc:
        node_from_manifest(doc)
    return str(exc.value)


def test_manifest_bad_quantities():
    assert manifest_error(capacity={"cpu": "lots"}) == (
        f"Node \"n1\": status.capacity[cpu]: quantities must match the regular expression '{QUANTITY_PATTERN}'")
    assert manifest_error(capacity={"cpu": "4"}, allocatable={"memory": "1Gb"}) == (
        f"Node \"n1\": status.allocatable[memory]: quantities must match the regular expression '{QUANTITY_PATTERN}'")
    assert manifest_error(capacity={"memory": "-1"}) == (
        'Node "n1": status.capacity[memory]: Invalid value: "-1": must be greater than or equal to 0')
    assert manifest_error(capacity={"nvidia.com/gpu": "0.5"}) == (
        'Node "n1": status.capacity[nvidia.com/gpu]: Invalid value: "0.5": must be an integer')
    assert manifest_error(capacity=["cpu"]) == (
        'Node "n1": status.capacity: must be a mapping of resource name to quantity')


@pytest.mark.parametrize(
    "change, message",
    [
        ({"metadata": {}}, "Node: metadata.name: Required value"),
        ({"kind": "Pod"}, 'Node "n1": kind: expected v1 Node, got v1 Pod'),
        ({"spec": {"taints": [{"key": "k", "effect": "Never"}]}},
         'Node "n1": spec.taints[0].effect: Unsupported value: "Never": '
         'supported values: "NoSchedule", "PreferNoSchedule", "NoExecute"'),
        ({"spec": {"unschedulable": "yes"}}, "Node \"n1\": spec.unschedulable: Invalid value: 'yes': must be true or false"),
        ({"metadata": {"name": "n1", "labels": {"gpus": 4}}},
         'Node "n1": metadata.labels[gpus]: Invalid value: 4: must be a string (quote it in YAML)'),
        ({"metadata": {"name": "n1", "annotations": {"n": 1}}}, 'Node "n1": metadata.annotations: values must be strings'),
    ],
)
def test_manifest_bad_documents(change, message):
    doc = copy.deepcopy(NODE)
    doc.update(change)
    with pytest.raises(GpuLabError) as exc:
        node_from_manifest(doc)
    assert str(exc.value) == message


# ---- cpu/memory default from the GPU model's reference machine, per GPU

def gpu_pool(model, count, **spec):
    doc = pool(gpu={"model": model, "count": count}, cpu=None, memory=None, count=1)
    doc["spec"].update(spec)
    return doc


@pytest.mark.parametrize(
    "model, gpus, cpu_millis, memory_gib",
    [
        ("H100-80GB", 8, 192_000, 2048),  # p5.48xlarge: 192 vCPU, 2048 GiB for 8
        ("H200-141GB", 8, 192_000, 2048),  # p5en.48xlarge, same shape
        ("A100-40GB", 8, 96_000, 1152),  # p4d.24xlarge: 96 vCPU, 1152 GiB for 8
        ("A100-80GB", 4, 48_000, 576),  # p4de.24xlarge, half of it
        ("L4", 4, 16_000, 64),  # g6.xlarge: 4 vCPU, 16 GiB per GPU
        ("T4", 1, 4_000, 16),  # g4dn.xlarge
        ("A10G", 2, 8_000, 32),  # g5.xlarge
        ("L40S", 3, 12_000, 96),  # g6e.xlarge: 4 vCPU, 32 GiB per GPU
        ("h100", 1, 24_000, 256),  # aliases work too
    ],
)
def test_cpu_and_memory_default_from_reference_machine(model, gpus, cpu_millis, memory_gib):
    (node,) = expand_node_pool(gpu_pool(model, gpus))
    assert node.capacity["cpu"] == cpu_millis
    assert node.capacity["memory"] == memory_gib * 2**30
    assert node.capacity["nvidia.com/gpu"] == gpus
    assert node.allocatable == node.capacity  # no reservations: defaults are allocatable too
    assert "cpu" not in node.raw["nodePool"]  # the spec is kept as written


def test_defaults_cover_every_catalog_model():
    from gpu_lab.gpus.catalog import MODELS

    for name, m in MODELS.items():
        (node,) = expand_node_pool(gpu_pool(name, m.reference.gpus))
        assert node.capacity["cpu"] == m.reference.vcpus * 1000, name
        assert node.capacity["memory"] == m.reference.memory_gib * 2**30, name


def test_explicit_cpu_or_memory_wins():
    (node,) = expand_node_pool(gpu_pool("H100", 8, cpu="96"))
    assert (node.capacity["cpu"], node.capacity["memory"]) == (96_000, 2048 * 2**30)
    (node,) = expand_node_pool(gpu_pool("H100", 8, memory="1Ti"))
    assert (node.capacity["cpu"], node.capacity["memory"]) == (192_000, 2**40)
    (node,) = expand_node_pool(gpu_pool("L4", 4, cpu="500m", memory="3Gi"))
    assert (node.capacity["cpu"], node.capacity["memory"]) == (500, 3 * 2**30)


def test_explicit_bad_value_is_not_replaced_by_the_default():
    assert error(gpu_pool("H100", 8, cpu="-1")) == (
        'NodePool "h100" is invalid: spec.cpu: Invalid value: "-1": must be greater than or equal to 0')


@pytest.mark.parametrize("gpu", [None, {"model": "H100", "count": 0}, {"count": 0}])
def test_pool_without_gpus_still_needs_cpu_and_memory(gpu):
    doc = pool(gpu=None, cpu=None, memory=None)
    if gpu is not None:
        doc["spec"]["gpu"] = gpu
    assert error(doc) == 'NodePool "h100" is invalid: [spec.cpu: Required value, spec.memory: Required value]'


def test_pool_without_gpus_missing_one_resource_reads_as_before():
    assert error(pool(gpu=None, cpu=None)) == 'NodePool "h100" is invalid: spec.cpu: Required value'


def test_wrong_gpu_is_reported_once_not_as_missing_cpu():
    # fixing the GPU fixes the default, so a missing cpu/memory is not an error of its own
    assert error(gpu_pool("X100", 8)) == (
        f'NodePool "h100" is invalid: spec.gpu.model: unknown GPU model "X100" (known: {KNOWN})')
    assert error(gpu_pool("H100", -1)) == (
        'NodePool "h100" is invalid: spec.gpu.count: Invalid value: -1: must be greater than or equal to 0')


def test_defaulted_pool_in_a_scenario():
    from gpu_lab.model.scenario import parse_scenario

    doc = gpu_pool("L4", 4)
    doc["spec"]["count"] = 2
    sc = parse_scenario([doc])
    assert [n.allocatable["cpu"] for n in sc.nodes] == [16_000, 16_000]
    assert [n.allocatable["memory"] for n in sc.nodes] == [64 * 2**30] * 2


# ---- every error at once, as the API server reports them

MANY = {
    "count": -1,
    "gpu": {"model": "X100", "count": 8},
    "pods": -5,
    "labels": {"spot": True},
    "taints": [{"key": "gpu", "effect": "NoRun"}, {"effect": "NoSchedule"}],
    "devicePlugin": {"version": "v2", "flags": {"migStrategy": "some"}},
}


def many_errors():
    doc = pool(**MANY)
    with pytest.raises(InvalidNodePool) as exc:
        expand_node_pool(doc)
    return exc.value


def test_all_errors_listed_in_one_message_in_field_order():
    err = many_errors()
    assert err.errors == [
        "spec.count: Invalid value: -1: must be greater than or equal to 0",
        f'spec.gpu.model: unknown GPU model "X100" (known: {KNOWN})',
        "spec.pods: Invalid value: -5: must be greater than or equal to 0",
        "spec.labels[spot]: Invalid value: True: must be a string (quote it in YAML)",
        'spec.taints[0].effect: Unsupported value: "NoRun": supported values: "NoSchedule", '
        '"PreferNoSchedule", "NoExecute"',
        "spec.taints[1].key: Required value",
        "spec.devicePlugin.version: unknown version: v2",
        'spec.devicePlugin.flags.migStrategy: Unsupported value: "some": supported values: "none", '
        '"single", "mixed"',
    ]
    assert str(err) == 'NodePool "h100" is invalid: [' + ", ".join(err.errors) + "]"
    assert isinstance(err, InvalidObject) and isinstance(err, GpuLabError)
    assert (err.kind, err.name) == ("NodePool", "h100")
    assert str(many_errors()) == str(err)  # stable from run to run


def test_three_errors_exact_message():
    assert error(pool(count=None, gpu={"model": "H100"}, cpu="lots", ephemeralStorage="-1Gi")) == (
        'NodePool "h100" is invalid: [spec.count: Required value, spec.gpu.count: Required value, '
        f"spec.cpu: quantities must match the regular expression '{QUANTITY_PATTERN}', "
        'spec.ephemeralStorage: Invalid value: "-1Gi": must be greater than or equal to 0]')


def test_metadata_and_unknown_fields_join_the_list():
    doc = pool(count=-1, gpus=8, replicas=2)
    doc["metadata"]["name"] = "H100"
    msg = error(doc)
    assert msg.startswith('NodePool "H100" is invalid: [metadata.name: Invalid value: "H100": a lowercase '
                          "RFC 1123 label")
    known = ("count, autoscaling, gpu, cpu, memory, ephemeralStorage, pods, instanceType, pricePerHour, zones, "
             "systemReserved, labels, "
             "taints, devicePlugin, mig, dra, topologyManagerPolicy")
    assert msg.endswith(f", spec.gpus: unknown field (known: {known}), spec.replicas: unknown field (known: "
                        f"{known}), spec.count: Invalid value: -1: must be greater than or equal to 0]")


def test_every_label_and_taint_is_checked():
    msg = error(pool(labels={"a": 1, "b": "ok", "c": "no good"},
                     taints=[{"key": "x", "effect": "NoSchedule"}, {"key": "x", "effect": "NoSchedule"},
                             {"key": "y", "value": 3}]))
    assert msg == (
        'NodePool "h100" is invalid: ['
        "spec.labels[a]: Invalid value: 1: must be a string (quote it in YAML), "
        'spec.labels[c]: Invalid value: "no good": a valid label value must be no more than 63 characters and '
        "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
        "character (regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]'), "
        'spec.taints[1]: Duplicate value: "x:NoSchedule": taints must be unique by key and effect pair, '
        "spec.taints[2].value: Invalid value: 3: must be a string (quote it in YAML), "
        "spec.taints[2].effect: Required value]")


def test_nested_config_errors_are_collected_alongside():
    msg = error(pool(count=None, devicePlugin={
        "flags": {"migStrategy": "single"},
        "sharing": {"timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 1}]}}},
        mig={"config": "all-1g.5gb"}))
    assert msg == (
        'NodePool "h100" is invalid: [spec.count: Required value, '
        "spec.devicePlugin.sharing.timeSlicing.resources[0].replicas: number of replicas must be >= 2, "
        'spec.mig.config: unknown MIG config "all-1g.5gb" for H100-80GB (known: all-disabled, all-enabled, '
        "all-1g.10gb, all-1g.10gb.me, all-1g.20gb, all-2g.20gb, all-3g.40gb, all-4g.40gb, all-7g.80gb, "
        "all-balanced)]")


def test_mig_with_a_wrong_gpu_reports_the_gpu_only():
    assert error(pool(gpu={"model": "X100", "count": 8}, mig={"config": "all-balanced"})) == (
        f'NodePool "h100" is invalid: spec.gpu.model: unknown GPU model "X100" (known: {KNOWN})')


def test_plain_nodes_still_stop_at_the_first_error():
    doc = copy.deepcopy(NODE)
    doc["metadata"] = {"name": "n1", "labels": {"a": 1, "b": 2}}
    with pytest.raises(GpuLabError) as exc:
        node_from_manifest(doc)
    assert str(exc.value) == 'Node "n1": metadata.labels[a]: Invalid value: 1: must be a string (quote it in YAML)'


def test_zones_from_a_list_go_round_the_nodes_and_user_labels_still_win():
    nodes = expand_node_pool(pool(count=3, zones=["us-east-1a", "us-east-1b"]))
    assert [n.labels["topology.kubernetes.io/zone"] for n in nodes] == ["us-east-1a", "us-east-1b", "us-east-1a"]
    pinned = expand_node_pool(pool(zones=["a", "b"], labels={"topology.kubernetes.io/zone": "c"}))
    assert {n.labels["topology.kubernetes.io/zone"] for n in pinned} == {"c"}
    assert "topology.kubernetes.io/zone" not in expand_node_pool(pool())[0].labels


def test_system_reserved_is_taken_from_allocatable_not_capacity():
    node = expand_node_pool(pool(systemReserved={"cpu": "1500m", "memory": "16Gi"}))[0]
    assert node.capacity["cpu"] == 96000 and node.allocatable["cpu"] == 94500
    assert node.allocatable["memory"] == node.capacity["memory"] - 16 * 2**30
    assert node.allocatable["nvidia.com/gpu"] == node.capacity["nvidia.com/gpu"] == 8
    assert expand_node_pool(pool(systemReserved={"cpu": "200"}))[0].allocatable["cpu"] == 0  # not below 0


@pytest.mark.parametrize("spec, message", [
    ({"zones": []}, "spec.zones: Invalid value: []: must be a non-empty list of zone names"),
    ({"zones": "a"}, "spec.zones: Invalid value: 'a': must be a non-empty list of zone names"),
    ({"zones": ["a", "a"]}, 'spec.zones[1]: Duplicate value: "a"'),
    ({"zones": ["a", ""]}, "spec.zones[1]: Required value"),
    ({"systemReserved": {"nvidia.com/gpu": 1}},
     'spec.systemReserved.nvidia.com/gpu: Unsupported value: "nvidia.com/gpu": supported values: "cpu", '
     '"ephemeral-storage", "memory"'),
    ({"systemReserved": {"cpu": "lots"}}, "spec.systemReserved.cpu: "),
    ({"systemReserved": [1]}, "spec.systemReserved: Invalid value: [1]: must be a mapping of resource to quantity"),
])
def test_bad_zones_and_reservations_are_named(spec, message):
    assert message in error(pool(**spec))
