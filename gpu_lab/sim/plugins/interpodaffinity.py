"""InterPodAffinity: place pods near (affinity) or away from (anti-affinity) other pods.

Mirrors ``pkg/scheduler/framework/plugins/interpodaffinity`` at v1.37 with the
default feature gates (InterPodAffinityHostnameFastPath is alpha and off, so
every term goes through the topology-pair counts; the results are the same).

Filter, checked in this order for each node:

1. the incoming pod's required ``podAffinity``: the node must carry every term's
   ``topologyKey``, and for every term some existing pod that matches *all* the
   terms must sit in the node's domain; failing that, the pod may still go to
   any node with all the keys when no pod anywhere matches all the terms (from a
   node that has a term's key) and the pod matches all its own terms: the first
   pod of a self-affine group. Reject: UnschedulableAndUnresolvable,
   "node(s) didn't match pod affinity rules".
2. the incoming pod's required ``podAntiAffinity``: no pod matching a term may
   share the node's domain for that term's key. Unschedulable,
   "node(s) didn't match pod anti-affinity rules".
3. existing pods' required anti-affinity: no existing pod whose term matches the
   incoming pod may share the node's domain. Unschedulable,
   "node(s) didn't satisfy existing pods anti-affinity rules".

PreFilter returns Skip when the pod has no required terms and no existing
pod's required anti-affinity matches it (from a node with that term's key).
Pods nominated to a node (equal or higher priority) are added first, as
``RunFilterPluginsWithNominatedPods`` does, and the node must pass both with
and without them.

Score: the incoming pod's preferred terms (+weight per matching existing pod,
-weight for anti-affinity) and existing pods' terms that match the incoming
pod (required affinity: ``hardPodAffinityWeight``, default 1; preferred
affinity +weight; preferred anti-affinity -weight), summed per topology
domain; a node gets the sum of its domains. PreScore returns Skip when nothing
matched anywhere (or with ``ignorePreferredTermsOfExistingPods`` and no
preferred terms). NormalizeScore: ``int(100 * (s - min) / (max - min))``, all 0
when max == min.

Terms: ``namespaces`` empty and no ``namespaceSelector`` means the pod's own
namespace; ``namespaceSelector: {}`` means all namespaces; a non-empty
``namespaceSelector`` is evaluated against namespace labels. gpu-lab has no
Namespace objects, so a namespace's labels are the one label the API server
always sets, ``kubernetes.io/metadata.name: <name>`` (a ``handle`` offering
``namespace_labels(ns)`` overrides this). ``matchLabelKeys`` /
``mismatchLabelKeys`` are merged into the label selector as ``key in (v)`` /
``key notin (v)`` the way the API server does when it admits the pod
(kube-scheduler itself never reads them).

Not modelled: label-selector parse errors (the API server rejects such pods),
the queueing hints.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, field, replace
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
from .helper import topology_codes

ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't satisfy existing pods anti-affinity rules"
ERR_REASON_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod affinity rules"
ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH = "node(s) didn't match pod anti-affinity rules"

NAMESPACE_NAME_LABEL = "kubernetes.io/metadata.name"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"

# Kinds of existing pods' terms kept in the per-snapshot index.
REQ_AFFINITY = "requiredAffinity"
REQ_ANTI_AFFINITY = "requiredAntiAffinity"
PREF_AFFINITY = "preferredAffinity"
PREF_ANTI_AFFINITY = "preferredAntiAffinity"
KINDS = (REQ_AFFINITY, REQ_ANTI_AFFINITY, PREF_AFFINITY, PREF_ANTI_AFFINITY)

NOTHING = LabelSelector((), nothing=True)

_AFFINITY, _ANTI_AFFINITY, _EXISTING_ANTI_AFFINITY = 1, 2, 3
_REASONS = {
    _AFFINITY: (UNRESOLVABLE, ERR_REASON_AFFINITY_RULES_NOT_MATCH),
    _ANTI_AFFINITY: (UNSCHEDULABLE, ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH),
    _EXISTING_ANTI_AFFINITY: (UNSCHEDULABLE, ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH),
}


# --------------------------------------------------------------------------
# Terms
# --------------------------------------------------------------------------
@dataclass(frozen=True)
class AffinityTerm:
    """``fwk.AffinityTerm``: namespaces, parsed selectors and the topology key."""

    namespaces: frozenset[str]
    selector: LabelSelector
    topology_key: str
    namespace_selector: LabelSelector = NOTHING

    def matches(self, namespace: str, labels: dict[str, str], ns_labels: dict[str, str] | None) -> bool:
        """``AffinityTerm.Matches``: namespace listed or namespace labels selected, then labels."""
        if namespace in self.namespaces or self.namespace_selector.matches(ns_labels or {}):
            return self.selector.matches(labels)
        return False


def _apply_label_keys(raw_selector: dict[str, Any] | None, term: dict[str, Any],
                      labels: dict[str, str]) -> LabelSelector:
    """The API server's ``applyMatchLabelKeysAndMismatchLabelKeys`` (nil selectors stay nil)."""
    selector = LabelSelector.parse(raw_selector)
    if raw_selector is None:
        return selector
    extra = [Requirement(k, "In", (labels[k],)) for k in term.get("matchLabelKeys") or [] if k in labels]
    extra += [Requirement(k, "NotIn", (labels[k],)) for k in term.get("mismatchLabelKeys") or [] if k in labels]
    if not extra:
        return selector
    return LabelSelector(selector.requirements + tuple(extra))


