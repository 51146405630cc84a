"""What a plugin may tell the scheduler's speed caches (``cache.py``), beside the scheduling
framework rather than inside its contract: kube-scheduler has no such hints (it recomputes
every cycle); the sim keeps results across cycles where a plugin says when they stay true.

A plugin opts in by mixing in :class:`CacheHints` and overriding the hints it can give;
``cache.py`` and ``scheduler.py`` ask :func:`hints`, which answers for a plugin that did
not opt in with the defaults (no hint: compute every cycle)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from ..model.objects import Pod
    from .framework import CycleContext


class CacheHints:
    # True when PreScore only ever returns what skips_pre_score says (it reads the pod
    # and the args, nothing else): a pod it does not skip need not ask it again.
    pre_score_decided_by_pod: ClassVar[bool] = False

    def skips_pre_filter(self, pod: Pod) -> bool:
        """True when PreFilter returns Skip for this pod whatever the cluster holds
        (it depends on the pod and the plugin's args only). The scheduler then
        counts the plugin as skipped without calling it."""
        return False

    def skips_pre_score(self, pod: Pod) -> bool:
        """Like ``skips_pre_filter``, for PreScore."""
        return False

    def static_filter_key(self, pod: Pod) -> Any:
        """For a Filter that depends only on the node objects (labels, taints,
        spec), never on the pods bound to them: a hashable key such that pods with
        equal keys get the same verdict on every node. The scheduler then keeps
        the combined mask of such filters until a node changes. None (the
        default) means: run Filter every cycle."""
        return None

    def score_key(self, pod: Pod) -> Any:
        """For a node-local Score: a hashable key such that pods with equal keys get
        the same raw score on every node, and a node's raw score changes only when
        pods are bound to or removed from it (or the node itself changes). The
        scheduler then keeps raw scores per key and rescores only the nodes that
        changed since (with ``score_each`` when there are few). None (the
        default): score every cycle."""
        return None

    def score_each(self, ctx: CycleContext, nodes: list[int]) -> list[int] | None:
        """Raw scores of a few nodes, one node at a time as kube-scheduler's per-node
        Score computes them (plain Python: cheaper than numpy for a handful). None
        when the plugin only scores many nodes at once."""
        return None

    def same_everywhere(self, ctx: CycleContext) -> bool:
        """True when this plugin's normalised score is the same on every node for this
        pod: it then cannot change which node wins, and the scheduler leaves it out
        when it is not recording explanations."""
        return False


NO_HINTS = CacheHints()


def hints(plugin: object) -> CacheHints:
    """The plugin's hints, or the defaults for a plugin that gives none."""
    return plugin if isinstance(plugin, CacheHints) else NO_HINTS


def gives(plugin: object, hint: str) -> bool:
    """Whether the plugin overrides the hint ``hint`` (its answer may differ from the default)."""
    return getattr(type(hints(plugin)), hint) is not getattr(CacheHints, hint)
