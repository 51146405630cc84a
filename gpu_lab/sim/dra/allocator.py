"""The structured allocator kube-scheduler v1.37 runs for one node (``structured/internal/
incubating``: the variant picked when, as by default, DRAConsumableCapacity and
DRADeviceBindingConditions are on).

``Allocator(classes, slices, allocated).allocate(node, claims)`` returns one ``Allocation``
per claim, or None when the claims cannot all be allocated on the node; it raises
``AllocatorError`` for the problems that abort a scheduling attempt (a missing class, a
CEL runtime error, a claim over 32 devices) and ``FailedOnNode`` when nothing fits and some
pool is invalid. The search is the real one, so its choices are the real ones:

* claims in the pod's order, each claim's requests in order, and for a ``firstAvailable``
  request its subrequests in order (the first that can be satisfied wins);
* for each device a request needs, candidates in pool order (driver, then pool name),
  slice order (by name) and device order within the slice; the devices of one request
  are tried as combinations, never permutations;
* a candidate must be free (not allocated in the cluster nor picked in this attempt),
  match its DeviceClass's selectors and then the request's, fit the pool's shared
  counters, have no NoSchedule/NoExecute taint the request does not tolerate, and keep
  every constraint of its claim (``matchAttribute``, ``distinctAttribute``);
* ``allocationMode: All`` takes every matching device of the node's pools, and fails when
  one of them cannot be had;
* on a dead end it backtracks (exhaustively), and the first complete solution is used.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...model.objects import Node
from .cel import CelRuntimeError, compile_selector
from .counters import Ledger
from .objects import (
    ALL,
    ALLOCATION_RESULTS_MAX,
    AllocatedDevice,
    Allocation,
    ClaimSpec,
    Constraint,
    Device,
    DeviceClass,
    Request,
    ResourceSlice,
)
from .pools import Pool, gather_pools

DeviceId = tuple[str, str, str]  # driver, pool, device


class AllocatorError(Exception):
    """Stops the scheduling attempt (``statusError`` in the plugin)."""


class FailedOnNode(Exception):
    """Allocation failed on this node only, for a reason worth saying (invalid pools)."""


class _MaxSize(Exception):
    """errAllocationResultMaxSizeExceeded: backtrack harder."""


def device_id_text(dev_id: DeviceId) -> str:
    return "/".join(dev_id)


@dataclass
class _Data:
    """One request or subrequest being allocated (the allocator's ``requestData``)."""

    request: Request
    parent: str | None  # the request's name when this is a subrequest
    cls: DeviceClass
    num: int
    all_devices: list[tuple[Pool, ResourceSlice, Device]] = field(default_factory=list)

    @property
    def result_name(self) -> str:
        return f"{self.parent}/{self.request.name}" if self.parent else self.request.name


class _Constraint:
    def __init__(self, c: Constraint):
        self.requests = set(c.requests)
        self.attribute = c.match_attribute or c.distinct_attribute or ""
        self.match = c.match_attribute is not None
        self.values: list[Any] = []

    def applies(self, base: str, sub: str) -> bool:
        if not self.requests:
            return True
        return base in self.requests or (bool(sub) and f"{base}/{sub}" in self.requests)

    def add(self, base: str, sub: str, device: Device) -> bool:
        if not self.applies(base, sub):
            return True
        value = device.attribute(self.attribute)
        if value is None:
            return False
        if self.match:
            if self.values and (type(value) is not type(self.values[0]) or value != self.values[0]):
                return False
        elif any(type(value) is type(v) and value == v for v in self.values):
            return False
        self.values.append(value)
        return True

    def remove(self, base: str, sub: str) -> None:
        if self.applies(base, sub):
            self.values.pop()


class Allocator:
    """What stays fixed during one scheduling cycle: classes, slices, allocated devices."""

    def __init__(self, classes: dict[str, DeviceClass], slices: list[ResourceSlice],
                 allocated: set[DeviceId]):
        self.classes = classes
        self.slices = slices
        self.allocated = allocated

    def allocate(self, node: Node, claims: list[tuple[str, ClaimSpec]]) -> list[Allocation] | None:
        """``claims``: (namespace/name, spec) of each claim still to allocate, in the pod's order."""
        return _Attempt(self, node, claims).run()


class _Attempt:
    def __init__(self, alloc: Allocator, node: Node, claims: list[tuple[str, ClaimSpec]]):
        self.a = alloc
        self.node = node
        self.claims = claims
        self.pools = gather_pools(alloc.slices, node)
        self.data: dict[tuple[int, int, int], _Data] = {}
        self.selected: dict[tuple[int, int], int] = {}
        self.constraints = [[_Constraint(c) for c in spec.constraints] for _, spec in claims]
        self.results: list[list[tuple[_Data, Pool, ResourceSlice, Device]]] = [[] for _ in claims]
        self.allocating: dict[DeviceId, set[int]] = {}
        self.ledger = Ledger(alloc.allocated)
        self.matches: dict[tuple, bool] = {}

    # ------------------------------------------------------------ set up
    def run(self) -> list[Allocation] | None:
        for ci, (key, spec) in enumerate(self.claims):
            accounted = 0
            for ri, req in enumerate(spec.requests):
                if req.exactly is not None:
                    data = self._validate(ci, key, req.exactly, None)
                    self.data[(ci, ri, 0)] = data
                    least = data.num
                else:
                    least = ALLOCATION_RESULTS_MAX + 1
                    for si, sub in enumerate(req.first_available):
                        data = self._validate(ci, key, sub, req.name)
                        self.data[(ci, ri, si)] = data
                        least = min(least, data.num)
                if least > ALLOCATION_RESULTS_MAX - accounted:
                    raise AllocatorError(f"claim {key}, request {req.name}: adding {least} devices exceeds the "
                                         f"claim limit of {ALLOCATION_RESULTS_MAX}, with {accounted} already "
                                         "accounted for")
                accounted += least
        try:
            done = self._one(0, 0, 0, 0, False, (0, 0, 0))
        except _MaxSize:
            done = False
        if not done:
            if any(p.invalid for p in self.pools):
                raise FailedOnNode("invalid resource pools were encountered")
            return None
        return [self._result(ci) for ci in range(len(self.claims))]

    def _validate(self, ci: int, key: str, req: Request, parent: str | None) -> _Data:
        name = f"{parent}/{req.name}" if parent else req.name
        cls = self.a.classes.get(req.class_name)
        if cls is None:
            raise AllocatorError(f"claim {key}, request {name}: could not retrieve device class {req.class_name}: "
                                 f'deviceclasses.resource.k8s.io "{req.class_name}" not found')
        data = _Data(req, parent, cls, req.count)
        if req.mode == ALL:
            for pool in self.pools:
                if pool.incomplete:
                    raise AllocatorError(f"claim {key}, request {name}: asks for all devices, but resource pool "
                                         f"{pool.id} is currently being updated")
                if pool.invalid:
                    raise AllocatorError(f"claim {key}, request {name}: asks for all devices, but resource pool "
                                         f"{pool.id} is currently invalid")
                for s in pool.slices:
                    for d in s.devices:
                        if self._selectable(ci, data, s, d):
                            data.all_devices.append((pool, s, d))
            data.num = len(data.all_devices)
        return data

    # ------------------------------------------------------------ search
    def _one(self, ci: int, ri: int, si: int, di: int, in_sub: bool, start: tuple[int, int, int]) -> bool:
        if ci >= len(self.claims):
            return True
        spec = self.claims[ci][1]
        if ri >= len(spec.requests):
            try:
                return self._one(ci + 1, 0, 0, 0, False, (0, 0, 0))
            except _MaxSize:
                return False
        data = self.data[(ci, ri, si)]
        if not in_sub and data.parent is not None:
            all_exceeded, sub = True, 0
            while (ci, ri, sub) in self.data:
                try:
                    ok = self._one(ci, ri, sub, 0, True, (0, 0, 0))
                except _MaxSize:
                    sub += 1
                    continue
                all_exceeded = False
                if ok:
                    self.selected[(ci, ri)] = sub
                    return True
                sub += 1
            if all_exceeded:
                raise _MaxSize
            return False
        req = data.request
        if req.mode == ALL and not data.all_devices:
            return False
        if di >= data.num:
            return self._one(ci, ri + 1, 0, 0, False, (0, 0, 0))
        if data.num - di > ALLOCATION_RESULTS_MAX - len(self.results[ci]):
            raise _MaxSize
        if req.mode == ALL:
            pool, s, d = data.all_devices[di]
            undo = self._take(ci, data, pool, s, d, must=True)
            if undo is None:
                return False
            try:
                done = self._one(ci, ri, si, di + 1, in_sub, (0, 0, 0))
            except _MaxSize:
                undo()
                raise
            if not done:
                undo()
            return done
        p0, s0, d0 = start
        for pi in range(p0, len(self.pools)):
            pool = self.pools[pi]
            if pool.incomplete or pool.invalid:
                continue
            for sj in range(s0 if pi == p0 else 0, len(pool.slices)):
                s = pool.slices[sj]
                for dk in range(d0 if (pi, sj) == (p0, s0) else 0, len(s.devices)):
                    d = s.devices[dk]
                    if self._in_use((pool.driver, pool.name, d.name)):
                        continue
                    if not self._selectable(ci, data, s, d):
                        continue
                    undo = self._take(ci, data, pool, s, d, must=False)
                    if undo is None:
                        continue
                    try:
                        done = self._one(ci, ri, si, di + 1, in_sub, (pi, sj, dk + 1))
                    except _MaxSize:
                        undo()
                        raise
                    if done:
                        return True
                    undo()
        return False

    def _in_use(self, dev_id: DeviceId) -> bool:
        return dev_id in self.a.allocated or bool(self.allocating.get(dev_id))

    def _selectable(self, ci: int, data: _Data, s: ResourceSlice, d: Device) -> bool:
        key = (s.driver, s.pool, d.name, ci, data.result_name)
        got = self.matches.get(key)
        if got is None:
            got = self.matches[key] = (self._selectors(ci, data.cls.selectors, s, d, data.cls.name)
                                       and self._selectors(ci, data.request.selectors, s, d, None))
        return got

    def _selectors(self, ci: int, exprs: tuple[str, ...], s: ResourceSlice, d: Device, cls: str | None) -> bool:
        for i, text in enumerate(exprs):
            try:
                if not compile_selector(text).matches(s.driver, d.attributes, d.capacity):
                    return False
            except CelRuntimeError as err:
                who = f"class {cls}" if cls is not None else f"claim {self.claims[ci][0]}"
                raise AllocatorError(f"{who}: selector #{i} on device {s.driver}/{s.pool}/{d.name}: CEL runtime "
                                     f"error: {err}") from None
        return True

    def _take(self, ci: int, data: _Data, pool: Pool, s: ResourceSlice, d: Device,
              must: bool) -> Callable[[], None] | None:
        """``allocateDevice``: the candidate, if free, within the counters, tolerated and keeping
        the constraints; returns how to undo it."""
        dev_id = (pool.driver, pool.name, d.name)
        if self._in_use(dev_id):
            return None
        if d.consumes and not self.ledger.take(pool, d):
            return None
        base = data.parent or data.request.name
        sub = data.request.name if data.parent else ""

        def release_counters() -> None:
            if d.consumes:
                self.ledger.give_back(pool, d)

        for taint in d.taints:
            if taint.effect in ("NoSchedule", "NoExecute") and not any(
                    t.tolerates(taint) for t in data.request.tolerations):
                release_counters()
                return None
        added: list[_Constraint] = []
        for c in self.constraints[ci]:
            if not c.add(base, sub, d):
                for done in reversed(added):
                    done.remove(base, sub)
                release_counters()
                if must:
                    raise AllocatorError(f"claim {self.claims[ci][0]}, request {data.request.name}: cannot add device "
                                         f"{device_id_text(dev_id)} because a claim constraint would not be satisfied")
                return None
            added.append(c)
        self.allocating.setdefault(dev_id, set()).add(ci)
        self.results[ci].append((data, pool, s, d))

        def undo() -> None:
            self.results[ci].pop()
            self.allocating[dev_id].discard(ci)
            for done in reversed(added):
                done.remove(base, sub)
            release_counters()

        return undo

    def _result(self, ci: int) -> Allocation:
        results = tuple(AllocatedDevice(data.result_name, pool.driver, pool.name, d.name)
                        for data, pool, _s, d in self.results[ci])
        on_node = any(s.node_name for _, _, s, _ in self.results[ci])
        return Allocation(results, self.node.name if on_node else None)
