"""OpportunisticBatching: kube-scheduler v1.37.2's node hints for consecutive look-alike pods.

What the real scheduler does (the OpportunisticBatching gate is beta and on by default since
v1.35, ``pkg/features/kube_features.go``; the local lab leaves it on):

* **Signature** (``framework/runtime/framework.go``: ``computeBatchablePlugins``,
  ``SignPod``; each plugin's ``SignPod``; ``k8s.io/kube-scheduler/framework/signers.go``).
  A profile signs pods only when it has no extenders and every PreFilter, Filter, PreScore and
  Score plugin implements ``SignPod`` (all of v1.37's in-tree ones do). A pod's signature is
  its schedulerName plus each plugin's fragments: NodeName its ``nodeName``; NodeUnschedulable
  and TaintToleration its tolerations; NodeAffinity its node affinity and nodeSelector;
  NodePorts its host ports; NodeResourcesFit and NodeResourcesBalancedAllocation its requests
  with overhead; InterPodAffinity its labels (none with ``ignorePreferredTermsOfExistingPods``);
  ImageLocality its image names; the volume plugins its volumes other than ConfigMaps and
  Secrets. A pod is unsignable (no signature, never batched) when it has its own
  topologySpreadConstraints, when PodTopologySpread has default constraints (so under
  ``defaultingType: System``, the default profile, no pod is signable), when it has pod
  affinity or anti-affinity, when it has resourceClaims, or when a DeviceClass serves one of
  its extended resources through DRA.
* **Storing** (``batch.go`` ``StoreScheduleResults``, called by ``schedulePod`` in
  ``schedule_one.go`` after every successful cycle). The cycle's number and chosen node are
  kept. A pod placed on its hint keeps the batch state as it is; otherwise a signed pod whose
  cycle scored more than one node leaves its signature and the other scored nodes (their raw
  scores and totals) as the new state, and any other pod clears it.
* **The hint** (``GetNodeHint``, asked by ``findNodesThatFitPod`` after PreFilter). There is
  none unless the state exists, this cycle directly follows the one that stored it (or is
  the same pod group cycle: GenericWorkload is on in the lab), the pod has no nominated node,
  its signature equals the state's and the state is younger than 500 ms (``maxBatchAge``).
  Then the last chosen node, if it still passes the filters, is rescored (PreScore over the
  kept nodes and it, Score for it alone, NormalizeScore over the kept raw scores and its fresh
  ones) and put back among the kept nodes; the best one is popped as the hint. The pod is
  filtered against that node alone (``evaluateNominatedNode``); if it passes, it is bound
  there without scoring (``feasibleNodes=1``), otherwise every node is filtered and scored as
  usual. batch.go logs "OpportunisticBatch provided node hint" at verbosity 3; schedule_one.go
  then logs no score lines. The local backend's explain reads the hint back and says so in
  the sim's words (``explain.batched_note``), the other nodes "not evaluated".

What the simulator models: all of the above for the plugins it has, plus the image names and
volumes fragments when the profile's configuration leaves ImageLocality or a volume plugin
enabled. ``SchedulingLoop`` numbers the cycles (one per pod, one per pod group cycle) and
starts every pass without state: a pass is what one ``schedule`` (an apply, an action) sets
off, and on a real cluster more than 500 ms pass between two. The kept nodes are a max-heap
on the total, as ``framework/sorted_nodes.go`` keeps them (Go's container/heap, no
randomizer without extenders), so equal totals go the way the real heap sends them (the last
chosen node, put back at the end, wins no tie against a kept node above it); the heap is
built from the scored nodes in the order the simulator's filter found them, where the real
parallel filter finds them in no fixed order, and the chosen node is taken out wherever
selectHost's tie-break found it. Not modelled: the NodeDeclaredFeatures fragment (no pod of
gpu-lab asks for node features) and a plugin error while rescoring.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..model.objects import Pod
from .cache import plan
from .framework import SKIP, SUCCESS, CycleContext, run_filter_plugins

if TYPE_CHECKING:
    from .profile import Profile
    from .scheduler import Scheduler

#: pkg/features: OpportunisticBatching, beta and on by default since v1.35
ENABLED = True
#: framework/runtime/framework.go: what the profile's plugins contribute to a signature
_BASE_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pods")
_VOLUME_PLUGINS = ("VolumeRestrictions", "NodeVolumeLimits", "VolumeBinding", "VolumeZone")


@dataclass(slots=True)
class ScoredNode:
    """``fwk.NodePluginScores`` as the batch keeps it: raw scores per plugin and the total."""

    name: str
    raw: dict[str, int]
    total: int


@dataclass(slots=True)
class BatchState:
    signature: tuple
    nodes: list[ScoredNode]  # a heap (heap_init): the best total first


# framework/sorted_nodes.go's heap: Go's container/heap with Less = a higher TotalScore (the
# Randomizer is 0 without extenders), so equal totals never swap.
def _down(h: list[ScoredNode], i0: int, n: int) -> bool:
    i = i0
    while True:
        j = 2 * i + 1
        if j >= n:
            break
        if j + 1 < n and h[j + 1].total > h[j].total:
            j += 1
        if not h[j].total > h[i].total:
            break
        h[i], h[j] = h[j], h[i]
        i = j
    return i > i0


def _up(h: list[ScoredNode], j: int) -> None:
    while j > 0:
        i = (j - 1) // 2
        if not h[j].total > h[i].total:
            break
        h[i], h[j] = h[j], h[i]
        j = i


def heap_init(h: list[ScoredNode]) -> list[ScoredNode]:
    for i in range(len(h) // 2 - 1, -1, -1):
        _down(h, i, len(h))
    return h


def heap_remove(h: list[ScoredNode], i: int) -> ScoredNode:
    """``heap.Remove`` (``heap.Pop`` is ``heap_remove(h, 0)``)."""
    n = len(h) - 1
    if n != i:
        h[i], h[n] = h[n], h[i]
        if not _down(h, i, n):
            _up(h, i)
    return h.pop()


@dataclass(slots=True)
class OpportunisticBatch:
    """One profile's batch (``frameworkImpl.batch``)."""

    state: BatchState | None = None
    last_cycle: int | None = None  # lastCycle.cycleCount (None: no cycle succeeded yet)
    last_chosen: str = ""
    batched_pods: int = 0


