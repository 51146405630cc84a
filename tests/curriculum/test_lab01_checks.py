"""Lab 01's checks: a mixed L4/A100 fleet with three dead device plugins, one of them on a
full node; the tempting wrong answers get specific messages, the right ones pass."""

from __future__ import annotations

import pytest

import gpu_lab

lab01 = gpu_lab.labs.lab01


def failure(fn, *args) -> str:
    with pytest.raises(gpu_lab.labs.LabCheckFailed) as err:
        fn(*args)
    return str(err.value)


@pytest.fixture
def lab():
    return lab01.paged_cluster()


def truth(lab) -> dict[str, int]:
    """{node: stranded GPUs} from what kubectl shows: allocatable below GFD's count."""
    out = {}
    for _, row in lab.nodes().iterrows():
        installed = int(lab.describe_node(row["name"]).labels["nvidia.com/gpu.count"])
        if row["nvidia.com/gpu allocatable"] < installed:
            out[row["name"]] = installed - int(row["nvidia.com/gpu requested"])
    return out


def test_the_incident_is_what_kubectl_shows(lab):
    nodes = lab.nodes().set_index("name")
    assert set(nodes["product"]) == {"NVIDIA-L4", "NVIDIA-A100-SXM4-80GB"}
    assert truth(lab) == {"l4-2": 3, "l4-3": 0, "a100-1": 4}
    # past the grace period on l4-2 (capacity 0 too), within it on the other two
    assert nodes.loc["l4-2", "nvidia.com/gpu capacity"] == 0
    assert nodes.loc["l4-3", "nvidia.com/gpu capacity"] == 4 and nodes.loc["a100-1", "nvidia.com/gpu capacity"] == 8
    pending = lab.pods().query("phase == 'Pending'")
    assert sorted(pending["name"]) == ["finetune", "ocr-2", "ranker-4"]
    assert all("Insufficient nvidia.com/gpu" in m for m in pending["message"])


def test_the_right_diagnosis_passes_and_shows_the_arithmetic(lab):
    fb = lab01.check_diagnosis(lab, ["a100-1", "l4-2", "l4-3"], 7)
    assert "broken device plugins: a100-1, l4-2, l4-3" in str(fb)
    assert "l4-3: 4 installed - 4 in use = 0" in str(fb)


def test_missing_the_full_broken_node_names_its_symptom_not_the_node(lab):
    text = failure(lab01.check_diagnosis, lab, ["a100-1", "l4-2"], 7)
    assert "running pods hold all 4 GPUs it has, so it looks full, but its allocatable is 0 (capacity 4)" in text
    assert "l4-3" not in text and "kubectl describe node" in text


def test_a_full_healthy_node_is_busy_not_broken(lab):
    text = failure(lab01.check_diagnosis, lab, ["l4-0", "a100-1", "l4-2", "l4-3"], 7)
    assert "you named l4-0, but its plugin is fine" in text and "A full node is busy, not broken" in text


@pytest.mark.parametrize("said, words", [
    (12, "Capacity minus allocatable misses a node whose plugin died more than 5 minutes ago"),
    (16, "You also counted the GPUs running pods hold"),
    (4, "That is one broken node alone."),
])
def test_tempting_counts_get_their_reason(lab, said, words):
    text = failure(lab01.check_diagnosis, lab, ["a100-1", "l4-2", "l4-3"], said)
    assert f"you said {said} stranded GPUs" in text and words in text


def test_recovery_needs_every_plugin_back_and_nothing_moved(lab):
    lab.restart_plugin("a100-1")
    lab.restart_plugin("l4-2")
    lab.schedule()
    text = failure(lab01.check_recovery, lab)
    assert "device plugin still down on l4-3 (allocatable 0 of 4)" in text
    lab.restart_plugin("l4-3")
    lab.schedule()
    fb = lab01.check_recovery(lab)
    assert "all 15 pods are running" in str(fb) and "every node advertises all its GPUs again (32 in all)" in str(fb)
