"""Pod manifests into ``Pod`` records, the way the API server admits a pod.

The steps run in the API server's order: the Priority admission plugin
resolves ``priorityClassName`` (its refusals come first), core/v1 defaults
fill requests from limits, validation collects every error, and only then is
the pod converted to the internal units the scheduler reads.
"""

from __future__ import annotations

import contextlib
import hashlib
import random
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import Forbidden, GpuLabError, InvalidObject
from ..names import stable_uid
from . import validation as v
from .objects import (
    DEFAULT_SCHEDULER,
    ContainerResources,
    HostPort,
    Pod,
    Toleration,
    compute_pod_requests,
    spec_key,
    spec_memo,
)
from .quantity import milli_value, value

# Every cluster has these two classes; the API server creates them at start.
SYSTEM_PRIORITY_CLASSES: dict[str, dict[str, Any]] = {
    "system-node-critical": {"value": 2000001000, "preemptionPolicy": "PreemptLowerPriority"},
    "system-cluster-critical": {"value": 2000000000, "preemptionPolicy": "PreemptLowerPriority"},
}
PREEMPT_LOWER = "PreemptLowerPriority"
MAX_INT64 = 2**63 - 1
# utilrand's alphabet: no vowels (no accidental words), no confusable 0/1/3.
NAME_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"


def name_suffix(seed: str, length: int = 5) -> str:
    """A stable stand-in for a ``generateName`` suffix, derived from ``seed`` (no retries:
    ``NameGenerator`` is what names pods)."""
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(NAME_ALPHABET[b % len(NAME_ALPHABET)] for b in digest[:length])


# The API server retries a generateName collision this many times (RetryGenerateName).
NAME_ATTEMPTS = 8
MAX_GENERATED_PREFIX = 58  # 63 - 5 random characters


class NameGenerator:
    """The API server's ``generateName``: the prefix plus 5 random characters from
    utilrand's alphabet, drawn again when the name is taken (RetryGenerateName, GA in v1.32).

    Draws are reproducible: each (namespace, prefix) has its own random stream seeded from
    the session's ``seed``, so a Deployment's pods are named the same in every run of a
    scenario, whatever else it holds. ``taken(namespace, name)`` tells about names that
    exist already (a session's pods); names this generator gave out are never repeated.
    ``seed=None`` draws from the system's randomness, as a real API server does.
    """

    def __init__(self, seed: int | str | None = 0,
                 taken: Callable[[str, str], bool] | None = None):
        self.seed = seed
        self.taken = taken
        self.used: set[tuple[str, str]] = set()
        self._streams: dict[tuple[str, str], random.Random] = {}
        self._journal: dict | None = None

    def generate(self, namespace: str, prefix: str) -> str:
        prefix = prefix[:MAX_GENERATED_PREFIX]  # SimpleNameGenerator truncates long bases
        key = (namespace, prefix)
        rng = self._streams.get(key)
        if rng is None:
            rng = self._streams[key] = (random.Random() if self.seed is None
                                        else random.Random(f"{self.seed}/{namespace}/{prefix}"))
        journal = self._journal
        if journal is not None and key not in journal["states"]:
            journal["states"][key] = rng.getstate()
        for _ in range(NAME_ATTEMPTS):
            name = prefix + "".join(rng.choices(NAME_ALPHABET, k=5))
            if (namespace, name) in self.used or (self.taken is not None and self.taken(namespace, name)):
                continue
            self.used.add((namespace, name))
            if journal is not None:
                journal["names"].append((namespace, name))
            return name
        raise GpuLabError(f'pods "{name}" already exists')

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """Draws made inside are undone if it raises (an apply is all-or-nothing)."""
        if self._journal is not None:  # nested: the outer one decides
            yield
            return
        self._journal = {"states": {}, "names": []}
        try:
            yield
        except BaseException:
            for key, state in self._journal["states"].items():
                self._streams[key].setstate(state)
            self.used.difference_update(self._journal["names"])
            raise
        finally:
            self._journal = None


