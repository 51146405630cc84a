"""Lab 07's checks: the nightly sweep's rendezvous timeouts fail two of three Jobs; the usual
half-fixes (no timeout, more retries, a partial gang or queue) fail with specific messages;
whole gangs, or Kueue with every Job queued, pass."""

from __future__ import annotations

import copy

import pytest

import gpu_lab

lab07 = gpu_lab.labs.lab07
SWEEPS = ("sweep-lr", "sweep-wd", "sweep-bs")


def failure(fn, *args, **kwargs) -> str:
    with pytest.raises(gpu_lab.labs.LabCheckFailed) as err:
        fn(*args, **kwargs)
    return str(err.value)


def tonight() -> list[dict]:
    return copy.deepcopy(lab07.documents(lab07.SWEEP))


def job(docs: list[dict], name: str) -> dict:
    return next(d for d in docs if d.get("kind") == "Job" and d["metadata"]["name"] == name)


def without_timeout() -> list[dict]:
    docs = tonight()
    for name in SWEEPS:
        job(docs, name)["metadata"]["annotations"].pop(lab07.TIMEOUT)
    return docs


def test_the_work_is_computed_from_the_manifests():
    docs = tonight()
    assert lab07.work_problems(docs) == []
    assert [w.key for w in lab07.WORK] == [f"research/{n}" for n in SWEEPS]
    assert lab07.CLUSTER_GPUS == 16
    # two Jobs together need more than the cluster has: the sweep can only run one Job at a time
    assert all(a.gpus + b.gpus > lab07.CLUSTER_GPUS for a in lab07.WORK for b in lab07.WORK if a != b)


# ------------------------------------------------------------------ the sweep as it is
def test_tonight_two_jobs_fail_on_rendezvous_timeouts_and_are_named():
    text = failure(lab07.check_all_finish, lab07.SWEEP)
    assert "2 Jobs never finished in 24h" in text
    assert ("research/sweep-wd Failed at 1.333 h: BackoffLimitExceeded (Job has reached the specified "
            "backoff limit) after 5 failed workers, 5 of them rendezvous timeouts") in text
    assert "research/sweep-bs Failed at 1.667 h: BackoffLimitExceeded" in text
    assert "decides nothing about who gets them next" in text
    assert "kubectl describe job -n research" in text
    assert "✔ the submission still runs tonight's work" in text


def test_tonight_strands_the_timed_out_workers_gpu_hours():
    text = failure(lab07.check_no_stranded, lab07.SWEEP)
    assert "6.667 GPU-hours stranded in 24h (goal <= 0)" in text
    assert "research/sweep-wd 3.333 (5 workers x 4 GPUs waited up to 0.1667 h" in text
    assert "per H200-hour" in text
    # the failure names the symptom, not the fix
    assert "PodGroup" not in text and "ClusterQueue" not in text


# ------------------------------------------------------------------ half-fixes
def test_no_timeout_meets_the_deadline_but_strands_20_gpu_hours():
    docs = without_timeout()
    fb = lab07.check_all_finish(docs, deadline="7h")
    assert "research/sweep-lr at 3 h, research/sweep-wd at 5 h, research/sweep-bs at 6.5 h (deadline 7h)" in str(fb)
    text = failure(lab07.check_no_stranded, docs)
    assert "20 GPU-hours stranded" in text
    assert "research/sweep-wd 12 (1 worker x 4 GPUs waited up to 3 h" in text
    assert "research/sweep-bs 8 (1 worker x 4 GPUs waited up to 2 h" in text


def test_a_tighter_deadline_names_the_late_job_and_when_it_finished():
    text = failure(lab07.check_all_finish, without_timeout(), deadline="6h")
    assert "every Job completes, but research/sweep-bs only at 6.5 h, after the 6h deadline" in text


def test_more_retries_finish_every_job_and_strand_18_gpu_hours():
    docs = tonight()
    for name in SWEEPS:
        job(docs, name)["spec"]["backoffLimit"] = 100
    assert "research/sweep-bs at 6.667 h" in str(lab07.check_all_finish(docs))
    text = failure(lab07.check_no_stranded, docs)
    assert "18 GPU-hours stranded" in text and "research/sweep-bs 12 (18 workers x 4 GPUs" in text


