"""PodDisruptionBudgets, ResourceQuotas and LimitRanges in the simulator (sim/policies.py and
the models it uses): the disruption controller's arithmetic, preemption that respects it,
quota admission and LimitRanger defaults, and bad input refused in one line."""

from __future__ import annotations

import pytest

import gpu_lab
from gpu_lab.errors import GpuLabError
from gpu_lab.model.disruptionbudget import PodView, parse_disruption_budget, status, violating
from gpu_lab.model.parse import parse_pod
from gpu_lab.model.resourcequota import Ledger, parse_resource_quota, pod_usage
from gpu_lab.model.scenario import load_scenario


def _pdb(spec: dict) -> object:
    return parse_disruption_budget({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
                                    "metadata": {"name": "b"}, "spec": spec})


def _views(ready: int, not_ready: int = 0, owner=("ReplicaSet", "web-1")) -> list[PodView]:
    return ([PodView("default", f"r{i}", {"app": "web"}, owner, True) for i in range(ready)]
            + [PodView("default", f"n{i}", {"app": "web"}, owner, False) for i in range(not_ready)])


SEL = {"matchLabels": {"app": "web"}}


@pytest.mark.parametrize("spec, ready, not_ready, scale, want", [
    ({"minAvailable": 2, "selector": SEL}, 3, 0, 3, (3, 2, 3, 1)),
    ({"minAvailable": 2, "selector": SEL}, 1, 1, 2, (1, 2, 2, 0)),
    ({"minAvailable": "50%", "selector": SEL}, 3, 0, 5, (3, 3, 5, 0)),  # 50% of 5 rounds up to 3
    ({"maxUnavailable": 1, "selector": SEL}, 4, 0, 4, (4, 3, 4, 1)),
    ({"maxUnavailable": "30%", "selector": SEL}, 4, 0, 4, (4, 2, 4, 2)),  # 30% of 4 rounds up to 2
    ({"maxUnavailable": 1, "selector": SEL}, 0, 0, 4, (0, 0, 0, 0)),  # no pods: no controller scale either
])
def test_disruption_controller_status(spec, ready, not_ready, scale, want):
    st = status(_pdb(spec), _views(ready, not_ready), lambda ns, owner: scale)
    assert st is not None
    assert (st.current_healthy, st.desired_healthy, st.expected_pods, st.disruptions_allowed) == want


def test_a_job_has_no_scale_so_the_sync_fails_and_nothing_may_be_disrupted():
    pdb = _pdb({"maxUnavailable": 1, "selector": SEL})
    assert status(pdb, _views(3, owner=("Job", "train")), lambda ns, owner: None) is None


def test_bare_pods_count_for_an_int_min_available_but_not_for_a_percent():
    bare = _views(3, owner=None)
    assert status(_pdb({"minAvailable": 1, "selector": SEL}), bare, lambda *_: 9).disruptions_allowed == 2
    st = status(_pdb({"minAvailable": "10%", "selector": SEL}), bare, lambda *_: 9)
    assert (st.expected_pods, st.disruptions_allowed) == (0, 0)


def test_an_empty_selector_counts_every_pod_for_the_controller_but_guards_none_for_the_scheduler():
    pdb = _pdb({"minAvailable": 1, "selector": {}})
    assert status(pdb, _views(2), lambda *_: 2).current_healthy == 2
    assert not pdb.guards("default", {"app": "web"})


def test_victims_violate_once_the_budget_is_spent_most_important_first():
    class V:
        def __init__(self, name, labels):
            self.name, self.namespace, self.labels = name, "default", labels

    a, b, c = V("a", {"app": "web"}), V("b", {"app": "web"}), V("c", {"app": "db"})
    bad, good = violating([a, b, c], [(_pdb({"minAvailable": 1, "selector": SEL}), 1)])
    assert [p.name for p, _ in bad] == ["b"] and [p.name for p in good] == ["a", "c"]


