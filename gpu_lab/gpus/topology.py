"""Inside a GPU node: which NUMA node each GPU hangs off, and which GPUs NVIDIA's plugin prefers.

Two layers, kept apart because one is fact and one is gpu-lab's model:

* **The interconnect** is a fact of the GPU model, in the catalog
  (``GpuModel.interconnect``): NVSwitch all-to-all for HGX A100/H100/H200
  boards, PCIe only for the L40S, L4, A10G and T4, with the datasheet figures.
* **The NUMA layout of a node** is gpu-lab's model, stated as such: an
  eight-GPU server is a two-socket machine with the first half of its GPUs on
  NUMA node 0 and the second half on node 1, as ``nvidia-smi topo -m`` prints
  for a DGX H100 (GPU0-3 NUMA 0, GPU4-7 NUMA 1); a smaller machine has one
  NUMA node. ``NodePool`` ``spec.gpu.numaNodes`` overrides the count. The
  device plugin reports each device's node in ``ListAndWatch``
  (``Device.topology``), which is what the kubelet's Topology Manager reads.

``best_effort`` is the choice NVIDIA's plugin answers ``GetPreferredAllocation``
with for whole GPUs (its ``alignedAlloc``, the best-effort policy of
NVIDIA/go-gpuallocator), written here from its documented behaviour: every pair
of GPUs gets a link score, and instead of the single best-scoring set it splits
*all* available GPUs into sets of the requested size, keeps the partition with
the highest total score, and returns the best set of that partition, so that
what is left stays well connected too. Pair scores follow go-gpuallocator's
weights for the PCIe relation: same NUMA node 20 (NVML ``TOPOLOGY_NODE``),
across sockets 10 (``TOPOLOGY_SYSTEM``). NVLinks add 100 per link in
go-gpuallocator; on an NVSwitch board every pair has the same links, so they
never change the choice and are left out. Ties go to the lower index: NVIDIA's
plugin breaks them by the order the kubelet lists available devices in (a Go
map's), ours by advertised order, so every backend gives the same answer.

The exact search is a few hundred partitions for eight GPUs; above
``EXACT_LIMIT`` available GPUs (no HGX board has that many) a greedy rule with
the same aim is used: the fullest-fitting NUMA node is kept whole.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from itertools import combinations
from math import ceil

from ..errors import GpuLabError

SAME_NUMA_SCORE = 20  # go-gpuallocator P2PLinkSameCPU
CROSS_NUMA_SCORE = 10  # go-gpuallocator P2PLinkCrossCPU
TWO_SOCKET_FROM = 8  # GPUs from which a machine is modelled as two-socket
MAX_NUMA_NODES = 8  # the Topology Manager refuses to run above 8 NUMA nodes
#: the kubelet's topologyManagerPolicy values (here so the NodePool model can check them)
TOPOLOGY_MANAGER_POLICIES = ("none", "best-effort", "restricted", "single-numa-node")
EXACT_LIMIT = 10  # available GPUs up to which the partition search is exact (945 partitions)


def default_numa_nodes(gpus: int) -> int:
    """gpu-lab's model: two NUMA nodes for an eight-GPU (or larger) server, else one."""
    return 2 if gpus >= TWO_SOCKET_FROM else 1


def gpu_numa(gpus: int, numa_nodes: int | None = None) -> list[int]:
    """NUMA node of each GPU index: contiguous blocks, GPU0.. on node 0."""
    nodes = default_numa_nodes(gpus) if numa_nodes is None else numa_nodes
    if isinstance(nodes, bool) or not isinstance(nodes, int) or not 1 <= nodes <= MAX_NUMA_NODES:
        raise GpuLabError(f"numaNodes must be an integer from 1 to {MAX_NUMA_NODES}, got {nodes!r}")
    if gpus <= 0:
        return []
    per = ceil(gpus / nodes)
    return [g // per for g in range(gpus)]


def pair_score(a: int | None, b: int | None) -> int:
    """go-gpuallocator's score for two GPUs on NUMA nodes ``a`` and ``b`` (None: unknown)."""
    if a is None or b is None:
        return 0
    return SAME_NUMA_SCORE if a == b else CROSS_NUMA_SCORE


def best_effort(numa: Sequence[int | None], required: Sequence[int], size: int) -> list[int]:
    """Positions (into ``numa``, the available GPUs in advertised order) of the preferred set.

    ``required`` are positions that must be in it. Raises ``GpuLabError`` when fewer
    than ``size`` GPUs are available.
    """
    if size > len(numa):
        raise GpuLabError("not enough available devices to satisfy allocation")
    return list(_choose(tuple(numa), tuple(sorted(set(required))), size))


@lru_cache(maxsize=4096)
def _choose(numa: tuple[int | None, ...], required: tuple[int, ...], size: int) -> tuple[int, ...]:
    if size <= 0:
        return ()
    if len(required) >= size:
        return required[:size]
    if size == 1:  # go-gpuallocator: every GPU its own partition, all scoring 0: the first wins
        return required or (0,)
    if not required and len(set(numa)) <= 1:
        return tuple(range(size))  # all pairs alike: every partition scores the same, the first wins
    if len(numa) > EXACT_LIMIT:
        return _greedy(numa, required, size)
    return _partition_search(numa, required, size)


def _partition_search(numa: tuple[int | None, ...], required: tuple[int, ...], size: int
                      ) -> tuple[int, ...]:
    n = len(numa)
    pads = (-n) % size
    devices = list(range(n)) + [-1 - p for p in range(pads)]  # negative: padding
    need = set(required)

    def set_score(s: Sequence[int]) -> int:
        real = [d for d in s if d >= 0]
        return sum(pair_score(numa[a], numa[b]) for a, b in combinations(real, 2))

    best: list[tuple[int, ...]] | None = None
    best_total = 0

    def walk(devs: list[int], acc: list[tuple[int, ...]]) -> None:
        nonlocal best, best_total
        if len(devs) == size:
            partition = [*acc, tuple(devs)]
            if not any(need <= set(s) and min(s) >= 0 for s in partition):
                return
            total = sum(set_score(s) for s in partition)
            if best is None or total > best_total:
                best, best_total = partition, total
            return
        first = devs[0]
        for combo in combinations(devs[1:], size - 1):
            s = (first, *combo)
            p = sum(1 for d in s if d < 0)
            if p not in (0, pads):  # padding stays together, as go-gpuallocator prunes
                continue
            taken = set(s)
            walk([d for d in devs if d not in taken], [*acc, s])

    walk(devices, [])
    assert best is not None
    sets = [s for s in best if need <= set(s)]
    chosen = max(sets, key=set_score)  # max keeps the first of equals
    return tuple(d for d in chosen if d >= 0)


def _greedy(numa: tuple[int | None, ...], required: tuple[int, ...], size: int) -> tuple[int, ...]:
    groups: dict[int | None, list[int]] = {}
    for i, node in enumerate(numa):
        groups.setdefault(node, []).append(i)
    out = list(required)
    want = size - len(out)
    home = {numa[i] for i in required}
    free = {k: [i for i in v if i not in required] for k, v in groups.items()}
    fits = [k for k in free if len(free[k]) >= want and (not home or k in home)]
    if fits:  # the fitting NUMA node with the fewest free GPUs, so fuller ones stay whole
        k = min(fits, key=lambda k: (len(free[k]), free[k][0]))
        return tuple(sorted(out + free[k][:want]))
    for k in sorted(free, key=lambda k: (k not in home, -len(free[k]), free[k][0] if free[k] else 0)):
        take = free[k][: size - len(out)]
        out += take
        if len(out) == size:
            break
    return tuple(sorted(out))
