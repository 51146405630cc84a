"""Progressive feedback: ``gpu_lab.labs.hint(N)`` gives lab N's hints in order, the answer only
at the last one, with state per lab; every lab has at least three; the first failure of every
lab's checks on today's (unmodified) cluster names the kubectl command that shows it."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
import yaml

import gpu_lab
from gpu_lab.curriculum.checks import hints as hints_module
from gpu_lab.errors import GpuLabError, LabCheckFailed

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "lessons" / "scenarios"
CHECKS = REPO / "gpu_lab" / "curriculum" / "checks"
LABS = (1, 2, 3, 4, 5, 6, 7, 8, 9, 11)
labs = gpu_lab.labs


@pytest.fixture(autouse=True)
def fresh_hints():
    labs.reset_hints()
    yield
    labs.reset_hints()


# ------------------------------------------------------------------ the mechanism
@pytest.mark.parametrize("n", LABS)
def test_every_lab_has_at_least_three_hints_and_only_the_last_is_the_answer(n):
    found = getattr(labs, f"lab{n:02d}").HINTS
    assert len(found) >= 3 and all(isinstance(h, str) and h for h in found)
    assert "kubectl" in found[0], "the first hint points at what to look at"
    assert found[-1].startswith("The answer")
    assert not any("The answer" in h for h in found[:-1])


def test_hints_come_in_order_and_the_last_one_is_the_answer():
    found = labs.lab04.HINTS
    shown = [labs.hint(4) for _ in found]
    assert [h.text for h in shown] == list(found)
    assert [h.number for h in shown] == list(range(1, len(found) + 1))
    assert [h.is_answer for h in shown] == [False] * (len(found) - 1) + [True]
    assert str(shown[0]).startswith(f"Lab 04, hint 1 of {len(found)} (more with another call):")
    assert "the answer" in shown[-1].heading and "MostAllocated" in shown[-1].text
    assert "nvidia.com/gpu=present:NoSchedule" in shown[-1].text
    again = labs.hint(4)
    assert again.is_answer and again.repeated and "no more" in str(again)
    assert "<b>" in again._repr_html_()


def test_state_is_per_lab_and_reset_starts_over():
    labs.hint(4)
    labs.hint(4)
    assert labs.hint(11).number == 1  # another lab starts at its first hint
    assert labs.hint(4).number == 3
    labs.reset_hints(4)
    assert labs.hint(4).number == 1
    assert labs.hint(11).number == 2  # resetting lab 04 leaves lab 11 alone
    labs.reset_hints()
    assert labs.hint(11).number == 1


def test_a_lab_is_named_by_number_or_text():
    assert labs.hint("04").lab == labs.hint(4).lab == labs.hint("lab04").lab == "04"
    with pytest.raises(GpuLabError, match="no lab 10"):
        labs.hint(10)


def test_a_failed_check_points_at_the_hints():
    with pytest.raises(LabCheckFailed) as err:
        labs.lab11.check_diagnosis(1, 1)
    assert str(err.value).splitlines()[-1] == "  Stuck? gpu_lab.labs.hint(11) gives a hint, one more each call."
    assert labs.lab11.check_diagnosis(2, 4).footer not in str(labs.lab11.check_diagnosis(2, 4))
    assert hints_module.lab_of("Lab 00: demo") is None


def test_every_check_of_every_lab_names_a_kubectl_command():
    """Each Checklist a check builds carries a default ``look``, so every failure names one."""
    for n in LABS:
        tree = ast.parse((CHECKS / f"lab{n:02d}.py").read_text())
        calls = [c for c in ast.walk(tree) if isinstance(c, ast.Call) and getattr(c.func, "id", "") == "Checklist"]
        assert calls, n
        for call in calls:
            looks = [k for k in call.keywords if k.arg == "look"]
            assert looks, f"lab{n:02d}.py line {call.lineno}: Checklist without a look"
            assert "kubectl" in ast.unparse(looks[0].value), f"lab{n:02d}.py line {call.lineno}"


# --------------------------------------------------- today's first failure, lab by lab
def _sim(*sources, **kw):
    lab = gpu_lab.connect("sim", **(kw or {"deterministic": True}))
    for src in sources:
        lab.apply(src)
    lab.schedule()
    return lab


def _lab04():
    lab = gpu_lab.connect("sim", deterministic=True)
    lab.apply(labs.lab04.GPU_POOLS)
    lab.apply(labs.lab04.CPU_POOL)
    for doc in yaml.safe_load_all(labs.lab04.ARRIVALS):
        if doc:
            lab.apply(doc)
            lab.schedule()
    return lab


def _lab02():
    services = [gpu_lab.gpus.Service("translate", 10, 2, 2), gpu_lab.gpus.Service("rerank", 5, None, 4)]
    return labs.lab02.check_fleet, (_sim(str(SCENARIOS / "02_a100_migration.yaml")), services)


TODAY = {
    1: lambda: (labs.lab01.check_recovery, (labs.lab01.paged_cluster(),)),
    2: _lab02,
    3: lambda: (labs.lab03.check_dev_notebooks,
                (_sim(str(SCENARIOS / "03_l4_fleet_today.yaml"), str(SCENARIOS / "03_inference.yaml"),
                      str(SCENARIOS / "03_dev_notebooks_today.yaml"), seed=0),)),
    4: lambda: (labs.lab04.check_training_fits, (_lab04(), "")),
    5: lambda: (labs.lab05.check_savings, (_sim(str(SCENARIOS / "05_lab_fleet.yaml"), seed=0),
                                           str(SCENARIOS / "05_lab_fleet.yaml"))),
    6: lambda: (labs.lab06.check_jobs, (labs.lab06.load(str(SCENARIOS / "06_lab_day.yaml")),
                                        str(SCENARIOS / "06_lab_day.yaml"))),
    7: lambda: (labs.lab07.check_all_finish, (labs.lab07.SWEEP,)),
    8: lambda: (labs.lab08.check_today, ({"search": 1.0, "assistant": 1.0},)),
    9: lambda: (labs.lab09.check_all_running, (str(SCENARIOS / "09_lab_services.yaml"),)),
    11: lambda: (labs.lab11.check_serve, (labs.lab11.TODAY_POLICY,)),
}


@pytest.mark.parametrize("n", sorted(TODAY))
def test_todays_first_failure_names_a_kubectl_command(n):
    check, args = TODAY[n]()
    with pytest.raises(LabCheckFailed) as err:
        check(*args)
    text = str(err.value)
    first = next(line for line in text.splitlines() if line.lstrip().startswith("✘"))
    assert "kubectl" in first, first
    assert f"gpu_lab.labs.hint({n})" in text


def test_lab01_diagnosis_names_the_symptom_not_the_nodes():
    lab = labs.lab01.paged_cluster()
    with pytest.raises(LabCheckFailed) as err:
        labs.lab01.check_diagnosis(lab, [], 1)
    text = str(err.value)
    assert "you missed a node whose plugin is down" in text and "kubectl describe node" in text
    broken = [n for n in lab.nodes()["name"] if f"you missed {n}" in text or f"{n}:" in text]
    assert broken == []
