"""Which node group grows: cluster-autoscaler's expanders, chained as ``--expander=a,b`` chains them.

Each expander keeps the options it likes best and hands them to the next;
whatever ties remain are broken at random (FAQ, "What are Expanders?"). Seeded,
so a simulation is reproducible.

* ``random``: no preference.
* ``most-pods``: the option that schedules the most pending pods.
* ``least-waste``: the least idle CPU plus idle memory, as fractions of the new
  nodes' capacity, after the pods are placed (``expander/waste/waste.go``; GPUs
  do not enter it, which is why it can pick a bigger GPU node than needed).
* ``least-nodes``: the fewest new nodes.
* ``price``: the lowest price per hour of the new nodes per pod they schedule.
  cluster-autoscaler divides by the pods' own price at the cloud's rates and
  adds a preferred-node-size term; gpu-lab has neither, so this is the cost
  comparison a learner expects. Options without a price go last.
* ``priority``: the highest priority whose regular expressions match the
  group's name (``expander/priority/readme.md``); no match anywhere: all stay.
"""

from __future__ import annotations

import math
import random
import re
from collections.abc import Mapping, Sequence

from .estimator import Estimate


def choose(options: Sequence[Estimate], chain: Sequence[str],
           priorities: Mapping[int, Sequence[str]], rng: random.Random) -> Estimate:
    """The option the expander chain picks (``options`` must not be empty)."""
    left = sorted(options, key=lambda o: o.group.name)
    for name in chain:
        if len(left) == 1:
            break
        left = _FILTERS[name](left, priorities)
    return left[0] if len(left) == 1 else rng.choice(left)


def _best(options: list[Estimate], score) -> list[Estimate]:
    scores = [score(o) for o in options]
    top = min(scores)
    return [o for o, s in zip(options, scores) if s == top]


def _random(options, _priorities):
    return options


def _most_pods(options, _priorities):
    return _best(options, lambda o: -len(o.placed))


def _least_nodes(options, _priorities):
    return _best(options, lambda o: o.nodes)


def _least_waste(options, _priorities):
    def waste(o: Estimate) -> float:
        total = 0.0
        for res in ("cpu", "memory"):
            avail = o.group.allocatable.get(res, 0) * o.nodes
            used = sum(p.requests.get(res, 0) for p in o.placed)
            total += (avail - used) / avail if avail > 0 else 0.0
        return total
    return _best(options, waste)


def _price(options, _priorities):
    def per_pod(o: Estimate) -> float:
        price = o.group.price_per_hour
        return math.inf if price is None else price * o.nodes / max(len(o.placed), 1)
    return _best(options, per_pod)


def _priority(options, priorities):
    for level in sorted(priorities, reverse=True):
        matched = [o for o in options if any(re.search(p, o.group.name) for p in priorities[level])]
        if matched:
            return matched
    return options


_FILTERS = {"random": _random, "most-pods": _most_pods, "least-waste": _least_waste,
            "least-nodes": _least_nodes, "price": _price, "priority": _priority}