# ------------------------------------------------------------------ signatures
def _image_name(name: str) -> str:
    """imagelocality's ``normalizedImageName``."""
    return name + ":latest" if name.rfind(":") <= name.rfind("/") else name


def _requirements(reqs: Any) -> tuple:
    """``NodeSelectorRequirementsSigner``: each requirement with sorted values, sorted."""
    out = []
    for r in reqs or []:
        r = dict(r or {})
        r["values"] = sorted(str(v) for v in r.get("values") or [])
        out.append(json.dumps(r, sort_keys=True))
    return tuple(sorted(out))


def _term(t: Any) -> tuple:
    t = t or {}
    return (_requirements(t.get("matchExpressions")), _requirements(t.get("matchFields")))


def _node_affinity(pod: Pod) -> Any:
    """``NodeAffinitySigner``: None without node affinity, else sorted required and preferred terms."""
    na = (pod.affinity or {}).get("nodeAffinity")
    if na is None:
        return None
    required = (na.get("requiredDuringSchedulingIgnoredDuringExecution") or {}).get("nodeSelectorTerms")
    preferred = na.get("preferredDuringSchedulingIgnoredDuringExecution") or []
    return (tuple(sorted(repr(_term(t)) for t in required or [])),
            tuple(sorted(repr((int(p.get("weight") or 0), _term(p.get("preference")))) for p in preferred)))


def _tolerations(pod: Pod) -> tuple:
    """``TolerationsSigner``: sorted by key, then value."""
    return tuple(sorted(((t.key, t.value, t.operator, t.effect, t.toleration_seconds) for t in pod.tolerations),
                        key=lambda t: (t[0], t[1])))


def _volumes(pod: Pod) -> tuple:
    """``VolumesSigner``: every volume source but ConfigMaps and Secrets."""
    out = []
    for v in (pod.raw.get("spec") or {}).get("volumes") or []:
        source = {k: val for k, val in (v or {}).items() if k != "name"}
        if "configMap" not in source and "secret" not in source:
            out.append(json.dumps(source, sort_keys=True, default=str))
    return tuple(sorted(out))


def _images(pod: Pod) -> tuple:
    spec = pod.raw.get("spec") or {}
    containers = list(spec.get("containers") or []) + list(spec.get("initContainers") or [])
    return tuple(sorted({_image_name(str((c or {}).get("image") or "")) for c in containers}))


