"""DaemonSet and StatefulSet controllers in the sim, and Services in default spreading."""

from __future__ import annotations

import pytest

import gpu_lab
from gpu_lab.model.documents import load_documents
from gpu_lab.model.objects import Pod
from gpu_lab.model.scenario import parse_scenario
from gpu_lab.sim.defaultselector import Listers

NODES = """
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: h100}
spec:
  count: 2
  gpu: {model: H100-80GB, count: 8}
  cpu: "16"
  memory: 128Gi
  taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]
---
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: cpu}
spec:
  count: 1
  cpu: "32"
  memory: 128Gi
"""

DAEMONSET = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: dcgm}
spec:
  selector: {matchLabels: {app: dcgm}}
  template:
    metadata: {labels: {app: dcgm}}
    spec:
      tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
      containers:
      - {name: c, image: dcgm, resources: {requests: {cpu: "4"}}}
"""


def _rows(pods, prefix: str):
    return pods[pods["name"].str.startswith(prefix)]


def test_a_daemonset_runs_one_pod_on_each_node_it_tolerates_and_selects():
    s = gpu_lab.connect("sim", seed=0)
    s.apply(NODES + "---" + DAEMONSET)
    rows = _rows(s.schedule(), "dcgm-")
    assert sorted(rows["node"]) == ["cpu-0", "h100-0", "h100-1"]
    assert all(rows["phase"] == "Running")
    assert all(len(n) == len("dcgm-") + 5 for n in rows["name"])  # generateName <ds>-

    untolerated = DAEMONSET.replace("tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]",
                                    "nodeSelector: {gpulab.dev/pool: cpu}")
    s = gpu_lab.connect("sim", seed=0)
    s.apply(NODES + "---" + untolerated)
    assert list(_rows(s.schedule(), "dcgm-")["node"]) == ["cpu-0"]


def test_a_daemon_pod_is_pinned_by_node_affinity_and_carries_the_daemon_tolerations():
    s = gpu_lab.connect("sim", seed=0)
    s.apply(NODES + "---" + DAEMONSET)
    s.schedule()
    records = s._sim.cluster.records
    pod = next(r.pod for k, r in records.items() if r.node == "h100-1" and k.startswith("default/dcgm-"))
    terms = pod.affinity["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["h100-1"]}]}]
    keys = {(t.key, t.effect) for t in pod.tolerations}
    assert {("node.kubernetes.io/not-ready", "NoExecute"), ("node.kubernetes.io/unschedulable", "NoSchedule"),
            ("nvidia.com/gpu", "NoSchedule")} <= keys
    assert ("node.kubernetes.io/network-unavailable", "NoSchedule") not in keys  # not hostNetwork
    assert pod.labels["pod-template-generation"] == "1" and pod.owner_kind == "DaemonSet"


def test_a_daemonset_follows_nodes_that_join_and_change():
    s = gpu_lab.connect("sim", seed=0)
    s.apply(NODES + "---" + DAEMONSET.replace("      tolerations:", "      nodeSelector: {monitor: \"on\"}\n"
                                                 "      tolerations:"))
    assert _rows(s.schedule(), "dcgm-").empty  # no node is labelled
    s.apply("""
apiVersion: v1
kind: Node
metadata: {name: late, labels: {monitor: "on"}}
status: {capacity: {cpu: "8", memory: 32Gi, pods: "110"}}
""")
    assert list(_rows(s.schedule(), "dcgm-")["node"]) == ["late"]
    s.label_node("h100-0", {"monitor": "on"})
    rows = _rows(s.schedule(), "dcgm-")
    assert sorted(rows["node"]) == ["h100-0", "late"]
    # the label goes: the pod on that node goes too
    s.label_node("late", {"monitor": None})
    rows = _rows(s.schedule(), "dcgm-")
    assert list(rows["node"]) == ["h100-0"]


def test_nodes_the_autoscaler_adds_get_their_daemon_pod():
    s = gpu_lab.connect("sim", seed=0)
    s.apply("""
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: h100}
spec:
  count: 1
  gpu: {model: H100-80GB, count: 8}
  autoscaling: {minCount: 1, maxCount: 3, provisioningDelay: 60s}