def parse_term(pod: Pod, raw: dict[str, Any]) -> AffinityTerm:
    """``newAffinityTerm``: empty namespaces and nil namespaceSelector mean the pod's namespace."""
    names = frozenset(raw.get("namespaces") or ())
    if not names and raw.get("namespaceSelector") is None:
        names = frozenset((pod.namespace,))
    return AffinityTerm(
        namespaces=names,
        selector=_apply_label_keys(raw.get("labelSelector"), raw, pod.labels),
        topology_key=raw.get("topologyKey") or "",
        namespace_selector=LabelSelector.parse(raw.get("namespaceSelector")),
    )


def _section(pod: Pod, which: str) -> dict[str, Any]:
    return (pod.affinity or {}).get(which) or {}


def required_terms(pod: Pod, which: str) -> list[AffinityTerm]:
    """The pod's required terms of ``which``, parsed once and kept on the pod (do not mutate)."""
    key = ("required_terms", which)
    got = pod.memo.get(key)
    if got is None:
        got = [parse_term(pod, t) for t in _section(pod, which).get(REQUIRED) or []]
        pod.memo[key] = got
    return got


def preferred_terms(pod: Pod, which: str) -> list[tuple[AffinityTerm, int]]:
    """(term, weight) for the pod's preferred terms of ``which``, kept on the pod (do not mutate)."""
    key = ("preferred_terms", which)
    got = pod.memo.get(key)
    if got is None:
        got = [(parse_term(pod, w.get("podAffinityTerm") or {}), int(w.get("weight") or 0))
               for w in _section(pod, which).get(PREFERRED) or []]
        pod.memo[key] = got
    return got


def has_pod_affinity(pod: Pod) -> bool:
    aff = pod.affinity
    return bool(aff) and bool(aff.get("podAffinity") or aff.get("podAntiAffinity"))


def existing_pod_terms(pod: Pod) -> list[tuple[str, AffinityTerm, int]]:
    """(kind, term, weight) for every term of an existing pod (weight 0 for required terms)."""
    if not has_pod_affinity(pod):
        return []
    out = [(REQ_AFFINITY, t, 0) for t in required_terms(pod, "podAffinity")]
    out += [(REQ_ANTI_AFFINITY, t, 0) for t in required_terms(pod, "podAntiAffinity")]
    out += [(PREF_AFFINITY, t, w) for t, w in preferred_terms(pod, "podAffinity")]
    out += [(PREF_ANTI_AFFINITY, t, w) for t, w in preferred_terms(pod, "podAntiAffinity")]
    return out


