"""KubeSchedulerConfiguration -> profiles of enabled plugins, as kube-scheduler builds them.

Defaults follow ``pkg/scheduler/apis/config/v1`` at v1.37: the default
multi-point plugin list and weights, ``mergePluginSet`` semantics for
``enabled``/``disabled`` (``"*"`` disables all defaults), per-plugin args with
their defaults, and ``percentageOfNodesToScore`` (0 = adaptive).
"""

from __future__ import annotations

import copy
import itertools
from dataclasses import dataclass, field
from typing import Any

from ..errors import GpuLabError
from ..model.objects import DEFAULT_SCHEDULER
from .framework import Plugin
from .plugins.registry import DEFAULT_MULTIPOINT, REGISTRY

API_VERSION = "kubescheduler.config.k8s.io/v1"
PHASES = ("preEnqueue", "preFilter", "filter", "postFilter", "preScore", "score", "permit",
          "podGroupPostFilter")
_PROFILE_TOKENS = itertools.count(1)
_PHASE_METHOD = {
    "preEnqueue": "pre_enqueue",
    "permit": "permit",
    "podGroupPostFilter": "pod_group_post_filter",
    "preFilter": "pre_filter",
    "filter": "filter",
    "postFilter": "post_filter",
    "preScore": "pre_score",
    "score": "score",
}


@dataclass
class Profile:
    scheduler_name: str
    plugins: dict[str, Plugin]
    phases: dict[str, list[str]]  # phase -> plugin names in order
    weights: dict[str, int]
    percentage_of_nodes_to_score: int | None
    args: dict[str, dict[str, Any]] = field(default_factory=dict)
    # Names this profile in caches kept on pods (ids of dead objects get reused).
    token: int = field(default_factory=lambda: next(_PROFILE_TOKENS), compare=False)

    def __post_init__(self) -> None:
        self._at = {phase: [self.plugins[n] for n in names] for phase, names in self.phases.items()}
        self._weighted = {phase: [(p, self.weights.get(p.name, 1)) for p in plugins]
                          for phase, plugins in self._at.items()}

    def at(self, phase: str) -> list[Plugin]:
        return self._at[phase]

    def weighted(self, phase: str) -> list[tuple[Plugin, int]]:
        """(plugin, score weight) in order."""
        return self._weighted[phase]


@dataclass
class SchedulerConfig:
    profiles: dict[str, Profile]
    percentage_of_nodes_to_score: int = 0
    raw: dict[str, Any] = field(default_factory=dict)

    def profile_for(self, scheduler_name: str) -> Profile | None:
        return self.profiles.get(scheduler_name)


# ------------------------------------------------------- strict decoding
# The v1 types kube-scheduler decodes its --config into: a field name maps to a Go type
# ("int32", "string", ...), a struct (name, fields) or a list ("[]", element). kube-scheduler
# decodes strictly: a value of the wrong type is encoding/json's error, unknown fields are
# listed together ("strict decoding error: unknown field ...").
_PLUGIN = ("Plugin", {"name": "string", "weight": "int32"})
_PLUGIN_SET = ("PluginSet", {"enabled": ("[]", _PLUGIN), "disabled": ("[]", _PLUGIN)})
_PLUGINS = ("Plugins", {k: _PLUGIN_SET for k in (
    "preEnqueue", "queueSort", "preFilter", "filter", "postFilter", "preScore", "score",
    "reserve", "permit", "preBind", "bind", "postBind", "multiPoint", "placementGenerate",
    "placementScore", "podGroupPostFilter")})
_PLUGIN_CONFIG = ("PluginConfig", {"name": "string", "args": "args"})
_PROFILE = ("KubeSchedulerProfile", {"schedulerName": "string", "percentageOfNodesToScore": "int32",
                                     "plugins": _PLUGINS, "pluginConfig": ("[]", _PLUGIN_CONFIG)})
_LEADER_ELECTION = ("LeaderElectionConfiguration", {
    "leaderElect": "bool", "leaseDuration": "duration", "renewDeadline": "duration",
    "retryPeriod": "duration", "resourceLock": "string", "resourceName": "string",
    "resourceNamespace": "string"}, "v1alpha1")
