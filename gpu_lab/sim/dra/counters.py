"""Shared counters of partitionable devices (KEP-4815), as the allocator keeps them.

A pool's counter sets say how much of each counter exists (NVIDIA's driver: per GPU, its
streaming multiprocessors, engines, memory and one ``memory-slice-<i>`` per memory slice);
each device says what it consumes when allocated. ``available`` is what the sets hold
minus what devices already allocated in the cluster consume (it may go negative, which
then blocks every further device of the pool). While searching, ``Ledger.take`` adds a
candidate's consumption and keeps it only if no counter of the pool is overdrawn, exactly
``checkAvailableCounters``; ``give_back`` undoes it when the search backtracks.
"""

from __future__ import annotations

from collections.abc import Iterable
from fractions import Fraction

from .objects import Device
from .pools import Pool

Counters = dict[str, dict[str, Fraction | int]]  # counter set -> counter -> amount (whole ones as ints)


def available(pool: Pool, allocated: set[tuple[str, str, str]]) -> Counters:
    """The pool's counters left after the devices already allocated in the cluster."""
    left = {name: dict(counters) for name, counters in pool.counter_sets.items()}
    for s in pool.slices + pool.other_slices:
        for d in s.devices:
            if (s.driver, s.pool, d.name) not in allocated:
                continue
            for use in d.consumes:
                have = left.get(use.counter_set, {})
                for counter, amount in use.counters:
                    if counter in have:
                        have[counter] -= amount
    return left


class Ledger:
    """What the devices picked so far in one allocation attempt consume, per pool."""

    def __init__(self, allocated: set[tuple[str, str, str]]):
        self.allocated = allocated
        self._available: dict[str, Counters] = {}
        self._consumed: dict[str, Counters] = {}

    def take(self, pool: Pool, device: Device) -> bool:
        left = self._available.get(pool.id)
        if left is None:
            left = self._available[pool.id] = available(pool, self.allocated)
        used = self._consumed.setdefault(pool.id, {})
        self._add(used, device.consumes, 1)
        for set_name, counters in left.items():
            mine = used.get(set_name, {})
            if any(amount < mine.get(counter, 0) for counter, amount in counters.items()):
                self._add(used, device.consumes, -1)
                return False
        return True

    def give_back(self, pool: Pool, device: Device) -> None:
        self._add(self._consumed[pool.id], device.consumes, -1)

    @staticmethod
    def _add(used: Counters, uses: Iterable, sign: int) -> None:
        for use in uses:
            mine = used.setdefault(use.counter_set, {})
            for counter, amount in use.counters:
                mine[counter] = mine.get(counter, 0) + sign * amount
