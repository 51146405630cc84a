"""Lab 13's checks: two fine-tunes split over both sockets by an overnight scale-down; the
tempting wrong answers (a chat replica named, a NUMA policy instead of a new order, a lost
replica) get specific messages, the right ones pass."""

from __future__ import annotations

import pytest

import gpu_lab

lab13 = gpu_lab.labs.lab13


def failure(fn, *args) -> str:
    with pytest.raises(gpu_lab.labs.LabCheckFailed) as err:
        fn(*args)
    return str(err.value)


@pytest.fixture
def lab():
    return lab13.paged_cluster()


def fix(lab) -> None:
    moved = [p for p in lab.pods()["name"] if p.startswith("chat-") and 1 in lab13.sockets(lab, p)]
    for p in [*lab13.FINETUNES, *moved]:
        lab.delete(p)
    for p in lab13.FINETUNES:
        lab.apply(lab13.finetune_pod(p))
    lab.schedule()
    for p in moved:
        lab.apply(lab13.chat_pod(p))
    lab.schedule()


def test_the_ticket_is_two_fine_tunes_on_both_sockets(lab):
    pods = lab.pods().set_index("name")
    assert (pods["phase"] == "Running").all() and int(pods["gpus"].sum()) == 16  # both nodes full
    assert {p: lab13.sockets(lab, p) for p in lab13.FINETUNES} == {
        "ft-a": {0: [2, 3], 1: [6, 7]}, "ft-b": {0: [2, 3], 1: [6, 7]}}
    assert all(len(lab13.sockets(lab, p)) == 1 for p in pods.index if p.startswith("chat-"))


def test_the_right_diagnosis_passes_and_names_the_gpus(lab):
    fb = lab13.check_diagnosis(lab, ["ft-b", "ft-a"])
    assert "ft-a (GPUs 2,3 on NUMA node 0 + GPUs 6,7 on NUMA node 1)" in str(fb)


def test_a_chat_replica_named_and_a_fine_tune_missed_are_told_apart(lab):
    text = failure(lab13.check_diagnosis, lab, ["ft-a", "chat-0"])
    assert "chat-0 holds GPUs 0,1 on NUMA node 0: one socket" in text
    assert "1 pod you did not name holds GPUs on both NUMA nodes" in text and "ft-b" not in text
    assert "no running pod is called nope" in failure(lab13.check_diagnosis, lab, ["nope"])
    assert "should be a list of pod names" in failure(lab13.check_diagnosis, lab, 3)


def test_the_untouched_cluster_fails_the_fix_and_the_right_order_passes(lab):
    assert "still spanning sockets: ft-a" in failure(lab13.check_fix, lab)
    fix(lab)
    fb = lab13.check_fix(lab)
    assert "ft-a on GPUs 4,5,6,7 on NUMA node 1" in str(fb)


def test_losing_a_replica_or_shrinking_a_fine_tune_is_named(lab):
    for p in lab13.FINETUNES:
        lab.delete(p)
    lab.apply(lab13.finetune_pod("ft-a").replace("nvidia.com/gpu: 4", "nvidia.com/gpu: 2"))
    lab.schedule()
    text = failure(lab13.check_fix, lab)
    assert "ft-a asks for 2 GPUs; a finetune pod needs 4" in text
    assert "1 finetune pods run, the ticket had 2" in text


def test_a_pod_that_cannot_land_is_reported_with_its_phase(lab):
    lab.apply(lab13.finetune_pod("ft-c"))
    lab.schedule()
    assert "not running: ft-c (Pending)" in failure(lab13.check_fix, lab)


def test_another_session_is_refused_in_one_line():
    text = failure(lab13.check_fix, gpu_lab.connect("sim"))
    assert text.startswith("Lab 13: this session is not the ticket's cluster")
