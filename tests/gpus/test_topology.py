"""Inside a node: the catalog's interconnects, gpu-lab's NUMA model, NVIDIA's best-effort choice."""

from itertools import combinations

import pytest

from gpu_lab.errors import GpuLabError
from gpu_lab.gpus.catalog import MODELS
from gpu_lab.gpus.topology import EXACT_LIMIT, best_effort, gpu_numa


def test_every_model_has_a_sourced_interconnect():
    for m in MODELS.values():
        ic = m.interconnect
        assert ic is not None and ic.source and ic.gpu_to_gpu and ic.pcie, m.name
    nvswitch = {n: MODELS[n].interconnect.topo for n in MODELS if MODELS[n].interconnect.kind == "nvswitch"}
    assert nvswitch == {"A100-40GB": "NV12", "A100-80GB": "NV12", "H100-80GB": "NV18", "H200-141GB": "NV18"}
    assert {n for n in MODELS if MODELS[n].interconnect.kind == "pcie"} == {"T4", "A10G", "L4", "L40S"}
    assert all(MODELS[n].interconnect.nvlinks == 0 for n in ("T4", "A10G", "L4", "L40S"))


def test_numa_model_two_sockets_for_eight_gpus():
    assert gpu_numa(8) == [0, 0, 0, 0, 1, 1, 1, 1]
    assert gpu_numa(4) == [0, 0, 0, 0] and gpu_numa(1) == [0] and gpu_numa(0) == []
    assert gpu_numa(8, 4) == [0, 0, 1, 1, 2, 2, 3, 3]
    assert gpu_numa(6, 4) == [0, 0, 1, 1, 2, 2]  # blocks of ceil(6/4) = 2
    for bad in (0, 9, True, "2"):
        with pytest.raises(GpuLabError, match="numaNodes must be an integer from 1 to 8"):
            gpu_numa(8, bad)


EIGHT = gpu_numa(8)


def choose(free: list[int], size: int, required=(), numa=EIGHT) -> list[int]:
    """best_effort on the free GPU indices; the answer as GPU indices."""
    picked = best_effort([numa[g] for g in free], [free.index(r) for r in required], size)
    return sorted(free[i] for i in picked)


def test_best_effort_keeps_a_request_on_one_numa_node_and_the_fuller_node_whole():
    assert choose(list(range(8)), 4) == [0, 1, 2, 3]
    assert choose(list(range(1, 8)), 4) == [4, 5, 6, 7]  # node 0 has only three left
    assert choose(list(range(1, 8)), 2) == [1, 2]  # from the broken node, so node 1 stays whole
    assert choose(list(range(1, 8)), 3) == [1, 2, 3]
    assert choose([1, 2, 3, 5, 6, 7], 3) == [1, 2, 3]
    assert choose([2, 3, 6, 7], 3) == [2, 3, 6]  # no node holds three: two plus one
    assert choose(list(range(8)), 1) == [0] and choose([5, 6], 1) == [5]
    assert choose(list(range(8)), 2, required=[5]) == [4, 5]
    with pytest.raises(GpuLabError, match="not enough available devices"):
        choose([1], 2)


def test_whenever_one_numa_node_can_hold_the_request_the_choice_stays_on_one():
    """Every free set of an 8-GPU node, every size from 2 to 4: the property the lesson states."""
    for k in range(2, 9):
        for free in combinations(range(8), k):
            free = list(free)
            for size in range(2, min(4, k) + 1):
                got = choose(free, size)
                assert len(got) == size and set(got) <= set(free)
                fits = any(sum(1 for g in free if EIGHT[g] == n) >= size for n in (0, 1))
                if fits:
                    assert len({EIGHT[g] for g in got}) == 1, (free, size, got)


def test_without_topology_the_lowest_free_gpus_and_above_the_exact_limit_a_greedy_rule():
    assert best_effort([None] * 6, [], 3) == [0, 1, 2]
    assert best_effort([0] * 6, [], 3) == [0, 1, 2]
    sixteen = gpu_numa(16)
    assert len(sixteen) > EXACT_LIMIT
    free = list(range(1, 16))
    assert choose(free, 8, numa=sixteen) == list(range(8, 16))  # the whole second node
    assert choose(free, 2, numa=sixteen) == [1, 2]  # from the node that is broken already
