"""Queueing hints: an unschedulable pod is retried only when an event may help it
(kube-scheduler v1.37's EventsToRegister/QueueingHintFn), not whenever any pod binds."""

from __future__ import annotations

import gpu_lab
from gpu_lab.sim import queueinghints as hints

NODE = """
apiVersion: gpulab.dev/v1alpha1
kind: NodePool
metadata: {name: cpu}
spec: {count: 1, cpu: "4", memory: 16Gi}
"""
AFFINITY_MSG = ("0/1 nodes are available: 1 node(s) didn't match pod affinity rules. preemption: 0/1 nodes "
                "are available: 1 Preemption is not helpful for scheduling.")


def pod(name: str, labels: dict, cpu: str, extra: str = "") -> str:
    return (f"---\napiVersion: v1\nkind: Pod\nmetadata: {{name: {name}, labels: {labels}}}\nspec:\n{extra}"
            f"  containers:\n  - {{name: c, image: app, resources: {{requests: {{cpu: \"{cpu}\"}}}}}}\n")


FOLLOWER = pod("follower", {"app": "web"}, "2", """  affinity:
    podAffinity:
      requiredDuringSchedulingIgnoredDuringExecution:
      - labelSelector: {matchLabels: {app: db}}
        topologyKey: kubernetes.io/hostname
""")


def run(*docs: str):
    lab = gpu_lab.connect("sim")
    lab.apply(NODE + "".join(docs))
    return lab.schedule().set_index("name")


def test_an_unrelated_pod_binding_does_not_retry_an_affinity_failure():
    pods = run(FOLLOWER, pod("unrelated", {"app": "batch"}, "3"))
    assert pods.loc["unrelated", "phase"] == "Running"
    assert pods.loc["follower", "message"] == AFFINITY_MSG  # not "Insufficient cpu": never retried


def test_a_matching_pod_binding_retries_it():
    pods = run(FOLLOWER, pod("db", {"app": "db"}, "1"))
    assert (pods["phase"] == "Running").all()


SPREAD = """  topologySpreadConstraints:
  - {maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: DoNotSchedule,
     labelSelector: {matchLabels: {app: web}}, minDomains: 2}
"""


def test_spread_hint_needs_a_matching_label_in_the_namespace():
    lab = gpu_lab.connect("sim")
    lab.apply(NODE)
    profile = lab._sim.cluster.scheduler.config.profile_for("default-scheduler")
    import yaml

    from gpu_lab.model.scenario import parse_scenario
    sc = parse_scenario(list(yaml.safe_load_all(NODE + pod("w", {"app": "web"}, "1", SPREAD)
                                                + pod("x", {"app": "web"}, "1") + pod("y", {"app": "db"}, "1"))))
    w, x, y = sorted(sc.pods, key=lambda p: p.name)
    assert hints.assigned_pod_added({"PodTopologySpread"}, w, x, profile)
    assert not hints.assigned_pod_added({"PodTopologySpread"}, w, y, profile)
    assert not hints.assigned_pod_added({"NodeResourcesFit"}, w, x, profile)  # no hint for an add


def _attempts(lab, name: str) -> int:
    return lab._sim.cluster.records[f"default/{name}"].attempts


def test_across_passes_a_new_pod_is_no_event_but_a_pod_leaving_is():
    lab = gpu_lab.connect("sim")
    lab.apply(NODE + pod("big", {"app": "big"}, "5"))
    lab.schedule()
    assert _attempts(lab, "big") == 1
    lab.apply(pod("small", {"app": "small"}, "1"))  # a new pod binds: NodeResourcesFit has no hint for it
    pods = lab.schedule().set_index("name")
    assert pods.loc["small", "phase"] == "Running" and _attempts(lab, "big") == 1
    lab.delete("small")  # an assigned pod deleted: room may have been made
    lab.schedule()
    assert _attempts(lab, "big") == 2


def test_a_pod_waiting_five_minutes_is_tried_again_without_an_event():
    lab = gpu_lab.connect("sim")
    lab.apply(NODE + pod("big", {"app": "big"}, "5"))
    lab.schedule()
    lab.advance(299)
    assert _attempts(lab, "big") == 1
    lab.advance(2)  # podMaxInUnschedulablePodsDuration (5 min) has passed
    assert _attempts(lab, "big") == 2
