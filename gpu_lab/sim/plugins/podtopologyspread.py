"""PodTopologySpread: keep matching pods evenly spread over topology domains.

Mirrors ``pkg/scheduler/framework/plugins/podtopologyspread`` at v1.37 with the
default feature gates (NodeInclusionPolicyInPodTopologySpread GA,
MatchLabelKeysInPodTopologySpread on).

Filter (``whenUnsatisfiable: DoNotSchedule``), per constraint in order:

* a node without the ``topologyKey`` label is rejected, UnschedulableAndUnresolvable,
  "node(s) didn't match pod topology spread constraints (missing required label)";
* otherwise ``matchNum + selfMatch - globalMin > maxSkew`` rejects it,
  Unschedulable, "node(s) didn't match pod topology spread constraints".

``matchNum`` is the number of pods in the incoming pod's namespace matching the
selector in the node's domain, counted only on *eligible* nodes: nodes that carry
every constraint's key and pass the inclusion policies (``nodeAffinityPolicy``,
default Honor: the pod's nodeSelector and required node affinity;
``nodeTaintsPolicy``, default Ignore: untolerated NoSchedule/NoExecute taints).
``globalMin`` is the smallest count over the eligible domains, or 0 when there
are fewer of them than ``minDomains`` (default 1). ``matchLabelKeys`` adds
``key in (pod's value)`` to the selector for each key the pod has. An empty
``labelSelector: {}`` counts no existing pod (``countPodsMatchSelector`` returns
0 for an empty selector) but still matches the incoming pod itself.

Score (``ScheduleAnyway``): for each constraint a node gets
``count * log(domains + 2) + (maxSkew - 1)`` (hostname: the node's own count and
``log(#scored nodes + 2)``), rounded half away from zero; NormalizeScore turns it
around: ``100 * (max + min - s) / max`` so the emptiest domain scores best, and
nodes missing a topology key score 0.

System default constraints (``defaultingType: System``, the default):
``kubernetes.io/hostname`` maxSkew 3 and ``topology.kubernetes.io/zone``
maxSkew 5, both ScheduleAnyway, applied only to pods without constraints of
their own and only with the selector ``helper.DefaultSelector`` derives from
the Services, ReplicationControllers, ReplicaSets and StatefulSets that select
the pod, read from the cluster's objects (``sim.defaultselector.Listers``, on the
snapshot); without them (a bare snapshot) a pod controlled by a ReplicaSet or
StatefulSet is spread by its own labels. Job and DaemonSet pods get no default
spreading unless a Service selects them: neither kind is in ``DefaultSelector``'s list. With
system defaulting a node without a zone label still gets hostname spreading
(``requireAllTopologies`` is false).

Not modelled: terminating pods (gpu-lab has no deletionTimestamp) and the
queueing hints.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...errors import GpuLabError
from ...model.objects import Pod
from ...model.selectors import LabelSelector, Requirement
from ..cachehints import CacheHints
from ..framework import (
    MAX_NODE_SCORE,
    UNRESOLVABLE,
    UNSCHEDULABLE,
    CycleContext,
    Plugin,
    Status,
    WithNominatedPods,
)
from ..snapshot import Snapshot
from .helper import required_node_affinity_mask, tolerated_mask, topology_codes

ERR_REASON_CONSTRAINTS_NOT_MATCH = "node(s) didn't match pod topology spread constraints"
ERR_REASON_NODE_LABEL_NOT_MATCH = ERR_REASON_CONSTRAINTS_NOT_MATCH + " (missing required label)"

LABEL_HOSTNAME = "kubernetes.io/hostname"
LABEL_TOPOLOGY_ZONE = "topology.kubernetes.io/zone"
DO_NOT_SCHEDULE = "DoNotSchedule"
SCHEDULE_ANYWAY = "ScheduleAnyway"
HONOR = "Honor"
IGNORE = "Ignore"
SYSTEM_DEFAULTING = "System"
LIST_DEFAULTING = "List"
MAX_INT32 = 2**31 - 1
_MISSING_LABEL, _SKEW = 1, 2

SYSTEM_DEFAULT_CONSTRAINTS: list[dict[str, Any]] = [
    {"topologyKey": LABEL_HOSTNAME, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 3},
    {"topologyKey": LABEL_TOPOLOGY_ZONE, "whenUnsatisfiable": SCHEDULE_ANYWAY, "maxSkew": 5},
]
# Owner kinds whose selector helper.DefaultSelector folds in (Job is not one of them).
DEFAULT_SELECTOR_OWNERS = ("ReplicationController", "ReplicaSet", "StatefulSet")


def go_round(x: np.ndarray) -> np.ndarray:
    """Go's ``math.Round``: half away from zero (Python's round() is half to even)."""
    t = np.trunc(x)
    return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)


# --------------------------------------------------------------------------
# Constraints
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class Constraint:
    """``topologySpreadConstraint``: a v1 constraint with its selector parsed."""

    max_skew: int
    topology_key: str
    selector: LabelSelector
    min_domains: int = 1
    node_affinity_policy: str = HONOR
    node_taints_policy: str = IGNORE


def merge_match_label_keys(selector: LabelSelector, keys: list[str], labels: dict[str, str]) -> LabelSelector:
    """``mergeLabelSetWithSelector``: ``key in (value)`` for each key the pod carries.

    A nil selector (matches nothing) stays nil, as ``Requirements()`` reports
    not-ok for it in Go.
    """
    match = {k: labels[k] for k in keys if k in labels}
    if not match or selector.nothing:
        return selector
    reqs = tuple(Requirement(k, "In", (v,)) for k, v in sorted(match.items()))
    return LabelSelector(reqs + selector.requirements)


def filter_constraints(raw: list[dict[str, Any]], labels: dict[str, str], action: str) -> list[Constraint]:
    """``filterTopologySpreadConstraints``: the constraints with ``whenUnsatisfiable == action``."""
    out = []
    for c in raw:
        if c.get("whenUnsatisfiable") != action:
            continue
        selector = LabelSelector.parse(c.get("labelSelector"))
        if c.get("matchLabelKeys"):
            selector = merge_match_label_keys(selector, list(c["matchLabelKeys"]), labels)
        min_domains = c.get("minDomains")
        out.append(Constraint(
            max_skew=int(c.get("maxSkew") or 0),
            topology_key=c.get("topologyKey") or "",
            selector=selector,
            min_domains=1 if min_domains is None else int(min_domains),
            node_affinity_policy=c.get("nodeAffinityPolicy") or HONOR,
            node_taints_policy=c.get("nodeTaintsPolicy") or IGNORE,
        ))
    return out


def _field_errors_message(kind: str, errs: list[str]) -> str:
    body = errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]"
    return f"{kind}: {body}"


def validate_args(args: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """``SetDefaults_PodTopologySpreadArgs`` + ``ValidatePodTopologySpreadArgs``."""
    defaulting = args.get("defaultingType") or SYSTEM_DEFAULTING
    constraints = list(args.get("defaultConstraints") or [])
    errs: list[str] = []
    if defaulting not in (SYSTEM_DEFAULTING, LIST_DEFAULTING):
        errs.append(f'defaultingType: Unsupported value: "{defaulting}": supported values: "System", "List"')
    elif defaulting == SYSTEM_DEFAULTING and constraints:
        errs.append('defaultingType: Invalid value: "System": when .defaultConstraints are not empty')
    for i, c in enumerate(constraints):
        p = f"defaultConstraints[{i}]"
        skew = int(c.get("maxSkew") or 0)
        if skew <= 0:
            errs.append(f"{p}.maxSkew: Invalid value: {skew}: not in valid range (0, inf)")
        if not c.get("topologyKey"):
            errs.append(f"{p}.topologyKey: Required value: can not be empty")
        when = c.get("whenUnsatisfiable") or ""
        if not when:
            errs.append(f"{p}.whenUnsatisfiable: Required value: can not be empty")
        elif when not in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY):
            errs.append(f'{p}.whenUnsatisfiable: Unsupported value: "{when}": supported values: '
                        f'"{DO_NOT_SCHEDULE}", "{SCHEDULE_ANYWAY}"')
        if c.get("labelSelector") is not None:
            errs.append(f"{p}.labelSelector: Forbidden: constraint must not define a selector, "
                        "as they deduced for each pod")
        for other in constraints[:i]:
            if other.get("topologyKey") == c.get("topologyKey") and other.get("whenUnsatisfiable") == when:
                errs.append(f'defaultConstraints[{i}]: Duplicate value: "{{{c.get("topologyKey")}, {when}}}"')
                break
    if errs:
        raise GpuLabError(_field_errors_message("PodTopologySpreadArgs", errs))
    return defaulting, constraints


# --------------------------------------------------------------------------
# Cycle state
# --------------------------------------------------------------------------
@dataclass
class _FilterState:
    constraints: list[Constraint]
    codes: list[np.ndarray]  # per constraint: node -> domain code (-1 = label missing)
    eligible: list[np.ndarray]  # per constraint: node counts toward its domain
    domain_counts: list[np.ndarray]  # per constraint: domain code -> matching pods
    present: list[np.ndarray]  # per constraint: domain code -> has an eligible node
    self_match: list[int]
    mask: np.ndarray | None = None
    reason: np.ndarray | None = None  # per node: 0 fits, 1 missing label, 2 skew (without nominated pods)


@dataclass
class _ScoreState:
    constraints: list[Constraint]
    ignored: np.ndarray  # over `feasible`
    values: list[np.ndarray]  # per constraint, over `feasible`: count credited to the node
    has_key: list[np.ndarray]  # per constraint, over `feasible`
    weights: list[float]


class PodTopologySpread(WithNominatedPods, CacheHints, Plugin):
    name = "PodTopologySpread"

    def __init__(self, args=None, handle=None):
        super().__init__(args, handle)
        self.defaulting_type, constraints = validate_args(self.args)
        self.system_defaulted = self.defaulting_type == SYSTEM_DEFAULTING
        self.default_constraints = SYSTEM_DEFAULT_CONSTRAINTS if self.system_defaulted else constraints
        # Parsed once: a default constraint carries no selector (it is deduced per pod).
        self._defaults = {a: filter_constraints(self.default_constraints, {}, a)
                          for a in (DO_NOT_SCHEDULE, SCHEDULE_ANYWAY)}
        self._missing_label = Status(UNRESOLVABLE, (ERR_REASON_NODE_LABEL_NOT_MATCH,), self.name)
        self._skewed = Status(UNSCHEDULABLE, (ERR_REASON_CONSTRAINTS_NOT_MATCH,), self.name)

    # ------------------------------------------------------------ helpers
    def default_selector(self, pod: Pod) -> LabelSelector | None:
        """``helper.DefaultSelector`` as far as gpu-lab has the objects (see module doc)."""
        hook = getattr(self.handle, "default_selector", None)
        if callable(hook):
            return hook(pod)
        listers = self._listers()
        if listers is not None:
            return listers.default_selector(pod)
        if pod.owner_kind in DEFAULT_SELECTOR_OWNERS and pod.labels:
            return LabelSelector(tuple(Requirement(k, "In", (str(v),)) for k, v in sorted(pod.labels.items())))
        return None

    def _listers(self):
        """The Services, ReplicaSets and StatefulSets the scheduler's informers hold, if any."""
        return getattr(getattr(self.handle, "snapshot", None), "listers", None)

    def build_default_constraints(self, pod: Pod, action: str) -> list[Constraint]:
        constraints = self._defaults[action]
        if not constraints:
            return []
        selector = self.default_selector(pod)
        if selector is None or selector.empty:
            return []
        return [Constraint(c.max_skew, c.topology_key, selector, c.min_domains,
                           c.node_affinity_policy, c.node_taints_policy) for c in constraints]

    def get_constraints(self, pod: Pod, action: str) -> list[Constraint]:
        """The pod's own constraints with ``action``, else the defaults; kept on the pod (do not mutate)."""
        key: tuple = (self.name, "constraints", self.token, action)
        listers = None if pod.topology_spread_constraints else self._listers()
        if listers is not None:  # defaults follow the Services and controllers there are now
            key += (listers.version, pod.owner_name)
        got = pod.memo.get(key)
        if got is None:
            if pod.topology_spread_constraints:
                got = filter_constraints(pod.topology_spread_constraints, pod.labels, action)
            else:
                got = self.build_default_constraints(pod, action)
            if not self._hooked():
                pod.memo[key] = got
        return got

    @staticmethod
    def _pod_counts(snap: Snapshot, pod: Pod, c: Constraint) -> np.ndarray:
        """``countPodsMatchSelector`` per node: same namespace; an empty selector counts 0."""
        if c.selector.empty or c.selector.nothing:
            return np.zeros(len(snap), dtype=np.int64)
        return snap.count_matching(frozenset((pod.namespace,)), c.selector)

    @staticmethod
    def _policy_mask(snap: Snapshot, pod: Pod, c: Constraint) -> np.ndarray | None:
        """``matchNodeInclusionPolicies`` per node; None when every node passes."""
        mask = None
        if c.node_affinity_policy == HONOR:
            mask = required_node_affinity_mask(snap, pod)
        if c.node_taints_policy == HONOR:
            taints = tolerated_mask(snap, pod)
            mask = taints if mask is None else mask & taints
        return mask

    # ------------------------------------------------------------ filter
    def _hooked(self) -> bool:
        """A handle that supplies default selectors may change its answer over time."""
        return callable(getattr(self.handle, "default_selector", None))

    def skips_pre_filter(self, pod: Pod) -> bool:
        return not self._hooked() and not self.get_constraints(pod, DO_NOT_SCHEDULE)

    def skips_pre_score(self, pod: Pod) -> bool:
        return not self._hooked() and not self.get_constraints(pod, SCHEDULE_ANYWAY)

    def pre_filter(self, ctx: CycleContext) -> Status | None:
        constraints = self.get_constraints(ctx.pod, DO_NOT_SCHEDULE)
        if not constraints:
            return self.skip
        ctx.data[self.name] = self._filter_state(ctx, constraints)
        return None

    def _filter_state(self, ctx: CycleContext, constraints: list[Constraint]) -> _FilterState:
        snap, pod = ctx.snapshot, ctx.pod
        codes = [topology_codes(snap, c.topology_key) for c in constraints]
        has_all = np.ones(len(snap), dtype=bool)
        for cd, _ in codes:
            has_all &= cd >= 0
        st = _FilterState(constraints, [], [], [], [], [])
        for c, (cd, values) in zip(constraints, codes, strict=True):
            eligible = has_all.copy()
            policy = self._policy_mask(snap, pod, c)
            if policy is not None:
                eligible &= policy
            counts = self._pod_counts(snap, pod, c)
            dom = cd[eligible]
            st.codes.append(cd)
            st.eligible.append(eligible)
            st.domain_counts.append(np.bincount(dom, weights=counts[eligible], minlength=len(values)).astype(np.int64))
            st.present.append(np.bincount(dom, minlength=len(values)) > 0)
            st.self_match.append(1 if c.selector.matches(pod.labels) else 0)
        return st

    @staticmethod
    def _min_match(st: _FilterState, k: int, counts: np.ndarray) -> int:
        """``minMatchNum``: the smallest eligible domain, or 0 with fewer than minDomains domains."""
        present = st.present[k]
        n = int(present.sum())
        if n < st.constraints[k].min_domains:
            return 0
        return int(counts[present].min()) if n else MAX_INT32

    def _base_reason(self, ctx: CycleContext, st: _FilterState) -> np.ndarray:
        """Filter for every node at once: the first failing constraint's reason (0 = fits)."""
        reason = np.zeros(len(ctx.snapshot), dtype=np.int8)
        for k, c in enumerate(st.constraints):
            cd = st.codes[k]
            has = cd >= 0
            reason[(reason == 0) & ~has] = _MISSING_LABEL
            dc = st.domain_counts[k]
            if not len(dc):  # no node carries the key
                continue
            skew = dc[np.where(has, cd, 0)] + st.self_match[k] - self._min_match(st, k, dc)
            reason[(reason == 0) & has & (skew > c.max_skew)] = _SKEW
        return reason

    def _nominated_deltas(self, ctx: CycleContext, st: _FilterState, i: int) -> list[int] | None:
        """``updateWithPod`` for the nominated pods on node i (AddPod before the first Filter pass)."""
        pods = ctx.nominated.get(i)
        if not pods:
            return None
        deltas = [0] * len(st.constraints)
        if not all(cd[i] >= 0 for cd in st.codes):
            return deltas
        for p in pods:
            if p.namespace != ctx.pod.namespace:
                continue
            for k, c in enumerate(st.constraints):
                if c.selector.matches(p.labels) and st.eligible[k][i]:
                    deltas[k] += 1
        return deltas

    def _node_status(self, st: _FilterState, i: int, deltas: list[int] | None) -> Status | None:
        for k, c in enumerate(st.constraints):
            code = int(st.codes[k][i])
            if code < 0:
                return self._missing_label
            counts = st.domain_counts[k]
            if deltas and deltas[k]:
                counts = counts.copy()
                counts[code] += deltas[k]
            min_match = self._min_match(st, k, counts)
            if int(counts[code]) + st.self_match[k] - min_match > c.max_skew:
                return self._skewed
        return None

    # the two passes with nominated pods: framework.WithNominatedPods
    def base_reasons(self, ctx: CycleContext, st: _FilterState) -> np.ndarray:
        return self._base_reason(ctx, st)

    def nominated_status(self, ctx: CycleContext, st: _FilterState, i: int, pods: list) -> Status | None:
        return self._node_status(st, i, self._nominated_deltas(ctx, st, i))

    def reason_status(self, st: _FilterState, i: int) -> Status:
        assert st.reason is not None  # filter() fills it
        return self._missing_label if st.reason[i] == _MISSING_LABEL else self._skewed

    # ------------------------------------------------------------- score
    def pre_score(self, ctx: CycleContext, feasible: np.ndarray) -> Status | None:
        snap, pod = ctx.snapshot, ctx.pod
        key = self.name + "/score"
        ctx.data.pop(key, None)
        if len(snap) == 0:
            return self.skip
        require_all = bool(pod.topology_spread_constraints) or not self.system_defaulted
        constraints = self.get_constraints(pod, SCHEDULE_ANYWAY)
        if not constraints:
            return self.skip

        feasible = np.asarray(feasible, dtype=np.int64)
        codes = [topology_codes(snap, c.topology_key) for c in constraints]
        has_all = np.ones(len(snap), dtype=bool)
        for cd, _ in codes:
            has_all &= cd >= 0
        ignored = ~has_all[feasible] if require_all else np.zeros(len(feasible), dtype=bool)
        scored = feasible[~ignored]
        st = _ScoreState(constraints, ignored, [], [], [])
        for c, (cd, values) in zip(constraints, codes, strict=True):
            counts = self._pod_counts(snap, pod, c)
            st.has_key.append(cd[feasible] >= 0)
            if c.topology_key == LABEL_HOSTNAME:
                st.weights.append(math.log(len(scored) + 2))
                st.values.append(counts[feasible])
                continue
            # A node without the key sits in domain "" (only possible with system defaulting).
            eff = cd
            if not require_all and (cd < 0).any():
                blank = values.index("") if "" in values else len(values)
                eff = np.where(cd < 0, blank, cd)
            ndom = int(eff.max()) + 1 if len(eff) else 0
            registered = np.zeros(ndom, dtype=bool)
            registered[eff[scored]] = True
            st.weights.append(math.log(int(registered.sum()) + 2))
            # processAllNode: every node (not only feasible) adds its count to a registered domain.
            contributing = has_all.copy() if require_all else np.ones(len(snap), dtype=bool)
            policy = self._policy_mask(snap, pod, c)
            if policy is not None:
                contributing &= policy
            sums = np.bincount(eff[contributing], weights=counts[contributing], minlength=ndom).astype(np.int64)
            st.values.append(sums[eff[feasible]] if ndom else np.zeros(len(feasible), dtype=np.int64))
        ctx.data[key] = st
        return None

    def score(self, ctx: CycleContext, feasible: np.ndarray) -> np.ndarray:
        st: _ScoreState | None = ctx.data.get(self.name + "/score")
        if st is None:
            return np.zeros(len(feasible), dtype=np.int64)
        total = np.zeros(len(feasible), dtype=np.float64)
        for c, values, has, w in zip(st.constraints, st.values, st.has_key, st.weights, strict=True):
            # scoreForCount: float64(cnt)*tpWeight + float64(maxSkew-1), summed in constraint order.
            total = np.where(has, total + (values.astype(np.float64) * w + float(c.max_skew - 1)), total)
        out = go_round(total).astype(np.int64)
        out[st.ignored] = 0
        return out

    def normalize_score(self, ctx: CycleContext, scores: np.ndarray) -> np.ndarray:
        st: _ScoreState | None = ctx.data.get(self.name + "/score")
        if st is None or len(scores) == 0:
            return scores
        valid = ~st.ignored
        out = np.zeros(len(scores), dtype=np.int64)
        if not valid.any():
            return out
        lo = int(scores[valid].min())
        hi = max(int(scores[valid].max()), 0)
        if hi == 0:
            out[valid] = MAX_NODE_SCORE
        else:
            out[valid] = MAX_NODE_SCORE * (hi + lo - scores[valid]) // hi
        return out
