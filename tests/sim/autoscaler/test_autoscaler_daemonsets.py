"""Template nodes carry their DaemonSet pods: cluster-autoscaler's template NodeInfo (release 1.37).

A pod that fits an empty new node but not one with the daemon pods on it does not
trigger a scale-up (or the expander picks a group whose nodes hold both); the
template comes from a real node of the group when one has been Ready for a minute
(its running daemon pods; others only with ``--force-ds`` or when
system-node-critical), else from the group itself (every DaemonSet that should run).
"""

from __future__ import annotations

import pytest
from scalekit import cpu_group, events, node, pod, ups

import gpu_lab
from gpu_lab.sim.autoscaler import Autoscaler, AutoscalerSpec, PodState, ScaleUp, parse_autoscaler

SMALL = cpu_group("small", cpu=8, mem_gi=32, delay=60.0)
LARGE = cpu_group("large", cpu=16, mem_gi=64, delay=60.0)


def daemon(name="agent", cpu_m=2000, node_name="tmpl", **kw) -> PodState:
    return PodState("default", f"{name}-pod-{node_name}", {"cpu": cpu_m, "memory": 64 * 2**20}, "DaemonSet",
                    owner_name=name, **kw)


def scaler(*groups, daemon_pods=None, **spec):
    return Autoscaler(AutoscalerSpec(**spec), groups, daemon_pods=daemon_pods)


def agents(*names, **kw):
    """daemon_pods: each named DaemonSet should run on every node."""
    def daemon_pods(group, example):
        where = example.name if example is not None else f"{group.name}-template"
        return [daemon(n, node_name=where, **kw) for n in names]
    return daemon_pods


def _not_triggered(acts):
    return [(e.involved, e.message) for e in events(acts, "NotTriggerScaleUp")]


# -- the model -------------------------------------------------------------------------------


def test_a_pod_that_fits_only_an_empty_node_does_not_trigger_a_scale_up():
    s = scaler(SMALL, daemon_pods=agents("agent"))
    acts = s.reconcile(0, [], [pod("big", cpu_m=7000)])
    assert ups(acts) == []
    assert _not_triggered(acts) == [("Pod default/big", "pod didn't trigger scale-up: 1 Insufficient cpu")]


def test_without_daemonsets_the_same_pod_scales_up():  # the daemon pods are what keeps it out
    acts = scaler(SMALL).reconcile(0, [], [pod("big", cpu_m=7000)])
    assert [u.pool for u in ups(acts)] == ["small"]


def test_a_bigger_group_that_holds_pod_and_daemon_is_picked():
    s = scaler(SMALL, LARGE, daemon_pods=agents("agent"))  # least-waste would pick small otherwise
    acts = s.reconcile(0, [], [pod("big", cpu_m=7000)])
    assert ups(acts) == [ScaleUp("large", 1, ("large-0",), 60.0, "TriggeredScaleUp",
                                 "pod triggered scale-up: [{large 0->1 (max: 4)}]", ("default/big",))]
    assert _not_triggered(acts) == []


def test_a_pod_that_fits_next_to_the_daemon_scales_up():
    s = scaler(SMALL, daemon_pods=agents("agent"))
    acts = s.reconcile(0, [], [pod("six", cpu_m=6000)])
    assert [(u.pool, u.count) for u in ups(acts)] == [("small", 1)]


def test_binpacking_leaves_room_for_the_daemon_on_every_new_node():
    three = [pod(f"w{i}", cpu_m=2500) for i in range(3)]
    assert ups(scaler(SMALL).reconcile(0, [], three))[0].count == 1  # 7.5 of 8 cpus
    acts = scaler(SMALL, daemon_pods=agents("agent")).reconcile(0, [], three)
    assert ups(acts)[0].count == 2  # 2 + 2.5 * 3 > 8: a second node


def test_pods_waiting_for_an_upcoming_node_count_its_daemon_pods():
    s = scaler(SMALL, daemon_pods=agents("agent"))
    s.reconcile(0, [], [pod("a", cpu_m=6000)])
    acts = s.reconcile(10, [], [pod("a", cpu_m=6000), pod("b", cpu_m=1000)])
    # a has the upcoming node's 6 free cpus; b does not fit beside it and the daemon: a second node
    assert [(u.pool, u.nodes) for u in ups(acts)] == [("small", ("small-1",))]


def test_a_stable_node_lends_its_running_daemon_pods_not_the_others():
    # agent runs on small-0; "late" was created since and has no pod there yet
    running = daemon("agent", node_name="small-0")
    s = scaler(SMALL, daemon_pods=agents("agent", "late"))
    acts = s.reconcile(100, [node("small-0", SMALL, running, pod("x", cpu_m=6000))], [pod("big", cpu_m=6000)])
    assert [u.pool for u in ups(acts)] == ["small"]  # 2 (agent) + 6 fit; late is not counted


def test_force_ds_counts_daemonsets_not_yet_on_the_example_node():
    running = daemon("agent", node_name="small-0")
    s = scaler(SMALL, daemon_pods=agents("agent", "late"), force_ds=True)
    acts = s.reconcile(100, [node("small-0", SMALL, running, pod("x", cpu_m=6000))], [pod("big", cpu_m=6000)])
    assert ups(acts) == []
    assert _not_triggered(acts) == [("Pod default/big", "pod didn't trigger scale-up: 1 Insufficient cpu")]


def test_system_node_critical_daemon_pods_count_without_force_ds():
    def daemon_pods(group, example):
        where = example.name if example is not None else "tmpl"
        return [daemon("agent", node_name=where),
                daemon("csi", node_name=where, priority_class_name="system-node-critical")]
    running = daemon("agent", node_name="small-0")
    s = scaler(SMALL, daemon_pods=daemon_pods)
    acts = s.reconcile(100, [node("small-0", SMALL, running, pod("x", cpu_m=6000))], [pod("big", cpu_m=6000)])
    assert ups(acts) == [] and len(_not_triggered(acts)) == 1