def parse_pod(raw: dict, *, priority_classes: dict[str, dict] | None = None, created: int = 0,
              names: NameGenerator | None = None) -> Pod:
    """Admit one ``v1 Pod`` manifest: priority, defaults, validation, conversion.

    ``names`` draws the name of a pod that has only ``generateName``."""
    if not isinstance(raw, dict):
        raise GpuLabError("Pod: the document must be a mapping")
    meta = dict(_mapping(raw.get("metadata")))
    spec = _mapping(raw.get("spec"))
    meta["namespace"] = meta.get("namespace") or "default"
    if not meta.get("name") and isinstance(meta.get("generateName"), str):
        if names is not None:
            meta["name"] = names.generate(str(meta["namespace"]), meta["generateName"])
        else:
            meta["name"] = meta["generateName"] + name_suffix(
                f"{meta['namespace']}/{meta['generateName']}/{created}")
    name = name_raw if isinstance(name_raw := meta.get("name"), str) else ""

    for t in _list(spec.get("tolerations")):
        seconds = t.get("tolerationSeconds") if isinstance(t, dict) else None
        if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, int)
                                    or not -(2**63) <= seconds < 2**63):
            raise GpuLabError(v.decode_error("Pod", "Toleration.spec.tolerations.tolerationSeconds",
                                             seconds, "int64"))
    class_name, priority, policy = resolve_priority(spec, name, priority_classes or {})
    spec = pod_defaults(spec)
    key = spec_key(spec)
    errs = v.validate_object_meta(meta) + list(_spec_errors(spec, key))
    if not isinstance(raw.get("metadata", {}), dict):
        errs.insert(0, v.wrong_type("metadata", raw.get("metadata"), "an object"))
    if not isinstance(raw.get("spec", {}), dict):
        errs.insert(0, v.wrong_type("spec", raw.get("spec"), "an object"))
    if errs:
        raise InvalidObject("Pod", name, v.dedupe(errs))

    ns = meta["namespace"]
    owner = _controller(meta.get("ownerReferences") or [])
    pod = Pod(
        namespace=ns,
        name=name,
        uid=stable_uid(ns, name),
        labels=dict(meta.get("labels") or {}),
        annotations=dict(meta.get("annotations") or {}),
        owner_kind=owner.get("kind"),
        owner_name=owner.get("name"),
        scheduler_name=spec.get("schedulerName") or DEFAULT_SCHEDULER,
        priority_class_name=class_name,
        priority=priority,
        preemption_policy=policy,
        node_name=spec.get("nodeName") or "",
        node_selector=dict(spec.get("nodeSelector") or {}),
        affinity=spec.get("affinity") or {},  # spec is already our own copy (pod_defaults)
        tolerations=[_toleration(t) for t in spec.get("tolerations") or []],
        topology_spread_constraints=spec.get("topologySpreadConstraints") or [],
        host_ports=_host_ports(spec),
        containers=[_container(c) for c in spec.get("containers") or []],
        init_containers=[_container(c) for c in spec.get("initContainers") or []],
        overhead=internal_resources(spec.get("overhead")),
        created=created,
        raw=raw,
        memo=spec_memo(ns, meta.get("labels") or {}, owner.get("kind"), spec, key),
    )
    compute_pod_requests(pod)
    return pod


_SPEC_ERRORS: dict[str, tuple[str, ...]] = {}
_SPEC_ERRORS_MAX = 4096


def _spec_errors(spec: dict, key: str) -> tuple[str, ...]:
    """``validate_pod_spec``, once per distinct (defaulted) spec: the pods of a controller, and
    most of a large what-if's, repeat a few specs thousands of times."""
    errs = _SPEC_ERRORS.get(key)
    if errs is None:
        errs = tuple(v.validate_pod_spec(spec))
        if len(_SPEC_ERRORS) >= _SPEC_ERRORS_MAX:
            _SPEC_ERRORS.clear()
        _SPEC_ERRORS[key] = errs
    return errs


def resolve_priority(spec: dict, pod_name: str, classes: dict[str, dict]) -> tuple[str, int, str]:
    """The Priority admission plugin: (class name, priority, preemption policy) or ``Forbidden``."""
    name = spec.get("priorityClassName") or ""
    if name:
        pc = classes.get(name) or SYSTEM_PRIORITY_CLASSES.get(name)
        if pc is None:
            raise Forbidden("pods", pod_name, f"no PriorityClass with name {name} was found")
    else:
        defaults = [(c.get("value", 0), n) for n, c in classes.items() if c.get("globalDefault")]
        # after a race two defaults may exist; the plugin takes the lowest value
        pc = classes[min(defaults)[1]] if defaults else {"value": 0}
        name = min(defaults)[1] if defaults else ""
    priority, policy = int(pc.get("value", 0)), pc.get("preemptionPolicy") or PREEMPT_LOWER
    asked = spec.get("priority")
    if asked is not None and asked != priority:
        raise Forbidden("pods", pod_name, f"the integer value of priority ({asked}) must not be provided in "
                        f"pod spec; priority admission controller computed {priority} from the given "
                        "PriorityClass name")
    asked = spec.get("preemptionPolicy")
    if asked is not None and asked != policy:
        raise Forbidden("pods", pod_name, f"the string value of PreemptionPolicy ({asked}) must not be "
                        f"provided in pod spec; priority admission controller computed {policy} from the "
                        "given PriorityClass name")
    return name, priority, policy