def _pod_fragments(pod: Pod, profile: Profile, unmodelled: tuple[bool, bool]) -> tuple | None:
    """The pod's signature without the DRA check (it depends only on the pod and the profile)."""
    sig: dict[str, Any] = {"SchedulerName": pod.scheduler_name}
    candidates = {pl.name: pl for phase in ("preFilter", "filter", "preScore", "score") for pl in profile.at(phase)}
    for name, pl in candidates.items():
        if name == "NodeName":
            sig["NodeName"] = pod.node_name
        elif name in ("NodeUnschedulable", "TaintToleration"):
            sig["Tolerations"] = _tolerations(pod)
        elif name == "NodeAffinity":
            sig["NodeAffinity"] = _node_affinity(pod)
            sig["NodeSelector"] = tuple(sorted(pod.node_selector.items()))
        elif name == "NodePorts":
            sig["HostPorts"] = tuple(sorted({hp.port for hp in pod.host_ports if hp.port}))
        elif name in ("NodeResourcesFit", "NodeResourcesBalancedAllocation"):
            sig["Resources"] = tuple(sorted((r, v) for r, v in pod.requests.items() if v))
        elif name == "PodTopologySpread":
            if pod.topology_spread_constraints or getattr(pl, "default_constraints", None):
                return None  # "pods with (default) topology constraints are not signable"
        elif name == "InterPodAffinity":
            aff = pod.affinity or {}
            if aff.get("podAffinity") is not None or aff.get("podAntiAffinity") is not None:
                return None  # "pods with InterPodAffinity are not signable"
            if not getattr(pl, "ignore_preferred_terms_of_existing_pods", False):
                sig["Labels"] = tuple(sorted(pod.labels.items()))
        elif name == "DynamicResources":
            if (pod.raw.get("spec") or {}).get("resourceClaims"):
                return None  # "pods with dra resource claims are not signable"
        else:
            return None  # a plugin without SignPod: the profile signs no pod
    images, volumes = unmodelled
    if images:
        sig["ImageNames"] = _images(pod)
    if volumes:
        sig["Volumes"] = _volumes(pod)
    return tuple(sorted(sig.items()))


def _unmodelled(raw_config: dict, scheduler_name: str) -> tuple[bool, bool] | None:
    """Whether the real profile signs image names (ImageLocality) and volumes (a volume
    plugin), which the simulator does not run; None when it signs nothing (extenders)."""
    if raw_config.get("extenders"):
        return None
    raw = next((p or {} for p in raw_config.get("profiles") or []
                if ((p or {}).get("schedulerName") or "default-scheduler") == scheduler_name), {})
    plugins = raw.get("plugins") or {}

    def disabled(phase: str, name: str) -> bool:
        names = {(p or {}).get("name") for p in (plugins.get(phase) or {}).get("disabled") or []}
        return "*" in names or name in names

    def enabled(name: str, phases: tuple[str, ...]) -> bool:
        return not disabled("multiPoint", name) and not all(disabled(ph, name) for ph in phases)

    return (enabled("ImageLocality", ("score",)),
            any(enabled(v, ("preFilter", "filter", "preScore", "score")) for v in _VOLUME_PLUGINS))


def sign_pod(sched: Scheduler, pod: Pod, profile: Profile) -> tuple | None:
    """``SignPod``: the pod's signature under ``profile``, or None when it cannot be batched."""
    key = ("batch_signature", profile.token)
    if key not in pod.memo:
        unmodelled = _unmodelled(sched.config.raw, profile.scheduler_name)
        pod.memo[key] = None if unmodelled is None else _pod_fragments(pod, profile, unmodelled)
    sig = pod.memo[key]
    if sig is not None and _delegated_to_dra(sched, pod, profile):
        return None  # "signature disabled when dra extended resources are used in the cluster"
    return sig


def _delegated_to_dra(sched: Scheduler, pod: Pod, profile: Profile) -> bool:
    """NodeResourcesFit's and BalancedAllocation's ``shouldDelegateResourceToDRA`` with no node."""
    if "NodeResourcesFit" not in profile.plugins and "NodeResourcesBalancedAllocation" not in profile.plugins:
        return False
    dra = getattr(sched.snapshot, "dra", None)
    if dra is None or not dra.maps_extended():
        return False
    return any(v and r not in _BASE_RESOURCES and dra.extended_class(r) is not None for r, v in pod.requests.items())


