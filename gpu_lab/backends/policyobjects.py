"""PodDisruptionBudgets, ResourceQuotas and LimitRanges on a real API server (local, kubeconfig, kind).

The real API server enforces them (LimitRanger and ResourceQuota are admission plugins it
enables by default) and the real controller-manager keeps their status (the resourcequota
and disruption controllers). Two things make a run repeatable, as a running cluster is once
its controllers have synced:

* Before an apply creates anything, the shared model (``model.limitrange``,
  ``model.resourcequota``) admits its pods in creation order against the quotas' synced
  ``status.used``: a bare pod over quota refuses the apply in the API server's words with
  nothing created (as on the sim), and a controller's pods over quota are known in advance,
  so the apply waits for the pods that will exist, not for ones the controller cannot make.
* Before the first pod of an apply is created, every quota's status must match the pods
  (``status.hard`` filled, ``status.used`` what the quota controller counts) and every
  PDB's status must be the disruption controller's verdict on the pods as they are, at its
  current ``observedGeneration``; a new LimitRange must be one the API server's LimitRanger
  already applies (a dry-run pod shows its defaults). Otherwise admission and
  kube-scheduler's preemption would read a status still on its way, and the result would
  depend on timing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from ..errors import Forbidden, GpuLabError
from ..kube import ApiError, KubeClient
from ..model import creationorder as batch
from ..model.disruptionbudget import PodView, parse_disruption_budget, status
from ..model.limitrange import ANNOTATION, parse_limit_range
from ..model.limitrange import admit as limit_range_admit
from ..model.objects import Pod, compute_pod_requests
from ..model.parse import _container, internal_resources
from ..model.resourcequota import Ledger, from_status, matched, parse_resource_quota, used_by
from ..names import TERMINAL_PHASES

KINDS = ("PodDisruptionBudget", "ResourceQuota", "LimitRange")
POLICY_API = "policy/v1"
PROBE = "gpu-lab-limitrange-probe"


def _api_version(kind: str) -> str:
    return POLICY_API if kind == "PodDisruptionBudget" else "v1"


def _pod(raw: dict) -> Pod:
    """What quota counts of a pod the API server holds (its requests already defaulted)."""

    meta, spec = raw.get("metadata") or {}, raw.get("spec") or {}
    pod = Pod(namespace=meta.get("namespace", "default"), name=meta.get("name", ""),
              labels=dict(meta.get("labels") or {}),
              containers=[_container(c) for c in spec.get("containers") or []],
              init_containers=[_container(c) for c in spec.get("initContainers") or []],
              overhead=internal_resources(spec.get("overhead")))
    compute_pod_requests(pod)
    return pod


def _existing(client: KubeClient) -> list[tuple[Pod, str, dict]]:
    """Every stored pod: the model's pod, its phase, and the manifest."""
    return [(_pod(p), (p.get("status") or {}).get("phase", ""), p) for p in client.list("Pod")["items"]]


# ------------------------------------------------------------------ admission, judged first


def admit(client: KubeClient, sc, docs: list[dict], wait: Callable[[Callable[[], bool], str], None]) -> set[str]:
    """LimitRanger and ResourceQuota for the apply's pods, in creation order, by the shared
    model: a refused bare pod raises (``Forbidden``, the API server's words); a controller's
    refused pod is dropped from ``sc`` (its controller's create will fail: no pod to wait for,
    but a ``FailedCreate`` event). Returns the keys of the pods dropped."""
    ranges = [parse_limit_range(d) for d in client.list("LimitRange")["items"]] + list(sc.limit_ranges)
    stored = client.list("ResourceQuota")["items"]
    if not (ranges or stored or sc.resource_quotas):
        return set()
    if stored:
        wait(lambda: synced(client), "the resource quota controller")
        stored = client.list("ResourceQuota")["items"]
    quotas = [parse_resource_quota(d) for d in stored]
    used = {(q.namespace, q.name): from_status(d.get("status")) for q, d in zip(quotas, stored, strict=True)}
    pods = [(p, phase) for p, phase, _ in _existing(client)] if sc.resource_quotas else []
    for q in sc.resource_quotas:
        used[(q.namespace, q.name)] = used_by(q, pods)
    ledger = Ledger(quotas + list(sc.resource_quotas), used)
    refused: set[str] = set()
    for p in batch.pods_in_order(docs, sc.pods):
        try:
            ledger.admit(limit_range_admit(p, ranges))
        except Forbidden as err:
            if p.owner_kind is None:
                raise _in_api_words(client, p, err) from None
            refused.add(p.key)
    if refused:
        sc.pods = [p for p in sc.pods if p.key not in refused]
        for record in sc.workloads:
            record["pods"] = [n for n in record["pods"] if f"{record['namespace']}/{n}" not in refused]
    return refused


def _in_api_words(client: KubeClient, pod: Pod, err: Forbidden) -> GpuLabError:
    """The API server's own refusal where it refuses the pod by itself (a dry run, nothing
    created); the model's where it would refuse it only after pods created before it."""
    try:
        client.create(pod.raw, namespace=pod.namespace, dry_run=True)
    except ApiError as api:
        if api.code == 403:
            return api
    return err


