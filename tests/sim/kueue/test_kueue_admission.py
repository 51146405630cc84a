"""Admission by quota: what fits is admitted, what does not waits with Kueue's own message."""

from gpu_lab.sim.kueue import Admit, Kueue, parse_kueue

from .kit import (
    admitted,
    cluster_queue,
    condition,
    flavor,
    gpu_cluster,
    job,
    local_queue,
    pending,
    state,
    submit_all,
)

INSUFFICIENT_8 = ("couldn't assign flavors to pod set main: insufficient unused quota for nvidia.com/gpu "
                  "in flavor h100, 8 more needed")


def test_two_8_gpu_jobs_on_an_8_gpu_quota_admit_one_and_the_other_waits_with_kueues_message():
    k = Kueue(gpu_cluster(gpus=8))
    submit_all(k, job("a", 8, created=0), job("b", 8, created=1))
    decisions = k.schedule(1)
    assert admitted(decisions) == ["a"]
    assert pending(decisions) == {"b": INSUFFICIENT_8}
    assert condition(k, "b", "QuotaReserved") == {
        "type": "QuotaReserved", "status": "False", "reason": "Pending", "message": INSUFFICIENT_8,
        "lastTransitionTime": 1}
    assert condition(k, "b", "Admitted") is None  # never admitted: Kueue sets no Admitted condition


def test_an_admitted_workload_carries_quota_reserved_and_admitted_conditions():
    k = Kueue(gpu_cluster())
    submit_all(k, job("a", 8))
    k.schedule(0)
    st = k.status("default/a")
    assert [(c["type"], c["status"], c["reason"], c["message"]) for c in st["conditions"]] == [
        ("QuotaReserved", "True", "QuotaReserved", "Quota reserved in ClusterQueue team"),
        ("Admitted", "True", "Admitted", "The workload is admitted")]
    assert st["admission"] == {"clusterQueue": "team", "podSetAssignments": [{
        "name": "main", "flavors": {"nvidia.com/gpu": "h100"}, "count": 1,
        "resourceUsage": {"nvidia.com/gpu": "8"}}]}


def test_the_count_multiplies_the_per_pod_request():
    k = Kueue(gpu_cluster(gpus=8))
    submit_all(k, job("wide", 2, pods=4, created=0), job("one-more", 1, created=1))
    d = k.schedule(1)
    assert admitted(d) == ["wide"]
    assert pending(d)["one-more"].endswith("insufficient unused quota for nvidia.com/gpu in flavor h100, "
                                           "1 more needed")


def test_a_finished_workload_releases_its_quota_and_the_waiting_one_is_admitted():
    k = Kueue(gpu_cluster())
    submit_all(k, job("a", 8), job("b", 8, created=1))
    k.schedule(1)
    k.finish("default/a", 100)
    d = k.schedule(100)
    assert admitted(d) == ["b"]
    assert state(k, "a")["state"] == "Finished"
    assert condition(k, "a", "Finished")["message"] == "Reached expected number of succeeded pods"
    assert state(k, "b")["admitted_at"] == 100


def test_a_request_larger_than_the_quota_can_never_fit():
    k = Kueue(gpu_cluster(gpus=8))
    submit_all(k, job("huge", 16))
    assert pending(k.schedule(0)) == {"huge": (
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor h100, "
        "previously considered podsets requests (0) + current podset request (16) > maximum capacity (8)")}


def test_a_resource_no_flavor_covers_keeps_the_workload_pending():
    # the classic mistake: a GPU-only ClusterQueue and pods that also request cpu
    k = Kueue(gpu_cluster())
    submit_all(k, job("a", 1, cpu=4000))
    assert pending(k.schedule(0)) == {
        "a": "couldn't assign flavors to pod set main: resource cpu unavailable in ClusterQueue"}


def test_cpu_and_memory_in_messages_print_as_quantities():
    cfg = parse_kueue([flavor("default"),
                       cluster_queue("cpu", [("default", {"cpu": "4", "memory": "16Gi"})],
                                     resources=("cpu", "memory")),
                       local_queue("q", "cpu")])
    k = Kueue(cfg)
    submit_all(k, job("a", 0, cpu=3500), job("b", 0, cpu=1500, created=1))
    d = k.schedule(1)
    assert admitted(d) == ["a"]
    assert pending(d)["b"] == ("couldn't assign flavors to pod set main: insufficient unused quota for cpu "
                               "in flavor default, 1 more needed")


def test_missing_local_queue_and_missing_cluster_queue_are_reported_on_the_workload():
    cfg = parse_kueue([flavor("h100"), local_queue("orphan", "nope")])
    k = Kueue(cfg)
    submit_all(k, job("a", 1, queue="nowhere"), job("b", 1, queue="orphan"))
    assert pending(k.schedule(0)) == {"a": "LocalQueue nowhere doesn't exist",
                                      "b": "ClusterQueue nope doesn't exist"}
    assert condition(k, "b", "QuotaReserved")["reason"] == "Inadmissible"
    assert k.local_queue_status("default/orphan")["conditions"] == [{
        "type": "Active", "status": "False", "reason": "ClusterQueueDoesNotExist",
        "message": "Can't submit new workloads to clusterQueue"}]


