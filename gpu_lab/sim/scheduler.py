"""One scheduling cycle, as kube-scheduler's ``schedulePod`` runs it.

PreFilter -> (nominated node first) -> Filter over nodes starting where the
last cycle stopped, until ``numFeasibleNodesToFind`` feasible nodes are found
-> PostFilter (preemption) when none fit -> PreScore/Score/NormalizeScore,
weighted sum -> highest total wins, ties broken at random (seeded) or, in
deterministic mode, by the lowest node name.

What kube-scheduler recomputes every cycle the simulator may keep, never changing
a decision (tests/sim/test_caches.py): the combined mask of the filters that read only
node objects (``static_filter_key``), which plugins skip a pod class whatever the cluster
holds, and the raw scores of node-local score plugins per pod class, rescored only on
nodes whose pods changed (``score_key``).

Two v1.37 details are modelled approximately, and the README says so: without
extenders the real scheduler breaks ties by heap order over the nodes in the order
its parallel filter found them (its Randomizer stays 0), which we treat as random;
and OpportunisticBatching (node hints for consecutive pods with the same signature)
is not modelled: it is inactive under the default profile (system-default topology
spreading makes pods unsignable) but active under ``defaultingType: List`` profiles.

Pods of a PodGroup are scheduled together (``schedule_pod_group``, kube-scheduler's
``podGroupSchedulingDefaultAlgorithm``): each queued member in turn gets an ordinary cycle
without PostFilter, its node is reserved in the snapshot for the members after it, and
PlacementFeasible decides after each one whether the group can still succeed; the
reservations are undone at the end, whatever the verdict, and the caller binds (through
Permit) the members that fit when the group succeeded.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..model.objects import Pod
from .framework import (
    ERROR,
    SKIP,
    SUCCESS,
    UNRESOLVABLE,
    UNSCHEDULABLE,
    WAIT,
    CycleContext,
    Diagnosis,
    Plugin,
    PostFilterResult,
    Status,
)
from .podgroups import PodGroupManager
from .profile import Profile, SchedulerConfig
from .snapshot import Snapshot

# Below this many changed nodes, node-local scores are refreshed one node at a time
# (plain Python); above it, numpy over the changed nodes is cheaper.
SCORE_ONE_BY_ONE = 12
MIN_FEASIBLE_NODES_TO_FIND = 100
MIN_FEASIBLE_NODES_PERCENTAGE_TO_FIND = 5
NO_NODE_AVAILABLE_MSG = "0/{} nodes are available"


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
    failed_by: dict[int, Status] = field(default_factory=dict)
    scores: dict[str, PluginScores] = field(default_factory=dict)
    skipped_score_plugins: list[str] = field(default_factory=list)
    total: np.ndarray | None = None
    post_filter: PostFilterResult | None = None
    via_nominated_node: bool = False
    node_names: list[str] = field(default_factory=list)
    # Only when recording: every filter plugin's verdict on every rejected node.
    filter_verdicts: dict[str, dict[int, str]] | None = None
    skipped_filter_plugins: list[str] = field(default_factory=list)


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
        # Combined masks of the filters that depend only on node objects, per
        # (profile, the pod's keys for those filters); valid for one node version.
        self._static_masks: dict[tuple, np.ndarray] = {}
        self._static_version: tuple[int, int] = (-1, -1)
        self._to_find: dict[tuple[int, int], int] = {}
        # Node-local raw scores per (plugin, score key), valid for one node version.
        self._score_cache: dict[tuple, list] = {}
        self._score_cache_state: tuple[int, int, int] = (-1, -1, -1)
        self.cache_scores = True  # off: every plugin scores the feasible nodes every cycle
        self.pod_groups = PodGroupManager()  # the embedded backend keeps it current

    @classmethod
    def from_config(cls, raw: dict | None, snapshot: Snapshot, seed: int | None = None,
                    deterministic: bool = False, record: bool = True) -> Scheduler:
        """Build the profiles with this scheduler as the plugins' handle (rng, nominations)."""
        from .profile import load_scheduler_config

        sched = cls(None, snapshot, seed, deterministic, record)  # type: ignore[arg-type]
        sched.config = load_scheduler_config(raw, handle=sched)
        return sched

    # ----------------------------------------------------------- filtering
    def _context(self, pod: Pod, profile: Profile) -> CycleContext:
        ctx = CycleContext(pod=pod, snapshot=self.snapshot, profile=profile)
        if self.nominated:
            for key, (other, i) in self.nominated.items():
                if key != pod.key and other.priority >= pod.priority:
                    ctx.nominated.setdefault(i, []).append(other)
        return ctx

    def _filter_masks(self, ctx: CycleContext, profile: Profile, skipped: set[str]):
        """Every filter plugin's own mask, in order: for reasons and explanations."""
        plugins = [p for p in profile.at("filter") if p.name not in skipped]
        masks = [p.filter(ctx) for p in plugins]
        return plugins, masks

    @staticmethod
    def _plan(pod: Pod, profile: Profile, phase: str) -> tuple[frozenset[str], list]:
        """The plugins of a phase that skip this pod whatever the cluster holds, and
        (plugin, weight, asks, score key, may be constant) for the others: asks is False
        for a plugin without a PreScore that could say more than its static skip, and
        may be constant is True for one that can tell its score is the same everywhere."""
        key = ("plan", phase, profile.token)
        plan = pod.memo.get(key)
        if plan is None:
            skips = "skips_pre_filter" if phase == "preFilter" else "skips_pre_score"
            static = frozenset(pl.name for pl in profile.at(phase) if getattr(pl, skips)(pod))
            score = phase == "score"
            plan = static, [(pl, w, not score or (pl.implements("pre_score") and not pl.pre_score_decided_by_pod),
                             pl.score_key(pod) if score else None, pl.implements("same_everywhere"))
                            for pl, w in profile.weighted(phase) if pl.name not in static]
            pod.memo[key] = plan
        return plan

    def _pre_filter(self, ctx: CycleContext, profile: Profile) -> tuple[Status | None, set[str], tuple]:
        """PreFilter: the first rejection, every plugin that skips, and those that skipped this cycle only."""
        static, ask = self._plan(ctx.pod, profile, "preFilter")
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

    def _filter_plan(self, pod: Pod, profile: Profile, skipped: set[str],
                     skipped_now: tuple[str, ...]) -> tuple[tuple, list, list]:
        """Split the pod's filter plugins into node-object-only ones (with their keys) and the rest."""
        key = ("filter_plan", profile.token, skipped_now)  # the rest of `skipped` is fixed per pod
        plan = pod.memo.get(key)
        if plan is None:
            keys, static, dynamic = [], [], []
            for pl in profile.at("filter"):
                if pl.name in skipped:
                    continue
                k = pl.static_filter_key(pod)
                if k is None:
                    dynamic.append(pl)
                else:
                    keys.append((pl.name, k))
                    static.append(pl)
            plan = (profile.token, tuple(keys)), static, dynamic
            pod.memo[key] = plan
        return plan

    def _passes(self, ctx: CycleContext, profile: Profile, skipped: set[str],
                skipped_now: tuple[str, ...]) -> np.ndarray:
        """Nodes that pass every Filter: cached node-object filters AND this cycle's others."""
        snap = self.snapshot
        cache_key, static, dynamic = self._filter_plan(ctx.pod, profile, skipped, skipped_now)
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
        for pl in dynamic:
            passes = passes & pl.filter(ctx)
        return passes

    # ------------------------------------------------------------- a cycle
    def schedule_one(self, pod: Pod, post_filter: bool = True) -> Attempt:
        """One pod's cycle; ``post_filter=False`` inside a pod group's cycle, which runs
        no per-pod preemption."""
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
        diagnosis = Diagnosis()
        attempt.diagnosis = diagnosis

        rejected, skipped, skipped_now = self._pre_filter(ctx, profile)
        if rejected is not None and rejected.code == ERROR:
            # A plugin error ends the attempt with its own text (reason SchedulerError), no FitError.
            attempt.message = rejected.message()
            attempt.evaluated = attempt.feasible = np.arange(0)
            return attempt
        if rejected is not None:
            diagnosis.pre_filter_msg = rejected.message()
            diagnosis.absent_status = rejected
            diagnosis.unschedulable_plugins.add(rejected.plugin)
            attempt.evaluated = np.arange(0)
            attempt.feasible = np.arange(0)
            return self._fail(ctx, attempt, n, post_filter)

        passes = self._passes(ctx, profile, skipped, skipped_now)

        # A pod nominated by an earlier preemption tries its node first, unscored.
        nom = self.nominated.get(pod.key) if self.nominated else None
        if nom is not None and passes[nom[1]]:
            if self.record:
                self._record_filters(ctx, profile, skipped, attempt)
            attempt.via_nominated_node = True
            attempt.evaluated = np.array([nom[1]])
            attempt.feasible = np.array([nom[1]])
            attempt.node = snap.nodes[nom[1]].name
            return attempt

        to_find = self._to_find.get((profile.token, n))
        if to_find is None:
            pct = profile.percentage_of_nodes_to_score
            if pct is None:
                pct = self.config.percentage_of_nodes_to_score
            to_find = num_feasible_nodes_to_find(pct, n) if profile.phases["score"] else 1
            self._to_find[(profile.token, n)] = to_find
        start = self.next_start_node_index
        feasible, processed = feasible_window(passes, start, to_find)
        self.next_start_node_index = (start + processed) % n
        attempt.feasible = feasible

        # Rejection reasons matter only for a failure message or an explanation.
        if self.record or not len(feasible):
            evaluated = (start + np.arange(processed)) % n
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
                    attempt.failed_by = {i: st for st, idx in diagnosis.groups for i in idx.tolist()}

        if len(feasible) == 0:
            return self._fail(ctx, attempt, n, post_filter)
        if len(feasible) == 1:
            attempt.node = snap.nodes[int(feasible[0])].name
            return attempt
        total = self._score(ctx, profile, feasible, attempt)
        attempt.total = total
        best = (total == total.max()).nonzero()[0]
        if len(best) == 1:
            choice = int(best[0])
        elif self.deterministic:
            choice = min((int(b) for b in best), key=lambda b: snap.nodes[int(feasible[b])].name)
        else:
            choice = int(best[self.rng.randrange(len(best))])
        attempt.node = snap.nodes[int(feasible[choice])].name
        return attempt

    def _record_filters(self, ctx: CycleContext, profile: Profile, skipped: set[str], attempt: Attempt,
                        plugins=None, masks=None) -> None:
        """For explanations: every filter plugin's verdict on every node it rejects."""
        if plugins is None:
            plugins, masks = self._filter_masks(ctx, profile, skipped)
        attempt.skipped_filter_plugins = sorted(skipped)
        attempt.filter_verdicts = {}
        for pl, m in zip(plugins, masks):
            rejected = (~m).nonzero()[0]
            statuses = pl.filter_statuses(ctx, rejected)
            # Nodes with the same verdict share one Status: word each once.
            words = {id(st): st.message() for st in dict(zip(map(id, statuses), statuses)).values()}
            attempt.filter_verdicts[pl.name] = dict(zip(rejected.tolist(), (words[id(st)] for st in statuses)))

    def _score(self, ctx: CycleContext, profile: Profile, feasible: np.ndarray, attempt: Attempt) -> np.ndarray:
        total = None
        static, ask = self._plan(ctx.pod, profile, "score")
        snap = self.snapshot
        if self._score_cache_state != (snap.change_epoch, snap.node_version, len(snap)):
            self._score_cache.clear()  # nodes changed, or the change log restarted
            self._score_cache_state = (snap.change_epoch, snap.node_version, len(snap))
        for pl, w, asks, key, may_be_constant in ask:
            if may_be_constant and not self.record and pl.same_everywhere(ctx):
                continue  # adds the same to every node's total: cannot change the choice
            if asks:
                st = pl.pre_score(ctx, feasible)
                if st is not None and st.code == SKIP:
                    attempt.skipped_score_plugins.append(pl.name)
                    continue
            if key is None or not self.cache_scores:
                raw = pl.score(ctx, feasible)
            else:
                raw = self._kept_scores(ctx, pl, key, feasible)
            norm = pl.normalize_score(ctx, raw)
            if self.record:
                attempt.scores[pl.name] = PluginScores(raw, np.asarray(norm, dtype=np.int64), w)
            part = norm * w if w != 1 else norm
            total = part if total is None else total + part
        if static and self.record:  # in profile order, as the plugins were met
            skipped = set(attempt.skipped_score_plugins) | static
            attempt.skipped_score_plugins = [pl.name for pl in profile.at("score") if pl.name in skipped]
        if total is None:
            return np.zeros(len(feasible), dtype=np.int64)
        return total

    def _kept_scores(self, ctx: CycleContext, pl: Plugin, key: Any, feasible: np.ndarray) -> np.ndarray:
        """A node-local plugin's raw scores over ``feasible``, kept per score key over all
        nodes: only nodes whose pods changed since are scored again, one by one
        (``score_each``) when they are few, else together."""
        log = self.snapshot.changed
        entry = self._score_cache.get((pl.token, key))  # [raw over all nodes, log position read]
        if entry is None or len(log) - entry[1] > len(self.snapshot) // 4:
            if len(self._score_cache) >= 1024:
                self._score_cache.clear()
            entry = self._score_cache[(pl.token, key)] = [pl.score(ctx, np.arange(len(self.snapshot))), len(log)]
        elif entry[1] < len(log):
            raw, stale = entry[0], list(set(log[entry[1]:]))
            entry[1] = len(log)
            each = pl.score_each(ctx, stale) if len(stale) <= SCORE_ONE_BY_ONE else None
            if each is None:
                raw[stale] = pl.score(ctx, np.array(stale))
            else:
                for i, v in zip(stale, each):
                    raw[i] = v
        return entry[0][feasible]

    def _fail(self, ctx: CycleContext, attempt: Attempt, n: int, post_filter: bool = True) -> Attempt:
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

    def _group_cycle(self, group: Any, pods: list[Pod], scheduled: int) -> tuple[Status, list[Attempt], list[Pod]]:
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
            attempt = self.schedule_one(pod, post_filter=False)
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

    def schedule_pod_group(self, group: Any, pods: list[Pod], scheduled: int) -> PodGroupAttempt:
        """One pod group scheduling cycle for the queued members ``pods`` (in queue order) of
        ``group``, of which ``scheduled`` members are already bound or assumed.

        When the group fails, PodGroupPostFilter (the group's preemption) runs and its word
        is added to the group's message: members that fit are told "pod group is
        unschedulable, <group message>", members that fit nowhere their own FitError, and
        members the cycle never reached the PlacementFeasible verdict alone."""
        status, attempts, reserved = self._group_cycle(group, pods, scheduled)
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
        reasons = list(status.reasons)
        for pl in profile.at("podGroupPostFilter") if profile is not None else ():
            post = pl.pod_group_post_filter(group, lambda: self._rerun(group, pods, scheduled))
            result.post_filter = post
            reasons += post.status.reasons
            if post.status.code == SUCCESS:
                break
        group_message = ", ".join(reasons)
        for a in attempts:
            result.messages[a.pod.key] = (f"{POD_GROUP_UNSCHEDULABLE}, {group_message}" if a.node is not None
                                          else a.message)
        for pod in pods[len(attempts):]:
            result.messages[pod.key] = verdict
        result.condition = ("False", "Unschedulable", group_message)
        return result

    def _rerun(self, group: Any, pods: list[Pod], scheduled: int) -> tuple[Status, list[Attempt]]:
        """The group's algorithm again on the snapshot as it is now (preemption's dry run)."""
        status, attempts, reserved = self._group_cycle(group, pods, scheduled)
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
