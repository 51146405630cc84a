"""gpu-lab's ``Autoscaler`` object: cluster-autoscaler's flags, or Karpenter's consolidation.

    apiVersion: gpulab.dev/v1alpha1
    kind: Autoscaler
    metadata: {name: default}
    spec:
      mode: ClusterAutoscaler          # or Consolidation
      scaleDownUnneededTime: 10m
      scaleDownUtilizationThreshold: 0.5
      scaleDownGpuUtilizationThreshold: 0.5
      scaleDownDelayAfterAdd: 10m
      expander: least-waste            # comma-separated chain, e.g. priority,least-waste
      priorities: {50: [".*h100.*"], 10: [".*"]}   # the priority expander's ConfigMap data

Each ClusterAutoscaler field is a cluster-autoscaler flag in camelCase
(``--scale-down-unneeded-time`` -> ``scaleDownUnneededTime``) with that flag's
default, from the parameter table in cluster-autoscaler's FAQ
(https://github.com/kubernetes/autoscaler/blob/master/cluster-autoscaler/FAQ.md#what-are-the-parameters-to-ca).
``priorities`` is the ``priorities`` key of the priority expander's ConfigMap
(``cluster-autoscaler/expander/priority/readme.md``). Consolidation fields are
Karpenter's ``NodePool.spec.disruption`` (``karpenter.sh/v1``, defaults from its
kubebuilder markers in ``pkg/apis/v1/nodepool.go``). A field of the other mode
is an error rather than silently ignored.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from ..errors import GpuLabError, InvalidObject
from .nodepool import spec_duration

API_VERSION = "gpulab.dev/v1alpha1"
KIND = "Autoscaler"
MODES = ("ClusterAutoscaler", "Consolidation")
# --expander values (cluster-autoscaler expander/expander.go); grpc needs an external server.
EXPANDERS = ("random", "most-pods", "least-waste", "least-nodes", "price", "priority")
CONSOLIDATION_POLICIES = ("WhenEmpty", "WhenEmptyOrUnderutilized")
_BUDGET = re.compile(r"^((100|[0-9]{1,2})%|[0-9]+)$")  # Karpenter's Budget.nodes pattern


@dataclass(frozen=True)
class AutoscalerSpec:
    """A validated ``Autoscaler``; durations in seconds. The defaults are the real tools'."""

    name: str = "default"
    mode: str = "ClusterAutoscaler"
    # cluster-autoscaler flags (FAQ parameter table; cited per field)
    scale_down_enabled: bool = True  # --scale-down-enabled: true (deprecated there, kept for lessons)
    scale_down_unneeded_time: float = 600.0  # --scale-down-unneeded-time: 10m0s
    scale_down_utilization_threshold: float = 0.5  # --scale-down-utilization-threshold: 0.5
    scale_down_gpu_utilization_threshold: float = 0.5  # --scale-down-gpu-utilization-threshold: 0.5
    scale_down_delay_after_add: float = 600.0  # --scale-down-delay-after-add: 10m0s
    scale_down_delay_after_delete: float = 0.0  # --scale-down-delay-after-delete: 0s
    # --expander: "least-waste" since kubernetes/autoscaler#7631 (merged 2025; "random" before)
    expander: tuple[str, ...] = ("least-waste",)
    priorities: dict[int, tuple[str, ...]] = field(default_factory=dict)
    max_nodes_total: int = 0  # --max-nodes-total: 0, no limit
    max_scale_down_parallelism: int = 10  # --max-scale-down-parallelism: 10
    max_drain_parallelism: int = 1  # --max-drain-parallelism: 1
    ignore_daemonsets_utilization: bool = False  # --ignore-daemonsets-utilization: false
    skip_nodes_with_system_pods: bool = True  # --skip-nodes-with-system-pods: true
    skip_nodes_with_custom_controller_pods: bool = True  # --skip-nodes-with-custom-controller-pods: true
    scan_interval: float = 10.0  # --scan-interval: 10s
    force_ds: bool = False  # --force-ds: false (count DaemonSets not yet running on the example node)
    # Karpenter NodePool.spec.disruption
    consolidation_policy: str = "WhenEmptyOrUnderutilized"  # +kubebuilder:default
    consolidate_after: float | None = 0.0  # +kubebuilder:default {consolidateAfter: "0s"}; None = Never
    budgets: tuple[str, ...] = ("10%",)  # +kubebuilder:default {{nodes: "10%"}}


