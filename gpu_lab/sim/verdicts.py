"""What ``explain`` shows per node, kept the cheap way while the scheduler runs.

A recorded cycle keeps, for every filter plugin, its verdict on every node it rejected, and
which plugin rejected each node first. At 10,000 pods on 1,000 nodes that is millions of
(pod, node) cells, nearly all of them sharing a handful of Statuses. So a cycle keeps the
plugins' groups (one Status, the array of nodes that share it) and a table is made per node
only for the pod someone asks about.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import numpy as np

from .framework import Status

Groups = Sequence[tuple[Status, np.ndarray]]


class ByNode(Mapping):
    """A read-only {node index: value} made from groups on first use, in node order."""

    __slots__ = ("_groups", "_flat")

    def __init__(self, groups: Groups) -> None:
        self._groups = groups
        self._flat: dict | None = None

    def _value(self, status: Status):
        raise NotImplementedError

    def narrow(self, dtype) -> None:
        """Keep the groups' node indices in ``dtype`` (an index type that holds the node count)."""
        self._groups = [(st, idx.astype(dtype, copy=False)) for st, idx in self._groups]

    def _table(self) -> dict:
        if self._flat is None:
            pairs = [(i, value) for st, idx in self._groups for value in (self._value(st),) for i in idx.tolist()]
            self._flat = dict(sorted(pairs, key=lambda p: p[0]))
        return self._flat

    def __getitem__(self, node: int):
        return self._table()[node]

    def __contains__(self, node: object) -> bool:
        return node in self._table()

    def __iter__(self) -> Iterator[int]:
        return iter(self._table())

    def __len__(self) -> int:
        return sum(len(idx) for _, idx in self._groups)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._table()!r})"


class NodeVerdicts(ByNode):
    """One filter plugin's verdicts: node index -> the message it rejected the node with."""

    __slots__ = ()

    def _value(self, status: Status) -> str:
        return status.message()


class NodeStatuses(ByNode):
    """The first rejecting plugin's Status per node (kube-scheduler's NodeToStatus)."""

    __slots__ = ()

    def _value(self, status: Status) -> Status:
        return status
