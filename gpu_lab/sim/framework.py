"""The scheduling framework's vocabulary: statuses, the per-cycle state, plugins.

Mirrors ``pkg/scheduler/framework`` closely enough that a learner can map each
piece: a ``Plugin`` implements some of ``pre_filter``, ``filter``,
``post_filter``, ``pre_score``, ``score`` and ``normalize_score``. Unlike
kube-scheduler, which calls Filter and Score once per node, our plugins answer
for every node at once (numpy arrays indexed like ``Snapshot.nodes``); a
per-node ``filter_status`` gives the reason in Kubernetes' words when asked.

Pods of a PodGroup (the native Workload API) also meet ``pre_enqueue`` (before they may
enter the scheduling queue), ``placement_feasible`` (after each pod of the group's cycle),
``pod_group_post_filter`` (the group's preemption) and ``permit`` (before binding, where a
pod may wait for the rest of its gang).
"""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from itertools import compress
from operator import attrgetter
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..model.objects import Pod

if TYPE_CHECKING:
    from .profile import Profile
    from .snapshot import Snapshot

MAX_NODE_SCORE = 100

# Status codes, as in k8s.io/kube-scheduler/framework.
SUCCESS = "Success"
UNSCHEDULABLE = "Unschedulable"
UNRESOLVABLE = "UnschedulableAndUnresolvable"
SKIP = "Skip"
ERROR = "Error"
WAIT = "Wait"  # Permit and PlacementFeasible: not yet, ask again


@dataclass(frozen=True)
class Status:
    code: str
    reasons: tuple[str, ...] = ()
    plugin: str = ""

    @property
    def rejected(self) -> bool:
        return self.code in (UNSCHEDULABLE, UNRESOLVABLE)

    def message(self) -> str:
        return ", ".join(self.reasons)


@dataclass(slots=True)
class CycleContext:
    """One scheduling attempt of one pod: the CycleState of kube-scheduler."""

    pod: Pod
    snapshot: Snapshot
    profile: Profile
    data: dict[str, Any] = field(default_factory=dict)  # per-plugin state, keyed by plugin name
    # Pods nominated to nodes (after preemption) that this pod must leave room for.
    nominated: dict[int, list[Pod]] = field(default_factory=dict)

    def run_filters(self, i: int) -> Status | None:
        """Re-run PreFilter and every Filter plugin for node i against the snapshot
        as it is now (preemption removes victims, then asks)."""
        return run_filter_plugins(self, i)


@dataclass(slots=True)
class Diagnosis:
    """Why a pod fits nowhere: each rejected node's status (framework.Diagnosis).

    A status is given per node (``node_status``) or, as the scheduler records it,
    for a group of nodes that share it (``groups``): on a large cluster most
    rejected nodes share one of a few verdicts.
    """

    node_status: dict[int, Status] = field(default_factory=dict)
    unschedulable_plugins: set[str] = field(default_factory=set)
    pre_filter_msg: str = ""
    post_filter_msg: str = ""
    # Set when PreFilter rejected: every node has this status.
    absent_status: Status | None = None
    groups: list[tuple[Status, np.ndarray]] = field(default_factory=list)

    def status_of(self, i: int) -> Status | None:
        """Node i's status, if it was rejected."""
        st = self.node_status.get(i)
        if st is None:
            st = next((s for s, idx in self.groups if i in idx), None)
        return st

    def rejected(self) -> int:
        """How many nodes have a status."""
        return len(self.node_status) + sum(len(idx) for _, idx in self.groups)

    def nodes_with(self, code: str) -> list[int]:
        """The rejected nodes whose status has this code, in snapshot order."""
        statuses = self.node_status
        out = list(compress(statuses, map(code.__eq__, map(attrgetter("code"), statuses.values()))))
        for st, idx in self.groups:
            if st.code == code:
                out.extend(idx.tolist())
        out.sort()
        return out

    def status_counts(self) -> list[tuple[Status, int]]:
        """Each distinct status with how many nodes have it."""
        statuses = list(self.node_status.values())
        by_id = dict(zip(map(id, statuses), statuses))
        out = [(by_id[sid], times) for sid, times in Counter(map(id, statuses)).items()]
        return out + [(st, len(idx)) for st, idx in self.groups]


@dataclass
class PostFilterResult:
    """What PostFilter (preemption) found: a node to nominate and the pods to evict."""

    nominated_node: int | None = None
    victims: list[Pod] = field(default_factory=list)
    status: Status = field(default_factory=lambda: Status(UNSCHEDULABLE))
    # "Override": set the pod's nomination to nominated_node (None clears it);
    # "Noop": leave an earlier nomination as it is.
    nominating_mode: str = "Noop"
    # PodGroupPostFilter: each member's proposed node (pod key -> node index)
    nominated_pods: dict[str, int] = field(default_factory=dict)


