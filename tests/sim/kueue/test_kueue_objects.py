"""Reading Kueue's objects: defaults, the two served versions, the manager Configuration, and
the small things Kueue prints (quantities, workload names)."""

from gpu_lab.model.kueue.quantities import quantity_string
from gpu_lab.sim.kueue import job_workload, parse_kueue, workload_name

from .kit import V, cluster_queue, configuration, flavor, local_queue

GPU = "nvidia.com/gpu"


def test_cluster_queue_defaults_are_the_crds_and_the_caches():
    cq = parse_kueue([cluster_queue("cq", [("h100", {GPU: 8})])]).cluster_queues["cq"]
    assert (cq.queueing_strategy, cq.stop_policy, cq.cohort) == ("BestEffortFIFO", "None", None)
    assert (cq.preemption.within_cluster_queue, cq.preemption.reclaim_within_cohort,
            cq.preemption.borrow_within_cohort) == ("Never", "Never", "Never")
    assert (cq.flavor_fungibility.when_can_borrow, cq.flavor_fungibility.when_can_preempt) == (
        "MayStopSearch", "TryNextFlavor")
    assert cq.quota("h100", GPU).nominal == 8 and cq.quota("h100", GPU).borrowing_limit is None


def test_quantities_become_kueues_integers():
    cq = parse_kueue([cluster_queue("cq", [("f", {"cpu": "1500m", "memory": "64Gi", GPU: "8"})],
                                    resources=("cpu", "memory", GPU))]).cluster_queues["cq"]
    assert [cq.quota("f", r).nominal for r in ("cpu", "memory", GPU)] == [1500, 64 * 2**30, 8]


def test_v1beta1_names_the_cohort_cohort_and_its_fungibility_values_convert():
    doc = cluster_queue("cq", [("h100", {GPU: 8})], flavorFungibility={"whenCanBorrow": "Borrow",
                                                                       "whenCanPreempt": "Preempt"})
    doc["apiVersion"] = "kueue.x-k8s.io/v1beta1"
    doc["spec"]["cohort"] = "lab"
    cq = parse_kueue([doc]).cluster_queues["cq"]
    assert cq.cohort == "lab"
    assert (cq.flavor_fungibility.when_can_borrow, cq.flavor_fungibility.when_can_preempt) == (
        "MayStopSearch", "MayStopSearch")


def test_flavors_local_queues_and_priority_classes():
    cfg = parse_kueue([
        flavor("h100", {"gpu": "h100"}, taints=[{"key": "gpu", "value": "true", "effect": "NoSchedule"}],
               tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}]),
        local_queue("q", "team", ns="ml"),
        {"apiVersion": V, "kind": "WorkloadPriorityClass", "metadata": {"name": "high"}, "value": 1000,
         "description": "urgent"}])
    rf = cfg.resource_flavors["h100"]
    assert rf.node_labels == {"gpu": "h100"} and rf.node_taints[0].effect == "NoSchedule"
    assert rf.tolerations[0].operator == "Exists"
    assert cfg.local_queues["ml/q"].cluster_queue == "team"
    assert cfg.priority_classes["high"].value == 1000


def test_other_documents_in_a_scenario_are_skipped():
    cfg = parse_kueue("""
apiVersion: v1
kind: Pod
metadata: {name: p}
spec: {containers: [{name: c, image: x}]}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default-flavor}
""")
    assert list(cfg.resource_flavors) == ["default-flavor"]


def test_wait_for_pods_ready_in_both_configuration_versions():
    v2 = parse_kueue([configuration("10m")]).wait_for_pods_ready
    assert (v2.timeout, v2.block_admission, v2.recovery_timeout, v2.backoff_base_seconds,
            v2.backoff_max_seconds, v2.backoff_limit_count, v2.requeuing_timestamp) == (
        600, False, 600, 60, 3600, None, "Eviction")
    v1 = parse_kueue([{"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration",
                       "waitForPodsReady": {"enable": True}}]).wait_for_pods_ready
    assert (v1.timeout, v1.block_admission) == (300, True)  # v1beta1: 5m and blockAdmission on
    off = parse_kueue([{"apiVersion": "config.kueue.x-k8s.io/v1beta1", "kind": "Configuration",
                        "waitForPodsReady": {"enable": False, "timeout": "1m"}}])
    assert off.wait_for_pods_ready is None
    assert parse_kueue([{"apiVersion": "config.kueue.x-k8s.io/v1beta2", "kind": "Configuration"}]) \
        .wait_for_pods_ready is None


def test_quantity_strings_follow_resource_quantity_string():
    assert [quantity_string("cpu", v) for v in (0, 500, 1000, 1500, 2_000_000)] == ["0", "500m", "1", "1500m", "2k"]
    assert [quantity_string("memory", v) for v in (1000, 1536, 2048, 100_000, 64 * 2**30)] == [
        "1k", "1536", "2Ki", "100k", "64Gi"]
    assert [quantity_string(GPU, v) for v in (8, 1000)] == ["8", "1k"]


def test_workload_names_follow_kueues_job_naming():
    name = workload_name("train", "6f1c6c3e-0000-4000-8000-000000000001")
    assert name.startswith("job-train-") and len(name) == 15
    assert workload_name("x" * 300, "u").startswith("job-" + "x" * 243) and len(workload_name("x" * 300, "u")) == 253


def test_a_job_without_a_queue_name_is_not_kueues():
    assert job_workload({"metadata": {"name": "j"}, "spec": {}}) is None


def test_job_workload_takes_count_requests_and_selector_from_the_template():
    manifest = {"metadata": {"name": "j", "namespace": "ml", "labels": {"kueue.x-k8s.io/queue-name": "q"}},
                "spec": {"parallelism": 8, "completions": 2, "template": {"spec": {
                    "nodeSelector": {"gpu": "h100"},
                    "containers": [{"name": "c", "image": "x",
                                    "resources": {"requests": {"cpu": "500m"}, "limits": {GPU: 1}}}]}}}}
    spec = job_workload(manifest, created=7, uid="abc")
    assert (spec.namespace, spec.queue, spec.count, spec.created) == ("ml", "q", 2, 7)
    assert spec.requests == {"cpu": 500, GPU: 1}
    assert spec.node_selector == {"gpu": "h100"} and spec.job == "j" and spec.job_uid == "abc"
