"""What nodes cost: a pool's price per hour, and node-hours and dollars from node lifetimes.

A node costs its pool's ``spec.pricePerHour`` when given, else its GPUs at the
catalog's on-demand price per GPU-hour (``gpu_lab.gpus.pricing``; a node without
GPUs then costs 0, and a GPU model the catalog lacks has no price). A node is
paid for from the moment it is requested: clouds bill from instance start, so
the provisioning delay costs money too.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ...gpus.pricing import node_price_per_hour
from ...model.nodepool import node_pool


def pool_price_per_hour(raw_pool: dict[str, Any]) -> float | None:
    """USD per node-hour of a ``NodePool`` document: ``spec.pricePerHour``, else the catalog's."""
    pool = node_pool(raw_pool)
    if pool.price_per_hour is not None:
        return pool.price_per_hour
    node = pool.node(0)
    return node_price_per_hour(node.labels, node.capacity, None)


@dataclass(frozen=True)
class NodeLifetime:
    """One node's life: billed from ``start`` (its request) to ``end`` (its deletion; None: still up)."""

    node: str
    pool: str | None
    start: float
    end: float | None = None


@dataclass(frozen=True)
class Cost:
    node_hours: float
    cost_usd: float
    by_pool: dict[str | None, tuple[float, float]] = field(default_factory=dict)  # pool -> (node-hours, USD)
    unpriced: tuple[str, ...] = ()  # pools with node-hours but no price; their dollars count as 0


def node_cost(lifetimes: Iterable[NodeLifetime],
              price_per_hour: Mapping[str | None, float | None] | Callable[[str | None], float | None],
              until: float) -> Cost:
    """Node-hours and dollars of ``lifetimes`` up to ``until`` seconds (lives still going end there)."""
    price = price_per_hour if callable(price_per_hour) else price_per_hour.get
    hours: dict[str | None, float] = {}
    for life in lifetimes:
        end = until if life.end is None else min(life.end, until)
        if end > life.start:
            hours[life.pool] = hours.get(life.pool, 0.0) + (end - life.start) / 3600.0
    by_pool: dict[str | None, tuple[float, float]] = {}
    unpriced = []
    for pool in sorted(hours, key=lambda p: (p is None, p or "")):
        rate = price(pool)
        if rate is None:
            unpriced.append(str(pool))
        by_pool[pool] = (hours[pool], hours[pool] * (rate or 0.0))
    return Cost(sum(h for h, _ in by_pool.values()), sum(d for _, d in by_pool.values()), by_pool,
                tuple(unpriced))