_CLIENT_CONNECTION = ("ClientConnectionConfiguration", {
    "kubeconfig": "string", "acceptContentTypes": "string", "contentType": "string",
    "qps": "float32", "burst": "int32"}, "v1alpha1")
_CONFIG = ("KubeSchedulerConfiguration", {
    "apiVersion": "string", "kind": "string", "parallelism": "int32",
    "leaderElection": _LEADER_ELECTION, "clientConnection": _CLIENT_CONNECTION,
    "healthzBindAddress": "string", "metricsBindAddress": "string", "enableProfiling": "bool",
    "enableContentionProfiling": "bool", "percentageOfNodesToScore": "int32",
    "podInitialBackoffSeconds": "int64", "podMaxBackoffSeconds": "int64",
    "profiles": ("[]", _PROFILE), "extenders": ("[]", "any"), "delayCacheUntilActive": "bool"})
_RESOURCE_SPEC = ("ResourceSpec", {"name": "string", "weight": "int64"})
_ARGS = {
    "NodeResourcesFit": ("NodeResourcesFitArgs", {
        "apiVersion": "string", "kind": "string", "ignoredResources": ("[]", "string"),
        "ignoredResourceGroups": ("[]", "string"),
        "scoringStrategy": ("ScoringStrategy", {
            "type": "string", "resources": ("[]", _RESOURCE_SPEC),
            "requestedToCapacityRatio": ("RequestedToCapacityRatioParam", {
                "shape": ("[]", ("UtilizationShapePoint", {"utilization": "int32", "score": "int32"}))})})}),
    "NodeResourcesBalancedAllocation": ("NodeResourcesBalancedAllocationArgs", {
        "apiVersion": "string", "kind": "string", "resources": ("[]", _RESOURCE_SPEC)}),
    "InterPodAffinity": ("InterPodAffinityArgs", {
        "apiVersion": "string", "kind": "string", "hardPodAffinityWeight": "int32",
        "ignorePreferredTermsOfExistingPods": "bool"}),
    "DefaultPreemption": ("DefaultPreemptionArgs", {
        "apiVersion": "string", "kind": "string", "minCandidateNodesPercentage": "int32",
        "minCandidateNodesAbsolute": "int32"}),
    "PodTopologySpread": ("PodTopologySpreadArgs", {
        "apiVersion": "string", "kind": "string", "defaultConstraints": ("[]", "any"),
        "defaultingType": "string"}),
    "NodeAffinity": ("NodeAffinityArgs", {"apiVersion": "string", "kind": "string",
                                          "addedAffinity": "any"}),
}
_INT_RANGE = {"int32": 2**31, "int64": 2**63}


def _go_type(spec: Any) -> str:
    if isinstance(spec, str):
        return {"duration": "v1.Duration"}.get(spec, spec)
    if spec[0] == "[]":
        return "[]" + _go_type(spec[1])
    return f"{spec[2] if len(spec) > 2 else 'v1'}.{spec[0]}"


def _json_kind(value: Any, go: str) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, (int, float)):
        return f"number {value}" if go.startswith(("int", "float")) else "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