---
apiVersion: batch/v1
kind: Job
metadata: {name: big}
spec:
  parallelism: 2
  completions: 2
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 8}}}]
---
""" + DAEMONSET.replace("tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]",
                        "tolerations: []"))
    s.schedule()
    s.advance(600)
    rows = _rows(s.pods(), "dcgm-")
    assert sorted(rows["node"]) == ["h100-0", "h100-1"] and set(rows["phase"]) == {"Running"}


def test_a_daemon_pod_takes_cpu_a_gpu_pod_then_lacks():
    s = gpu_lab.connect("sim", seed=0)
    s.apply(NODES + "---" + DAEMONSET)
    s.schedule()
    s.apply("""
apiVersion: v1
kind: Pod
metadata: {name: trainer}
spec:
  tolerations: [{key: nvidia.com/gpu, operator: Exists}]
  containers:
  - {name: c, image: t, resources: {requests: {cpu: "14"}, limits: {nvidia.com/gpu: 1}}}
""")
    row = s.schedule().set_index("name").loc["trainer"]
    assert row["phase"] == "Pending"
    assert row["message"].startswith("0/3 nodes are available: 1 Insufficient nvidia.com/gpu, 2 Insufficient cpu.")


STATEFULSET = """
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: l4}
spec:
  count: 1
  gpu: {model: L4, count: 2}
---
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 4
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers:
      - {name: c, image: db, resources: {limits: {nvidia.com/gpu: 1}}}
"""


def test_ordered_ready_creates_the_next_pod_only_once_the_previous_runs():
    s = gpu_lab.connect("sim", seed=0)
    s.apply(STATEFULSET)
    pods = s.schedule().set_index("name")
    assert sorted(pods.index) == ["db-0", "db-1", "db-2"]  # db-3 waits for db-2
    assert list(pods.loc[["db-0", "db-1", "db-2"], "phase"]) == ["Running", "Running", "Pending"]
    pod = s._sim.cluster.records["default/db-1"].pod
    assert pod.labels["statefulset.kubernetes.io/pod-name"] == "db-1"
    assert pod.labels["apps.kubernetes.io/pod-index"] == "1"
    assert (pod.raw["spec"]["hostname"], pod.raw["spec"]["subdomain"]) == ("db-1", "db")


def test_parallel_creates_every_pod_at_once():
    s = gpu_lab.connect("sim", seed=0)
    s.apply(STATEFULSET.replace("  serviceName: db\n", "  podManagementPolicy: Parallel\n"))
    pods = s.schedule().set_index("name")
    assert sorted(pods.index) == ["db-0", "db-1", "db-2", "db-3"]
    assert sorted(pods["phase"]) == ["Pending", "Pending", "Running", "Running"]


def test_a_deleted_stateful_pod_comes_back_under_its_name():
    s = gpu_lab.connect("sim", seed=0)
    s.apply(STATEFULSET.replace("replicas: 4", "replicas: 2"))
    s.schedule()
    s.delete("db-0")
    pods = s.schedule().set_index("name")
    assert sorted(pods.index) == ["db-0", "db-1"]
    assert list(pods["phase"]) == ["Running", "Running"]


# ------------------------------------------------------------------ default spreading


def _pod(labels: dict, owner: dict | None = None) -> Pod:
    raw = {"metadata": {"ownerReferences": [owner]} if owner else {}}
    return Pod(namespace="default", name="p", labels=labels, raw=raw)


def test_default_selector_merges_services_and_the_controllers_selector():
    sc = parse_scenario(load_documents("""
apiVersion: v1
kind: Service
metadata: {name: web}
spec: {selector: {app: web}, ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: tier}
spec: {selector: {tier: front}, ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: other}
spec: {selector: {app: other}, ports: [{port: 80}]}
---
apiVersion: v1
kind: Service
metadata: {name: none}
spec: {ports: [{port: 80}]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchExpressions: [{key: app, operator: In, values: [web]}]}
  template:
    metadata: {labels: {app: web, tier: front}}
    spec: {containers: [{name: c, image: x}]}