# --------------------------------------------------------------------------
# Existing pods' terms, grouped by (term, weight) with a per-node count,
# built once per snapshot and node version and kept current by a listener.
# --------------------------------------------------------------------------
class _ExistingTerms:
    def __init__(self) -> None:
        self.version = -1
        self.n = -1
        self.stale = True
        self.groups: dict[str, dict[tuple[AffinityTerm, int], np.ndarray]] = {k: {} for k in KINDS}
        self.totals: dict[str, dict[tuple[AffinityTerm, int], int]] = {k: {} for k in KINDS}
        self._parsed: dict[str, tuple[Pod, list]] = {}

    def _terms(self, pod: Pod) -> list:
        got = self._parsed.get(pod.key)
        if got is None or got[0] is not pod:
            got = (pod, existing_pod_terms(pod))
            self._parsed[pod.key] = got
        return got[1]

    def apply(self, pod: Pod, i: int, delta: int) -> None:
        if not has_pod_affinity(pod):
            return
        for kind, term, weight in self._terms(pod):
            key = (term, weight)
            arr = self.groups[kind].get(key)
            if arr is None:
                arr = np.zeros(self.n, dtype=np.int64)
                self.groups[kind][key] = arr
                self.totals[kind][key] = 0
            arr[i] += delta
            self.totals[kind][key] += delta
            if self.totals[kind][key] <= 0:
                del self.groups[kind][key]
                del self.totals[kind][key]
        if delta < 0:
            self._parsed.pop(pod.key, None)

    def rebuild(self, snap: Snapshot) -> None:
        self.version, self.n, self.stale = snap.node_version, len(snap), False
        self.groups = {k: {} for k in KINDS}
        self.totals = {k: {} for k in KINDS}
        self._parsed = {}
        for i, pods in enumerate(snap.pods_on):
            for p in pods:
                self.apply(p, i, +1)


_INDEX: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def existing_terms(snap: Snapshot) -> _ExistingTerms:
    idx = _INDEX.get(snap)
    if idx is None:
        idx = _ExistingTerms()
        _INDEX[snap] = idx
        ref = weakref.ref(snap)

        def listener(pod: Pod, i: int, delta: int, idx: _ExistingTerms = idx) -> None:
            if not has_pod_affinity(pod):
                return  # nothing to index (a node change is noticed by existing_terms itself)
            s = ref()
            if idx.stale or s is None:
                return
            if idx.version != s.node_version or idx.n != len(s):
                idx.stale = True  # set_nodes/touch_nodes: rebuilt on next use
                return
            idx.apply(pod, i, delta)

        snap.listeners.append(listener)
    if idx.stale or idx.version != snap.node_version or idx.n != len(snap):
        idx.rebuild(snap)
    return idx


def domain_sums(snap: Snapshot, key: str, counts: np.ndarray | None) -> np.ndarray:
    """Per domain of ``key``: the sum of ``counts`` over nodes that carry the key."""
    codes, values = topology_codes(snap, key)
    if counts is None:
        return np.zeros(len(values), dtype=np.int64)
    nz = np.flatnonzero(counts)
    cd = codes[nz]
    keep = cd >= 0
    return np.bincount(cd[keep], weights=counts[nz][keep], minlength=len(values)).astype(np.int64)


def _at_nodes(snap: Snapshot, key: str, per_domain: np.ndarray, default=0) -> np.ndarray:
    """``per_domain`` looked up at each node's domain of ``key`` (``default`` without the key)."""
    codes, _ = topology_codes(snap, key)
    if not len(per_domain):
        return np.full(len(codes), default, dtype=per_domain.dtype)
    return np.where(codes >= 0, per_domain[np.where(codes >= 0, codes, 0)], default)


# --------------------------------------------------------------------------
# The plugin
# --------------------------------------------------------------------------
@dataclass
class _FilterState:
    affinity: list[AffinityTerm]
    anti_affinity: list[AffinityTerm]
    ns_labels: dict[str, str]
    affinity_sums: list[np.ndarray] = field(default_factory=list)  # pods matching ALL terms, per domain
    affinity_counts_empty: bool = True  # len(clusterWideAffinityCounts) == 0
    self_match: bool = False
    anti_sums: list[np.ndarray] = field(default_factory=list)
    existing_bad: dict[str, np.ndarray] = field(default_factory=dict)  # key -> domain is repelling
    mask: np.ndarray | None = None
    reason: np.ndarray | None = None  # per node, without nominated pods: 0 fits, else _REASONS index