# spec field -> (attribute, kind of value, mode that owns it); order = the order errors are listed in
_FIELDS: dict[str, tuple[str, str, str | None]] = {
    "mode": ("mode", "mode", None),
    "scaleDownEnabled": ("scale_down_enabled", "bool", "ClusterAutoscaler"),
    "scaleDownUnneededTime": ("scale_down_unneeded_time", "duration", "ClusterAutoscaler"),
    "scaleDownUtilizationThreshold": ("scale_down_utilization_threshold", "ratio", "ClusterAutoscaler"),
    "scaleDownGpuUtilizationThreshold": ("scale_down_gpu_utilization_threshold", "ratio",
                                         "ClusterAutoscaler"),
    "scaleDownDelayAfterAdd": ("scale_down_delay_after_add", "duration", "ClusterAutoscaler"),
    "scaleDownDelayAfterDelete": ("scale_down_delay_after_delete", "duration", "ClusterAutoscaler"),
    "expander": ("expander", "expander", "ClusterAutoscaler"),
    "priorities": ("priorities", "priorities", "ClusterAutoscaler"),
    "maxNodesTotal": ("max_nodes_total", "count", "ClusterAutoscaler"),
    "maxScaleDownParallelism": ("max_scale_down_parallelism", "positive", "ClusterAutoscaler"),
    "maxDrainParallelism": ("max_drain_parallelism", "positive", "ClusterAutoscaler"),
    "ignoreDaemonsetsUtilization": ("ignore_daemonsets_utilization", "bool", "ClusterAutoscaler"),
    "skipNodesWithSystemPods": ("skip_nodes_with_system_pods", "bool", "ClusterAutoscaler"),
    "skipNodesWithCustomControllerPods": ("skip_nodes_with_custom_controller_pods", "bool",
                                          "ClusterAutoscaler"),
    "scanInterval": ("scan_interval", "interval", "ClusterAutoscaler"),
    "forceDs": ("force_ds", "bool", "ClusterAutoscaler"),
    "consolidationPolicy": ("consolidation_policy", "policy", "Consolidation"),
    "consolidateAfter": ("consolidate_after", "after", "Consolidation"),
    "budgets": ("budgets", "budgets", "Consolidation"),
}
SPEC_FIELDS = tuple(_FIELDS)


def parse_autoscaler(raw: Any) -> AutoscalerSpec:
    """Validate an ``Autoscaler`` document; every error is listed at once, in one line
    (``Autoscaler "x" is invalid: [spec.a: ..., spec.b: ...]``)."""
    if not isinstance(raw, dict):
        raise GpuLabError("Autoscaler: the document must be a mapping")
    meta = metadata_raw if isinstance(metadata_raw := raw.get("metadata"), dict) else {}
    name = meta.get("name")
    if not name or not isinstance(name, str):
        raise GpuLabError("Autoscaler: metadata.name: Required value")
    if raw.get("apiVersion") != API_VERSION or raw.get("kind") != KIND:
        raise GpuLabError(f'Autoscaler "{name}": apiVersion/kind must be {API_VERSION}/{KIND}, '
                          f'got {raw.get("apiVersion")}/{raw.get("kind")}')
    spec = raw.get("spec", {})
    if spec is None:
        spec = {}
    if not isinstance(spec, dict):
        raise InvalidObject(KIND, name, ["spec: must be a mapping"])
    errors: list[str] = []
    for key in sorted(k for k in spec if k not in _FIELDS):
        errors.append(f"spec.{key}: unknown field (known: {', '.join(SPEC_FIELDS)})")
    values: dict[str, Any] = {"name": name}
    mode = spec.get("mode", "ClusterAutoscaler")
    for key, (attr, kind, owner) in _FIELDS.items():
        if key not in spec:
            continue
        if owner is not None and mode in MODES and owner != mode:
            errors.append(f"spec.{key}: Forbidden: only with mode {owner} (mode is {mode})")
            continue
        try:
            values[attr] = _READERS[kind](spec[key])
        except ValueError as err:
            errors.append(f"spec.{key}: {err}")
    expander = values.get("expander", AutoscalerSpec.expander)
    if mode == "ClusterAutoscaler" and "priority" in expander and not values.get("priorities") \
            and "priorities" not in spec:
        errors.append("spec.priorities: Required value: the priority expander reads its priorities "
                      "(the cluster-autoscaler-priority-expander ConfigMap's data)")
    if errors:
        raise InvalidObject(KIND, name, errors)
    return AutoscalerSpec(**values)


