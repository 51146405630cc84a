"""The resource pools a node can allocate from (the allocator's ``GatherPools``).

A slice counts for a node when it names the node (``nodeName``), says ``allNodes``, or its
``nodeSelector`` matches the node's labels. Slices are grouped by (driver, pool); only the
newest ``generation`` of a pool counts; a pool with fewer slices than its
``resourceSliceCount`` is incomplete (nothing is allocated from it). Slices that carry
``sharedCounters`` hold the pool's counter sets (DRAPartitionableDevices); the others hold
devices, sorted by slice name: that, with the pools sorted by driver and then pool name,
is the order the allocator tries devices in. A pool whose device names repeat, or whose
devices consume a counter set or counter it does not define, is invalid.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction

from ...model.objects import Node
from ...model.selectors import NodeSelectorTerm, node_selector_matches
from .objects import ResourceSlice


@dataclass
class Pool:
    driver: str
    name: str
    incomplete: bool = False
    invalid: str = ""  # why the pool is invalid, "" when it is fine
    slices: list[ResourceSlice] = field(default_factory=list)  # device slices for this node, by name
    other_slices: list[ResourceSlice] = field(default_factory=list)  # same pool, other nodes
    counter_sets: dict[str, dict[str, Fraction | int]] = field(default_factory=dict)

    @property
    def id(self) -> str:
        return f"{self.driver}/{self.name}"


def _matches(s: ResourceSlice, node: Node) -> bool:
    if s.node_name:
        return s.node_name == node.name
    if s.all_nodes:
        return True
    if s.node_selector is not None:
        terms = [NodeSelectorTerm.parse(t) for t in s.node_selector.get("nodeSelectorTerms") or []]
        return node_selector_matches(terms, node.name, node.labels)
    return False


def gather_pools(all_slices: list[ResourceSlice], node: Node) -> list[Pool]:
    by_pool: dict[tuple[str, str], list[ResourceSlice]] = {}
    for s in all_slices:
        if not _matches(s, node):
            continue
        got = by_pool.setdefault((s.driver, s.pool), [])
        if got and s.generation < got[0].generation:
            continue
        if got and s.generation > got[0].generation:
            got.clear()
        got.append(s)
    pools = []
    for (driver, name), mine in by_pool.items():
        generation, want = mine[0].generation, mine[0].slice_count
        if len(mine) == want:
            pools.append(_build(driver, name, mine, []))
            continue
        everywhere = [s for s in all_slices if s.driver == driver and s.pool == name]
        if any(s.generation > generation for s in everywhere):
            continue  # obsolete: a newer generation is being published elsewhere
        same = [s for s in everywhere if s.generation == generation]
        if len(same) != want:
            pools.append(Pool(driver, name, incomplete=True))
            continue
        pools.append(_build(driver, name, mine, [s for s in same if s not in mine]))
    pools.sort(key=lambda p: (p.driver, p.name))
    return pools


def _build(driver: str, name: str, mine: list[ResourceSlice], others: list[ResourceSlice]) -> Pool:
    mine = sorted(mine, key=lambda s: s.name)
    pool = Pool(driver, name)
    counter_slices = [s for s in mine + others if s.shared_counters]
    pool.slices = [s for s in mine if not s.shared_counters]
    pool.other_slices = [s for s in others if not s.shared_counters]
    names: set[str] = set()
    for s in pool.slices:
        for d in s.devices:
            if d.name in names:
                pool.invalid = f"duplicate device name {d.name}"
                return pool
            names.add(d.name)
    for s in counter_slices:
        for set_name, counters in s.shared_counters.items():
            if set_name in pool.counter_sets:
                pool.invalid = f"duplicate counter set name {set_name}"
                return pool
            pool.counter_sets[set_name] = dict(counters)
    for s in pool.slices + pool.other_slices:
        for d in s.devices:
            for use in d.consumes:
                have = pool.counter_sets.get(use.counter_set)
                if have is None:
                    pool.invalid = f"counter set {use.counter_set} not found"
                    return pool
                for counter, _ in use.counters:
                    if counter not in have:
                        pool.invalid = f"counter {counter} not found in counter set {use.counter_set}"
                        return pool
    return pool
