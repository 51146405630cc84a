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
PHASES = ("preFilter", "filter", "postFilter", "preScore", "score")
_PROFILE_TOKENS = itertools.count(1)
_PHASE_METHOD = {
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


def _merge(defaults: list[dict], custom: dict | None) -> list[dict]:
    """``mergePluginSet``: drop disabled defaults, re-configure or append enabled ones."""
    if not custom:
        return [dict(p) for p in defaults]
    disabled = {p["name"] for p in custom.get("disabled") or []}
    enabled = {p["name"]: p for p in custom.get("enabled") or []}
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
        if p["name"] not in replaced:
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
            _check_plugin(p.get("name", ""), f"profile {name}")
    multipoint = _merge(DEFAULT_MULTIPOINT, plugins_cfg.get("multiPoint"))
    args: dict[str, dict[str, Any]] = {}
    for pc in raw.get("pluginConfig") or []:
        args[pc["name"]] = copy.deepcopy(pc.get("args") or {})

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
    instances = {n: REGISTRY[n](args.get(n), handle) for n in used}
    pct = raw.get("percentageOfNodesToScore")
    return Profile(name, instances, phases, weights, pct, args)


def default_config() -> SchedulerConfig:
    return load_scheduler_config(None)


def load_scheduler_config(raw: dict[str, Any] | None, handle: Any = None) -> SchedulerConfig:
    """Parse and default a KubeSchedulerConfiguration; ``handle`` is what plugins may ask
    of the scheduler (its rng, deterministic flag and nominations)."""
    raw = raw or {"apiVersion": API_VERSION, "kind": "KubeSchedulerConfiguration"}
    pct = int(raw.get("percentageOfNodesToScore") or 0)
    if not 0 <= pct <= 100:
        raise GpuLabError(
            f"KubeSchedulerConfiguration: percentageOfNodesToScore: Invalid value: {pct}: not in valid range [0-100]"
        )
    profiles_raw = raw.get("profiles") or [{}]
    profiles: dict[str, Profile] = {}
    for pr in profiles_raw:
        prof = build_profile(pr, pct, handle)
        if prof.scheduler_name in profiles:
            raise GpuLabError(
                f'KubeSchedulerConfiguration: profiles[].schedulerName: Duplicate value: "{prof.scheduler_name}"'
            )
        profiles[prof.scheduler_name] = prof
    return SchedulerConfig(profiles, pct, raw)
