"""What the simulator keeps between scheduling cycles only for speed, never changing a decision.

kube-scheduler recomputes all of this every cycle; the simulator keeps it
(tests/sim/test_caches.py checks each shortcut against the plain computation):

* per pod class (pods of equal manifests share ``pod.memo``): which plugins of a phase
  skip the pod whatever the cluster holds, and which filters read only node objects;
* the combined mask of the node-object-only filters (``static_filter_key``), valid
  until a node changes;
* ``numFeasibleNodesToFind`` per profile and node count;
* the raw scores of node-local score plugins per score key over all nodes, rescored
  only on nodes whose pods changed since (``Snapshot.changed``).

Not kube-scheduler's ``internal/cache`` (assumed pods, node infos): the Snapshot plays that.
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet
from typing import Any

import numpy as np

from .cachehints import gives, hints
from .framework import CycleContext, Plugin
from .profile import Profile
from .snapshot import Snapshot

# Below this many changed nodes, node-local scores are refreshed one node at a time
# (plain Python); above it, numpy over the changed nodes is cheaper.
SCORE_ONE_BY_ONE = 12


def plan(pod: Any, profile: Profile, phase: str) -> tuple[frozenset[str], list]:
    """The plugins of a phase that skip this pod whatever the cluster holds, and
    (plugin, weight, asks, score key, may be constant) for the others: asks is False
    for a plugin without a PreScore that could say more than its static skip, and
    may be constant is True for one that can tell its score is the same everywhere."""
    key = ("plan", phase, profile.token)
    got = pod.memo.get(key)
    if got is None:
        skips = "skips_pre_filter" if phase == "preFilter" else "skips_pre_score"
        static = frozenset(pl.name for pl in profile.at(phase) if getattr(hints(pl), skips)(pod))
        score = phase == "score"
        got = static, [(pl, w, not score or (pl.implements("pre_score") and not hints(pl).pre_score_decided_by_pod),
                        hints(pl).score_key(pod) if score else None, gives(pl, "same_everywhere"))
                       for pl, w in profile.weighted(phase) if pl.name not in static]
        pod.memo[key] = got
    return got


def filter_plan(pod: Any, profile: Profile, skipped: AbstractSet[str], skipped_now: tuple[str, ...]) -> tuple[tuple, list, list]:
    """Split the pod's filter plugins into node-object-only ones (with their keys) and the rest."""
    key = ("filter_plan", profile.token, skipped_now)  # the rest of `skipped` is fixed per pod
    got = pod.memo.get(key)
    if got is None:
        keys, static, dynamic = [], [], []
        for pl in profile.at("filter"):
            if pl.name in skipped:
                continue
            k = hints(pl).static_filter_key(pod)
            if k is None:
                dynamic.append(pl)
            else:
                keys.append((pl.name, k))
                static.append(pl)
        got = (profile.token, tuple(keys)), static, dynamic
        pod.memo[key] = got
    return got


class CycleCache:
    """One scheduler's kept masks, node counts and scores, over its snapshot."""

    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        # Combined masks of the filters that depend only on node objects, per
        # (profile, the pod's keys for those filters); valid for one node version.
        self._static_masks: dict[tuple, np.ndarray] = {}
        self._static_version: tuple[int, int] = (-1, -1)
        self._to_find: dict[tuple[int, int], int] = {}
        # Node-local raw scores per (plugin, score key), valid for one node version.
        self._scores: dict[tuple, list] = {}
        self._scores_state: tuple[int, int, int] = (-1, -1, -1)
        self.keep_scores = True  # off: every plugin scores the feasible nodes every cycle

    def node_object_filters(self, ctx: CycleContext, profile: Profile, skipped: AbstractSet[str],
                            skipped_now: tuple[str, ...]) -> tuple[np.ndarray, list]:
        """The combined (read-only) mask of the pod's node-object-only filters, and the
        filters left to run this cycle."""
        snap = self.snapshot
        cache_key, static, dynamic = filter_plan(ctx.pod, profile, skipped, skipped_now)
        version = (snap.node_version, len(snap))
        if self._static_version != version or len(self._static_masks) > 4096:
            self._static_masks.clear()
            self._static_version = version
        passes = self._static_masks.get(cache_key)
        if passes is None:
            passes = np.ones(len(snap), dtype=bool)
            for pl in static:
                passes &= pl.filter(ctx)
            passes.flags.writeable = False
            self._static_masks[cache_key] = passes
        return passes, dynamic

    def num_to_find(self, profile: Profile, n: int, compute: Callable[[], int]) -> int:
        """``numFeasibleNodesToFind`` for this profile on ``n`` nodes, computed once."""
        to_find = self._to_find.get((profile.token, n))
        if to_find is None:
            to_find = self._to_find[(profile.token, n)] = compute()
        return to_find

    def start_scoring(self) -> None:
        """Before a cycle's scores: drop kept scores when nodes changed or the change log restarted."""
        snap = self.snapshot
        if self._scores_state != (snap.change_epoch, snap.node_version, len(snap)):
            self._scores.clear()
            self._scores_state = (snap.change_epoch, snap.node_version, len(snap))

    def raw_scores(self, ctx: CycleContext, pl: Plugin, key: Any, feasible: np.ndarray) -> np.ndarray:
        """A plugin's raw scores over ``feasible``: kept per score key over all nodes for a
        node-local plugin (``key`` not None), where only nodes whose pods changed since are
        scored again, one by one (``score_each``) when they are few, else together."""
        if key is None or not self.keep_scores:
            return pl.score(ctx, feasible)
        log = self.snapshot.changed
        entry = self._scores.get((pl.token, key))  # [raw over all nodes, log position read]
        if entry is None or len(log) - entry[1] > len(self.snapshot) // 4:
            if len(self._scores) >= 1024:
                self._scores.clear()
            entry = self._scores[(pl.token, key)] = [pl.score(ctx, np.arange(len(self.snapshot))), len(log)]
        elif entry[1] < len(log):
            raw, stale = entry[0], list(set(log[entry[1]:]))
            entry[1] = len(log)
            each = hints(pl).score_each(ctx, stale) if len(stale) <= SCORE_ONE_BY_ONE else None
            if each is None:
                raw[stale] = pl.score(ctx, np.array(stale))
            else:
                for i, v in zip(stale, each):
                    raw[i] = v
        return entry[0][feasible]