def test_a_cluster_queue_without_namespace_selector_admits_from_no_namespace():
    # spec.namespaceSelector absent is labels.Nothing(): every workload is refused
    cfg = parse_kueue([flavor("h100"), cluster_queue("team", [("h100", {"nvidia.com/gpu": 8})], selector=False),
                       local_queue("q", "team")])
    k = Kueue(cfg)
    submit_all(k, job("a", 1))
    assert pending(k.schedule(0)) == {"a": "Workload namespace doesn't match ClusterQueue selector"}


def test_namespace_selector_reads_namespace_labels():
    ns = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "labels": {"team": "ml"}}}]
    cfg = parse_kueue([*ns, flavor("h100"),
                       cluster_queue("team", [("h100", {"nvidia.com/gpu": 8})],
                                     selector={"matchLabels": {"team": "ml"}}),
                       local_queue("q", "team", ns="ml"), local_queue("q", "team", ns="default")])
    k = Kueue(cfg)
    submit_all(k, job("in-ml", 1, ns="ml"), job("in-default", 1, created=1))
    d = k.schedule(1)
    assert admitted(d) == ["in-ml"]
    assert pending(d) == {"in-default": "Workload namespace doesn't match ClusterQueue selector"}


def test_a_cluster_queue_with_a_missing_flavor_is_inactive():
    cfg = parse_kueue([cluster_queue("team", [("h100", {"nvidia.com/gpu": 8})]), local_queue("q", "team")])
    k = Kueue(cfg)
    submit_all(k, job("a", 1))
    assert pending(k.schedule(0)) == {"a": "ClusterQueue team is inactive"}
    assert k.cluster_queue_status("team")["conditions"][0] == {
        "type": "Active", "status": "False", "reason": "FlavorNotFound",
        "message": "Can't admit new workloads: references missing ResourceFlavor(s): h100."}
    assert k.local_queue_status("default/q")["conditions"][0]["reason"] == "ClusterQueueIsInactive"


def test_a_stopped_cluster_queue_admits_nothing():
    cfg = parse_kueue([flavor("h100"), cluster_queue("team", [("h100", {"nvidia.com/gpu": 8})], stopPolicy="Hold"),
                       local_queue("q", "team")])
    k = Kueue(cfg)
    submit_all(k, job("a", 1))
    assert pending(k.schedule(0)) == {"a": "ClusterQueue team is inactive"}
    assert k.cluster_queue_status("team")["conditions"][0]["message"] == "Can't admit new workloads: is stopped."


def test_cluster_queue_status_counts_and_usage():
    k = Kueue(gpu_cluster(gpus=8))
    submit_all(k, job("a", 6), job("b", 4, created=1))
    k.schedule(1)
    st = k.cluster_queue_status("team")
    assert (st["pendingWorkloads"], st["reservingWorkloads"], st["admittedWorkloads"]) == (1, 1, 1)
    assert st["flavorsReservation"] == [{"name": "h100", "resources": [
        {"name": "nvidia.com/gpu", "total": "6", "borrowed": "0"}]}]
    assert k.local_queue_status("default/q")["conditions"][0]["reason"] == "Ready"


def test_admit_tells_the_caller_the_node_selector_and_tolerations_to_inject():
    tol = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    cfg = parse_kueue([flavor("h100", {"gpu": "h100", "pool": "a"}, tolerations=[tol]),
                       cluster_queue("team", [("h100", {"nvidia.com/gpu": 8})]), local_queue("q", "team")])
    k = Kueue(cfg)
    submit_all(k, job("a", 2))
    (d,) = [x for x in k.schedule(0) if isinstance(x, Admit)]
    assert d.node_selector == {"gpu": "h100", "pool": "a"}
    assert d.tolerations == (tol,)
    assert (d.job, d.cluster_queue, d.count) == ("default/a", "team", 1)


def test_job_key_and_workload_key_both_address_a_workload():
    k = Kueue(gpu_cluster())
    spec = job("job-train-1a2b3", 1).__class__(**{**job("job-train-1a2b3", 1).__dict__, "job": "train"})
    k.submit(spec, 0)
    assert spec.job_key == "default/train"
    assert k.status("default/job-train-1a2b3") == k.status("default/train")


def test_a_stopped_local_queue_keeps_its_workloads_out():
    doc = local_queue("q", "team")
    doc["spec"]["stopPolicy"] = "Hold"
    k = Kueue(parse_kueue([flavor("h100"), cluster_queue("team", [("h100", {"nvidia.com/gpu": 8})]), doc]))
    submit_all(k, job("a", 1))
    assert pending(k.schedule(0)) == {"a": "LocalQueue q is inactive"}
    assert k.local_queue_status("default/q")["conditions"][0]["message"] == "LocalQueue is stopped"


def test_deleting_an_admitted_workload_frees_its_quota():
    k = Kueue(gpu_cluster())
    submit_all(k, job("a", 8), job("b", 8, created=1))
    k.schedule(1)
    k.delete("default/a", 5)
    assert admitted(k.schedule(5)) == ["b"]
    assert [r["name"] for r in k.workloads()] == ["b"]


def test_pending_decisions_are_reported_once_per_new_message():
    k = Kueue(gpu_cluster())
    submit_all(k, job("a", 8), job("b", 8, created=1))
    assert "b" in pending(k.schedule(1))
    submit_all(k, job("c", 1, created=2))
    assert "b" not in pending(k.schedule(2))  # same message as before: nothing new to show