class _Decoder:
    """Walk a config against the v1 types: the first type error, then every unknown field."""

    def __init__(self) -> None:
        self.unknown: list[str] = []

    def type_error(self, value: Any, spec: Any, struct: str, path: str) -> GpuLabError:
        go = _go_type(spec)
        return GpuLabError(f"KubeSchedulerConfiguration: json: cannot unmarshal {_json_kind(value, go)} "
                           f"into Go struct field {struct}.{path} of type {go}")

    def value(self, value: Any, spec: Any, struct: str, path: str, where: str) -> None:
        """``path``: the json path without indexes (Go's error); ``where``: with indexes."""
        if value is None or spec == "any":
            return
        if spec == "args":
            if not isinstance(value, dict):
                raise GpuLabError(
                    f"KubeSchedulerConfiguration: decoding .{where.rsplit('.', 1)[0]}: decoding args for "
                    "plugin: couldn't get version/kind; json parse error: json: cannot unmarshal "
                    f"{_json_kind(value, 'struct')} into Go value of type struct")
            return
        if isinstance(spec, str):
            ok = {"string": isinstance(value, str), "duration": isinstance(value, str),
                  "bool": isinstance(value, bool),
                  "float32": isinstance(value, (int, float)) and not isinstance(value, bool)}.get(spec)
            if spec in _INT_RANGE:
                bound = _INT_RANGE[spec]
                ok = isinstance(value, int) and not isinstance(value, bool) and -bound <= value < bound
            if not ok:
                raise self.type_error(value, spec, struct, path)
            return
        if spec[0] == "[]":
            if not isinstance(value, list):
                raise self.type_error(value, spec, struct, path)
            for i, item in enumerate(value):
                if item is not None and not isinstance(item, dict) and not isinstance(spec[1], str):
                    raise self.type_error(item, spec[1], struct, path)
                self.value(item, spec[1], struct, path, f"{where}[{i}]")
            return
        if not isinstance(value, dict):
            raise self.type_error(value, spec, struct, path)
        self.struct(value, spec, path, where)

    def struct(self, raw: dict, spec: tuple, path: str, where: str) -> None:
        fields = spec[1]
        for key in sorted(raw, key=str):  # YAML becomes JSON with sorted keys on the way
            sub_path = f"{path}.{key}" if path else str(key)
            sub_where = f"{where}.{key}" if where else str(key)
            if key not in fields:
                self.unknown.append(sub_where)
                continue
            self.value(raw[key], fields[key], spec[0], sub_path, sub_where)


def decode_scheduler_config(raw: Any) -> None:
    """Refuse a KubeSchedulerConfiguration kube-scheduler would not decode, in its words."""
    if not isinstance(raw, dict):
        raise GpuLabError("KubeSchedulerConfiguration: the document must be a mapping")
    dec = _Decoder()
    dec.struct(raw, _CONFIG, "", "")
    if dec.unknown:
        raise GpuLabError("KubeSchedulerConfiguration: strict decoding error: "
                          + ", ".join(f'unknown field "{u}"' for u in dec.unknown))
    for i, profile in enumerate(raw.get("profiles") or []):
        for j, pc in enumerate((profile or {}).get("pluginConfig") or []):
            name: str | None = (pc or {}).get("name")  # the decoder refused a name that is no string
            spec = _ARGS.get(name) if name is not None else None
            args = (pc or {}).get("args")
            if spec is None or not isinstance(args, dict):
                continue
            inner = _Decoder()
            inner.struct(args, spec, "", "")
            if inner.unknown:
                raise GpuLabError(
                    f"KubeSchedulerConfiguration: strict decoding error: decoding .profiles[{i}].pluginConfig[{j}]: "
                    f"strict decoding error: decoding args for plugin {pc['name']}: strict decoding error: "
                    + ", ".join(f'unknown field "{u}"' for u in inner.unknown))


def _check_score_overflow(profile: str, weights: list[int]) -> None:
    """``getScoreWeights``: the weighted maximum scores must fit an int64 (Go arithmetic, so
    a negative weight wraps the running total and trips the check at the next plugin)."""
    max_total, total = 2**63 - 1, 0

    def wrap(x: int) -> int:
        return (x + 2**63) % 2**64 - 2**63

    for w in weights:
        if wrap(w * 100) > wrap(max_total - total):
            raise GpuLabError(f"KubeSchedulerConfiguration: initializing profiles: creating profile for "
                              f"scheduler name {profile}: score plugins: total score of Score plugins "
                              "could overflow")
        total = wrap(total + w * 100)


def _merge(defaults: list[dict], custom: dict | None) -> list[dict]:
    """``mergePluginSet``: drop disabled defaults, re-configure or append enabled ones."""
    if not custom:
        return [dict(p) for p in defaults]
    disabled = {p.get("name") or "" for p in custom.get("disabled") or [] if p}
    enabled = {p.get("name") or "": p for p in custom.get("enabled") or [] if p}
    out: list[dict] = []
    replaced: set[str] = set()
    if "*" not in disabled:
        for p in defaults:
            if p["name"] in disabled:
                continue
            if p["name"] in enabled:
                q = dict(p)
                q.update({k: v for k, v in enabled[p["name"]].items() if v is not None})
                out.append(q)
                replaced.add(p["name"])
            else:
                out.append(dict(p))
    for p in custom.get("enabled") or []:
        if p and (p.get("name") or "") not in replaced:
            out.append(dict(p))
    return out


