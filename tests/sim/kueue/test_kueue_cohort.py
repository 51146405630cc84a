"""Cohorts: borrowing unused quota, borrowingLimit and lendingLimit, and reclaiming it."""

from gpu_lab.sim.kueue import Kueue, parse_kueue

from .kit import (
    admitted,
    cluster_queue,
    condition,
    evicted,
    flavor,
    job,
    local_queue,
    pending,
    submit_all,
)

GPU = "nvidia.com/gpu"


def cohort(a=None, b=None, preemption_b=None):
    """team-a and team-b, 8 GPUs each, in cohort ``lab``; LocalQueues qa and qb."""
    return parse_kueue([
        flavor("h100"),
        cluster_queue("team-a", [("h100", {GPU: a or 8})], cohort="lab"),
        cluster_queue("team-b", [("h100", {GPU: b or 8})], cohort="lab", preemption=preemption_b),
        local_queue("qa", "team-a"), local_queue("qb", "team-b")])


def test_a_cluster_queue_borrows_its_cohorts_unused_quota():
    k = Kueue(cohort())
    submit_all(k, job("big", 12, queue="qa"))
    assert admitted(k.schedule(0)) == ["big"]
    st = k.cluster_queue_status("team-a")
    assert st["flavorsReservation"][0]["resources"] == [{"name": GPU, "total": "12", "borrowed": "4"}]


def test_the_lender_waits_while_its_quota_is_lent_without_reclaim():
    k = Kueue(cohort())
    submit_all(k, job("big", 12, queue="qa"))
    k.schedule(0)
    submit_all(k, job("mine", 8, queue="qb", created=1))
    assert pending(k.schedule(1)) == {"mine": "couldn't assign flavors to pod set main: insufficient unused "
                                              "quota for nvidia.com/gpu in flavor h100, 4 more needed"}


def test_reclaim_within_cohort_evicts_the_borrower_with_kueues_message():
    k = Kueue(cohort(preemption_b={"reclaimWithinCohort": "Any"}))
    submit_all(k, job("big", 12, queue="qa"))
    k.schedule(0)
    submit_all(k, job("mine", 8, queue="qb", created=1))
    d = k.schedule(1)
    (ev,) = evicted(d)
    message = ("Preempted to accommodate a workload (UID: uid-mine, JobUID: job-uid-mine) due to reclamation "
               "within the cohort; preemptor path: /lab/team-b; preemptee path: /lab/team-a")
    assert (ev.key, ev.reason, ev.message, ev.preemptor) == ("default/big", "Preempted", message, "default/mine")
    assert pending(d)["mine"] == ("couldn't assign flavors to pod set main: insufficient unused quota for "
                                  "nvidia.com/gpu in flavor h100, 4 more needed. Pending the preemption of "
                                  "1 workload(s)")
    assert condition(k, "big", "Preempted")["reason"] == "InCohortReclamation"
    assert condition(k, "big", "Evicted") | {"lastTransitionTime": 0} == {
        "type": "Evicted", "status": "True", "reason": "Preempted", "message": message, "lastTransitionTime": 0}
    # the quota comes back only once the Job is stopped
    assert admitted(k.schedule(2)) == []
    k.stopped("default/big", 3)
    assert condition(k, "big", "Requeued") == {"type": "Requeued", "status": "True", "reason": "Preempted",
                                               "message": message, "lastTransitionTime": 3}
    assert condition(k, "big", "QuotaReserved") == {"type": "QuotaReserved", "status": "False",
                                                    "reason": "Pending", "message": message,
                                                    "lastTransitionTime": 3}
    assert condition(k, "big", "Admitted")["reason"] == "NoReservation"
    d = k.schedule(3)
    assert admitted(d) == ["mine"]
    assert condition(k, "mine", "QuotaReserved")["message"] == "Quota reserved in ClusterQueue team-b"
    # the requeued borrower tries again and now finds the cohort's spare quota taken
    assert pending(d)["big"].endswith("insufficient unused quota for nvidia.com/gpu in flavor h100, "
                                      "4 more needed")


def test_reclaim_lower_priority_spares_an_equal_priority_borrower():
    k = Kueue(cohort(preemption_b={"reclaimWithinCohort": "LowerPriority"}))
    submit_all(k, job("big", 12, queue="qa", priority=10))
    k.schedule(0)
    submit_all(k, job("mine", 8, queue="qb", created=1, priority=10))
    d = k.schedule(1)
    assert evicted(d) == [] and "mine" in pending(d)


def test_borrowing_limit_caps_what_a_queue_may_take_from_the_cohort():
    cfg = parse_kueue([flavor("h100"),
                       cluster_queue("team-a", [("h100", {GPU: {"nominalQuota": 8, "borrowingLimit": 2}})],
                                     cohort="lab"),
                       cluster_queue("team-b", [("h100", {GPU: 8})], cohort="lab"),
                       local_queue("qa", "team-a")])
    k = Kueue(cfg)
    submit_all(k, job("twelve", 12, queue="qa"), job("ten", 10, queue="qa", created=1))
    d = k.schedule(1)
    assert admitted(d) == ["ten"]
    assert pending(d)["twelve"] == (
        "couldn't assign flavors to pod set main: insufficient quota for nvidia.com/gpu in flavor h100, "
        "previously considered podsets requests (0) + current podset request (12) > maximum capacity (10)")


def test_lending_limit_keeps_part_of_the_quota_for_the_owner():
    cfg = parse_kueue([flavor("h100"),
                       cluster_queue("team-a", [("h100", {GPU: 8})], cohort="lab"),
                       cluster_queue("team-b", [("h100", {GPU: {"nominalQuota": 8, "lendingLimit": 2}})],
                                     cohort="lab"),
                       local_queue("qa", "team-a"), local_queue("qb", "team-b")])
    k = Kueue(cfg)
    submit_all(k, job("greedy", 12, queue="qa"))
    d = k.schedule(0)
    assert pending(d)["greedy"].endswith("> maximum capacity (10)")
    submit_all(k, job("ten", 10, queue="qa", created=1), job("owner", 6, queue="qb", created=2))
    assert admitted(k.schedule(2)) == ["owner", "ten"]  # the one not borrowing first


def test_workloads_within_nominal_quota_are_admitted_before_borrowers():
    k = Kueue(cohort())
    k.submit(job("a-borrows", 10, queue="qa", created=0), 0)
    k.submit(job("b-fits", 8, queue="qb", created=1), 1)
    # both heads are nominated in one cycle; the one not borrowing is admitted first
    assert admitted(k.schedule(1)) == ["b-fits"]