PREEMPTION = """
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: l4}
spec: {count: 2, gpu: {model: L4, count: 1}}
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: low}
value: 10
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: mid}
value: 20
---
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high}
value: 100
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: train}
spec:
  replicas: 1
  selector: {matchLabels: {app: train}}
  template:
    metadata: {labels: {app: train}}
    spec:
      priorityClassName: low
      containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]
---
apiVersion: v1
kind: Pod
metadata: {name: batch}
spec:
  priorityClassName: mid
  containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]
"""
URGENT = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "urgent"},
          "spec": {"priorityClassName": "high",
                   "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}


def _preempted(pdb: dict | None, cluster: str = PREEMPTION, arrival: dict | str = URGENT) -> list[str]:
    """Who ``arrival`` (a pod, or a gang, named urgent) preempts in ``cluster``, with or without a PDB on train."""
    s = gpu_lab.connect("sim")
    s.apply(cluster)
    if pdb is not None:
        s.apply({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "train"},
                 "spec": {**pdb, "selector": {"matchLabels": {"app": "train"}}}})
    s.schedule()
    s.apply(arrival)
    pods = s.schedule()
    assert pods.set_index("name").loc["urgent", "phase"] == "Running"
    return sorted(pods[pods["reason"] == "PreemptionByScheduler"]["name"].str.split("-").str[0])


def test_without_a_budget_the_lowest_priority_victim_goes():
    assert _preempted(None) == ["train"]


@pytest.mark.parametrize("pdb", [{"minAvailable": 1}, {"maxUnavailable": 0}, {"minAvailable": "100%"}])
def test_a_spent_budget_steers_preemption_to_the_node_without_violations(pdb):
    assert _preempted(pdb) == ["batch"]


def test_a_budget_with_a_disruption_left_does_not_steer():
    assert _preempted({"maxUnavailable": 1}) == ["train"]


# ------------------------------------------------------------------ quota and limit ranges

QUOTA = """
apiVersion: v1
kind: ResourceQuota
metadata: {name: q}
spec: {hard: {requests.nvidia.com/gpu: "2", limits.memory: 3Gi, pods: "5"}}
"""


def _pod(limits: dict, requests: dict | None = None, name: str = "p"):
    res = {"limits": limits, **({"requests": requests} if requests else {})}
    return parse_pod({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                      "spec": {"containers": [{"name": "c", "image": "x", "resources": res}]}})


def test_quota_counts_extended_resources_by_their_requests_name_only():
    usage = pod_usage(_pod({"nvidia.com/gpu": 2, "memory": "1Gi"}))
    assert usage["requests.nvidia.com/gpu"] == 2 and "nvidia.com/gpu" not in usage
    assert usage["limits.memory"] == usage["requests.memory"] == 2**30 and usage["pods"] == 1
    assert pod_usage(_pod({"nvidia.com/gpu": 2}), "Succeeded") == {"count/pods": 1}


def test_quota_refuses_in_the_admission_plugins_words():
    q = parse_resource_quota(load_scenario(QUOTA).documents[0])
    ledger = Ledger([q], {("default", "q"): {}})
    ledger.admit(_pod({"nvidia.com/gpu": 1, "memory": "1Gi"}, name="a"))
    with pytest.raises(GpuLabError) as err:
        ledger.admit(_pod({"nvidia.com/gpu": 2, "memory": "1Gi"}, name="b"))
    assert str(err.value) == ('pods "b" is forbidden: exceeded quota: q, requested: requests.nvidia.com/gpu=2, '
                              "used: requests.nvidia.com/gpu=1, limited: requests.nvidia.com/gpu=2")
    with pytest.raises(GpuLabError) as err:  # quota on limits.memory: every container must state it
        ledger.admit(_pod({"nvidia.com/gpu": 1}, name="c"))
    assert str(err.value) == 'pods "c" is forbidden: failed quota: q: must specify limits.memory for: c'
    assert ledger.used[("default", "q")]["requests.nvidia.com/gpu"] == 1  # refusals count nothing


