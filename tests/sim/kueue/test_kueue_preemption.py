"""Preemption within a ClusterQueue: a higher-priority workload evicts lower-priority ones."""

from gpu_lab.sim.kueue import Kueue

from .kit import admitted, condition, evicted, gpu_cluster, job, pending, state, submit_all

LOWER = {"withinClusterQueue": "LowerPriority"}


def test_a_higher_priority_workload_preempts_a_lower_one_with_kueues_message():
    k = Kueue(gpu_cluster(gpus=8, preemption=LOWER))
    submit_all(k, job("low", 8, priority=0))
    k.schedule(0)
    submit_all(k, job("high", 8, created=10, priority=100))
    d = k.schedule(10)
    (ev,) = evicted(d)
    message = ("Preempted to accommodate a workload (UID: uid-high, JobUID: job-uid-high) due to prioritization "
               "in the ClusterQueue; preemptor path: /team; preemptee path: /team")
    assert (ev.key, ev.reason, ev.message) == ("default/low", "Preempted", message)
    assert condition(k, "low", "Preempted") == {"type": "Preempted", "status": "True", "reason": "InClusterQueue",
                                                "message": message, "lastTransitionTime": 10}
    assert state(k, "low")["state"] == "Evicting"
    k.stopped("default/low", 11)
    d = k.schedule(11)
    assert admitted(d) == ["high"]
    assert "low" in pending(d)


def test_readmission_marks_eviction_and_preemption_as_previously():
    k = Kueue(gpu_cluster(gpus=8, preemption=LOWER))
    submit_all(k, job("low", 8))
    k.schedule(0)
    submit_all(k, job("high", 8, created=1, priority=5))
    k.schedule(1)
    k.stopped("default/low", 2)
    k.schedule(2)
    k.finish("default/high", 3)
    assert admitted(k.schedule(3)) == ["low"]
    ev = condition(k, "low", "Evicted")
    assert (ev["status"], ev["reason"]) == ("False", "QuotaReserved")
    assert ev["message"].startswith("Previously: Preempted to accommodate a workload")


def test_without_a_preemption_policy_priority_only_orders_the_queue():
    k = Kueue(gpu_cluster(gpus=8))
    submit_all(k, job("low", 8))
    k.schedule(0)
    submit_all(k, job("high", 8, created=1, priority=100))
    d = k.schedule(1)
    assert evicted(d) == []
    assert pending(d)["high"].endswith("8 more needed")


def test_equal_priority_is_not_preempted_by_lower_priority_policy():
    k = Kueue(gpu_cluster(gpus=8, preemption=LOWER))
    submit_all(k, job("first", 8, priority=5))
    k.schedule(0)
    submit_all(k, job("second", 8, created=1, priority=5))
    assert evicted(k.schedule(1)) == []


def test_lower_or_newer_equal_priority_preempts_the_newer_equal_one():
    k = Kueue(gpu_cluster(gpus=8, preemption={"withinClusterQueue": "LowerOrNewerEqualPriority"}))
    submit_all(k, job("newer", 8, created=5, priority=5))
    k.schedule(5)
    submit_all(k, job("older", 8, created=0, priority=5))  # created earlier, submitted late
    assert [e.key for e in evicted(k.schedule(6))] == ["default/newer"]


def test_only_as_many_victims_as_needed_lowest_priority_first():
    k = Kueue(gpu_cluster(gpus=8, preemption=LOWER))
    submit_all(k, job("p1", 4, priority=1), job("p2", 2, created=1, priority=2), job("p3", 2, created=2,
                                                                                       priority=3))
    assert admitted(k.schedule(2)) == ["p3", "p2", "p1"]
    submit_all(k, job("vip", 4, created=3, priority=10))
    assert [e.key for e in evicted(k.schedule(3))] == ["default/p1"]


def test_a_pending_preemptor_is_not_evicting_twice():
    k = Kueue(gpu_cluster(gpus=8, preemption=LOWER))
    submit_all(k, job("low", 8))
    k.schedule(0)
    submit_all(k, job("high", 8, created=1, priority=9))
    assert len(evicted(k.schedule(1))) == 1
    assert evicted(k.schedule(2)) == []  # the victim's Job has not stopped yet: nothing new