"""))
    listers = Listers()
    for svc in sc.services:
        listers.add_service(svc)
    record = sc.workloads[0]
    listers.add_workload(record)
    bare = listers.default_selector(_pod({"app": "web", "tier": "front"}))
    assert [(r.key, r.values) for r in bare.requirements] == [("app", ("web",)), ("tier", ("front",))]
    rs = record["owner"]
    owned = listers.default_selector(_pod({"app": "web", "tier": "front"}, {**rs, "controller": True}))
    keys = [(r.key, r.operator) for r in owned.requirements]
    assert ("pod-template-hash", "In") in keys and ("app", "In") in keys and len(keys) == 4
    # a Job is not in DefaultSelector's list; an owner reference without controller: true is no controller
    job = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "controller": True}
    assert listers.default_selector(_pod({"app": "x"}, job)).empty
    assert listers.default_selector(_pod({"app": "x"}, {**rs, "controller": False})).empty


@pytest.mark.parametrize("with_service,expected", [(True, [2, 2]), (False, [0, 4])])
def test_a_service_makes_bare_pods_spread(with_service, expected):
    from pathlib import Path

    path = Path(__file__).parents[1] / "fidelity" / "scenarios" / "service_spreads_bare_pods.yaml"
    docs = [d for d in load_documents(path) if with_service or d["kind"] != "Service"]
    s = gpu_lab.connect("sim", seed=0)
    s.apply(docs)
    counts = s.schedule()["node"].value_counts()
    assert sorted(counts.reindex(["l4-0", "l4-1"], fill_value=0)) == expected


# ------------------------------------------------------------------ bad input


@pytest.mark.parametrize("doc,message", [
    ("""
apiVersion: apps/v1
kind: StatefulSet
metadata: {name: Db}
spec:
  podManagementPolicy: Random
  selector: {}
  template: {metadata: {labels: {app: db}}, spec: {restartPolicy: Never, containers: [{name: c, image: x}]}}
""", 'StatefulSet.apps "Db" is invalid: [metadata.name: Invalid value: "Db": a lowercase RFC 1123 label must '
     "consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric "
     "character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?'), "
     "spec.podManagementPolicy: Invalid value: \"Random\": must be 'OrderedReady' or 'Parallel', "
     "spec.selector: Invalid value: {}: empty selector is invalid for statefulset, "
     'spec.template.spec.restartPolicy: Unsupported value: "Never": supported values: "Always"]'),
    ("""
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: d}
spec:
  template: {metadata: {labels: {app: d}}, spec: {containers: [{name: c, image: x}]}}
""", 'DaemonSet.apps "d" is invalid: spec.template.metadata.labels: Invalid value: {"app":"d"}: '
     "`selector` does not match template `labels`"),
    ("""
apiVersion: v1
kind: Service
metadata: {name: s}
spec:
  ports: [{port: 0, protocol: ICMP}, {port: 80}]
""", 'Service "s" is invalid: [spec.ports[0].name: Required value, spec.ports[0].port: Invalid value: 0: '
     'must be between 1 and 65535, inclusive, spec.ports[0].protocol: Unsupported value: "ICMP": supported '
     'values: "SCTP", "TCP", "UDP", spec.ports[0].targetPort: Invalid value: 0: must be between 1 and 65535, '
     'inclusive, spec.ports[1].name: Required value]'),
    ("""
apiVersion: v1
kind: Service
metadata: {name: s}
spec: {selector: {app: s}}
""", 'Service "s" is invalid: spec.ports: Required value'),
])
def test_bad_podsets_and_services_are_refused_in_the_api_servers_words(doc, message):
    s = gpu_lab.connect("sim", seed=0)
    with pytest.raises(gpu_lab.GpuLabError) as err:
        s.apply(doc)
    assert str(err.value) == message
    assert s.pods().empty


def test_a_service_name_is_taken_once():
    s = gpu_lab.connect("sim", seed=0)
    svc = "apiVersion: v1\nkind: Service\nmetadata: {name: web}\nspec: {ports: [{port: 80}]}\n"
    s.apply(svc)
    with pytest.raises(gpu_lab.GpuLabError, match='^services "web" already exists$'):
        s.apply(svc)
