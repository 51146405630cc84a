"""GpuUse records read off a sim session: device IDs back to GPU indexes, sharing, annotations."""

import gpu_lab
from gpu_lab.gpus.labels import gpu_uuids
from gpu_lab.metrics import dcgm_text, gpu_nodes, gpu_uses, utilisation

CLUSTER = """
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: h100}
spec: {count: 1, gpu: {model: H100-80GB, count: 4}}
---
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: l4}
spec:
  count: 1
  gpu: {model: L4, count: 2}
  devicePlugin:
    version: v1
    sharing:
      timeSlicing:
        resources: [{name: nvidia.com/gpu, replicas: 4}]
---
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: a100}
spec:
  count: 1
  gpu: {model: A100-80GB, count: 2}
  devicePlugin: {version: v1, flags: {migStrategy: mixed}}
  mig: {config: all-balanced}
"""


def pod(name, resource, n, util=None, mem=None, container="srv"):
    ann = {}
    if util is not None:
        ann["gpulab.dev/gpu-utilization"] = str(util)
    if mem is not None:
        ann["gpulab.dev/gpu-memory"] = mem
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "annotations": ann},
            "spec": {"containers": [{"name": container, "image": "x", "resources": {"limits": {resource: n}}}]}}


def session():
    pods = [pod("train", "nvidia.com/gpu", 2, 90, "70Gi", container="trainer"),
            pod("nb", "nvidia.com/gpu", 1, 25, "6Gi"),
            pod("svc", "nvidia.com/mig-2g.20gb", 1, 40, "12Gi")]
    lab = gpu_lab.connect("sim", deterministic=True)
    lab.apply(CLUSTER)
    # nodeName keeps each pod where the test expects it
    for p, node in zip(pods, ["h100-0", "l4-0", "a100-0"]):
        p["spec"]["nodeName"] = node
        lab.apply(p)
    lab.schedule()
    return lab, {p["metadata"]["name"]: p for p in pods}


def test_records_match_the_devices_the_plugin_handed_out():
    lab, manifests = session()
    uses = gpu_uses(lab, manifests, hours={"train": 2})
    by_pod = {}
    for u in uses:
        by_pod.setdefault(u.pod, []).append(u)
    devices = lab.pods().set_index("name")["devices"]
    train = by_pod["train"]
    assert len(train) == 2 and {u.requested for u in train} == {2}
    ids = gpu_uuids("h100-0", 4)
    assert sorted(ids[u.gpu] for u in train) == sorted(devices["train"]["nvidia.com/gpu"])
    assert {u.container for u in train} == {"trainer"} and {u.hours for u in train} == {2}
    assert train[0].utilization == 90 and train[0].memory_mib == 70 * 1024 and train[0].sharing == "none"
    (nb,) = by_pod["nb"]
    assert nb.sharing == "time-slicing" and nb.replicas == 4 and nb.device_id.endswith("::0")
    assert gpu_uuids("l4-0", 2)[nb.gpu] == nb.device_id.split("::")[0]
    (svc,) = by_pod["svc"]
    assert svc.sharing == "mig" and svc.mig_profile == "2g.20gb" and svc.model == "A100-80GB"
    assert svc.device_id == devices["svc"]["nvidia.com/mig-2g.20gb"][0]
    assert 0 <= svc.gpu < 2


def test_session_records_feed_the_table_and_the_exporter():
    lab, manifests = session()
    uses = gpu_uses(lab, manifests)
    nodes = gpu_nodes(lab)
    assert {(n.name, n.model, n.gpus, n.mig) for n in nodes} == {("h100-0", "H100-80GB", 4, False), ("l4-0", "L4", 2, False),
                                                          ("a100-0", "A100-80GB", 2, True)}
    df = utilisation(uses)
    assert len(df) == 4 and set(df["pod"]) == {"train", "nb", "svc"}
    text = dcgm_text(uses, nodes)
    util = [ln for ln in text.splitlines() if ln.startswith("DCGM_FI_DEV_GPU_UTIL{")]
    # 4 H100 + 2 L4 GPUs; the MIG GPUs report no DCGM_FI_DEV_GPU_UTIL
    assert len(util) == 6
    assert sum('pod="train"' in ln for ln in util) == 2 and sum('pod="nb"' in ln for ln in util) == 1
    assert sum('pod="' not in ln for ln in util) == 3
    assert 'GPU_I_PROFILE="2g.20gb"' in text and 'pod="svc"' in text


def test_pods_missing_from_the_manifests_given_declare_nothing():
    lab, _ = session()
    uses = gpu_uses(lab, {})
    assert uses and all(u.utilization is None and u.container == "" for u in uses)


def test_a_session_gives_its_own_pods_annotations_without_manifests():
    import gpu_lab

    lab = gpu_lab.connect("sim")
    lab.apply([{"apiVersion": "gpulab.dev/v1alpha1", "kind": "NodePool", "metadata": {"name": "a100"},
                "spec": {"count": 1, "gpu": {"model": "A100-SXM4-80GB", "count": 8}}},
               {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "chat", "annotations": {"gpulab.dev/gpu-utilization": "20",
                                                              "gpulab.dev/gpu-memory": "10Gi"}},
                "spec": {"containers": [{"name": "server", "image": "x",
                                         "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}])
    lab.schedule()
    (use,) = gpu_lab.metrics.gpu_uses(lab)
    assert (use.pod, use.container, use.utilization, use.memory_mib) == ("chat", "server", 20, 10240)
    assert gpu_lab.metrics.waste([use]).iloc[0]["gpu_hours_wasted"] == 0.8
