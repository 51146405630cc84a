"""A Parallel StatefulSet creates its pods in slowStartBatch's batches and stops after a
batch where the API server refused a create (quota): later ordinals get no FailedCreate."""

from pathlib import Path

import gpu_lab
from gpu_lab.fidelity import Case, run_case
from gpu_lab.model.statefulset import slow_start_batch

SCENARIO = Path(__file__).parents[1] / "fidelity" / "scenarios" / "quota_stops_a_parallel_statefulset.yaml"


def test_batches_double():
    assert [slow_start_batch(i) for i in range(8)] == [0, 1, 1, 2, 2, 2, 2, 3]


def _failed(session) -> list[str]:
    return sorted(m.split(" in ")[0] for _, _, _, m in session._sim.apiserver.policies.failed_creates)


def test_a_refused_batch_stops_the_walk_at_apply_and_at_each_sync():
    lab = gpu_lab.connect("sim", seed=0)
    out = run_case(Case.load(SCENARIO), lab)
    assert not out.pending
    assert sorted({m.split(" in ")[0] for _, m in out.refused}) == ["Create Pod shard-1", "Create Pod shard-2"]
    # the apply's creates, then the controller's sync trying again: shard-3 is never tried
    assert _failed(lab) == ["Create Pod shard-1"] * 2 + ["Create Pod shard-2"] * 2


def test_ordinals_after_a_refused_one_are_made_once_quota_allows(tmp_path):
    text = SCENARIO.read_text().replace('requests.nvidia.com/gpu: "1"', 'requests.nvidia.com/gpu: "4"')
    path = tmp_path / "room.yaml"
    path.write_text(text)
    out = run_case(Case.load(path), gpu_lab.connect("sim", seed=0))
    assert not out.refused and not out.pending
    assert out.usage == {"l4-0": (("nvidia.com/gpu", "4"), ("pods", "4"))}