# ------------------------------------------------------------------ the controllers synced


def synced(client: KubeClient) -> bool:
    """Every quota's and PDB's status is what its controller makes of the pods as they are."""
    quotas = client.list("ResourceQuota")["items"]
    budgets = client.list("PodDisruptionBudget", api_version=POLICY_API)["items"]
    if not quotas and not budgets:
        return True
    pods = _existing(client)
    for raw in quotas:
        q = parse_resource_quota(raw)
        st = raw.get("status") or {}
        if internal_resources(st.get("hard")) != internal_resources((raw.get("spec") or {}).get("hard")):
            return False
        used = from_status(st)
        want = used_by(q, [(p, phase) for p, phase, _ in pods])
        if any(used.get(r) != n for r, n in want.items() if matched(r)):
            return False
    if budgets:
        views = [_view(raw) for _, _, raw in pods]
        scales: dict[tuple[str, str, str], int | None] = {}

        def scale_of(ns: str, owner: tuple[str, str]) -> int | None:
            key = (ns, *owner)
            if key not in scales:
                scales[key] = _scale(client, ns, owner)
            return scales[key]

        parsed = [parse_disruption_budget(raw) for raw in budgets]
        picked = [{(p.namespace, p.name) for p in views if b.selects(p)} for b in parsed]
        for i, (raw, pdb) in enumerate(zip(budgets, parsed, strict=True)):
            st = raw.get("status") or {}
            if st.get("observedGeneration") != (raw.get("metadata") or {}).get("generation"):
                return False
            if any(picked[i] & other for j, other in enumerate(picked) if j != i):
                # pods under several PDBs: a pod's change requeues only the first PDB the
                # controller finds for it (getPdbForPod), so the others' counts may stay stale
                continue
            expect = status(pdb, views, scale_of)
            if expect is None:  # the controller's sync fails: it writes disruptionsAllowed 0 alone
                if st.get("disruptionsAllowed", 0) != 0:
                    return False
                continue
            have = (st.get("currentHealthy", 0), st.get("desiredHealthy", 0), st.get("expectedPods", 0),
                    st.get("disruptionsAllowed", 0))
            if have != (expect.current_healthy, expect.desired_healthy, expect.expected_pods,
                        expect.disruptions_allowed):
                return False
    return True


def _view(raw: dict) -> PodView:
    meta, st = raw.get("metadata") or {}, raw.get("status") or {}
    ref = next((o for o in meta.get("ownerReferences") or [] if o.get("controller")), None)
    ready = not meta.get("deletionTimestamp") and st.get("phase") not in TERMINAL_PHASES and any(
        c.get("type") == "Ready" and c.get("status") == "True" for c in st.get("conditions") or [])
    return PodView(meta.get("namespace", "default"), meta.get("name", ""), dict(meta.get("labels") or {}),
                   (ref["kind"], ref["name"]) if ref else None, ready)


def _scale(client: KubeClient, ns: str, owner: tuple[str, str]) -> int | None:
    """The disruption controller's finders: a ReplicaSet's Deployment's replicas (or its own),
    a StatefulSet's; None for a controller without scale (a Job)."""
    kind, name = owner
    if kind not in ("ReplicaSet", "StatefulSet"):
        return None
    try:
        obj = client.get(kind, name, ns)
    except ApiError:
        return None
    ref = next((o for o in obj["metadata"].get("ownerReferences") or [] if o.get("controller")), None)
    if kind == "ReplicaSet" and ref is not None and ref.get("kind") == "Deployment":
        with contextlib.suppress(ApiError):
            obj = client.get("Deployment", ref["name"], ns)
    replicas = (obj.get("spec") or {}).get("replicas")
    return replicas if isinstance(replicas, int) else 1


def limit_ranges_applied(client: KubeClient, namespaces: set[str]) -> bool:
    """LimitRanger fills the defaults of a LimitRange just created: a dry-run pod in each
    namespace with one comes back annotated (its cache may lag the create by a moment)."""
    for ns in sorted(namespaces):
        probe: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": PROBE, "namespace": ns},
                                 "spec": {"containers": [{"name": "probe", "image": "probe"}]}}
        try:
            made = client.create(probe, namespace=ns, dry_run=True)
        except ApiError as err:
            if "serviceaccount" in str(err).lower():
                return False  # a new namespace's ServiceAccount is not there yet: ask again
            continue  # refused by LimitRanger's own min/max or by quota, after its defaults
        if ANNOTATION not in ((made.get("metadata") or {}).get("annotations") or {}):
            return False
    return True


# ------------------------------------------------------------------ reset


def delete_all(client: KubeClient) -> None:
    """Every PDB, quota and limit range (reset; namespaces other than default take theirs along)."""
    for kind in KINDS:
        with contextlib.suppress(ApiError):
            for obj in client.list(kind, api_version=_api_version(kind))["items"]:
                meta = obj["metadata"]
                client.delete(kind, meta["name"], namespace=meta.get("namespace"),
                              api_version=_api_version(kind), missing_ok=True)


def left(client: KubeClient) -> bool:
    with contextlib.suppress(ApiError):
        return any(client.list(kind, api_version=_api_version(kind))["items"] for kind in KINDS)
    return False
