"""One scheduling cycle, as kube-scheduler's ``schedulePod`` runs it.

PreFilter -> (nominated node first) -> Filter over nodes starting where the
last cycle stopped, until ``numFeasibleNodesToFind`` feasible nodes are found
-> PostFilter (preemption) when none fit -> PreScore/Score/NormalizeScore,
weighted sum -> highest total wins, ties broken at random (seeded) or, in
deterministic mode, by the lowest node name.

The methods are named after ``pkg/scheduler/schedule_one.go``: ``schedule_one`` is
``schedulePod``, which calls ``findNodesThatFitPod`` (PreFilter, the nominated node,
``findNodesThatPassFilters``), ``prioritizeNodes`` and ``selectHost``. What kube-scheduler
recomputes every cycle the simulator keeps in ``cache.py``, never changing a decision.

One v1.37 detail is modelled approximately, and the README says so: without
extenders the real scheduler breaks ties by heap order over the nodes in the order
its parallel filter found them (its Randomizer stays 0), which we treat as random.
Cycles the scheduling queue numbers (``cycle``) take part in OpportunisticBatching
(``batch.py``): a pod like the one before may be tried on a node hint alone, unscored.

Pods of a PodGroup are scheduled together (``schedule_pod_group``, kube-scheduler's
``podGroupSchedulingDefaultAlgorithm``): each queued member in turn gets an ordinary cycle
without PostFilter, its node is reserved in the snapshot for the members after it, and
PlacementFeasible decides after each one whether the group can still succeed; the
reservations are undone at the end, whatever the verdict, and the caller binds (through
Permit) the members that fit when the group succeeded.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from collections.abc import Set as AbstractSet
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..model.objects import Pod
from .batch import BatchCycle, Batching, others_scored
from .cache import CycleCache, plan
from .cachehints import hints
from .framework import (
    ERROR,
    SKIP,
    SUCCESS,
    UNRESOLVABLE,
    UNSCHEDULABLE,
    WAIT,
    CycleContext,
    Diagnosis,
    PostFilterResult,
    Status,
    fit_error_message,
)
from .podgroups import PodGroupManager
from .profile import Profile, SchedulerConfig, load_scheduler_config
from .snapshot import Snapshot
from .verdicts import ByNode, NodeStatuses, NodeVerdicts

MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5


def num_feasible_nodes_to_find(percentage: int, num_all_nodes: int) -> int:
    """``numFeasibleNodesToFind`` (schedule_one.go)."""
    if num_all_nodes < MIN_FEASIBLE_NODES_TO_FIND:
        return num_all_nodes
    if percentage == 0:
        percentage = max(50 - num_all_nodes // 125, MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND)
    num = num_all_nodes * percentage // 100
    return max(num, MIN_FEASIBLE_NODES_TO_FIND)


def feasible_window(passes: np.ndarray, start: int, to_find: int) -> tuple[np.ndarray, int]:
    """``findNodesThatPassFilters``' walk: visit nodes from ``start`` round the ring,
    keeping passing nodes, and stop at the ``to_find``-th one when more than that pass.
    Returns the kept nodes in visiting order and how many nodes were processed (all of
    them when it never stopped early).

    Taken from the sorted passing indices rather than by walking: the same answer.
    """
    n = len(passes)
    found = passes.nonzero()[0]
    first = int(found.searchsorted(start))
    if len(found) > to_find:
        feasible = found[first:first + to_find]
        if len(feasible) < to_find:
            feasible = np.concatenate([feasible, found[:to_find - len(feasible)]])
        return feasible, (int(feasible[-1]) - start) % n + 1
    return (np.concatenate([found[first:], found[:first]]) if first else found), n




# submitPodGroupAlgorithmResult: a member that fit, of a group that did not
POD_GROUP_UNSCHEDULABLE = "pod group is unschedulable"


@dataclass(slots=True)
class PodGroupAttempt:
    """One pod group scheduling cycle: the group's verdict and every member's attempt.

    ``attempts`` follow the queue order; a member the cycle never reached has none.
    ``messages`` hold what each member that will not bind is told (its PodScheduled
    condition), ``condition`` the PodGroup's PodGroupInitiallyScheduled (status, reason,
    message)."""

    group: Any
    status: Status
    attempts: list = field(default_factory=list)
    messages: dict[str, str] = field(default_factory=dict)
    condition: tuple[str, str, str] = ("True", "Scheduled", "")
    post_filter: PostFilterResult | None = None  # the group's preemption, when it failed

    @property
    def scheduled(self) -> list:
        """The members that fit, when the group succeeded: they go on to Permit."""
        return [a for a in self.attempts if a.node is not None] if self.status.code == SUCCESS else []


@dataclass(slots=True)
class PluginScores:
    raw: np.ndarray
    normalized: np.ndarray
    weight: int


@dataclass(slots=True)
class Attempt:
    """The outcome of one scheduling cycle, with everything ``explain`` shows."""

    pod: Pod
    profile: str
    node: str | None = None
    message: str = ""
    diagnosis: Diagnosis | None = None
    evaluated: np.ndarray | None = None  # node indices the filter looked at
    feasible: np.ndarray | None = None  # node indices that passed
    failed_by: Mapping[int, Status] = field(default_factory=dict)
    scores: dict[str, PluginScores] = field(default_factory=dict)
    skipped_score_plugins: list[str] = field(default_factory=list)
    total: np.ndarray | None = None
    post_filter: PostFilterResult | None = None
    via_nominated_node: bool = False
    batch_hint: str | None = None  # placed on opportunistic batching's node hint, unscored
    node_names: list[str] = field(default_factory=list)
    # Only when recording: every filter plugin's verdict on every rejected node.
    filter_verdicts: dict[str, Mapping[int, str]] | None = None
    skipped_filter_plugins: list[str] = field(default_factory=list)

    def cells(self) -> int:
        """(pod, node) cells this attempt keeps for explain: the nodes its filter looked at."""
        return len(self.evaluated) if self.evaluated is not None else len(self.node_names)

    def compact(self) -> Attempt:
        """The attempt as it is kept for ``explain``: every array in the narrowest integer
        type that holds its values (scores are 0-100, node indices below the node count),
        about a fifth of the memory of int64 arrays; what is read back is the same numbers."""
        index = np.int16 if len(self.node_names) <= _INT16_MAX else np.int32
        if self.evaluated is not None and self.evaluated is not self.feasible:
            self.evaluated = self.evaluated.astype(index, copy=False)
        if self.feasible is not None:
            same = self.evaluated is self.feasible
            self.feasible = self.feasible.astype(index, copy=False)
            if same:
                self.evaluated = self.feasible
        self.total = _narrow(self.total)
        diagnosis = self.diagnosis
        if diagnosis is not None and diagnosis.groups:  # shared with failed_by (NodeStatuses)
            diagnosis.groups = [(st, idx.astype(index, copy=False)) for st, idx in diagnosis.groups]
            if isinstance(self.failed_by, NodeStatuses):
                self.failed_by = NodeStatuses(list(diagnosis.groups))
        for verdicts in (self.filter_verdicts or {}).values():
            if isinstance(verdicts, ByNode):
                verdicts.narrow(index)
        for name, ps in self.scores.items():
            norm = _narrow(ps.normalized)
            self.scores[name] = PluginScores(norm if ps.raw is ps.normalized else _narrow(ps.raw), norm, ps.weight)
        return self


_INT16_MAX = 32767
#: (lowest, highest, type) from the narrowest: the first that holds an array's values is kept
_NARROW = [(int(np.iinfo(t).min), int(np.iinfo(t).max), t) for t in (np.int8, np.int16, np.int32)]


def _narrow(a):
    """``a`` (an integer array, or None) in the first of int8, int16, int32 that holds it."""
    if a is None or not len(a) or a.dtype.kind not in "iu":
        return a
    lo, hi = int(a.min()), int(a.max())
    for low, high, t in _NARROW:
        if low <= lo and hi <= high:
            return a.astype(t, copy=False)
    return a


#: Replays another scheduler's choices among equal totals: called at every selectHost with
#: the pod and the best nodes, it returns the node to take (None: break the tie as usual).
#: The differential harness (fidelity.py) sets it to follow the real kube-scheduler, so
#: the states compared after a tie are the same states.
tie_break: ContextVar[Callable[[Pod, list[str]], str | None] | None] = ContextVar("tie_break", default=None)


class Scheduler:
    """Runs cycles against a snapshot; keeps the round-robin start index."""

    def __init__(self, config: SchedulerConfig, snapshot: Snapshot, seed: int | None = None,
                 deterministic: bool = False, record: bool = True):
        self.config = config
        self.record = record
        self.snapshot = snapshot
        self.rng = random.Random(seed)
        self.deterministic = deterministic
        self.next_start_node_index = 0
        self.nominated: dict[str, tuple[Pod, int]] = {}  # pod key -> (pod, node index)
        # pod key -> when the kubelet started it (status.startTime; the binder keeps it):
        # pickOneNodeForPreemption's last criterion compares the victims' start times
        self.started: dict[str, float] = {}
        # every PodDisruptionBudget with its disruptionsAllowed, as preemption reads them (sim/policies.py)
        self.disruption_budgets: Callable[[], list] = list
        self.cache = CycleCache(snapshot)  # kept only for speed (cache.py)
        self.pod_groups = PodGroupManager()  # the scheduling queue keeps it current
        self.batching = Batching(self)  # OpportunisticBatching, per profile
        self.cycles = 0  # the scheduling queue's cycle count (SchedulingCycle)

    @classmethod
    def from_config(cls, raw: dict | None, snapshot: Snapshot, seed: int | None = None,
                    deterministic: bool = False, record: bool = True) -> Scheduler:
        """Build the profiles with this scheduler as the plugins' handle (rng, nominations)."""

        sched = cls(None, snapshot, seed, deterministic, record)  # type: ignore[arg-type]
        sched.config = load_scheduler_config(raw, handle=sched)
        return sched

    # ------------------------------------------------------------- a cycle
    def next_cycle(self) -> int:
        """The queue pops a pod or a pod group: a new scheduling cycle's number."""
        self.cycles += 1
        return self.cycles

    def schedule_one(self, pod: Pod, post_filter: bool = True, cycle: int | None = None) -> Attempt:
        """``schedulePod``: one pod's cycle; ``post_filter=False`` inside a pod group's cycle,
        which runs no per-pod preemption; ``cycle``: the queue's cycle number, for
        OpportunisticBatching (None, for a what-if outside the queue: no batching)."""
        profile = self.config.profile_for(pod.scheduler_name)
        snap = self.snapshot
        attempt = Attempt(pod=pod, profile=pod.scheduler_name, node_names=snap.names)
        n = len(snap)
        if profile is None:
            attempt.message = f'no scheduler profile serves schedulerName "{pod.scheduler_name}"'
            return attempt
        if n == 0:
            attempt.message = "no nodes available to schedule pods"
            return attempt
        ctx = self._context(pod, profile)
        attempt.diagnosis = Diagnosis()
        batch = self.batching.cycle(pod, profile, cycle)
        feasible = self._find_nodes_that_fit_pod(ctx, profile, attempt, batch)
        if feasible is None:  # a plugin error: the attempt carries its text
            return attempt
        if len(feasible) == 0:
            return self._fail(ctx, attempt, n, post_filter)
        if len(feasible) == 1:
            attempt.node = snap.nodes[int(feasible[0])].name
            if batch is not None:
                batch.store(attempt.node, None)
            return attempt
        keep = batch is not None and batch.signature is not None  # the batch keeps raw scores
        total = self._prioritize_nodes(ctx, profile, feasible, attempt, keep)
        attempt.total = total
        best = self._select_host(total, feasible, pod)
        attempt.node = snap.nodes[int(feasible[best])].name
        if batch is not None:
            batch.store(attempt.node, others_scored(attempt, feasible, total, best, snap.names) if keep else None)
        return attempt

    def _context(self, pod: Pod, profile: Profile) -> CycleContext:
        ctx = CycleContext(pod=pod, snapshot=self.snapshot, profile=profile)
        if self.nominated:
            for key, (other, i) in self.nominated.items():
                if key != pod.key and other.priority >= pod.priority:
                    ctx.nominated.setdefault(i, []).append(other)
        return ctx

    # ----------------------------------------------------------- filtering
    def _find_nodes_that_fit_pod(self, ctx: CycleContext, profile: Profile, attempt: Attempt,
                                 batch: BatchCycle | None = None) -> np.ndarray | None:
        """``findNodesThatFitPod``: PreFilter, the nominated node (or batching's hint) first,
        then Filter over the nodes. The feasible node indices (also in ``attempt.feasible``),
        or None on a plugin error."""
        diagnosis = attempt.diagnosis
        assert diagnosis is not None
        rejected, skipped, skipped_now = self._pre_filter(ctx, profile)
        if rejected is not None and rejected.code == ERROR:
            # A plugin error ends the attempt with its own text (reason SchedulerError), no FitError.
            attempt.message = rejected.message()
            attempt.evaluated = attempt.feasible = np.arange(0)
            return None
        if rejected is not None:
            diagnosis.pre_filter_msg = rejected.message()
            diagnosis.absent_status = rejected
            diagnosis.unschedulable_plugins.add(rejected.plugin)
            attempt.evaluated = np.arange(0)
            attempt.feasible = np.arange(0)
            return attempt.feasible

        passes = self._passes(ctx, profile, skipped, skipped_now)
        within = self._pre_filter_result(ctx, profile, skipped, diagnosis)
        if within is not None:
            passes = passes & within

        # A pod nominated by an earlier preemption tries its node first, unscored; so does a
        # pod that OpportunisticBatching gives a hint (never a nominated one).
        hint = batch.node_hint(ctx, passes) if batch is not None else None
        nom = self.nominated.get(ctx.pod.key) if self.nominated else None
        first = nom[1] if nom is not None else hint
        if first is not None and passes[first]:
            if self.record:
                self._record_filters(ctx, profile, skipped, attempt)
            if nom is not None:
                attempt.via_nominated_node = True
            else:
                attempt.batch_hint = self.snapshot.nodes[first].name
            attempt.evaluated = np.array([first])
            attempt.feasible = np.array([first])
            return attempt.feasible
        return self._find_nodes_that_pass_filters(ctx, profile, skipped, passes, attempt, within)

    def _pre_filter_result(self, ctx: CycleContext, profile: Profile, skipped: AbstractSet[str],
                           diagnosis: Diagnosis) -> np.ndarray | None:
        """The PreFilterResult (NodeAffinity's nodes pinned by metadata.name): a mask of the
        only nodes Filter runs on, or None for all. Every other node is absent from the walk
        and gets one status, naming the plugins that narrowed it (findNodesThatFitPod's
        SetAbsentNodesStatus); they count in the FitError and preemption skips them."""
        names: AbstractSet[str] | None = None
        plugins: list[str] = []
        for pl in profile.at("preFilter"):
            got = None if pl.name in skipped else pl.pre_filter_nodes(ctx)
            if got is not None:
                plugins.append(pl.name)
                names = got if names is None else names & got
        if names is None:
            return None
        diagnosis.unschedulable_plugins.update(plugins)
        diagnosis.absent_status = Status(UNRESOLVABLE, (f"node(s) didn't satisfy plugin(s) [{' '.join(sorted(plugins))}]",),
                                         plugins[0])
        return np.fromiter((n in names for n in self.snapshot.names), dtype=bool, count=len(self.snapshot))

    def _pre_filter(self, ctx: CycleContext, profile: Profile) -> tuple[Status | None, AbstractSet[str], tuple]:
        """PreFilter: the first rejection, every plugin that skips, and those that skipped this cycle only."""
        static, ask = plan(ctx.pod, profile, "preFilter")
        skipped_now: tuple[str, ...] = ()
        for pl, _, _, _, _ in ask:
            st = pl.pre_filter(ctx)
            if st is None:
                continue
            if st.code == SKIP:
                skipped_now += (pl.name,)
            elif st.rejected or st.code == ERROR:
                return Status(st.code, st.reasons, pl.name), set(static), skipped_now
        return None, static.union(skipped_now), skipped_now

    def _passes(self, ctx: CycleContext, profile: Profile, skipped: AbstractSet[str],
                skipped_now: tuple[str, ...]) -> np.ndarray:
        """Nodes that pass every Filter: the kept node-object filters AND this cycle's others."""
        passes, dynamic = self.cache.node_object_filters(ctx, profile, skipped, skipped_now)
        for pl in dynamic:
            passes = passes & pl.filter(ctx)
        return passes

    def _find_nodes_that_pass_filters(self, ctx: CycleContext, profile: Profile, skipped: AbstractSet[str],
                                      passes: np.ndarray, attempt: Attempt,
                                      within: np.ndarray | None = None) -> np.ndarray:
        """``findNodesThatPassFilters``: the feasible nodes from where the last cycle stopped,
        up to ``numFeasibleNodesToFind``; the rejected ones' reasons in the diagnosis. With a
        PreFilterResult (``within``) only its nodes are walked and given a status."""
        diagnosis = attempt.diagnosis
        assert diagnosis is not None
        n = len(self.snapshot)
        to_find = self.cache.num_to_find(profile, n, lambda: self._num_feasible_nodes_to_find(profile, n))
        start = self.next_start_node_index
        feasible, processed = feasible_window(passes, start, to_find)
        walked = (start + np.arange(processed)) % n
        if within is not None:  # processedNodes: the feasible nodes and those given a status
            walked = walked[within[walked]]
        self.next_start_node_index = (start + len(walked)) % n
        attempt.feasible = feasible

        # Rejection reasons matter only for a failure message or an explanation.
        if self.record or not len(feasible):
            evaluated = walked
            attempt.evaluated = evaluated
            plugins, masks = self._filter_masks(ctx, profile, skipped)
            if self.record:
                self._record_filters(ctx, profile, skipped, attempt, plugins, masks)
            rejected = evaluated[~passes[evaluated]]
            if len(rejected):
                # The first plugin that rejects a node is the one kube-scheduler reports.
                first_bad = np.argmax(~np.vstack([m[rejected] for m in masks]), axis=0)
                for k, pl in enumerate(plugins):
                    idx = rejected[first_bad == k]
                    if not len(idx):
                        continue
                    diagnosis.unschedulable_plugins.add(pl.name)
                    diagnosis.groups.extend(pl.filter_status_groups(ctx, idx))
                if self.record:
                    attempt.failed_by = NodeStatuses(list(diagnosis.groups))
        return feasible

    def _num_feasible_nodes_to_find(self, profile: Profile, n: int) -> int:
        pct = profile.percentage_of_nodes_to_score
        if pct is None:
            pct = self.config.percentage_of_nodes_to_score
        return num_feasible_nodes_to_find(pct, n) if profile.phases["score"] else 1

    def _filter_masks(self, ctx: CycleContext, profile: Profile, skipped: AbstractSet[str]):
        """Every filter plugin's own mask, in order: for reasons and explanations."""
        plugins = [p for p in profile.at("filter") if p.name not in skipped]
        masks = [p.filter(ctx) for p in plugins]
        return plugins, masks

    def _record_filters(self, ctx: CycleContext, profile: Profile, skipped: AbstractSet[str], attempt: Attempt,
                        plugins=None, masks=None) -> None:
        """For explanations: every filter plugin's verdict on every node it rejects."""
        if plugins is None:
            plugins, masks = self._filter_masks(ctx, profile, skipped)
        attempt.skipped_filter_plugins = sorted(skipped)
        attempt.filter_verdicts = {}
        for pl, m in zip(plugins, masks):
            rejected = (~m).nonzero()[0]
            # Nodes with the same verdict share one Status: kept as groups, worded when asked.
            groups = pl.filter_status_groups(ctx, rejected) if len(rejected) else []
            attempt.filter_verdicts[pl.name] = NodeVerdicts(groups)

    # ------------------------------------------------------------- scoring
    def _prioritize_nodes(self, ctx: CycleContext, profile: Profile, feasible: np.ndarray,
                          attempt: Attempt, keep: bool = False) -> np.ndarray:
        """``prioritizeNodes``: PreScore, Score, NormalizeScore, times each plugin's weight, summed.
        ``keep``: every plugin's scores go into ``attempt.scores`` even when not recording."""
        total = None
        static, ask = plan(ctx.pod, profile, "score")
        cache = self.cache
        cache.start_scoring()
        record = self.record or keep
        for pl, w, asks, key, may_be_constant in ask:
            if may_be_constant and not record and hints(pl).same_everywhere(ctx):
                continue  # adds the same to every node's total: cannot change the choice
            if asks:
                st = pl.pre_score(ctx, feasible)
                if st is not None and st.code == SKIP:
                    attempt.skipped_score_plugins.append(pl.name)
                    continue
            raw = cache.raw_scores(ctx, pl, key, feasible)
            norm = pl.normalize_score(ctx, raw)
            if record:
                attempt.scores[pl.name] = PluginScores(raw, np.asarray(norm, dtype=np.int64), w)
            part = norm * w if w != 1 else norm
            total = part if total is None else total + part
        if static and self.record:  # in profile order, as the plugins were met
            skipped = set(attempt.skipped_score_plugins) | static
            attempt.skipped_score_plugins = [pl.name for pl in profile.at("score") if pl.name in skipped]
        if total is None:
            return np.zeros(len(feasible), dtype=np.int64)
        return total

    def _select_host(self, total: np.ndarray, feasible: np.ndarray, pod: Pod) -> int:
        """``selectHost``: the position in ``feasible`` of the highest total; ties at random
        (seeded), or by the lowest node name in deterministic mode."""
        best = (total == total.max()).nonzero()[0]
        replay = tie_break.get()
        if replay is not None:
            nodes = self.snapshot.nodes
            names = [nodes[int(feasible[b])].name for b in best]
            chosen = replay(pod, names)
            if chosen in names:
                return int(best[names.index(chosen)])
        if len(best) == 1:
            return int(best[0])
        if self.deterministic:
            nodes = self.snapshot.nodes
            return min((int(b) for b in best), key=lambda b: nodes[int(feasible[b])].name)
        return int(best[self.rng.randrange(len(best))])

    def _fail(self, ctx: CycleContext, attempt: Attempt, n: int, post_filter: bool = True) -> Attempt:
        """A FitError: PostFilter (preemption) gets its turn, then the message."""
        diagnosis = attempt.diagnosis
        assert diagnosis is not None
        post = ctx.profile.at("postFilter") if post_filter else []
        # DefaultPreemption decides eligibility itself (preemptionPolicy, nominations).
        if post:
            for pl in post:
                result = pl.post_filter(ctx, diagnosis)
                attempt.post_filter = result
                if result.status.reasons:
                    diagnosis.post_filter_msg = result.status.message()
                if result.nominated_node is not None:
                    break
        attempt.message = fit_error_message(n, diagnosis)
        return attempt

    # ------------------------------------------------------- pod groups
    def pre_enqueue(self, pod: Pod) -> Status | None:
        """PreEnqueue plugins: the first rejection keeps the pod out of the queue."""
        profile = self.config.profile_for(pod.scheduler_name)
        for pl in profile.at("preEnqueue") if profile is not None else ():
            st = pl.pre_enqueue(pod)
            if st is not None and st.rejected:
                return Status(st.code, st.reasons, pl.name)
        return None

    def _placement_feasible(self, profile: Profile | None, group: Any, remaining: int, scheduled: int) -> Status:
        """RunPlacementFeasiblePlugins: GangScheduling is the only one (when in the profile)."""
        pl = profile.plugins.get("GangScheduling") if profile is not None else None
        st = pl.placement_feasible(group, remaining, scheduled) if pl is not None else None
        return st or Status(SUCCESS)

    def _group_cycle(self, group: Any, pods: list[Pod], scheduled: int,
                     cycle: int | None = None) -> tuple[Status, list[Attempt], list[Pod]]:
        """``podGroupSchedulingDefaultAlgorithm``: the verdict, the attempts, and the members
        left reserved in the snapshot (the caller undoes them)."""
        profile = self.config.profile_for(pods[0].scheduler_name)
        remaining = len(pods)
        status = self._placement_feasible(profile, group, remaining, scheduled)
        attempts: list[Attempt] = []
        reserved: list[Pod] = []
        if status.code == UNSCHEDULABLE:
            return status, attempts, reserved
        for pod in pods:
            attempt = self.schedule_one(pod, post_filter=False, cycle=cycle)
            attempts.append(attempt)
            remaining -= 1
            if attempt.node is not None:
                self.snapshot.add_pod(pod, self.snapshot.index[attempt.node])
                self.forget_nomination(pod)  # assume() drops an assumed pod's nomination
                reserved.append(pod)
                scheduled += 1
            status = self._placement_feasible(profile, group, remaining, scheduled)
            if status.code == UNSCHEDULABLE:
                break
        if status.code == WAIT:
            status = Status(UNSCHEDULABLE, status.reasons, status.plugin)
        return status, attempts, reserved

    def schedule_pod_group(self, group: Any, pods: list[Pod], scheduled: int,
                           cycle: int | None = None) -> PodGroupAttempt:
        """One pod group scheduling cycle for the queued members ``pods`` (in queue order) of
        ``group``, of which ``scheduled`` members are already bound or assumed.

        When the group fails, PodGroupPostFilter (the group's preemption) runs and its word
        is added to the group's message: members that fit are told "pod group is
        unschedulable, <group message>", members that fit nowhere their own FitError, and
        members the cycle never reached the PlacementFeasible verdict alone."""
        status, attempts, reserved = self._group_cycle(group, pods, scheduled, cycle)
        for pod in reversed(reserved):
            self.snapshot.remove_pod(pod)
        result = PodGroupAttempt(group, status, attempts)
        verdict = status.message()
        if status.code == SUCCESS:
            for a in attempts:
                if a.node is None:
                    result.messages[a.pod.key] = a.message
            return result
        profile = self.config.profile_for(pods[0].scheduler_name)
        # RunPodGroupPostFilterPlugins: the first success or UnschedulableAndUnresolvable
        # answer ends the run and is the whole answer; Unschedulable reasons add up
        post_reasons: list[str] = []
        for pl in profile.at("podGroupPostFilter") if profile is not None else ():
            post = pl.pod_group_post_filter(group, lambda: self._rerun(group, pods, scheduled, cycle), pods)
            result.post_filter = post
            if post.status.code in (SUCCESS, UNRESOLVABLE):
                post_reasons = list(post.status.reasons)
                break
            post_reasons += post.status.reasons
        group_message = ", ".join(list(status.reasons) + post_reasons)
        for a in attempts:
            result.messages[a.pod.key] = (f"{POD_GROUP_UNSCHEDULABLE}, {group_message}" if a.node is not None
                                          else a.message)
        for pod in pods[len(attempts):]:
            result.messages[pod.key] = verdict
        result.condition = ("False", "Unschedulable", group_message)
        return result

    def _rerun(self, group: Any, pods: list[Pod], scheduled: int,
               cycle: int | None = None) -> tuple[Status, list[Attempt]]:
        """The group's algorithm again on the snapshot as it is now (preemption's dry run)."""
        status, attempts, reserved = self._group_cycle(group, pods, scheduled, cycle)
        for pod in reversed(reserved):
            self.snapshot.remove_pod(pod)
        return status, attempts

    def run_permit(self, pod: Pod, node: str) -> tuple[Status | None, dict[str, float]]:
        """RunPermitPlugins: None to bind now; a WAIT status with each waiting plugin's
        timeout; or the first rejection."""
        profile = self.config.profile_for(pod.scheduler_name)
        if profile is None:
            return None, {}
        ctx = CycleContext(pod=pod, snapshot=self.snapshot, profile=profile)
        waits: dict[str, float] = {}
        for pl in profile.at("permit"):
            st, timeout = pl.permit(ctx, node)
            if st is None or st.code == SUCCESS:
                continue
            if st.code == WAIT:
                waits[pl.name] = timeout
                continue
            return Status(st.code, st.reasons, pl.name), {}
        if waits:
            return Status(WAIT, (), ",".join(waits)), waits
        return None, {}

    # ------------------------------------------------------- bookkeeping
    def nominate(self, pod: Pod, node_index: int) -> None:
        self.nominated[pod.key] = (pod, node_index)

    def forget_nomination(self, pod: Pod) -> None:
        self.nominated.pop(pod.key, None)


def is_unresolvable(status: Status) -> bool:
    return status.code == UNRESOLVABLE
