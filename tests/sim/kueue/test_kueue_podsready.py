"""waitForPodsReady: a timeout evicts an admitted workload whose pods never all got ready,
requeues it after Kueue's backoff, deactivates it past backoffLimitCount, and blockAdmission
holds every other admission until the admitted workloads are ready."""

from gpu_lab.sim.kueue import Kueue

from .kit import (
    admitted,
    condition,
    configuration,
    evicted,
    gpu_cluster,
    job,
    pending,
    state,
    submit_all,
)


def cluster(gpus=8, **pods_ready):
    return Kueue(gpu_cluster(gpus=gpus, extra_docs=[configuration(**{"timeout": "5m", **pods_ready})]))


def test_an_admitted_workload_not_ready_within_the_timeout_is_evicted():
    k = cluster()
    submit_all(k, job("a", 8))
    k.schedule(0)
    assert condition(k, "a", "PodsReady") | {"lastTransitionTime": None} == {
        "type": "PodsReady", "status": "False", "reason": "WaitForStart",
        "message": "Not all pods are ready or succeeded", "lastTransitionTime": None}
    assert k.next_wakeup() == 300
    assert evicted(k.schedule(299)) == []
    (ev,) = evicted(k.schedule(300))
    assert (ev.key, ev.reason, ev.message) == ("default/a", "PodsReadyTimeout",
                                               "Exceeded the PodsReady timeout default/a")
    assert k.status("default/a")["requeueState"] == {"count": 1, "requeueAt": 360}


def test_after_the_backoff_the_workload_is_requeued_and_admitted_again():
    k = cluster()
    submit_all(k, job("a", 8))
    k.schedule(0)
    k.schedule(300)
    k.stopped("default/a", 301)
    assert condition(k, "a", "Requeued") == {"type": "Requeued", "status": "False", "reason": "PodsReadyTimeout",
                                             "message": "Exceeded the PodsReady timeout default/a",
                                             "lastTransitionTime": 301}
    assert condition(k, "a", "QuotaReserved")["message"] == "Exceeded the PodsReady timeout default/a"
    assert k.next_wakeup() == 360  # the backoff: 60 s (backoffBaseSeconds) after the eviction
    assert admitted(k.schedule(359)) == []
    assert admitted(k.schedule(360)) == ["a"]
    assert condition(k, "a", "Requeued") == {"type": "Requeued", "status": "True", "reason": "BackoffFinished",
                                             "message": "The workload backoff was finished",
                                             "lastTransitionTime": 360}


def test_the_backoff_doubles_with_each_timeout():
    k = cluster(requeuingStrategy={"backoffBaseSeconds": 10, "backoffMaxSeconds": 25})
    submit_all(k, job("a", 8))
    now, waits = 0.0, []
    k.schedule(now)
    for _ in range(3):
        now += 300
        k.schedule(now)
        k.stopped("default/a", now)
        waits.append(k.next_wakeup() - now)
        now = k.next_wakeup()
        assert admitted(k.schedule(now)) == ["a"]
    assert waits == [10, 20, 25]


def test_past_backoff_limit_count_the_workload_is_deactivated():
    k = cluster(requeuingStrategy={"backoffLimitCount": 1})
    submit_all(k, job("a", 8))
    k.schedule(0)
    k.schedule(300)
    k.stopped("default/a", 300)
    k.schedule(360)
    (ev,) = evicted(k.schedule(660))
    assert (ev.reason, ev.message) == ("DeactivatedDueToRequeuingLimitExceeded",
                                       "The workload is deactivated due to exceeding the maximum number of "
                                       "re-queuing retries")
    k.stopped("default/a", 660)
    assert admitted(k.schedule(10_000)) == []
    assert state(k, "a")["state"] == "Deactivated" and k.next_wakeup() is None


def test_ready_pods_stop_the_timer():
    k = cluster()
    submit_all(k, job("a", 8))
    k.schedule(0)
    k.pods_ready("default/a", 120)
    assert condition(k, "a", "PodsReady")["reason"] == "Started"
    assert k.next_wakeup() is None and evicted(k.schedule(1000)) == []


def test_a_pod_failure_after_ready_starts_the_recovery_timeout():
    k = cluster(recoveryTimeout="2m")
    submit_all(k, job("a", 8))
    k.schedule(0)
    k.pods_ready("default/a", 10)
    k.pods_ready("default/a", 100, ready=False)
    assert condition(k, "a", "PodsReady")["message"] == "At least one pod has failed, waiting for recovery"
    assert k.next_wakeup() == 220
    assert [e.reason for e in evicted(k.schedule(220))] == ["PodsReadyTimeout"]


def test_a_timed_out_workload_queues_by_its_eviction_time():
    k = cluster()
    submit_all(k, job("a", 8, created=0))
    k.schedule(0)
    submit_all(k, job("b", 8, created=100))
    k.schedule(300)
    k.stopped("default/a", 300)
    # requeuingStrategy.timestamp Eviction: a (evicted at 300) now queues behind b (created at 100)
    assert admitted(k.schedule(300)) == ["b"]
    k.finish("default/b", 400)
    assert admitted(k.schedule(400)) == ["a"]


def test_block_admission_waits_for_the_admitted_workloads_pods():
    k = cluster(gpus=16, blockAdmission=True)
    submit_all(k, job("a", 8), job("b", 8, created=1))
    d = k.schedule(1)
    assert admitted(d) == ["a"]
    assert pending(d) == {"b": "waiting for all admitted workloads to be in PodsReady condition"}
    assert condition(k, "b", "QuotaReserved")["reason"] == "Waiting"
    k.pods_ready("default/a", 50)
    assert admitted(k.schedule(50)) == ["b"]


def test_block_admission_ends_when_the_unready_workload_times_out():
    k = cluster(gpus=16, blockAdmission=True)
    submit_all(k, job("a", 8), job("b", 8, created=1))
    k.schedule(1)  # a admitted at 1: its deadline is 301
    assert admitted(k.schedule(300)) == []
    assert evicted(k.schedule(301))
    assert admitted(k.schedule(301)) == []  # a still holds its quota and is not ready
    k.stopped("default/a", 302)
    assert admitted(k.schedule(302)) == ["b"]


def test_without_block_admission_both_are_admitted():
    k = cluster(gpus=16)
    submit_all(k, job("a", 8), job("b", 8, created=1))
    assert admitted(k.schedule(1)) == ["a", "b"]


def test_without_wait_for_pods_ready_there_is_no_timer_and_no_pods_ready_condition():
    k = Kueue(gpu_cluster())
    submit_all(k, job("a", 8))
    k.schedule(0)
    k.pods_ready("default/a", 1)
    assert k.next_wakeup() is None and condition(k, "a", "PodsReady") is None


def test_null_backoff_fields_take_kueues_defaults():
    # pointers in Kueue's Configuration: null is nil, and defaulting gives 60 s and 3600 s
    k = cluster(requeuingStrategy={"backoffBaseSeconds": None, "backoffMaxSeconds": None})
    submit_all(k, job("a", 8))
    k.schedule(0)
    k.schedule(300)
    k.stopped("default/a", 300)
    assert k.next_wakeup() == 360
