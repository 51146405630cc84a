"""DefaultPreemption: when a pod fits nowhere, find lower-priority pods to evict.

Mirrors ``plugins/defaultpreemption`` and ``framework/preemption`` of
kube-scheduler v1.37 for single pods (a PodGroup's preemption, PodGroupPostFilter, is in
``podgrouppreemption``):

1. Eligibility (``PodEligibleToPreemptOthers``): a pod with
   ``preemptionPolicy: Never`` may not preempt ("not eligible due to
   preemptionPolicy=Never."). A pod already nominated to a node may not preempt
   again while a lower-priority pod there is still terminating because of an
   earlier preemption -- unless its nominated node is now
   UnschedulableAndUnresolvable. The simulator deletes victims at once, so this
   only applies to pods whose manifest carries ``deletionTimestamp`` and a
   ``DisruptionTarget``/``PreemptionByScheduler`` condition.
2. Candidate nodes (``findCandidates``): only nodes whose filter status is
   ``Unschedulable``; ``UnschedulableAndUnresolvable`` means removing pods
   cannot help. Nodes absent from the diagnosis (PreFilter rejected the pod)
   take the PreFilter status's code, so an Unschedulable PreFilter rejection
   makes every node a candidate and an Unresolvable one makes none.
3. Dry run (``SelectVictimsOnNode``) on each candidate, from an offset, until
   ``max(numNodes * minCandidateNodesPercentage / 100,
   minCandidateNodesAbsolute)`` (at most numNodes) nodes with victims are
   found: remove every pod of lower priority than the preemptor (pods of any
   profile, and pods bound by ``nodeName``, are victims alike), re-run
   PreFilter and Filter; if the pod still does not fit, the node's status is
   that failure. Otherwise put the victims back one by one, most important
   first (higher priority, then earlier start), keeping each one the pod can
   live with. PDB-violating victims are reprieved first, then the others
   (``FilterVictimsWithPDBViolation``: a victim violates once a
   PodDisruptionBudget matching it has no disruption left; the budgets are
   the disruption controller's ``disruptionsAllowed``, read once per attempt
   from ``handle.disruption_budgets()``, model/disruptionbudget.py). The
   snapshot is always restored exactly afterwards.
4. Pick one node (``pickOneNodeForPreemption``): fewest PDB violations,
   lowest highest-victim priority, smallest sum of (priority + 2^31), fewest
   victims, latest start of the highest-priority victims, then the first.

Where kube-scheduler is random the simulator is deterministic unless the
plugin's handle offers one: the dry run starts at offset 0 (Kubernetes picks
``rand.Int31n(numNodes)``) unless ``handle.rng`` exists and
``handle.deterministic`` is false; candidates are compared in dry-run order
(Kubernetes iterates a map, so its final tie-break is effectively random); the
dry run is sequential where Kubernetes runs 16 goroutines, so it stops at
exactly the candidate count. A victim's start time is when the simulator's kubelet
started it, in whole seconds as the API keeps it; candidates still equal are broken by
creation order (``Pod.created``; larger = later) where Kubernetes' is random.

Messages are kube-scheduler's: success gives "preemption: found a potential
placement for pod on node <node>, preempting <n> victims" (appended to the
FitError of the PodScheduled condition), failure "preemption: 0/N nodes are
available: <histogram>." where nodes that were not tried read "Preemption is
not helpful for scheduling".

Performance: a node without lower-priority pods is rejected without running a
filter (as in Kubernetes), and when NodeResourcesFit filters this profile a
node where even evicting every lower-priority pod frees too little is skipped
without the dry run; its exact filter status is only worked out if no
candidate is found at all and the message needs it. The same arithmetic
spares the Filter run for reprieves that cannot fit.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any

import numpy as np

from ...errors import GpuLabError
from ...model.disruptionbudget import violating
from ...model.objects import Pod
from ..framework import (
    ERROR,
    SUCCESS,
    UNRESOLVABLE,
    UNSCHEDULABLE,
    CycleContext,
    Diagnosis,
    Plugin,
    PostFilterResult,
    Status,
    fit_error_message,
)
from ..util import more_important_key
from .podgrouppreemption import preempt_for_group

NOT_ELIGIBLE_NEVER = "not eligible due to preemptionPolicy=Never."
NOT_ELIGIBLE_TERMINATING = "not eligible due to a terminating pod on the nominated node."
NO_VICTIMS = "No preemption victims found for incoming pod"
NOT_HELPFUL = "Preemption is not helpful for scheduling"
FOUND = "found a potential placement for pod on node {}, preempting {} victims"

#: Replays another scheduler's choice among preemption candidates it cannot tell apart:
#: called at every successful pick with the preemptor and the names of the equally good
#: candidate nodes, it returns the node to take (None, or a node not among them: the
#: simulator's own pick). The differential harness (fidelity.py) follows the real
#: kube-scheduler with it, as ``scheduler.tie_break`` does for equal scores.
preemption_tie_break: ContextVar[Callable[[Pod, list[str]], str | None] | None] = ContextVar(
    "preemption_tie_break", default=None)
MAX_INT32 = 2**31 - 1

DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE = 10
DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE = 100




def terminating_by_preemption(pod: Pod) -> bool:
    """``PodTerminatingByPreemption``: being deleted, with a DisruptionTarget condition from preemption."""
    if getattr(pod, "terminating_by_preemption", False):
        return True
    raw = pod.raw or {}
    if not (raw.get("metadata") or {}).get("deletionTimestamp"):
        return False
    for cond in (raw.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "DisruptionTarget":
            return cond.get("status") == "True" and cond.get("reason") == "PreemptionByScheduler"
    return False


def lower_priority_nominated(nominated: dict[str, tuple[Pod, int]], priority: int, node: int) -> list[Pod]:
    """``getLowerPriorityNominatedPods``: whose nomination to clear after preempting on ``node``."""
    return [p for p, i in nominated.values() if i == node and p.priority < priority]


def _aggregate(errors: list[str]) -> str:
    """``utilerrors.NewAggregate(errs).Error()``."""
    if len(errors) == 1:
        return errors[0]
    return "[" + ", ".join(errors) + "]"


def _validate(pct: Any, absolute: Any) -> None:
    errs = []
    if not isinstance(pct, int) or not 0 <= pct <= 100:
        errs.append(f"minCandidateNodesPercentage: Invalid value: {pct}: not in valid range [0, 100]")
    if not isinstance(absolute, int) or absolute < 0:
        errs.append(f"minCandidateNodesAbsolute: Invalid value: {absolute}: not in valid range [0, inf)")
    if pct == 0 and absolute == 0:
        errs.append("minCandidateNodesPercentage: Invalid value: 0: cannot be zero at the same time as minCandidateNodesAbsolute")
        errs.append("minCandidateNodesAbsolute: Invalid value: 0: cannot be zero at the same time as minCandidateNodesPercentage")
    if errs:
        raise GpuLabError("DefaultPreemptionArgs: " + _aggregate(errs))


class _ResourceBound:
    """NodeResourcesFit's arithmetic, used only to skip work whose answer is already known.

    ``fits(i, freed)`` is False only when NodeResourcesFit would reject node i
    with the pods in ``freed`` removed, so the full filter run would fail too.
    """

    def __init__(self, ctx: CycleContext):
        self.active = False
        fit = ctx.profile.plugins.get("NodeResourcesFit")
        if fit is None or "NodeResourcesFit" not in ctx.profile.phases.get("filter", []):
            return
        checked = getattr(fit, "_checked", None)
        if checked is None:
            return
        snap = ctx.snapshot
        entries = list(checked(ctx))  # may add resource columns: read arrays after
        self.names = ["pods"] + [name for name, _, _ in entries]
        self.cols = np.array([snap.rindex["pods"]] + [col for _, col, _ in entries], dtype=np.int64)
        self.need = np.array([1] + [v for _, _, v in entries], dtype=np.int64)
        self.snap = snap
        self.extra: dict[int, np.ndarray] = {}
        for i, pods in ctx.nominated.items():
            self.extra[i] = sum((self.vector(p) for p in pods), np.zeros(len(self.cols), dtype=np.int64))
        self.active = True

    def vector(self, pod: Pod) -> np.ndarray:
        req = pod.requests
        return np.array([1] + [req.get(n, 0) for n in self.names[1:]], dtype=np.int64)

    def fits(self, i: int, freed: Sequence[Pod] = ()) -> bool:
        if not self.active:
            return True
        snap = self.snap
        used = snap.requested[i, self.cols].copy()
        if i in self.extra:
            used += self.extra[i]
        for p in freed:
            used -= self.vector(p)
        return bool(np.all(self.need <= snap.allocatable[i, self.cols] - used))


class DefaultPreemption(Plugin):
    name = "DefaultPreemption"

    def __init__(self, args=None, handle=None):
        super().__init__(args, handle)
        pct = self.args.get("minCandidateNodesPercentage")
        absolute = self.args.get("minCandidateNodesAbsolute")
        self.min_pct = DEFAULT_MIN_CANDIDATE_NODES_PERCENTAGE if pct is None else pct
        self.min_abs = DEFAULT_MIN_CANDIDATE_NODES_ABSOLUTE if absolute is None else absolute
        _validate(self.min_pct, self.min_abs)

    # ------------------------------------------------------------ helpers
    def num_candidates(self, num_nodes: int) -> int:
        """``calculateNumCandidates``."""
        n = num_nodes * self.min_pct // 100
        n = max(n, self.min_abs)
        return min(n, num_nodes)

    def offset(self, num_nodes: int) -> int:
        rng = getattr(self.handle, "rng", None)
        if rng is None or getattr(self.handle, "deterministic", False) or num_nodes == 0:
            return 0
        return rng.randrange(num_nodes)

    def _nominated_node(self, ctx: CycleContext) -> int | None:
        pod = ctx.pod
        nominated = getattr(self.handle, "nominated", None)
        if isinstance(nominated, dict) and pod.key in nominated:
            return nominated[pod.key][1]
        name = ((pod.raw or {}).get("status") or {}).get("nominatedNodeName")
        return ctx.snapshot.index.get(name) if name else None

    def eligible(self, ctx: CycleContext, diagnosis: Diagnosis) -> tuple[bool, str]:
        """``PodEligibleToPreemptOthers``."""
        pod = ctx.pod
        if pod.preemption_policy == "Never":
            return False, NOT_ELIGIBLE_NEVER
        nom = self._nominated_node(ctx)
        if nom is not None:
            st = diagnosis.status_of(nom) or diagnosis.absent_status
            if st is None or st.code == UNRESOLVABLE:
                return True, ""
            for p in ctx.snapshot.pods_on[nom]:
                if p.priority < pod.priority and terminating_by_preemption(p):
                    return False, NOT_ELIGIBLE_TERMINATING
        return True, ""

    @staticmethod
    def potential_nodes(ctx: CycleContext, diagnosis: Diagnosis) -> list[int]:
        """``NodesForStatusCode(Unschedulable)``: explicit statuses, or every node for an absent one."""
        absent = diagnosis.absent_status
        if absent is not None and absent.code == UNSCHEDULABLE:
            return [
                i for i in range(len(ctx.snapshot))
                if (diagnosis.status_of(i) or absent).code == UNSCHEDULABLE
            ]
        # Kubernetes walks a Go map here (random order); we use snapshot order.
        return diagnosis.nodes_with(UNSCHEDULABLE)

    # ---------------------------------------------------------- dry run
    def select_victims(self, ctx: CycleContext, i: int, victims: list[Pod], run, bound,
                       budgets: Sequence = ()) -> tuple[list[Pod], int, Status | None]:
        """``SelectVictimsOnNode`` for node ``i``: (victims high->low importance, how many of
        them violate a PodDisruptionBudget, failure status)."""
        snap = ctx.snapshot
        saved = list(snap.pods_on[i])
        removed: list[Pod] = []
        try:
            for p in victims:
                snap.remove_pod(p)
                removed.append(p)
            st = run(i)
            if st is not None:
                return [], 0, st
            chosen: list[Pod] = []
            bad, good = violating(sorted(victims, key=more_important_key), list(budgets))
            violations = 0

            def reprieve(p: Pod) -> bool:
                nonlocal removed
                snap.add_pod(p, i)
                removed = [q for q in removed if q is not p]
                if bound.fits(i) and run(i) is None:
                    return True
                snap.remove_pod(p)
                removed.append(p)
                chosen.append(p)
                return False

            for p, count in bad:  # the PDB-violating victims first
                if not reprieve(p):
                    violations += count
            for p in good:
                reprieve(p)
            if bad and good:
                chosen.sort(key=more_important_key)
            return chosen, violations, None
        finally:
            for p in removed:
                snap.add_pod(p, i)
            snap.pods_on[i] = saved

    @staticmethod
    def best_candidates(candidates: list[tuple[int, list[Pod]]], started: dict[str, float] | None = None,
                        violations: Sequence[int] = ()) -> list[int]:
        """The candidates ``pickOneNodeForPreemption``'s score functions cannot tell apart
        (indexes, in candidate order). A victim's start time counts in whole seconds, as the
        API server keeps ``status.startTime`` (``started``: pod key -> start; absent, 0)."""
        started = started or {}

        def highest_start(victims: list[Pod]) -> int:  # GetEarliestPodStartTime
            top = max(p.priority for p in victims)
            return min(int(started.get(p.key, 0.0)) for p in victims if p.priority == top)

        funcs = [
            lambda v: -v[0].priority,
            lambda v: -sum(p.priority + MAX_INT32 + 1 for p in v),
            lambda v: -len(v),
            highest_start,
        ]
        # the first score function: fewest PDB violations (violations[k]: candidate k's)
        alive = [c for c in range(len(candidates)) if not violations or violations[c] == min(violations)]
        for f in funcs:
            scores = [f(candidates[c][1]) for c in alive]
            best = max(scores)
            alive = [c for c, s in zip(alive, scores, strict=True) if s == best]
            if len(alive) == 1:
                break
        return alive

    @staticmethod
    def pick_one(candidates: list[tuple[int, list[Pod]]], started: dict[str, float] | None = None,
                 violations: Sequence[int] = ()) -> int:
        """``pickOneNodeForPreemption`` with the default score functions; returns a candidate
        index. Among candidates still equal, kube-scheduler takes the first of a Go map's
        iteration (random); the simulator takes the one whose most important victims were
        created last (the earlier one on a tie), so it is repeatable."""
        tied = DefaultPreemption.best_candidates(candidates, started, violations)

        def created(c: int) -> int:
            victims = candidates[c][1]
            top = max(p.priority for p in victims)
            return min(p.created for p in victims if p.priority == top)

        return max(tied, key=lambda c: (created(c), -c))

    # ----------------------------------------------------------- the phase
    def post_filter(self, ctx: CycleContext, diagnosis: Diagnosis) -> PostFilterResult:
        ok, msg = self.eligible(ctx, diagnosis)
        if not ok:
            # A nil PostFilterResult: the pod's nomination stays as it is.
            return self._result(None, [], Status(UNSCHEDULABLE, ("preemption: " + msg,), self.name), "Noop")

        snap, pod = ctx.snapshot, ctx.pod
        run = ctx.run_filters
        potential = self.potential_nodes(ctx, diagnosis)
        statuses: dict[int, Status] = {}
        candidates: list[tuple[int, list[Pod]]] = []
        violations: list[int] = []
        errors: list[str] = []
        read = getattr(self.handle, "disruption_budgets", None)
        budgets = read() if callable(read) else []  # the PDB lister, once per attempt

        def evaluate(i: int, victims: list[Pod]) -> None:
            chosen, violated, st = self.select_victims(ctx, i, victims, run, bound, budgets)
            if st is None and not chosen:
                st = Status(ERROR, (f'expected at least one victim pod on node "{snap.nodes[i].name}"',))
            if st is None:
                candidates.append((i, chosen))
                violations.append(violated)
                return
            if st.code == ERROR:
                errors.append(st.message())
            statuses[i] = st

        everywhere: list[tuple[Status, np.ndarray]] = []  # nodes that share one status
        if potential:
            offset = self.offset(len(potential))
            want = self.num_candidates(len(potential))
            bound = _ResourceBound(ctx)
            hopeless: list[tuple[int, list[Pod]]] = []
            # Nodes holding no lower-priority pod cannot be helped; decide them in one go.
            has_victims = snap.min_priority[np.asarray(potential, dtype=np.int64)] < pod.priority
            no_victims = Status(UNRESOLVABLE, (NO_VICTIMS,), self.name)
            if not has_victims.any():
                everywhere = [(no_victims, np.asarray(potential))]
                potential = []
            for i, has in zip(potential, has_victims.tolist()):
                if not has:
                    statuses[i] = no_victims
            for k in range(len(potential)):
                i = potential[(offset + k) % len(potential)]
                if not has_victims[(offset + k) % len(potential)]:
                    continue
                victims = [p for p in snap.pods_on[i] if p.priority < pod.priority]
                if not bound.fits(i, victims):
                    # NodeResourcesFit rejects it even without the victims: not a
                    # candidate. Its exact status only matters if nothing is found.
                    hopeless.append((i, victims))
                else:
                    evaluate(i, victims)
                    if len(candidates) >= want:
                        break
            if not candidates:
                for i, victims in hopeless:
                    evaluate(i, victims)

        if not candidates:
            if errors:
                return self._result(None, [], Status(ERROR, ("preemption: " + _aggregate(errors),), self.name), "Noop")
            inner = Diagnosis(node_status=statuses, absent_status=Status(UNRESOLVABLE, (NOT_HELPFUL,)),
                              groups=everywhere)
            text = fit_error_message(len(snap), inner)
            # Kubernetes returns a PostFilterResult nominating "": it clears the pod's nomination.
            return self._result(None, [], Status(UNSCHEDULABLE, ("preemption: " + text,), self.name), "Override")

        started = getattr(self.handle, "started", None)
        pick = self.pick_one(candidates, started, violations) if len(candidates) > 1 else 0
        replay = preemption_tie_break.get()
        if replay is not None:  # told at every pick, so it can follow along pick by pick
            tied = self.best_candidates(candidates, started, violations)
            names = [snap.nodes[candidates[t][0]].name for t in tied]
            chosen = replay(pod, names)
            if chosen in names:
                pick = tied[names.index(chosen)]
        node, victims = candidates[pick]
        text = FOUND.format(snap.nodes[node].name, len(victims))
        return self._result(node, victims, Status(SUCCESS, ("preemption: " + text,), self.name), "Override")

    def pod_group_post_filter(self, group: Any, run_group: Any, members: list) -> PostFilterResult:
        """PodGroupPostFilter: preemption for a whole pod group (see podgrouppreemption)."""
        return preempt_for_group(self, group, run_group, members)

    @staticmethod
    def _result(node: int | None, victims: list[Pod], status: Status, mode: str) -> PostFilterResult:
        res = PostFilterResult(nominated_node=node, victims=victims, status=status)
        # kube-scheduler's NominatingMode: "Override" sets (or, with no node,
        # clears) the pod's nominatedNodeName; "Noop" leaves it alone.
        res.nominating_mode = mode
        return res