def _mode(value: Any) -> str:
    if value not in MODES:
        raise ValueError(f'Unsupported value: {_show(value)}: supported values: '
                         + ", ".join(f'"{m}"' for m in MODES))
    return value


def _bool(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError(f"Invalid value: {value!r}: must be true or false")
    return value


def _duration(value: Any) -> float:
    return spec_duration(value)


def _interval(value: Any) -> float:
    seconds = spec_duration(value)
    if seconds <= 0:
        raise ValueError(f'Invalid value: "{value}": must be greater than 0')
    return seconds


def _after(value: Any) -> float | None:
    return spec_duration(value, never=True)


def _ratio(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"Invalid value: {value!r}: must be a number between 0 and 1")
    if not 0 <= value <= 1:
        raise ValueError(f"Invalid value: {value}: must be between 0 and 1")
    return float(value)


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"Invalid value: {value!r}: must be an integer")
    if value < 0:
        raise ValueError(f"Invalid value: {value}: must be greater than or equal to 0")
    return value


def _positive(value: Any) -> int:
    if _count(value) == 0:
        raise ValueError(f"Invalid value: {value}: must be greater than 0")
    return value


def _expander(value: Any) -> tuple[str, ...]:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"Invalid value: {value!r}: must be an expander name or a comma-separated "
                         f"list of them ({', '.join(EXPANDERS)})")
    names = tuple(n.strip() for n in value.split(","))
    for n in names:
        if n == "grpc":
            raise ValueError('Unsupported value: "grpc": the grpc expander calls an external server '
                             "gpu-lab does not run; supported values: " + ", ".join(f'"{e}"' for e in EXPANDERS))
        if n not in EXPANDERS:
            raise ValueError(f'Unsupported value: "{n}": supported values: '
                             + ", ".join(f'"{e}"' for e in EXPANDERS))
    dup = next((n for i, n in enumerate(names) if n in names[:i]), None)
    if dup:  # FAQ: "An expander must not appear in the list more than once."
        raise ValueError(f'Duplicate value: "{dup}": an expander must not appear in the list more than once')
    return names


def _priorities(value: Any) -> dict[int, tuple[str, ...]]:
    if not isinstance(value, dict) or not value:
        raise ValueError("must be a mapping of priority (an integer) to a list of node group name "
                         "regular expressions")
    out: dict[int, tuple[str, ...]] = {}
    for prio, patterns in value.items():
        try:
            level = int(prio)
        except (TypeError, ValueError):
            raise ValueError(f"Invalid value: {prio!r}: priorities must be integers") from None
        if isinstance(prio, bool) or level < 0:
            raise ValueError(f"Invalid value: {prio!r}: priorities must be non-negative integers")
        if isinstance(patterns, str):
            patterns = [patterns]
        if not isinstance(patterns, list) or not all(isinstance(p, str) for p in patterns):
            raise ValueError(f"[{prio}]: must be a list of regular expressions")
        for p in patterns:
            try:
                re.compile(p)
            except re.error as err:
                raise ValueError(f'[{prio}]: Invalid value: "{p}": not a regular expression: {err}') from None
        out[level] = tuple(patterns)
    return out


def _policy(value: Any) -> str:
    if value not in CONSOLIDATION_POLICIES:
        raise ValueError(f"Unsupported value: {_show(value)}: supported values: "
                         + ", ".join(f'"{p}"' for p in CONSOLIDATION_POLICIES))
    return value


def _budgets(value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise ValueError('must be a list of budgets such as [{nodes: "10%"}]')
    out = []
    for i, b in enumerate(value):
        if not isinstance(b, dict) or "nodes" not in b:
            raise ValueError(f"[{i}].nodes: Required value")
        extra = sorted(set(b) - {"nodes"})
        if extra:  # schedule, duration and reasons are not modelled
            raise ValueError(f"[{i}].{extra[0]}: unknown field (gpu-lab models budgets by nodes only)")
        nodes = b["nodes"]
        if not isinstance(nodes, str) or not _BUDGET.match(nodes):
            raise ValueError(f"[{i}].nodes: Invalid value: {_show(nodes)}: should match "
                             f"'{_BUDGET.pattern}'")
        out.append(nodes)
    return tuple(out)


def _show(value: Any) -> str:
    return f'"{value}"' if isinstance(value, str) else repr(value)


_READERS = {
    "mode": _mode, "bool": _bool, "duration": _duration, "interval": _interval, "after": _after,
    "ratio": _ratio, "count": _count, "positive": _positive, "expander": _expander,
    "priorities": _priorities, "policy": _policy, "budgets": _budgets,
}