# ------------------------------------------------------------------ the work may not change
@pytest.mark.parametrize("change, words", [
    (lambda d: job(d, "sweep-wd")["spec"].update(parallelism=2, completions=2),
     "research/sweep-wd asks for 8 GPUs in all (2 pods x 4), tonight's asks for 12"),
    (lambda d: job(d, "sweep-lr")["metadata"]["annotations"].pop("gpulab.dev/rendezvous"),
     'research/sweep-lr lost gpulab.dev/rendezvous: "true"'),
    (lambda d: job(d, "sweep-bs")["metadata"]["annotations"].update({"gpulab.dev/submit-at": "5h"}),
     "research/sweep-bs is submitted at 5 h, tonight's at 0.08333 h"),
    (lambda d: job(d, "sweep-lr")["spec"]["template"]["metadata"]["annotations"].update(
        {"gpulab.dev/duration": "1h"}), "research/sweep-lr runs 1 h (gpulab.dev/duration), tonight's runs 3 h"),
    (lambda d: d.remove(job(d, "sweep-wd")), "Job research/sweep-wd is missing"),
    (lambda d: d.append({"apiVersion": "gpulab.dev/v1alpha1", "kind": "NodePool", "metadata": {"name": "more"},
                         "spec": {"count": 1, "gpu": {"model": "H200-141GB", "count": 8}}}),
     "the submission brings hardware (NodePool more): the cluster is fixed at 16 GPUs"),
])
def test_changing_the_work_is_named(change, words):
    docs = tonight()
    change(docs)
    assert any(words in p for p in lab07.work_problems(docs))
    text = failure(lab07.check_no_stranded, docs, max_gpu_hours=1e9)
    assert "the submission changes tonight's work: " in text and words in text