class InterPodAffinity(WithNominatedPods, CacheHints, Plugin):
    name = "InterPodAffinity"

    def __init__(self, args=None, handle=None):
        super().__init__(args, handle)
        w = self.args.get("hardPodAffinityWeight")
        self.hard_pod_affinity_weight = 1 if w is None else int(w)
        if not 0 <= self.hard_pod_affinity_weight <= 100:
            raise GpuLabError(
                f"InterPodAffinityArgs: hardPodAffinityWeight: Invalid value: {self.hard_pod_affinity_weight}: "
                "not in valid range [0, 100]"
            )
        self.ignore_preferred_terms_of_existing_pods = bool(self.args.get("ignorePreferredTermsOfExistingPods"))
        self._statuses = {r: Status(code, (msg,), self.name) for r, (code, msg) in _REASONS.items()}

    # ----------------------------------------------------------- namespaces
    def namespace_labels(self, namespace: str) -> dict[str, str]:
        hook = getattr(self.handle, "namespace_labels", None)
        if callable(hook):
            got = hook(namespace)
            if got is not None:
                return dict(got)
        return {NAMESPACE_NAME_LABEL: namespace}

    def _known_namespaces(self, ctx: CycleContext) -> set[str]:
        hook = getattr(self.handle, "namespaces", None)
        if callable(hook):
            return set(hook())
        # Only namespaces that hold pods can change a match, so these suffice.
        names = {k.split("/", 1)[0] for k in ctx.snapshot.pod_node}
        names.add(ctx.pod.namespace)
        for pods in ctx.nominated.values():
            names.update(p.namespace for p in pods)
        return names

    def _merge_namespaces(self, ctx: CycleContext, terms: list[AffinityTerm]) -> list[AffinityTerm]:
        """``mergeAffinityTermNamespacesIfNotEmpty`` for the incoming pod's terms."""
        out, known = [], None
        for t in terms:
            sel = t.namespace_selector
            if sel.empty or sel.nothing:
                out.append(t)
                continue
            if known is None:
                known = self._known_namespaces(ctx)
            names = {ns for ns in known if sel.matches(self.namespace_labels(ns))}
            out.append(replace(t, namespaces=t.namespaces | names, namespace_selector=NOTHING))
        return out

    @staticmethod
    def _term_counts(snap: Snapshot, t: AffinityTerm) -> np.ndarray | None:
        """Existing pods per node matching an incoming (merged) term; None = none anywhere."""
        if t.selector.nothing:
            return None
        if t.namespace_selector.empty:
            return snap.count_matching(None, t.selector)
        if not t.namespaces:
            return None
        return snap.count_matching(frozenset(t.namespaces), t.selector)

    @staticmethod
    def _all_terms_counts(snap: Snapshot, terms: list[AffinityTerm]) -> np.ndarray | None:
        """Existing pods per node matching every term at once (``podMatchesAllAffinityTerms``)."""
        namespaces: frozenset[str] | None = None
        reqs: list[Requirement] = []
        for t in terms:
            if t.selector.nothing:
                return None
            reqs.extend(t.selector.requirements)
            if not t.namespace_selector.empty:
                namespaces = t.namespaces if namespaces is None else namespaces & t.namespaces
        if namespaces is not None and not namespaces:
            return None
        return snap.count_matching(namespaces, LabelSelector(tuple(dict.fromkeys(reqs))))

    # ------------------------------------------------------------ filter
    def pre_filter(self, ctx: CycleContext) -> Status | None:
        snap, pod = ctx.snapshot, ctx.pod
        if not has_pod_affinity(pod) and not existing_terms(snap).groups[REQ_ANTI_AFFINITY]:
            return self.skip  # the usual case, decided without parsing anything
        affinity = required_terms(pod, "podAffinity")
        anti = required_terms(pod, "podAntiAffinity")
        existing_anti = existing_terms(snap).groups[REQ_ANTI_AFFINITY]
        if not existing_anti and not affinity and not anti:
            return self.skip
        ns_labels = self.namespace_labels(pod.namespace)
        st = _FilterState(affinity, anti, ns_labels)

        for (term, _), counts in existing_anti.items():
            if not term.matches(pod.namespace, pod.labels, ns_labels):
                continue
            bad = domain_sums(snap, term.topology_key, counts) > 0
            if bad.any():
                prev = st.existing_bad.get(term.topology_key)
                st.existing_bad[term.topology_key] = bad if prev is None else prev | bad
        if not st.existing_bad and not affinity and not anti:
            return self.skip

        st.affinity = self._merge_namespaces(ctx, affinity)
        st.anti_affinity = self._merge_namespaces(ctx, anti)
        if st.affinity:
            all_counts = self._all_terms_counts(snap, st.affinity)
            st.affinity_sums = [domain_sums(snap, t.topology_key, all_counts) for t in st.affinity]
            st.affinity_counts_empty = not any(s.any() for s in st.affinity_sums)
            st.self_match = all(t.matches(pod.namespace, pod.labels, None) for t in st.affinity)
        st.anti_sums = [domain_sums(snap, t.topology_key, self._term_counts(snap, t)) for t in st.anti_affinity]
        ctx.data[self.name] = st
        return None

    def _base_reason(self, snap: Snapshot, st: _FilterState) -> np.ndarray:
        """Filter for every node at once: which check fails first (0 = fits)."""
        reason = np.zeros(len(snap), dtype=np.int8)
        if st.affinity:
            has_all = np.ones(len(snap), dtype=bool)
            exist = np.ones(len(snap), dtype=bool)
            for t, sums in zip(st.affinity, st.affinity_sums, strict=True):
                codes, _ = topology_codes(snap, t.topology_key)
                has_all &= codes >= 0
                exist &= _at_nodes(snap, t.topology_key, sums) > 0
            ok = has_all if st.affinity_counts_empty and st.self_match else has_all & exist
            reason[~ok] = _AFFINITY
        for t, sums in zip(st.anti_affinity, st.anti_sums, strict=True):
            reason[(reason == 0) & (_at_nodes(snap, t.topology_key, sums) > 0)] = _ANTI_AFFINITY
        for key, bad in st.existing_bad.items():
            reason[(reason == 0) & _at_nodes(snap, key, bad, default=False)] = _EXISTING_ANTI_AFFINITY
        return reason

    def _node_status(self, ctx: CycleContext, st: _FilterState, i: int,
                     nominated: list[Pod] | None) -> Status | None:
        """Filter for node i, with ``nominated`` pods added to the state first (``updateWithPod``)."""
        snap, pod = ctx.snapshot, ctx.pod
        nominated = nominated or []
        if st.affinity:
            codes = [int(topology_codes(snap, t.topology_key)[0][i]) for t in st.affinity]
            if any(c < 0 for c in codes):
                return Status(UNRESOLVABLE, (ERR_REASON_AFFINITY_RULES_NOT_MATCH,), self.name)
            added = sum(1 for p in nominated if all(t.matches(p.namespace, p.labels, None) for t in st.affinity))
            exist = all(int(s[c]) + added > 0 for s, c in zip(st.affinity_sums, codes, strict=True))
            if not exist and not (st.affinity_counts_empty and st.self_match):
                return Status(UNRESOLVABLE, (ERR_REASON_AFFINITY_RULES_NOT_MATCH,), self.name)
        for t, sums in zip(st.anti_affinity, st.anti_sums, strict=True):
            c = int(topology_codes(snap, t.topology_key)[0][i])
            if c < 0:
                continue
            n = int(sums[c]) + sum(1 for p in nominated if t.matches(p.namespace, p.labels, None))
            if n > 0:
                return Status(UNSCHEDULABLE, (ERR_REASON_ANTI_AFFINITY_RULES_NOT_MATCH,), self.name)
        for key, bad in st.existing_bad.items():
            c = int(topology_codes(snap, key)[0][i])
            if c >= 0 and bad[c]:
                return Status(UNSCHEDULABLE, (ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,), self.name)
        labels = snap.nodes[i].labels
        for p in nominated:
            for kind, term, _ in existing_pod_terms(p):
                if (kind == REQ_ANTI_AFFINITY and term.topology_key in labels
                        and term.matches(pod.namespace, pod.labels, st.ns_labels)):
                    return Status(UNSCHEDULABLE, (ERR_REASON_EXISTING_ANTI_AFFINITY_RULES_NOT_MATCH,), self.name)
        return None

    # the two passes with nominated pods: framework.WithNominatedPods
    def base_reasons(self, ctx: CycleContext, st: _FilterState) -> np.ndarray:
        return self._base_reason(ctx.snapshot, st)

    def nominated_status(self, ctx: CycleContext, st: _FilterState, i: int, pods: list) -> Status | None:
        return self._node_status(ctx, st, i, pods)

    def reason_status(self, st: _FilterState, i: int) -> Status:
        assert st.reason is not None  # filter() fills it
        return self._statuses[int(st.reason[i]) or _ANTI_AFFINITY]

    # ------------------------------------------------------------- score
    def skips_pre_score(self, pod: Pod) -> bool:
        # Existing pods' preferred terms count unless the args say to ignore them.
        return self.ignore_preferred_terms_of_existing_pods and not (
            preferred_terms(pod, "podAffinity") or preferred_terms(pod, "podAntiAffinity"))

    def pre_score(self, ctx: CycleContext, feasible: np.ndarray) -> Status | None:
        snap, pod = ctx.snapshot, ctx.pod
        key = self.name + "/score"
        ctx.data.pop(key, None)
        if not has_pod_affinity(pod):
            groups = existing_terms(snap).groups
            if self.ignore_preferred_terms_of_existing_pods or not (
                    groups[REQ_AFFINITY] or groups[PREF_AFFINITY] or groups[PREF_ANTI_AFFINITY]):
                return self.skip  # the usual case, decided without parsing anything
        pref_affinity = preferred_terms(pod, "podAffinity")
        pref_anti = preferred_terms(pod, "podAntiAffinity")
        has_constraints = bool(pref_affinity) or bool(pref_anti)
        if self.ignore_preferred_terms_of_existing_pods and not has_constraints:
            return self.skip
        idx = existing_terms(snap)
        if not has_constraints and not any(idx.groups[k] for k in (REQ_AFFINITY, PREF_AFFINITY, PREF_ANTI_AFFINITY)):
            return self.skip  # nothing could add to any node's score

        topology_score: dict[str, np.ndarray] = {}

        def add(t: AffinityTerm, counts: np.ndarray | None, weight: int) -> None:
            sums = domain_sums(snap, t.topology_key, counts)
            if sums.any():  # processTerm only records when a pod matched on a node with the key
                prev = topology_score.get(t.topology_key)
                topology_score[t.topology_key] = sums * weight if prev is None else prev + sums * weight

        for terms, sign in ((pref_affinity, 1), (pref_anti, -1)):
            merged = self._merge_namespaces(ctx, [t for t, _ in terms])
            for t, (_, w) in zip(merged, terms, strict=True):
                add(t, self._term_counts(snap, t), sign * w)

        ns_labels = self.namespace_labels(pod.namespace)
        signs = ((REQ_AFFINITY, 1), (PREF_AFFINITY, 1), (PREF_ANTI_AFFINITY, -1))
        for kind, sign in signs:
            if kind == REQ_AFFINITY and self.hard_pod_affinity_weight <= 0:
                continue
            for (t, w), counts in idx.groups[kind].items():
                if t.matches(pod.namespace, pod.labels, ns_labels):
                    weight = self.hard_pod_affinity_weight if kind == REQ_AFFINITY else w
                    add(t, counts, sign * weight)
        if not topology_score:
            return self.skip
        ctx.data[key] = topology_score
        return None

    def score(self, ctx: CycleContext, feasible: np.ndarray) -> np.ndarray:
        topology_score: dict[str, np.ndarray] | None = ctx.data.get(self.name + "/score")
        out = np.zeros(len(feasible), dtype=np.int64)
        if not topology_score:
            return out
        for key, per_domain in topology_score.items():
            out += _at_nodes(ctx.snapshot, key, per_domain)[feasible]
        return out

    def normalize_score(self, ctx: CycleContext, scores: np.ndarray) -> np.ndarray:
        if not ctx.data.get(self.name + "/score") or len(scores) == 0:
            return scores
        lo, hi = int(scores.min()), int(scores.max())
        diff = hi - lo
        if diff <= 0:
            return np.zeros(len(scores), dtype=np.int64)
        # float64(MaxNodeScore) * (float64(s-min) / float64(max-min)), truncated by int64().
        return (float(MAX_NODE_SCORE) * ((scores - lo).astype(np.float64) / float(diff))).astype(np.int64)
