"""Kueue in the sim: Jobs suspended until admitted, the flavor's node labels, PodsReady eviction."""

import pytest

import gpu_lab

from .kit import pod, priority_class, rendezvous

V = "kueue.x-k8s.io/v1beta2"
H100_PRODUCT = "NVIDIA-H100-80GB-HBM3"


def kueue(gpus=8, *, cq="training", lq_target=None, extra=()):
    return [{"apiVersion": V, "kind": "ResourceFlavor", "metadata": {"name": "h100"},
             "spec": {"nodeLabels": {"nvidia.com/gpu.product": H100_PRODUCT}}},
            {"apiVersion": V, "kind": "ClusterQueue", "metadata": {"name": cq},
             "spec": {"namespaceSelector": {}, "resourceGroups": [{
                 "coveredResources": ["nvidia.com/gpu"],
                 "flavors": [{"name": "h100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": gpus}]}]}]}},
            {"apiVersion": V, "kind": "LocalQueue", "metadata": {"name": "team", "namespace": "default"},
             "spec": {"clusterQueue": lq_target or cq}}, *extra]


def queued(doc):
    doc["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = "team"
    return doc


def h100_pool(nodes=1):
    return {"apiVersion": "gpulab.dev/v1alpha1", "kind": "NodePool", "metadata": {"name": "h100"},
            "spec": {"count": nodes, "gpu": {"model": "H100-80GB", "count": 8}}}


def test_the_second_job_waits_suspended_with_kueues_message_then_runs():
    lab = gpu_lab.connect("sim")
    lab.apply([h100_pool(2)])
    lab.apply(kueue(8))
    lab.apply([queued(rendezvous("a", 8)), queued(rendezvous("b", 8))])
    lab.schedule()
    jobs = lab.jobs().set_index("name")
    assert jobs.loc["a", "state"] == "Running" and jobs.loc["b", "state"] == "Suspended"
    assert jobs.loc["b", "message"] == ("couldn't assign flavors to pod set main: insufficient unused quota "
                                        "for nvidia.com/gpu in flavor h100, 8 more needed")
    assert not lab.timeline()["owner"].eq("b").any()  # a suspended Job has no pods
    lab.advance(None)
    jobs = lab.jobs().set_index("name")
    assert list(jobs["state"]) == ["Complete", "Complete"]
    assert jobs.loc["b", "admitted_at"] == 3600 and jobs.loc["b", "finished_at"] == 7200


def test_quota_admission_removes_the_two_team_deadlock():
    def day(with_kueue):
        docs = [h100_pool(1), priority_class("team-b", 100, never=True), pod("blocker", gpus=4, duration="10m")]
        a, b = rendezvous("a", 8, duration="1h"), rendezvous("b", 8, duration="1h", priority_class="team-b")
        b["metadata"]["annotations"]["gpulab.dev/submit-at"] = "5m"
        if with_kueue:
            docs = docs[:2] + kueue(8) + docs[2:]
            a, b = queued(a), queued(b)
        return gpu_lab.simulate(docs + [a, b], until="12h")

    stuck, fixed = day(False), day(True)
    assert stuck.metrics["jobs_complete"] == 0 and stuck.metrics["gpu_hours_stranded"] > 40
    # Quota is not placement: "a" is admitted while the blocker still holds 4 GPUs, so 4 of its
    # workers wait 10 minutes (0.67 GPU-hours); but "b" can no longer take the freed GPUs.
    assert fixed.metrics["jobs_complete"] == 2
    assert fixed.metrics["gpu_hours_stranded"] == pytest.approx(4 * 10 / 60, abs=1e-3)


def test_the_flavors_node_labels_steer_the_pods():
    l4 = {"apiVersion": "gpulab.dev/v1alpha1", "kind": "NodePool", "metadata": {"name": "l4"},
          "spec": {"count": 1, "gpu": {"model": "L4", "count": 8}}}
    lab = gpu_lab.connect("sim")
    lab.apply([l4, h100_pool(1)])
    lab.apply(kueue(8))
    lab.apply([queued(rendezvous("train", 8))])
    lab.schedule()
    assert set(lab.timeline()["pool"]) == {"h100"}


def test_wait_for_pods_ready_evicts_a_job_that_never_got_all_its_pods():
    config = {"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration",
              "waitForPodsReady": {"timeout": "5m"}}
    lab = gpu_lab.connect("sim")
    # the quota (16) is more than the free GPUs (8 - 4): Kueue admits, the scheduler cannot place all
    lab.apply([h100_pool(1), pod("inference", gpus=4, duration="2h")])
    lab.apply(kueue(16, extra=[config]))
    lab.apply([queued(rendezvous("train", 8, duration="1h"))])
    lab.advance(299)
    t = lab.timeline()
    assert ((t["owner"] == "train") & (t["phase"] == "Running")).sum() == 4
    lab.advance(2)
    job = lab.jobs().iloc[0]
    assert job["state"] in ("Suspended", "Pending") and job["message"].startswith("Exceeded the PodsReady timeout default/job-train-")
    assert not ((lab.timeline()["owner"] == "train") & (lab.timeline()["phase"] == "Running")).any()
    lab.advance(None)
    assert lab.jobs().iloc[0]["state"] == "Complete"


def test_without_kueue_objects_the_label_means_nothing():
    lab = gpu_lab.connect("sim")
    lab.apply([h100_pool(1), queued(rendezvous("train", 8))])
    lab.schedule()
    assert lab.jobs().iloc[0]["state"] == "Running"


def test_a_local_queue_naming_a_missing_cluster_queue_waits_with_kueues_words():
    lab = gpu_lab.connect("sim")
    lab.apply([h100_pool(1)])
    lab.apply(kueue(8, lq_target="nope"))
    lab.apply([queued(rendezvous("train", 8))])
    lab.schedule()
    job = lab.jobs().iloc[0]
    assert job["state"] == "Suspended" and job["message"] == "ClusterQueue nope doesn't exist"


def test_quota_for_a_resource_no_flavor_covers_is_refused_and_nothing_applied():
    docs = kueue(8)
    docs[1]["spec"]["resourceGroups"][0]["flavors"][0]["resources"].append({"name": "cpu", "nominalQuota": 10})
    lab = gpu_lab.connect("sim")
    with pytest.raises(gpu_lab.GpuLabError, match="flavors must have the same number of resources as the "
                                                  "coveredResources"):
        lab.apply([h100_pool(1), *docs])
    assert lab.nodes().empty