# ------------------------------------------------------------------ one cycle's batching
@dataclass(slots=True)
class BatchCycle:
    """What one scheduling cycle asks of its profile's batch: a hint, then the results."""

    sched: Scheduler
    batch: OpportunisticBatch
    signature: tuple | None
    cycle: int
    hint: str | None = field(default=None)

    def node_hint(self, ctx: CycleContext, passes: np.ndarray) -> int | None:
        """``GetNodeHint``: the node index to try alone, or None. ``passes``: every node's
        Filter verdict this cycle."""
        b, snap = self.batch, ctx.snapshot
        if not self._compatible(ctx.pod):
            return None
        assert b.state is not None
        last = snap.index.get(b.last_chosen)
        if last is None:
            return None  # BatchFlushNodeMissing
        if self._still_fits(ctx, last, passes) and not self._rescore(ctx, last):
            return None
        hinted = heap_remove(b.state.nodes, 0).name
        i = snap.index.get(hinted)
        self.hint = hinted if i is not None else None
        return i

    def _compatible(self, pod: Pod) -> bool:
        """``batchStateCompatible`` (the state's age is the pass's: see the module doc)."""
        b = self.batch
        if b.state is None or not b.state.nodes or b.last_cycle is None:
            return False
        if self.cycle != b.last_cycle + 1 and self.cycle != b.last_cycle:  # same cycle: a pod group's
            return False
        if pod.key in self.sched.nominated:
            return False
        return self.signature is not None and self.signature == b.state.signature

    def _still_fits(self, ctx: CycleContext, i: int, passes: np.ndarray) -> bool:
        """``RunFilterPlugins`` on the last chosen node: without nominated pods, unlike ``passes``."""
        if not ctx.nominated.get(i):
            return bool(passes[i])
        bare = CycleContext(pod=ctx.pod, snapshot=ctx.snapshot, profile=ctx.profile)
        return run_filter_plugins(bare, i) is None

    def _rescore(self, ctx: CycleContext, last: int) -> bool:
        """``rescoreHintedNode``: the last chosen node back among the kept ones with fresh raw
        scores, every node's total normalised again over them all."""
        b, snap, profile = self.batch, ctx.snapshot, ctx.profile
        assert b.state is not None
        kept = b.state.nodes
        idx = [snap.index.get(sn.name) for sn in kept]
        if any(i is None for i in idx):
            return False  # BatchFlushNodeMissing
        candidates = np.array([*idx, last], dtype=np.int64)
        rctx = CycleContext(pod=ctx.pod, snapshot=snap, profile=profile, data=dict(ctx.data),
                            nominated=ctx.nominated)  # state.Clone(): the cycle's own state stays
        _, ask = plan(ctx.pod, profile, "score")
        cache = self.sched.cache
        cache.start_scoring()
        scored: list[tuple[Any, int, int]] = []  # (plugin, weight, fresh raw score)
        for pl, w, asks, key, _ in ask:
            if asks:
                st = pl.pre_score(rctx, candidates)
                if st is not None and st.code == SKIP:
                    continue
                if st is not None and st.code != SUCCESS:
                    return False  # BatchFlushPreScoreError
            fresh = (cache.raw_scores(rctx, pl, key, candidates[-1:]) if key is not None
                     else pl.score(rctx, candidates)[-1:])
            scored.append((pl, w, int(fresh[0])))
        fresh_raw = {pl.name: v for pl, _, v in scored}
        nodes = [*kept, ScoredNode(snap.nodes[last].name, fresh_raw, 0)]
        totals = np.zeros(len(nodes), dtype=np.int64)
        for pl, w, _ in scored:
            raw = np.array([sn.raw.get(pl.name, 0) for sn in nodes], dtype=np.int64)
            totals += np.asarray(pl.normalize_score(rctx, raw), dtype=np.int64) * w
        for sn, t in zip(nodes, totals.tolist()):
            sn.total = t
        b.state.nodes = heap_init(nodes)  # NewSortedScoredNodes
        return True

    def store(self, chosen: str, others: list[ScoredNode] | None) -> None:
        """``StoreScheduleResults`` after a successful cycle; ``others``: the scored nodes
        other than the chosen one (None when one node was feasible)."""
        b = self.batch
        b.last_cycle, b.last_chosen = self.cycle, chosen
        if self.hint is not None and self.hint == chosen:
            b.batched_pods += 1
            return
        if self.signature is not None and others:
            b.state = BatchState(self.signature, others)
        else:
            b.state = None


def others_scored(attempt: Any, feasible: np.ndarray, total: np.ndarray, chosen: int, names: list[str]
                  ) -> list[ScoredNode]:
    """``sortedPrioritizedNodes`` once the chosen node (position ``chosen`` in ``feasible``) is
    taken out: the heap of the other scored nodes."""
    raws = {p: ps.raw for p, ps in attempt.scores.items()}
    heap = heap_init([ScoredNode(names[int(i)], {p: int(r[k]) for p, r in raws.items()}, int(total[k]))
                      for k, i in enumerate(feasible)])
    at = next(k for k, sn in enumerate(heap) if sn.name == names[int(feasible[chosen])])
    heap_remove(heap, at)
    return heap


class Batching:
    """Every profile's batch, and what a cycle needs of it (None: no batching)."""

    def __init__(self, sched: Scheduler) -> None:
        self.sched = sched
        self.batches: dict[int, OpportunisticBatch] = {}

    def cycle(self, pod: Pod, profile: Profile, cycle: int | None) -> BatchCycle | None:
        if not ENABLED or cycle is None:
            return None
        batch = self.batches.setdefault(profile.token, OpportunisticBatch())
        return BatchCycle(self.sched, batch, sign_pod(self.sched, pod, profile), cycle)

    def expire(self) -> None:
        """``maxBatchAge``: a new pass starts with no state (see the module doc)."""
        for b in self.batches.values():
            b.state = None
