"""MIG planner: exact against brute force on small inputs, bounds, cost, CSV input."""

import random

import pytest

from gpu_lab.errors import PlanError
from gpu_lab.gpus.catalog import MODELS
from gpu_lab.gpus.mig import MIG_MODELS, geometry, validate_layout
from gpu_lab.gpus.migparted import resolve
from gpu_lab.gpus.planner import (
    Service,
    brute_force_gpus,
    plan,
    read_services_csv,
    smallest_profile,
)


def _check(result):
    """Every GPU's layout is valid and every replica is placed once in a big-enough instance."""
    geom = geometry(result.model)
    placed = sorted((s, r) for g in result.gpus for s, r, _ in g.replicas)
    assert placed == sorted((s.name, r) for s in result.services for r in range(s.replicas))
    by_name = {s.name: s for s in result.services}
    for g in result.gpus:
        if g.layout is None:
            continue
        assert validate_layout(result.model, list(g.layout)).profiles == g.layout
        assert sorted(p for _, _, p in g.replicas) == sorted(g.layout)
        for s, _, p in g.replicas:
            prof = geom.profile(p)
            assert prof.memory_gib >= by_name[s].memory_gb
            assert prof.compute_slices >= (by_name[s].compute_slices or 1)
    assert result.gpu_count >= result.lower_bound


def _random_services(rng, model, n_replicas_max=6):
    scale = geometry(model).profiles[0].memory_gib / 79.25
    out, total = [], 0
    for i in range(rng.randint(1, 4)):
        reps = rng.randint(1, 2)
        if total + reps > n_replicas_max:
            break
        total += reps
        out.append(Service(f"s{i}", round(rng.choice([3, 5, 9, 12, 18, 25, 30, 38, 45, 70]) * scale, 1),
                           rng.choice([None, None, 1, 2, 3]), reps))
    return out


@pytest.mark.parametrize("model", MIG_MODELS)
def test_planner_matches_brute_force_on_small_inputs(model):
    rng = random.Random(f"planner-{model}")
    checked = 0
    while checked < 25:
        svcs = _random_services(rng, model)
        if not svcs:
            continue
        result = plan(svcs, model)
        _check(result)
        assert result.optimal
        assert result.gpu_count == brute_force_gpus(svcs, model), svcs
        checked += 1


def test_hand_worked_plan_on_h100():
    svcs = [Service("llama-8b", 18, None, 2), Service("embed", 4, None, 3), Service("rerank", 9, 2, 1),
            Service("big", 70, None, 1)]
    result = plan(svcs, "H100-80GB")
    _check(result)
    # 18 GB -> 1g.20gb (19.6 GiB); 4 GB -> 1g.10gb; 9 GB + 2 compute -> 2g.20gb; 70 GB -> 7g.80gb
    assert result.profile_of == {"llama-8b": "1g.20gb", "embed": "1g.10gb", "rerank": "2g.20gb", "big": "7g.80gb"}
    # the 7g takes a GPU; the rest need 9 memory slices (2+2+1+1+1+2), more than one GPU's 8
    assert result.gpu_count == 3 and result.lower_bound == 3 and result.optimal
    assert result.bounds == {"memory_slices": 3, "compute_slices": 2, "linear_program": 3}
    assert result.whole_gpu_count == 7
    price = MODELS["H100-80GB"].price_per_hour
    cost = result.cost()
    assert cost["per_hour"] == round(3 * price, 4) and cost["whole_gpu_per_hour"] == round(7 * price, 4)
    assert cost["saving_per_month"] == round(4 * price * 730, 2)
    util = result.utilisation()
    gib = MODELS["H100-80GB"].memory_mib / 1024
    assert util["memory_requested"] == pytest.approx((36 + 12 + 9 + 70) / (3 * gib))
    assert util["compute_allocated"] == pytest.approx((1 + 1 + 1 + 1 + 1 + 2 + 7) / 21)
    assert "3 H100-80GB GPUs with MIG (optimal; lower bound 3) vs 7 with one whole GPU per replica" in str(result)


def test_memory_is_the_usable_size_not_the_name():
    assert smallest_profile("H100-80GB", 9.75).name == "1g.10gb"
    assert smallest_profile("H100-80GB", 10).name == "1g.20gb"  # a 1g.10gb holds 9.75 GiB
    assert smallest_profile("H100-80GB", 5, 3).name == "3g.40gb"
    assert smallest_profile("H100-80GB", 80) is None


def test_service_bigger_than_mig_but_not_the_gpu_gets_a_whole_gpu():
    result = plan([Service("almost-all", 79.5), Service("small", 5, None, 2)], "H100-80GB")
    _check(result)
    whole = [g for g in result.gpus if g.layout is None]
    assert len(whole) == 1 and whole[0].replicas == (("almost-all", 0, "whole-gpu"),)
    assert result.gpu_count == 2 == result.lower_bound
    cfg = result.mig_configs()
    assert resolve("H100-80GB", 2, cfg, "planned") == [{"1g.10gb": 2}, None]