def _check_plugin(name: str, where: str) -> None:
    if name not in REGISTRY:
        raise GpuLabError(
            f'KubeSchedulerConfiguration: {where}: plugin "{name}" is not supported by the gpu-lab simulator '
            f"(known: {', '.join(sorted(REGISTRY))})"
        )


def build_profile(raw: dict[str, Any], global_pct: int, handle: Any = None) -> Profile:
    name = raw.get("schedulerName") or DEFAULT_SCHEDULER
    plugins_cfg = raw.get("plugins") or {}
    for phase_cfg in plugins_cfg.values():
        for p in (phase_cfg or {}).get("enabled") or []:
            _check_plugin((p or {}).get("name") or "", f"profile {name}")
    multipoint = _merge(DEFAULT_MULTIPOINT, plugins_cfg.get("multiPoint"))
    args: dict[str, dict[str, Any]] = {}
    for pc in raw.get("pluginConfig") or []:
        if pc:
            args[pc.get("name") or ""] = copy.deepcopy(pc.get("args") or {})

    phases: dict[str, list[str]] = {}
    weights: dict[str, int] = {}
    used: set[str] = set()
    for phase in PHASES:
        method = _PHASE_METHOD[phase]
        base = [p for p in multipoint if REGISTRY[p["name"]].implements(method)]
        custom = plugins_cfg.get(phase)
        merged = _merge(base, custom)
        names = []
        for p in merged:
            cls = REGISTRY[p["name"]]
            if not cls.implements(method):
                raise GpuLabError(f'KubeSchedulerConfiguration: plugin "{p["name"]}" does not extend {phase}')
            if p["name"] not in names:
                names.append(p["name"])
            if phase == "score":
                weights[p["name"]] = int(p.get("weight") or 0) or 1
        phases[phase] = names
        used.update(names)
    # kube-scheduler weighs the profile's score plugins first, then the multi-point ones
    order: dict[str, int] = {}
    for p in ((plugins_cfg.get("score") or {}).get("enabled") or []) + multipoint:
        pname = (p or {}).get("name") or ""
        if pname in REGISTRY and REGISTRY[pname].implements("score") and pname not in order:
            order[pname] = int(p.get("weight") or 0) or 1
    _check_score_overflow(name, list(order.values()))
    instances = {n: REGISTRY[n](args.get(n), handle) for n in used}
    pct = raw.get("percentageOfNodesToScore")
    return Profile(name, instances, phases, weights, pct, args)


def default_config() -> SchedulerConfig:
    return load_scheduler_config(None)


def load_scheduler_config(raw: dict[str, Any] | None, handle: Any = None) -> SchedulerConfig:
    """Parse and default a KubeSchedulerConfiguration; ``handle`` is what plugins may ask
    of the scheduler (its rng, deterministic flag and nominations)."""
    raw = raw or {"apiVersion": API_VERSION, "kind": "KubeSchedulerConfiguration"}
    decode_scheduler_config(raw)
    pct = int(raw.get("percentageOfNodesToScore") or 0)
    if not 0 <= pct <= 100:
        raise GpuLabError(
            f"KubeSchedulerConfiguration: percentageOfNodesToScore: Invalid value: {pct}: not in valid range [0-100]"
        )
    profiles_raw = raw.get("profiles") or [{}]
    profiles: dict[str, Profile] = {}
    for i, pr in enumerate(profiles_raw):
        pr = pr or {}
        own = pr.get("percentageOfNodesToScore")
        if own is not None and not 0 <= own <= 100:
            raise GpuLabError(f"KubeSchedulerConfiguration: profiles[{i}].percentageOfNodesToScore: "
                              f"Invalid value: {own}: not in valid range [0-100]")
        prof = build_profile(pr, pct, handle)
        if prof.scheduler_name in profiles:
            raise GpuLabError(
                f'KubeSchedulerConfiguration: profiles[].schedulerName: Duplicate value: "{prof.scheduler_name}"'
            )
        profiles[prof.scheduler_name] = prof
    return SchedulerConfig(profiles, pct, raw)
