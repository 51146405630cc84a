"""Lab 07's checks: Monday deadlocks; the usual half-fixes fail with specific messages; gang admission passes."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

import gpu_lab

MONDAY = Path(__file__).resolve().parents[2] / "lessons" / "scenarios" / "07_lab_monday.yaml"
lab07 = gpu_lab.labs.lab07


def failure(fn, *args, **kwargs) -> str:
    with pytest.raises(gpu_lab.labs.LabCheckFailed) as err:
        fn(*args, **kwargs)
    return str(err.value)


def monday() -> list[dict]:
    return copy.deepcopy(lab07.documents(MONDAY))


def job(docs: list[dict], name: str) -> dict:
    return next(d for d in docs if d.get("kind") == "Job" and d["metadata"]["name"] == name)


def equal_priority() -> list[dict]:
    docs = monday()
    job(docs, "finetune")["spec"]["template"]["spec"].pop("priorityClassName")
    return docs


# ------------------------------------------------------------------ Monday as it is
def test_monday_deadlocks_and_both_jobs_are_named_with_what_they_hold():
    text = failure(lab07.check_both_finish, str(MONDAY))
    assert "2 Jobs never finished in 24h" in text
    assert "vision/pretrain: 3 of 4 workers running (12 GPUs held), 1 pending" in text
    assert "speech/finetune: 6 of 8 workers running (12 GPUs held), 2 pending" in text
    assert "together they hold 24 of 24 GPUs (0 free)" in text and "a deadlock" in text
    # the work itself is unchanged, so that line passes
    assert "✔ the submission still runs Monday's work" in text


def test_monday_strands_every_gpu_for_the_rest_of_the_day():
    text = failure(lab07.check_no_stranded, MONDAY.read_text())
    assert "567 GPU-hours stranded in 24h (goal <= 0)" in text
    assert "vision/pretrain 288 (3 workers x 4 GPUs waited up to 24 h" in text
    assert "speech/finetune 279 (6 workers x 2 GPUs waited up to 23.25 h" in text
    assert "per A100-hour" in text and "PodGroup" in text and "ClusterQueue" in text


# ------------------------------------------------------------------ half-fixes
def test_equal_priorities_meet_the_deadline_but_strand_41_gpu_hours():
    docs = equal_priority()
    fb = lab07.check_both_finish(docs, deadline="7h")
    assert ("platform/nightly-eval at 0.75 h, vision/pretrain at 4.75 h, speech/finetune at 6.75 h "
            "(deadline 7h)") in str(fb)
    text = failure(lab07.check_no_stranded, docs)
    assert "41 GPU-hours stranded" in text
    assert "vision/pretrain 9 (3 workers x 4 GPUs waited up to 0.75 h" in text
    assert "speech/finetune 32 (4 workers x 2 GPUs waited up to 4 h" in text


def test_a_tighter_deadline_names_the_late_job_and_when_it_finished():
    text = failure(lab07.check_both_finish, equal_priority(), deadline="5h")
    assert "every Job completes, but speech/finetune only at 6.75 h, after the 5h deadline" in text


def test_rendezvous_timeouts_turn_the_deadlock_into_failed_jobs():
    docs = monday()
    for name in ("pretrain", "finetune"):
        job(docs, name)["metadata"]["annotations"][lab07.TIMEOUT] = "10m"
    text = failure(lab07.check_both_finish, docs)
    assert "vision/pretrain Failed at 0.6667 h: BackoffLimitExceeded (Job has reached the specified backoff limit)" in text
    assert "speech/finetune Failed at 0.6667 h" in text and "after 10 failed workers" in text
    assert "rendezvous timeouts (gpulab.dev/rendezvous-timeout)" in text
    assert "decides nothing about who gets them next" in text


# ------------------------------------------------------------------ the work may not change
@pytest.mark.parametrize("change, words", [
    (lambda d: job(d, "finetune")["spec"].update(parallelism=6, completions=6),
     "speech/finetune asks for 12 GPUs in all (6 pods x 2), Monday's asks for 16"),
    (lambda d: job(d, "pretrain")["metadata"]["annotations"].pop("gpulab.dev/rendezvous"),
     'vision/pretrain lost gpulab.dev/rendezvous: "true"'),
    (lambda d: job(d, "finetune")["metadata"]["annotations"].update({"gpulab.dev/submit-at": "5h"}),
     "speech/finetune is submitted at 5 h, Monday's at 0.25 h"),
    (lambda d: job(d, "pretrain")["spec"]["template"]["metadata"]["annotations"].update(
        {"gpulab.dev/duration": "1h"}), "vision/pretrain runs 1 h (gpulab.dev/duration), Monday's runs 4 h"),
    (lambda d: d.remove(job(d, "nightly-eval")), "Job platform/nightly-eval is missing"),
    (lambda d: d.append({"apiVersion": "gpulab.dev/v1alpha1", "kind": "NodePool", "metadata": {"name": "more"},
                         "spec": {"count": 1, "gpu": {"model": "A100-80GB", "count": 8}}}),
     "the submission brings hardware (NodePool more): the cluster is fixed at 24 GPUs"),
])
def test_changing_the_work_is_named(change, words):
    docs = monday()
    change(docs)
    assert any(words in p for p in lab07.work_problems(docs))
    text = failure(lab07.check_no_stranded, docs, max_gpu_hours=1e9)
    assert "the submission changes Monday's work: " in text and words in text


def test_a_new_worker_shape_with_the_same_gpus_is_the_same_work():
    docs = monday()
    spec = job(docs, "finetune")["spec"]
    spec.update(parallelism=2, completions=2)
    spec["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 8
    assert lab07.work_problems(docs) == []


# ------------------------------------------------------------------ reading input
def test_documents_reads_text_paths_dicts_and_lists():
    from_path = lab07.documents(str(MONDAY))
    assert [d["kind"] for d in from_path].count("Job") == 3
    assert lab07.documents(MONDAY.read_text()) == from_path
    assert lab07.documents([from_path[:2], from_path[2]]) == from_path[:3]
    assert lab07.documents(None) == []


def test_summary_has_the_judged_numbers():
    s = lab07.summary(lab07.run(equal_priority()))
    assert s["speech/finetune"] == {"state": "Complete", "finished_h": 6.75, "stranded_gpu_hours": 32.0}
    assert s["total"] == {"gpu_hours_stranded": 41.0, "makespan_h": 6.75}


# ------------------------------------------------------------------ gangs (the native Workload API)
def as_gangs(docs: list[dict], min_count: int | None = None, groups: bool = True) -> list[dict]:
    """Each training Job's pods join a PodGroup of the Job's name (gang, minCount = parallelism)."""
    extra = []
    for name in ("pretrain", "finetune"):
        j = job(docs, name)
        j["spec"]["template"]["spec"]["schedulingGroup"] = {"podGroupName": name}
        if groups:
            extra.append({"apiVersion": "scheduling.k8s.io/v1beta1", "kind": "PodGroup",
                          "metadata": {"name": name, "namespace": j["metadata"]["namespace"]},
                          "spec": {"schedulingPolicy": {"gang": {"minCount": min_count or j["spec"]["parallelism"]}}}})
    return docs + extra


def test_whole_gangs_pass_both_checks_with_no_gpu_hour_stranded():
    docs = as_gangs(monday())
    fb = lab07.check_both_finish(docs, deadline="7h")
    # speech's gang goes first (priority 100) once the evaluation frees its GPUs, then vision's
    assert "platform/nightly-eval at 0.75 h, speech/finetune at 2.75 h, vision/pretrain at 6.75 h" in str(fb)
    assert "0 GPU-hours stranded (goal <= 0)" in str(lab07.check_no_stranded(docs))
    assert lab07.gang_notes(docs) == []


def test_a_gang_smaller_than_the_job_still_deadlocks_and_the_min_count_is_named():
    docs = as_gangs(monday(), min_count=2)
    text = failure(lab07.check_both_finish, docs)
    assert "a deadlock" in text
    assert "PodGroup vision/pretrain has minCount 2, but vision/pretrain needs all 4 workers at once" in text
    assert "PodGroup speech/finetune has minCount 2, but speech/finetune needs all 8 workers" in text


def test_pods_naming_a_missing_pod_group_never_start_and_why_is_named():
    docs = as_gangs(monday(), groups=False)
    text = failure(lab07.check_both_finish, docs)
    assert "vision/pretrain never started a worker (4 pending pods)" in text
    assert ("vision/pretrain's pods name PodGroup pretrain (spec.schedulingGroup), which does not exist in "
            "namespace vision") in text
    # nothing ran, so nothing was stranded: the other check passes, which is why there are two
    assert lab07.check_no_stranded(docs).passed


def test_ganging_one_job_only_leaves_the_other_stranding():
    docs = monday()
    docs = as_gangs(docs)
    docs = [d for d in docs if not (d["kind"] == "PodGroup" and d["metadata"]["name"] == "pretrain")]
    job(docs, "pretrain")["spec"]["template"]["spec"].pop("schedulingGroup")
    lab07.check_both_finish(docs)
    text = failure(lab07.check_no_stranded, docs)
    assert "9 GPU-hours stranded" in text and "vision/pretrain 9 (3 workers x 4 GPUs waited up to 0.75 h" in text


def test_gang_notes_name_a_group_no_pod_joins_and_a_basic_policy():
    docs = as_gangs(monday())
    job(docs, "pretrain")["spec"]["template"]["spec"].pop("schedulingGroup")
    next(d for d in docs if d["kind"] == "PodGroup" and d["metadata"]["name"] == "finetune")["spec"] = {
        "schedulingPolicy": {"basic": {}}}
    notes = lab07.gang_notes(docs)
    assert ("PodGroup vision/pretrain exists, but no pod of Job vision/pretrain joins it: set "
            "spec.template.spec.schedulingGroup.podGroupName") in notes
    assert ("PodGroup speech/finetune has the basic policy: its pods are scheduled one by one; use "
            "gang: {minCount: 8}") in notes


# ------------------------------------------------------------------ Kueue
def with_kueue(docs: list[dict], quota: int = 24, queue_eval: bool = True) -> list[dict]:
    """A ClusterQueue of ``quota`` GPUs, a LocalQueue per namespace, Monday's Jobs labelled for it."""
    v = "kueue.x-k8s.io/v1beta2"
    objects = [{"apiVersion": v, "kind": "ResourceFlavor", "metadata": {"name": "a100"},
                "spec": {"nodeLabels": {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}}},
               {"apiVersion": v, "kind": "ClusterQueue", "metadata": {"name": "gpus"},
                "spec": {"namespaceSelector": {}, "resourceGroups": [{
                    "coveredResources": ["nvidia.com/gpu"],
                    "flavors": [{"name": "a100", "resources": [{"name": "nvidia.com/gpu", "nominalQuota": quota}]}]}]}}]
    objects += [{"apiVersion": v, "kind": "LocalQueue", "metadata": {"name": "gpus", "namespace": ns},
                 "spec": {"clusterQueue": "gpus"}} for ns in ("platform", "vision", "speech")]
    for d in docs:
        if d["kind"] == "Job" and (queue_eval or d["metadata"]["name"] != "nightly-eval"):
            d["metadata"].setdefault("labels", {})["kueue.x-k8s.io/queue-name"] = "gpus"
    return objects + docs


def test_every_gpu_job_in_a_queue_of_the_clusters_gpus_passes_both_checks():
    docs = with_kueue(monday())
    fb = lab07.check_both_finish(docs)
    assert "speech/finetune at 2.75 h, vision/pretrain at 6.75 h (deadline 7h)" in str(fb)
    assert lab07.check_no_stranded(docs).passed
    assert lab07.kueue_notes(docs) == []


def test_a_queue_without_the_evaluation_admits_vision_too_early_and_says_so():
    docs = with_kueue(monday(), queue_eval=False)
    lab07.check_both_finish(docs)
    text = failure(lab07.check_no_stranded, docs)
    assert "9 GPU-hours stranded" in text
    assert ("not in a LocalQueue (no kueue.x-k8s.io/queue-name label): platform/nightly-eval (12 GPUs); "
            "Kueue counts only queued Jobs against the quota") in text


def test_kueue_notes_name_a_quota_larger_than_the_cluster():
    notes = lab07.kueue_notes(with_kueue(monday(), quota=32))
    assert notes == ["the ClusterQueues' nvidia.com/gpu quota adds up to 32, the cluster has 24: admitted Jobs "
                     "can find fewer GPUs than their quota"]
    assert lab07.kueue_notes(monday()) == []