def test_a_plain_extended_resource_in_hard_is_valid_but_limits_nothing():
    s = gpu_lab.connect("sim")
    s.apply("""
apiVersion: v1
kind: ResourceQuota
metadata: {name: q}
spec: {hard: {nvidia.com/gpu: "1"}}
---
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: l4}
spec: {count: 1, gpu: {model: L4, count: 4}}
---
apiVersion: v1
kind: Pod
metadata: {name: p}
spec: {containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 3}}}]}
""")
    assert s.schedule().loc[0, "phase"] == "Running"


def test_an_apply_with_a_pod_over_quota_creates_nothing():
    s = gpu_lab.connect("sim")
    s.apply(QUOTA.replace('"2"', '"1"'))
    with pytest.raises(GpuLabError, match='pods "big" is forbidden: exceeded quota: q'):
        s.apply([_manifest("small", 1), _manifest("big", 1)])
    assert s.pods().empty


def _manifest(name: str, gpus: int) -> dict:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [{"name": "c", "image": "x",
                                     "resources": {"limits": {"nvidia.com/gpu": gpus, "memory": "1Gi"}}}]}}


def test_a_replica_refused_by_quota_is_made_once_quota_frees():
    s = gpu_lab.connect("sim")
    s.apply("""
apiVersion: v1
kind: ResourceQuota
metadata: {name: q}
spec: {hard: {requests.nvidia.com/gpu: "2"}}
---
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: l4}
spec: {count: 1, gpu: {model: L4, count: 4}}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 3
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]}
""")
    pods = s.schedule()
    assert len(pods) == 2 and set(pods["phase"]) == {"Running"}
    events = s.events(kind="ReplicaSet")  # `kubectl get events --field-selector involvedObject.kind=ReplicaSet`
    failed = events[events["reason"] == "FailedCreate"]
    assert len(failed) == 1 and failed["message"].iloc[0].startswith("Error creating: pods ")
    s.delete(f"default/{pods.loc[0, 'name']}")  # its replacement and the missing replica: quota has room for one
    assert (s.schedule()["phase"] == "Running").sum() == 2


LIMITS = """
apiVersion: v1
kind: LimitRange
metadata: {name: lr}
spec:
  limits:
  - type: Container
    max: {cpu: "2"}
    defaultRequest: {cpu: 500m, memory: 1Gi}
"""


def test_limit_range_fills_defaults_and_annotates_the_pod():
    s = gpu_lab.connect("sim")
    s.apply(LIMITS)
    s.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
             "spec": {"containers": [{"name": "c", "image": "x"}]}})
    rec = s._sim.cluster.records["default/p"]
    # default (the limit) comes from max, the request from defaultRequest
    assert rec.pod.requests == {"cpu": 500, "memory": 2**30}
    assert rec.pod.containers[0].limits == {"cpu": 2000}
    assert rec.pod.annotations["kubernetes.io/limit-ranger"] == (
        "LimitRanger plugin set: cpu, memory request for container c; cpu limit for container c")


def test_limit_range_max_refuses_in_limit_rangers_words():
    s = gpu_lab.connect("sim")
    s.apply(LIMITS)
    with pytest.raises(GpuLabError) as err:
        s.apply({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                 "spec": {"containers": [{"name": "c", "image": "x", "resources": {"limits": {"cpu": "4"}}}]}})
    assert str(err.value) == 'pods "p" is forbidden: maximum cpu usage per Container is 2, but limit is 4'
    assert s.pods().empty


# ------------------------------------------------------------------ bad input, one line each

