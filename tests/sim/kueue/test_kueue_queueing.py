"""Queueing: StrictFIFO's head-of-line blocking, BestEffortFIFO skipping ahead, priority order."""

from gpu_lab.sim.kueue import Kueue

from .kit import admitted, gpu_cluster, job, pending, priority_class, state, submit_all


def _blocked_head(strategy):
    """8 GPUs; 4 in use; an 8-GPU job at the head, a 2-GPU job behind it."""
    k = Kueue(gpu_cluster(gpus=8, strategy=strategy))
    submit_all(k, job("running", 4, created=0))
    k.schedule(0)
    submit_all(k, job("big", 8, created=1), job("small", 2, created=2))
    return k, k.schedule(2)


def test_strict_fifo_blocks_everything_behind_a_head_that_does_not_fit():
    k, d = _blocked_head("StrictFIFO")
    assert admitted(d) == []
    assert pending(d) == {"big": "couldn't assign flavors to pod set main: insufficient unused quota for "
                                 "nvidia.com/gpu in flavor h100, 4 more needed"}
    # the scheduler never looked at "small": Kueue writes no condition on it
    assert state(k, "small")["state"] == "Pending" and state(k, "small")["message"] is None


def test_best_effort_fifo_admits_what_fits_behind_a_blocked_head():
    k, d = _blocked_head("BestEffortFIFO")
    assert admitted(d) == ["small"]
    assert "big" in pending(d)


def test_best_effort_fifo_is_the_default():
    k, d = _blocked_head(None)
    assert admitted(d) == ["small"]


def test_strict_fifo_head_is_admitted_once_quota_frees_then_the_rest_follow():
    k, _ = _blocked_head("StrictFIFO")
    k.finish("default/running", 60)
    assert admitted(k.schedule(60)) == ["big"]
    k.finish("default/big", 120)
    assert admitted(k.schedule(120)) == ["small"]


def test_a_parked_best_effort_workload_returns_when_quota_is_released():
    k, _ = _blocked_head("BestEffortFIFO")
    assert k.cluster_queue_status("team")["pendingWorkloads"] == 1
    k.finish("default/running", 60)
    assert admitted(k.schedule(60)) == []  # small (2) + big (8) > 8: big still waits for small
    k.finish("default/small", 90)
    assert admitted(k.schedule(90)) == ["big"]


def test_higher_priority_goes_first_whatever_the_creation_order():
    k = Kueue(gpu_cluster(gpus=8))
    submit_all(k, job("old-low", 8, created=0, priority=0), job("new-high", 8, created=5, priority=100))
    assert admitted(k.schedule(5)) == ["new-high"]


def test_equal_priority_is_first_in_first_out():
    k = Kueue(gpu_cluster(gpus=8))
    submit_all(k, job("first", 8, created=0), job("second", 8, created=1))
    assert admitted(k.schedule(1)) == ["first"]


def test_priority_from_a_workload_priority_class_label():
    from gpu_lab.sim.kueue import job_workload
    cfg = gpu_cluster(extra_docs=[priority_class("urgent", 1000)])
    manifest = {"apiVersion": "batch/v1", "kind": "Job",
                "metadata": {"name": "train", "namespace": "default",
                             "labels": {"kueue.x-k8s.io/queue-name": "q", "kueue.x-k8s.io/priority-class": "urgent"}},
                "spec": {"parallelism": 4, "completions": 4, "template": {"spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": 2}}}]}}}}
    spec = job_workload(manifest, created=3, uid="0000-1111", config=cfg)
    assert (spec.priority, spec.priority_class, spec.count, spec.requests) == (1000, "urgent", 4,
                                                                               {"nvidia.com/gpu": 2})
    assert spec.name.startswith("job-train-") and len(spec.name) == len("job-train-") + 5
    k = Kueue(cfg)
    submit_all(k, job("low", 8, created=0), spec)
    assert admitted(k.schedule(3)) == [spec.name]