def test_a_young_node_is_no_example_the_group_template_counts_every_daemonset():
    running = daemon("agent", node_name="small-0")
    s = scaler(SMALL, daemon_pods=agents("agent", "late"))
    # Ready 30 s ago (under the minute): the group's own template, every DaemonSet forced
    acts = s.reconcile(100, [node("small-0", SMALL, running, pod("x", cpu_m=6000), created_at=70.0)],
                       [pod("big", cpu_m=6000)])
    assert ups(acts) == []


def test_the_example_template_is_cached_after_the_group_shrinks_to_zero():
    calls = []

    def daemon_pods(group, example):
        calls.append(example.name if example is not None else None)
        return [daemon("agent", node_name=example.name if example is not None else "tmpl")]
    s = scaler(SMALL, daemon_pods=daemon_pods)
    s.reconcile(100, [node("small-0", SMALL, daemon("agent", node_name="small-0"))], [])
    calls.clear()
    acts = s.reconcile(200, [], [pod("big", cpu_m=7000)])
    assert calls == []  # the cached template of small-0, not the group's
    assert _not_triggered(acts) == [("Pod default/big", "pod didn't trigger scale-up: 1 Insufficient cpu")]


def test_force_ds_is_a_cluster_autoscaler_field():
    spec = parse_autoscaler({"apiVersion": "gpulab.dev/v1alpha1", "kind": "Autoscaler",
                             "metadata": {"name": "ca"}, "spec": {"forceDs": True}})
    assert spec.force_ds is True
    with pytest.raises(gpu_lab.GpuLabError, match=r"spec.forceDs: Forbidden: only with mode ClusterAutoscaler"):
        parse_autoscaler({"apiVersion": "gpulab.dev/v1alpha1", "kind": "Autoscaler", "metadata": {"name": "k"},
                          "spec": {"mode": "Consolidation", "forceDs": True}})


# -- the sim ---------------------------------------------------------------------------------

POOL = """
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: small}
spec:
  count: 0
  cpu: "8"
  memory: 32Gi
  autoscaling: {minCount: 0, maxCount: 3, provisioningDelay: 60s}
"""
AGENT = """
apiVersion: apps/v1
kind: DaemonSet
metadata: {name: agent}
spec:
  selector: {matchLabels: {app: agent}}
  template:
    metadata: {labels: {app: agent}}
    spec:
      containers:
      - {name: c, image: agent, resources: {requests: {cpu: "2"}}}
"""


def _pod(name: str, cpu: int, extra: str = "") -> str:
    return f"""
apiVersion: v1
kind: Pod
metadata: {{name: {name}}}
spec:{extra}
  containers:
  - {{name: c, image: x, resources: {{requests: {{cpu: "{cpu}"}}}}}}
"""


def _run(*docs: str):
    s = gpu_lab.connect("sim", seed=0)
    s.apply("---".join(docs))
    s.schedule()
    s.advance(600)
    return s


def test_sim_no_scale_up_for_a_pod_that_fits_only_beside_no_daemon():
    s = _run(POOL, AGENT, _pod("big", 7))
    assert len(s.nodes()) == 0
    ev = s.autoscaler_events()
    assert list(zip(ev["object"], ev["reason"], ev["message"])) == [
        ("Pod default/big", "NotTriggerScaleUp", "pod didn't trigger scale-up: 1 Insufficient cpu")]


def test_sim_the_bigger_pool_grows_and_holds_pod_and_daemon():
    large = POOL.replace("name: small", "name: large").replace('cpu: "8"', 'cpu: "16"')
    s = _run(POOL, large, AGENT, _pod("big", 7))
    pods = s.pods().set_index("name")
    assert pods.loc["big", "node"] == "large-0" and pods.loc["big", "phase"] == "Running"
    assert sorted(pods[pods.index.str.startswith("agent-")]["node"]) == ["large-0"]
    assert list(s.autoscaler_events()["message"]) == ["pod triggered scale-up: [{large 0->1 (max: 3)}]"]


def test_sim_a_pod_that_fits_beside_the_daemon_lands_with_it():
    s = _run(POOL, AGENT, _pod("six", 6))
    pods = s.pods()
    assert sorted(zip(pods["name"].str.split("-").str[0], pods["node"], pods["phase"])) == [
        ("agent", "small-0", "Running"), ("six", "small-0", "Running")]
    assert list(s.autoscaler_events()["reason"]) == ["TriggeredScaleUp"]


def test_sim_host_ports_of_the_daemon_count_on_the_template():
    agent = AGENT.replace("resources: {requests: {cpu: \"2\"}}",
                          "ports: [{containerPort: 9100, hostPort: 9100}], resources: {requests: {cpu: \"1\"}}")
    ported = _pod("exporter", 1).replace("image: x,", "image: x, ports: [{containerPort: 9100, hostPort: 9100}],")
    s = _run(POOL, agent, ported)
    assert len(s.nodes()) == 0
    (reason,) = s.autoscaler_events()["reason"]
    assert reason == "NotTriggerScaleUp"


def test_sim_a_daemonset_that_does_not_tolerate_the_pool_adds_nothing():
    tainted = POOL.replace("autoscaling:", "taints: [{key: dedicated, value: x, effect: NoSchedule}]\n  autoscaling:")
    tolerant = "\n  tolerations: [{key: dedicated, operator: Exists}]"
    s = _run(tainted, AGENT, _pod("big", 7, tolerant))
    assert s.pods().set_index("name").loc["big", "node"] == "small-0"
    assert not s.pods()["name"].str.startswith("agent-").any()