def plain_copy(x: Any) -> Any:
    """A deep copy of manifest data (dicts, lists and immutable scalars): what
    ``copy.deepcopy`` gives, without its bookkeeping (a pod is copied thousands of times)."""
    if isinstance(x, dict):
        return {k: plain_copy(v) for k, v in x.items()}
    if isinstance(x, list):
        return [plain_copy(v) for v in x]
    return x


def template_defaults(spec: dict) -> dict:
    """The defaults every PodSpec gets (pod templates too): port protocol TCP."""
    spec = plain_copy(spec)
    for c in _containers(spec):
        for p in _list(c.get("ports")):
            if isinstance(p, dict) and not p.get("protocol"):
                p["protocol"] = "TCP"
    return spec


def pod_defaults(spec: dict) -> dict:
    """``SetDefaults_Pod``: requests default to limits; hostNetwork publishes container ports."""
    spec = template_defaults(spec)
    for c in _containers(spec):
        res = c.get("resources")
        if (isinstance(res, dict) and isinstance(res.get("limits"), dict)
                and isinstance(res.get("requests") or {}, dict)):
            requests = res.get("requests") or {}
            res["requests"] = {**requests, **{k: q for k, q in res["limits"].items() if k not in requests}}
        if spec.get("hostNetwork") is True:
            for p in _list(c.get("ports")):
                if isinstance(p, dict) and not p.get("hostPort"):
                    p["hostPort"] = p.get("containerPort")
    return spec


def internal_amount(resource: str, raw: Any) -> int:
    """cpu in millicores, everything else in whole units (both rounded up, as the scheduler reads)."""
    q = v.parse(raw)
    # ParseQuantity caps a quantity at the largest int64; so do the scheduler's sums
    return min(milli_value(q) if resource == "cpu" else value(q), MAX_INT64)


def internal_resources(resources: dict | None) -> dict[str, int]:
    return {str(r): internal_amount(str(r), q) for r, q in (resources or {}).items()}


def _container(c: dict) -> ContainerResources:
    res = c.get("resources") or {}
    requests = internal_resources(res.get("requests"))
    return ContainerResources(
        name=str(c.get("name") or ""),
        requests=requests,
        limits=internal_resources(res.get("limits")),
        stated=frozenset(r for r in ("cpu", "memory") if r in requests),
    )


def _host_ports(spec: dict) -> list[HostPort]:
    """``schedutil.GetHostPorts``: sidecar init containers (restartPolicy Always), then containers."""
    sidecars = [c for c in _list(spec.get("initContainers")) if c.get("restartPolicy") == "Always"]
    ports = []
    for c in sidecars + _list(spec.get("containers")):
        for p in _list(c.get("ports")):
            if p.get("hostPort"):
                ports.append(HostPort(int(p["hostPort"]), p.get("protocol") or "TCP", p.get("hostIP") or "0.0.0.0"))
    return ports


def _toleration(t: dict) -> Toleration:
    seconds = t.get("tolerationSeconds")
    return Toleration(key=str(t.get("key") or ""), operator=t.get("operator") or "Equal",
                      value=str(t.get("value") or ""), effect=t.get("effect") or "",
                      toleration_seconds=int(seconds) if seconds is not None else None)


def _controller(refs: list[dict]) -> dict:
    """The controlling owner (``metav1.GetControllerOf``); hand-written refs often omit
    ``controller: true``, so the first reference stands in for it."""
    for ref in refs:
        if ref.get("controller") is True:
            return ref
    return refs[0] if refs else {}


def _mapping(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _list(value: Any) -> list:
    return value if isinstance(value, list) else []


def _containers(spec: dict) -> list[dict]:
    return [c for key in ("containers", "initContainers") for c in _list(spec.get(key)) if isinstance(c, dict)]