def test_service_bigger_than_the_gpu_is_an_error():
    with pytest.raises(PlanError) as exc:
        plan([Service("huge", 90)], "H100-80GB")
    assert str(exc.value) == ('service "huge" needs 90 GB; the largest MIG instance on an H100-80GB is 7g.80gb '
                              "(79.25 GiB, 7 compute slices) and a whole GPU has 79.65 GiB")


def test_plan_as_mig_parted_file_is_valid_for_every_gpu():
    rng = random.Random(5)
    svcs = [Service(f"s{i}", rng.choice([3, 9, 15, 19, 35, 39]), None, rng.randint(1, 3)) for i in range(20)]
    result = plan(svcs, "A100-80GB")
    _check(result)
    layouts = resolve("A100-80GB", result.gpu_count, result.mig_configs(), "planned")
    assert [sorted(lay.items()) for lay in layouts] == [
        sorted({p: g.layout.count(p) for p in set(g.layout)}.items()) for g in result.gpus]


def test_fifty_services_plan_is_proven_optimal():
    rng = random.Random(50)
    svcs = [Service(f"svc-{i}", rng.choice([3, 5, 8, 12, 18, 25, 35, 45, 70]), rng.choice([None, 1, 2]),
                    rng.randint(1, 4)) for i in range(50)]
    result = plan(svcs, "H100-80GB")
    _check(result)
    assert result.optimal and result.gpu_count == result.lower_bound
    assert result.gpu_count < result.whole_gpu_count


@pytest.mark.parametrize("services, message", [
    ([], "no services to plan"),
    ([Service("a", 5), Service("a", 6)], 'service "a" is listed twice'),
    ([Service("a", 0)], 'service "a": memory_gb must be a positive number, got 0'),
    ([Service("a", 5, 8)], 'service "a": compute_slices must be an integer from 1 to 7, got 8'),
    ([Service("a", 5, None, 0)], 'service "a": replicas must be an integer >= 1, got 0'),
    ([{"name": "a", "memory_gb": 5, "gpus": 1}], 'service: unknown field "gpus" (known: name, memory_gb, '
                                                  "compute_slices, replicas)"),
])
def test_bad_services(services, message):
    with pytest.raises(PlanError) as exc:
        plan(services, "H100-80GB")
    assert str(exc.value) == message


def test_read_csv(tmp_path):
    f = tmp_path / "services.csv"
    f.write_text("name,memory_gb,compute_slices,replicas\n# comment\nllama,18,,2\nembed, 4.5 ,1,\n\n")
    assert read_services_csv(f) == [Service("llama", 18.0, None, 2), Service("embed", 4.5, 1, 1)]
    g = tmp_path / "min.csv"
    g.write_text("memory_gb,name\n12,a\n")
    assert read_services_csv(g) == [Service("a", 12.0)]


@pytest.mark.parametrize("text, message", [
    ("", "empty file (expected a header: name,memory_gb,compute_slices,replicas)"),
    ("name,memory,replicas\n", 'line 1: unknown column "memory" (known: name, memory_gb, compute_slices, replicas)'),
    ("name,replicas\n", 'line 1: missing column "memory_gb" (header: name,memory_gb,compute_slices,replicas)'),
    ("name,memory_gb\n", "no services after the header"),
    ("name,memory_gb\na,abc\n", 'line 2: memory_gb: must be a positive number, got "abc"'),
    ("name,memory_gb\na,-3\n", 'line 2: memory_gb: must be a positive number, got "-3"'),
    ("name,memory_gb\na,nan\n", 'line 2: memory_gb: must be a positive number, got "nan"'),
    ("name,memory_gb,replicas\na,3,0\n", 'line 2: replicas: must be an integer >= 1, got "0"'),
    ("name,memory_gb,replicas\na,3,1.5\n", 'line 2: replicas: must be an integer >= 1, got "1.5"'),
    ("name,memory_gb,compute_slices\na,3,9\n", 'line 2: compute_slices: must be an integer from 1 to 7, got "9"'),
    ("name,memory_gb\n,3\n", "line 2: name: must not be empty"),
    ("name,memory_gb\na,3\na,4\n", 'line 3: name: "a" already on line 2'),
    ("name,memory_gb\na,3,4\n", "line 2: 3 fields, the header has 2"),
])
def test_csv_errors_are_one_line(tmp_path, text, message):
    f = tmp_path / "s.csv"
    f.write_text(text)
    with pytest.raises(PlanError) as exc:
        read_services_csv(f)
    assert str(exc.value) == f"{f}: {message}"


def test_missing_csv(tmp_path):
    with pytest.raises(PlanError, match="nope.csv: cannot read: No such file"):
        read_services_csv(tmp_path / "nope.csv")