_TOKENS = itertools.count(1)


class Plugin:
    """Base class; subclasses set ``name`` and implement the phases they take part in."""

    name: ClassVar[str] = ""

    def __init__(self, args: dict[str, Any] | None = None, handle: Any = None):
        self.args = args or {}
        self.handle = handle
        # Names this instance (and so its args) in caches kept on pods.
        self.token = next(_TOKENS)
        self.skip = Status(SKIP, plugin=self.name)  # what pre_filter/pre_score return to skip

    # --- phases (overridden by plugins that take part) ---------------
    def pre_filter(self, ctx: CycleContext) -> Status | None:
        """Return a rejection for every node, ``Status(SKIP)`` to skip Filter, or None."""
        return None

    def pre_filter_nodes(self, ctx: CycleContext) -> AbstractSet[str] | None:
        """The node names of this plugin's PreFilterResult (the only nodes Filter runs on),
        or None for every node. Asked only when ``pre_filter`` neither skipped nor rejected."""
        return None

    def filter(self, ctx: CycleContext) -> np.ndarray:
        """Boolean array, True where the node passes."""
        raise NotImplementedError

    def filter_status(self, ctx: CycleContext, i: int) -> Status:
        """Why node ``i`` failed this plugin's filter."""
        raise NotImplementedError

    def post_filter(self, ctx: CycleContext, diagnosis: Diagnosis) -> PostFilterResult:
        """Called when no node fits; preemption lives here."""
        raise NotImplementedError

    def pre_enqueue(self, pod: Pod) -> Status | None:
        """Before the pod may enter the scheduling queue: a rejection keeps it out (gated),
        None lets it in."""
        return None

    def placement_feasible(self, group: Any, remaining: int, scheduled: int) -> Status | None:
        """During a pod group's cycle: None when the group's constraint holds, ``WAIT`` when
        it may still hold once ``remaining`` more pods are tried, a rejection when it cannot."""
        return None

    def pod_group_post_filter(self, group: Any, run_group: Any, members: list) -> PostFilterResult:
        """When a pod group fits nowhere (``members``: its unscheduled pods): a pod group's
        preemption (``run_group`` reruns the group's algorithm on the snapshot as it is then)."""
        raise NotImplementedError

    def permit(self, ctx: CycleContext, node: str) -> tuple[Status | None, float]:
        """Before binding: None to bind, ``(Status(WAIT), seconds)`` to hold the pod (its
        resources reserved) until allowed or timed out, a rejection to unreserve it."""
        return None, 0.0

    def filter_statuses(self, ctx: CycleContext, idx: np.ndarray) -> list[Status]:
        """Statuses for many rejected nodes at once; plugins may vectorise this."""
        return [self.filter_status(ctx, int(i)) for i in idx]

    def filter_status_groups(self, ctx: CycleContext, idx: np.ndarray) -> list[tuple[Status, np.ndarray]]:
        """``filter_statuses`` grouped: each distinct Status with the nodes that share it."""
        statuses = self.filter_statuses(ctx, idx)
        ids = list(map(id, statuses))
        if ids and ids.count(ids[0]) == len(ids):
            return [(statuses[0], idx)]
        members: dict[int, list[int]] = {}
        for k, sid in enumerate(ids):
            members.setdefault(sid, []).append(k)
        by_id = dict(zip(ids, statuses))
        return [(by_id[sid], idx[ks]) for sid, ks in members.items()]

    def pre_score(self, ctx: CycleContext, feasible: np.ndarray) -> Status | None:
        """Return ``Status(SKIP)`` to skip Score for this pod."""
        return None

    def score(self, ctx: CycleContext, feasible: np.ndarray) -> np.ndarray:
        """Raw int64 scores for the node indices in ``feasible``."""
        raise NotImplementedError

    def normalize_score(self, ctx: CycleContext, scores: np.ndarray) -> np.ndarray:
        return scores

    @classmethod
    def implements(cls, phase: str) -> bool:
        own = getattr(cls, phase, None)
        return own is not None and own is not getattr(Plugin, phase, None)


def default_normalize(scores: np.ndarray, reverse: bool = False) -> np.ndarray:
    """``helper.DefaultNormalizeScore``: scale to 0..100 by the max, optionally reversed."""
    if len(scores) == 0:
        return scores
    top = int(scores.max())
    if top == 0:
        if reverse:
            return np.full(len(scores), MAX_NODE_SCORE, dtype=np.int64)
        return scores
    out = scores * MAX_NODE_SCORE // top
    if reverse:
        out = MAX_NODE_SCORE - out
    return out