def test_a_new_worker_shape_with_the_same_gpus_is_the_same_work():
    docs = tonight()
    spec = job(docs, "sweep-wd")["spec"]
    spec.update(parallelism=2, completions=2)
    spec["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 6
    assert lab07.work_problems(docs) == []


# ------------------------------------------------------------------ reading input
def test_documents_reads_text_dicts_and_lists():
    docs = lab07.documents(lab07.SWEEP)
    assert [d["kind"] for d in docs].count("Job") == 3
    assert lab07.documents([docs[:2], docs[2]]) == docs[:3]
    assert lab07.documents(None) == []


def test_summary_has_the_judged_numbers():
    s = lab07.summary(lab07.run(without_timeout()))
    assert s["research/sweep-wd"] == {"state": "Complete", "finished_h": 5.0, "stranded_gpu_hours": 12.0}
    assert s["total"] == {"gpu_hours_stranded": 20.0, "makespan_h": 6.5}


# ------------------------------------------------------------------ gangs (the native Workload API)
def as_gangs(docs: list[dict], min_count: int | None = None, groups: bool = True,
             only: tuple[str, ...] = SWEEPS) -> list[dict]:
    """Each named Job's pods join a PodGroup of the Job's name (gang, minCount = parallelism)."""
    extra = []
    for name in only:
        j = job(docs, name)
        j["spec"]["template"]["spec"]["schedulingGroup"] = {"podGroupName": name}
        if groups:
            extra.append({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                          "metadata": {"name": name, "namespace": j["metadata"]["namespace"]},
                          "spec": {"schedulingPolicy": {"gang": {"minCount": min_count or j["spec"]["parallelism"]}}}})
    return docs + extra


def test_whole_gangs_pass_both_checks_with_no_gpu_hour_stranded():
    docs = as_gangs(tonight())
    fb = lab07.check_all_finish(docs, deadline="7h")
    # one Job at a time, each whole, in arrival order; the timeout never fires
    assert "research/sweep-lr at 3 h, research/sweep-wd at 5 h, research/sweep-bs at 6.5 h" in str(fb)
    assert "0 GPU-hours stranded (goal <= 0)" in str(lab07.check_no_stranded(docs))
    assert lab07.gang_notes(docs) == []


def test_ganging_two_jobs_only_leaves_the_third_failing_and_stranding():
    docs = as_gangs(tonight(), only=("sweep-lr", "sweep-wd"))
    text = failure(lab07.check_all_finish, docs)
    assert "1 Job never finished in 24h: research/sweep-bs Failed at 0.9167 h: BackoffLimitExceeded" in text
    text = failure(lab07.check_no_stranded, docs)
    assert "3.333 GPU-hours stranded" in text and "research/sweep-bs 3.333 (5 workers x 4 GPUs" in text


def test_pods_naming_a_missing_pod_group_never_start_and_why_is_named():
    docs = as_gangs(tonight(), groups=False)
    text = failure(lab07.check_all_finish, docs)
    assert "research/sweep-lr never started a worker (3 pending pods)" in text
    assert ("research/sweep-lr's pods name PodGroup sweep-lr (spec.schedulingGroup), which does not exist in "
            "namespace research") in text
    # nothing ran, so nothing was stranded: the other check passes, which is why there are two
    assert lab07.check_no_stranded(docs).passed


def test_gang_notes_name_a_small_min_count_a_group_no_pod_joins_and_a_basic_policy():
    docs = as_gangs(tonight())
    job(docs, "sweep-lr")["spec"]["template"]["spec"].pop("schedulingGroup")
    groups = {d["metadata"]["name"]: d for d in docs if d["kind"] == "PodGroup"}
    groups["sweep-wd"]["spec"] = {"schedulingPolicy": {"basic": {}}}
    groups["sweep-bs"]["spec"]["schedulingPolicy"]["gang"]["minCount"] = 2
    notes = lab07.gang_notes(docs)
    assert ("PodGroup research/sweep-lr exists, but no pod of Job research/sweep-lr joins it: set "
            "spec.template.spec.schedulingGroup.podGroupName") in notes
    assert ("PodGroup research/sweep-wd has the basic policy: its pods are scheduled one by one; use "
            "gang: {minCount: 3}") in notes
    assert ("PodGroup research/sweep-bs has minCount 2, but research/sweep-bs needs all 3 workers at once: "
            "the scheduler binds the group as soon as 2 fit") in notes


# ------------------------------------------------------------------ Kueue
def with_kueue(docs: list[dict], quota: int = 16, skip: tuple[str, ...] = ()) -> list[dict]:
    """A ClusterQueue of ``quota`` GPUs, a LocalQueue in research, the sweep's Jobs labelled for it."""
    v = "kueue.x-k8s.io/v1beta2"
    objects = [{"apiVersion": v, "kind": "ResourceFlavor", "metadata": {"name": "h200"},
                "spec": {"nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-H200"}}},
               {"apiVersion": v, "kind": "ClusterQueue", "metadata": {"name": "gpus"},
                "spec": {"namespaceSelector": {}, "resourceGroups": [{
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [{"name": "h200", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": quota}]}]}]}},
               {"apiVersion": v, "kind": "LocalQueue", "metadata": {"name": "gpus", "namespace": "research"},
                "spec": {"clusterQueue": "gpus"}}]
    for d in docs:
        if d["kind"] == "Job" and d["metadata"]["name"] not in skip:
            d["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = "gpus"
    return objects + docs


def test_every_job_in_a_queue_of_the_clusters_gpus_passes_both_checks():
    docs = with_kueue(tonight())
    fb = lab07.check_all_finish(docs)
    assert "research/sweep-bs at 6.5 h (deadline 7h)" in str(fb)
    assert lab07.check_no_stranded(docs).passed
    assert lab07.kueue_notes(docs) == []


def test_a_job_left_out_of_the_queue_is_named():
    docs = with_kueue(tonight(), skip=("sweep-bs",))
    text = failure(lab07.check_no_stranded, docs)
    assert "3.333 GPU-hours stranded" in text
    assert ("not in a LocalQueue (no kueue.x-k8s.io/queue-name label): research/sweep-bs (12 GPUs); "
            "Kueue counts only queued Jobs against the quota") in text


def test_kueue_notes_name_a_quota_larger_than_the_cluster():
    notes = lab07.kueue_notes(with_kueue(tonight(), quota=24))
    assert notes == ["the ClusterQueues' nvidia.com/gpu quota adds up to 24, the cluster has 16: admitted Jobs "
                     "can find fewer GPUs than their quota"]
    assert lab07.kueue_notes(tonight()) == []
