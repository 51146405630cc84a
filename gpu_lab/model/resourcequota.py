"""ResourceQuota (v1): validated as the API server does, enforced as the ResourceQuota admission plugin.

Quota is checked when a pod is created (a controller's pod too): the pod's usage as the pod
evaluator counts it (``pkg/quota/v1/evaluator/core/pods.go``) is added to each matching
quota's ``status.used`` and refused past ``status.hard``, in the plugin's words
(``exceeded quota: NAME, requested: ..., used: ..., limited: ...``). Extended resources
count only as ``requests.<name>`` (``requests.nvidia.com/gpu``); a plain ``nvidia.com/gpu``
in ``hard`` is valid but limits nothing, as on a real cluster.

Not modelled (refused in one line): ``scopes``/``scopeSelector`` and quota on objects other
than pods (``services``, ``count/deployments.apps``, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import Forbidden, GpuLabError, InvalidObject
from ..names import TERMINAL_PHASES
from . import validation as v
from .objects import Pod
from .parse import internal_amount
from .quantity import format_quantity

API_VERSION = "v1"
KIND = "ResourceQuota"
#: what the pod evaluator matches besides hugepages and requests.<extended resource>
POD_RESOURCES = ("count/pods", "cpu", "memory", "ephemeral-storage", "requests.cpu", "requests.memory",
                 "requests.ephemeral-storage", "limits.cpu", "limits.memory", "limits.ephemeral-storage", "pods")
#: IsStandardQuotaResourceName's other names: valid, but they count objects gpu-lab does not quota
OTHER_STANDARD = ("requests.storage", "resourcequotas", "services", "replicationcontrollers", "secrets",
                  "persistentvolumeclaims", "configmaps", "services.nodeports", "services.loadbalancers")
#: IsStandardResourceName's names (count/pods is qualified)
STANDARD_RESOURCES = (set(POD_RESOURCES) - {"count/pods"}) | set(OTHER_STANDARD) | {"storage"}
#: ``ValidateResourceQuotaResourceName``'s message
INVALID_RESOURCE = "must be a standard resource for quota"
#: quota on cpu or memory makes every container state it (the evaluator's Constraints)
VALIDATION_SET = ("cpu", "memory", "requests.cpu", "requests.memory", "limits.cpu", "limits.memory")
UNSUPPORTED = ("gpu-lab enforces ResourceQuota on pods only (pods, count/pods, cpu, memory, "
               "ephemeral-storage, their requests./limits. forms, hugepages and requests.<extended resource>)")


@dataclass
class ResourceQuota:
    namespace: str
    name: str
    hard: dict[str, int] = field(default_factory=dict)  # internal amounts (cpu in milli)


def _base(resource: str) -> str:
    """The resource a quota name counts in (``requests.cpu`` -> ``cpu``), for its units."""
    for prefix in ("requests.", "limits."):
        if resource.startswith(prefix):
            return resource[len(prefix):]
    return resource


def _is_hugepages(name: str) -> bool:
    return _base(name).startswith("hugepages-")


def matched(name: str) -> bool:
    """``podEvaluator.MatchingResources`` for one quota resource name."""
    if name in POD_RESOURCES or name.startswith(("hugepages-", "requests.hugepages-")):
        return True
    native = "/" not in name or "kubernetes.io/" in name
    return name.startswith("requests.") and (not native or name.startswith("requests.deviceclass.resource.kubernetes.io/"))


def parse_resource_quota(doc: dict) -> ResourceQuota:
    meta = m if isinstance(m := doc.get("metadata"), dict) else {}
    name = name_raw if isinstance(name_raw := meta.get("name"), str) else ""
    errs = v.validate_object_meta(meta)
    spec = sp if isinstance(sp := doc.get("spec"), dict) else {}
    if spec.get("scopes") or spec.get("scopeSelector"):
        raise GpuLabError(f'ResourceQuota "{name}": spec.scopes and spec.scopeSelector are not supported by '
                          "gpu-lab (a quota here counts every pod of its namespace)")
    hard_raw = spec.get("hard") or {}
    if not isinstance(hard_raw, dict):
        raise InvalidObject(KIND, name, [v.wrong_type("spec.hard", hard_raw, "an object")])
    hard: dict[str, int] = {}
    for res, q in sorted(hard_raw.items(), key=lambda kv: str(kv[0])):
        res, path = str(res), f"spec.hard[{res}]"
        named = [v.invalid(path, res, m) for m in v.is_qualified_name(res)]  # ValidateResourceQuotaResourceName
        if not named and "/" not in res and res not in STANDARD_RESOURCES and not _is_hugepages(res):
            named.append(v.invalid(path, res, "must be a standard resource type or fully qualified"))
        if "/" not in res and res not in POD_RESOURCES and res not in OTHER_STANDARD and not _is_hugepages(res):
            named.append(v.invalid(path, res, INVALID_RESOURCE))
        if named:
            errs += named + v.validate_quantity_value(res, q, path)
            continue
        if res in OTHER_STANDARD or (res.startswith("count/") and res != "count/pods"):
            raise GpuLabError(f'ResourceQuota "{name}": {path}: {UNSUPPORTED}')
        errs += v.validate_quantity_value(res, q, path)
        hard[res] = internal_amount(_base(res), q)
    if errs:
        raise InvalidObject(KIND, name, v.dedupe(errs))
    return ResourceQuota(str(meta.get("namespace") or "default"), name, hard)


def _limits(pod: Pod) -> dict[str, int]:
    """``resourcehelper.PodLimits``: app containers summed, at least each init container, plus
    overhead where a limit is set."""
    total: dict[str, int] = {}
    for c in pod.containers:
        for r, amount in c.limits.items():
            total[r] = total.get(r, 0) + amount
    for c in pod.init_containers:
        for r, amount in c.limits.items():
            total[r] = max(total.get(r, 0), amount)
    for r, amount in pod.overhead.items():
        if r in total:
            total[r] += amount
    return total


def _requests(pod: Pod) -> dict[str, int]:
    """``resourcehelper.PodRequests`` with the resources a container states at 0 kept."""
    stated = {r for c in pod.containers + pod.init_containers for r in c.requests}
    return {r: pod.requests.get(r, 0) for r in stated | set(pod.requests)}


def pod_usage(pod: Pod, phase: str = "") -> dict[str, int]:
    """``PodUsageFunc``: what one pod counts against quota (a finished pod only its object)."""
    out = {"count/pods": 1}
    if phase in TERMINAL_PHASES:
        return out
    out["pods"] = 1
    requests, limits = _requests(pod), _limits(pod)
    for r in ("cpu", "memory", "ephemeral-storage"):
        if r in requests:
            out[r] = out[f"requests.{r}"] = requests[r]
        if r in limits:
            out[f"limits.{r}"] = limits[r]
    for r, amount in requests.items():
        if r.startswith("hugepages-"):
            out[r] = out[f"requests.{r}"] = amount
        elif "/" in r and "kubernetes.io/" not in r and not r.startswith("requests."):
            out[f"requests.{r}"] = amount  # extended resources count as requests.<name> only
    return out


def _container_usage(c) -> set[str]:
    """The quota names one container states (``podComputeUsageHelper`` over its own resources)."""
    names = {"pods"}
    for r in ("cpu", "memory", "ephemeral-storage"):
        if r in c.requests:
            names |= {r, f"requests.{r}"}
        if r in c.limits:
            names.add(f"limits.{r}")
    return names


def _print(amounts: dict[str, int]) -> str:
    """``prettyPrint``: name=quantity, sorted by name."""
    return ",".join(f"{k}={format_quantity(_base(k), amounts.get(k, 0))}" for k in sorted(amounts))


class Ledger:
    """The quotas of a cluster and what each has used: admits pods one at a time, as the
    plugin does, adding each admitted pod's usage to ``used``."""

    def __init__(self, quotas: list[ResourceQuota], used: dict[tuple[str, str], dict[str, int]]) -> None:
        self.quotas = sorted(quotas, key=lambda q: (q.namespace, q.name))
        self.used = {(q.namespace, q.name): dict(used.get((q.namespace, q.name)) or {}) for q in self.quotas}

    def check(self, pod: Pod) -> dict[tuple[str, str], dict[str, int]]:
        """The new usage of each matching quota if ``pod`` is created; ``Forbidden`` if it may not be."""
        mine = [q for q in self.quotas if q.namespace == pod.namespace]
        interesting = [q for q in mine if any(matched(r) for r in q.hard)]
        for q in interesting:  # Constraints: every quota first, then usage
            required = {r for r in q.hard if matched(r)} & set(VALIDATION_SET)
            missing: dict[str, set[str]] = {}
            for c in pod.containers + pod.init_containers:
                for r in required - _container_usage(c):
                    missing.setdefault(r, set()).add(c.name)
            if missing:
                detail = "; ".join(f"{r} for: {','.join(sorted(names))}" for r, names in sorted(missing.items()))
                raise Forbidden("pods", pod.name, f"failed quota: {q.name}: must specify {detail}")
        usage = {r: amount for r, amount in pod_usage(pod).items() if amount}
        out = {}
        for q in interesting:
            key = (q.namespace, q.name)
            requested = {r: usage[r] for r in q.hard if matched(r) and r in usage}
            if not requested:
                continue
            used = self.used[key]
            new = {r: used.get(r, 0) + amount for r, amount in requested.items()}
            exceeded = sorted(r for r, amount in new.items() if amount > q.hard[r])
            if exceeded:
                raise Forbidden("pods", pod.name, f"exceeded quota: {q.name}, requested: "
                                f"{_print({r: requested[r] for r in exceeded})}, used: "
                                f"{_print({r: used.get(r, 0) for r in exceeded})}, limited: "
                                f"{_print({r: q.hard[r] for r in exceeded})}")
            out[key] = {**used, **new}
        return out

    def admit(self, pod: Pod) -> None:
        """Check ``pod`` and count it (``Forbidden`` leaves the ledger as it was)."""
        self.used.update(self.check(pod))


def used_by(quota: ResourceQuota, pods: list[tuple[Pod, str]]) -> dict[str, int]:
    """``status.used`` as the quota controller computes it from (pod, phase) pairs."""
    used = dict.fromkeys((r for r in quota.hard if matched(r)), 0)
    for pod, phase in pods:
        if pod.namespace != quota.namespace:
            continue
        for r, amount in pod_usage(pod, phase).items():
            if r in used:
                used[r] += amount
    return used


def from_status(raw: Any) -> dict[str, int]:
    """A quota's ``status.used`` as the API server reports it, in internal amounts."""
    return {str(r): internal_amount(_base(str(r)), q) for r, q in ((raw or {}).get("used") or {}).items()}