def run_pre_filter_plugins(ctx: CycleContext) -> tuple[Status | None, set[str]]:
    """Every PreFilter plugin in order: the first rejection (if any) and the plugins that skip."""
    skipped: set[str] = set()
    for pl in ctx.profile.at("preFilter"):
        st = pl.pre_filter(ctx)
        if st is None:
            continue
        if st.code == SKIP:
            skipped.add(pl.name)
        elif st.rejected:
            return Status(st.code, st.reasons, pl.name), skipped
    return None, skipped


def run_filter_plugins(ctx: CycleContext, i: int) -> Status | None:
    """PreFilter, then every Filter plugin in order, for node ``i`` as the snapshot is now.

    Returns the first rejection, or None when the node passes. The scheduler
    uses it for nominated-node checks and preemption's "would it fit now?".
    """
    fresh = CycleContext(pod=ctx.pod, snapshot=ctx.snapshot, profile=ctx.profile, nominated=ctx.nominated)
    rejected, skipped = run_pre_filter_plugins(fresh)
    if rejected is not None:
        return rejected
    for pl in ctx.profile.at("filter"):
        if pl.name not in skipped and not pl.filter(fresh)[i]:
            return pl.filter_status(fresh, i)
    return None


NO_NODE_AVAILABLE_MSG = "0/{} nodes are available"

def fit_error_message(num_all_nodes: int, diagnosis: Diagnosis) -> str:
    """``FitError.Error()``: "0/N nodes are available: <reasons>. <post-filter msg>"."""
    msg = NO_NODE_AVAILABLE_MSG.format(num_all_nodes) + ":"
    if diagnosis.pre_filter_msg:
        msg += f" {diagnosis.pre_filter_msg}."
    else:
        counts: dict[str, int] = {}
        for st, times in diagnosis.status_counts():
            for r in st.reasons:
                counts[r] = counts.get(r, 0) + times
        absent = num_all_nodes - diagnosis.rejected()
        if absent > 0 and diagnosis.absent_status is not None:
            for r in diagnosis.absent_status.reasons:
                counts[r] = counts.get(r, 0) + absent
        parts = sorted(f"{v} {k}" for k, v in counts.items())
        if parts:
            msg += " " + ", ".join(parts) + "."
    if diagnosis.post_filter_msg:
        msg += f" {diagnosis.post_filter_msg}"
    return msg


class WithNominatedPods:
    """Filter as kube-scheduler's ``RunFilterPluginsWithNominatedPods`` runs it, once for
    every plugin a nominated pod can make pass as well as fail (pod affinity, topology
    spread): a node with pods nominated to it (equal or higher priority) must pass with those
    pods added to its NodeInfo and without them. Plugins whose verdict only gets stricter as
    pods are added (resources, ports) fold the nominated pods' usage into their figures
    instead: for them the pass without is implied.

    A plugin mixes this in before :class:`Plugin` and gives, from its cycle state ``st``
    (``ctx.data[name]``, with ``mask`` and ``reason`` fields): ``base_reasons(ctx, st)``,
    one code per node without nominated pods (0 passes); ``nominated_status(ctx, st, i,
    pods)``, node ``i`` with ``pods`` added (None passes); ``reason_status(st, i)``, the
    Status of node ``i``'s code."""

    name: ClassVar[str]

    def base_reasons(self, ctx: CycleContext, st: Any) -> np.ndarray:
        raise NotImplementedError

    def nominated_status(self, ctx: CycleContext, st: Any, i: int, pods: list) -> Status | None:
        raise NotImplementedError

    def reason_status(self, st: Any, i: int) -> Status:
        raise NotImplementedError

    def filter(self, ctx: CycleContext) -> np.ndarray:
        st = ctx.data[self.name]
        if st.mask is None:
            st.reason = self.base_reasons(ctx, st)
            mask = st.reason == 0
            for i, pods in ctx.nominated.items():
                if pods and mask[i]:
                    mask[i] = self.nominated_status(ctx, st, i, pods) is None
            st.mask = mask
        return st.mask

    def filter_status(self, ctx: CycleContext, i: int) -> Status:
        st = ctx.data[self.name]
        if st.reason is None:
            self.filter(ctx)
        pods = ctx.nominated.get(i)
        if pods:  # the first pass, with the nominated pods added
            status = self.nominated_status(ctx, st, i, pods)
            if status is not None:
                return status
        return self.reason_status(st, i)