@pytest.mark.parametrize("doc, message", [
    ({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b"},
      "spec": {"minAvailable": "50", "selector": SEL}},
     'PodDisruptionBudget.policy "b" is invalid: spec.minAvailable: Invalid value: "50": a valid percent string '
     "must be a numeric string followed by an ending '%' (e.g. '1%',  or '93%', regex used for validation is "
     "'[0-9]+%')"),
    ({"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "b"},
      "spec": {"maxUnavailable": -1}},
     'PodDisruptionBudget.policy "b" is invalid: spec.maxUnavailable: Invalid value: -1: must be greater than or '
     "equal to 0"),
    ({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"}, "spec": {"hard": {"gpus": 2}}},
     'ResourceQuota "q" is invalid: [spec.hard[gpus]: Invalid value: "gpus": must be a standard resource type or '
     'fully qualified, spec.hard[gpus]: Invalid value: "gpus": must be a standard resource for quota]'),
    ({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
      "spec": {"hard": {"requests.nvidia.com/gpu": "-1"}}},
     'ResourceQuota "q" is invalid: spec.hard[requests.nvidia.com/gpu]: Invalid value: "-1": must be greater than '
     "or equal to 0"),
    ({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"},
      "spec": {"hard": {"pods": 2}, "scopes": ["BestEffort"]}},
     'ResourceQuota "q": spec.scopes and spec.scopeSelector are not supported by gpu-lab (a quota here counts '
     "every pod of its namespace)"),
    ({"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": "q"}, "spec": {"hard": {"services": 2}}},
     'ResourceQuota "q": spec.hard[services]: gpu-lab enforces ResourceQuota on pods only (pods, count/pods, cpu, '
     "memory, ephemeral-storage, their requests./limits. forms, hugepages and requests.<extended resource>)"),
    ({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l"},
      "spec": {"limits": [{"type": "Container", "min": {"cpu": "2"}, "max": {"cpu": "1"}}]}},
     # validated after defaulting: default from max (1), defaultRequest from default (1)
     'LimitRange "l" is invalid: [spec.limits[0].min[cpu]: Invalid value: "2": min value 2 is greater than max '
     'value 1, spec.limits[0].defaultRequest[cpu]: Invalid value: "1": min value 2 is greater than default '
     'request value 1, spec.limits[0].default[cpu]: Invalid value: "2": min value 2 is greater than default value 1]'),
    ({"apiVersion": "v1", "kind": "LimitRange", "metadata": {"name": "l"},
      "spec": {"limits": [{"type": "Pod", "max": {"cpu": "2"}}]}},
     'LimitRange "l": spec.limits[0].type: Pod is not supported by gpu-lab (only type Container limits are modelled)'),
])
def test_bad_policy_objects_are_refused_in_one_line(doc, message):
    with pytest.raises(GpuLabError) as err:
        load_scenario(doc)
    assert str(err.value) == message and "\n" not in message


def test_a_second_object_of_the_same_name_already_exists():
    s = gpu_lab.connect("sim")
    s.apply(QUOTA)
    with pytest.raises(GpuLabError, match='^resourcequotas "q" already exists$'):
        s.apply(QUOTA)
    with pytest.raises(GpuLabError, match='^namespaces "team" not found$'):
        s.apply(QUOTA.replace("{name: q}", "{name: q, namespace: team}"))


# PREEMPTION's pods on one node with two GPUs, so the gang's preemption has one domain
GANG_PREEMPTION = """
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: a100}
spec: {count: 1, gpu: {model: A100-SXM4-80GB, count: 2}}
---""" + PREEMPTION.split("---", 1)[1]
GANG = """
apiVersion: scheduling.k8s.io/v1beta1
kind: PodGroup
metadata: {name: urgent}
spec:
  priorityClassName: high
  schedulingPolicy: {gang: {minCount: 1}}
---
apiVersion: v1
kind: Pod
metadata: {name: urgent}
spec:
  priorityClassName: high
  schedulingGroup: {podGroupName: urgent}
  containers: [{name: c, image: x, resources: {limits: {nvidia.com/gpu: 1}}}]
"""


@pytest.mark.parametrize(("pdb", "victim"), [(None, "train"), ({"minAvailable": 1}, "batch")])
def test_pod_group_preemption_reprieves_budget_protected_victims_first(pdb, victim):
    # PodGroupPostFilter filters victims with FilterVictimsWithPDBViolation too: the spent
    # budget's pod is put back first, so the more important pod goes instead.
    assert _preempted(pdb, GANG_PREEMPTION, GANG) == [victim]
