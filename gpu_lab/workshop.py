"""``gpu-lab workshop provision|status|teardown``: one isolated slice of a cluster per participant.

For each participant ``i`` in ``1..N`` :func:`provision` creates, on the cluster the
instructor's (admin) kubeconfig reaches:

* a Namespace ``participant-<i>`` labelled ``gpulab.dev/workshop=<name>`` (and Pod
  Security ``baseline``: no privileged pods, no hostPath, no host network);
* a ResourceQuota ``gpu-lab-gpus`` with ``requests.nvidia.com/gpu: K`` (the only quota
  form Kubernetes accepts for an extended resource; a GPU must be requested with an equal
  limit, so this caps both);
* a ServiceAccount ``learner``, a Role ``gpu-lab-learner`` (pods and their logs/exec,
  deployments, jobs, events, read-only quota and replicasets, Kueue queues) and a
  RoleBinding of the two: nothing cluster-wide, so no other namespace and no node;
* where Kueue's API (``kueue.x-k8s.io``) is served, a LocalQueue ``workshop`` on one
  ClusterQueue ``gpu-lab-<name>`` shared by the workshop;
* ``DIR/participant-<i>.kubeconfig`` (mode 0600): the API server and its CA from the admin
  kubeconfig, a TokenRequest token of ``learner`` (``--token-hours``, default 24) and the
  namespace as the context's default.

Provisioning is idempotent: running it again with the same N changes no object and keeps
every kubeconfig whose token is still valid for more than an hour; a larger N adds
participants. :func:`teardown` deletes only the namespaces labelled as this workshop's.

Exit codes: 0 done, 1 the cluster refused or could not be reached, 2 bad input.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import json
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pandas as pd
import yaml

from .backends.kind.cluster import KindCluster
from .backends.kubeconfig.connect import default_kubeconfig, open_client
from .backends.local.cluster import LocalCluster
from .errors import (
    GpuLabError,
    LocalClusterError,
    NotFound,
    WorkshopClusterError,
    WorkshopInputError,
)
from .kube import ApiError, KubeClient, KubeconfigError, Unreachable
from .kube import kubeconfig as kc
from .names import GPU_RESOURCE as GPU

WORKSHOP_LABEL = "gpulab.dev/workshop"
PARTICIPANT_LABEL = "gpulab.dev/participant"
PREFIX = "participant-"
SERVICE_ACCOUNT = "learner"
ROLE = "gpu-lab-learner"
QUOTA = "gpu-lab-gpus"
QUOTA_KEY = f"requests.{GPU}"
LOCAL_QUEUE = "workshop"
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_MISSING = "Kueue not installed: no LocalQueue"
#: how long a Kueue group listed in /apis may take to serve its version
KUEUE_DISCOVERY_WAIT_S = 2.0
POD_SECURITY = "baseline"
DEFAULT_TOKEN_HOURS = 24.0
#: a kubeconfig whose token expires sooner than this is written again
RENEW_MARGIN_S = 3600
TEARDOWN_TIMEOUT_S = 120.0
BACKENDS = ("local", "kind", "kubeconfig")
MAX_PARTICIPANTS = 500
STATUS_COLUMNS = ["participant", "namespace", "running", "pending", "gpus_requested",
                  "gpu_quota", "pods"]
_NAME = re.compile(r"^[a-z0-9]([a-z0-9.-]{0,61}[a-z0-9])?$")

Progress = Callable[[str], object] | None

#: what a learner may do in their own namespace, and nothing else
LEARNER_RULES: list[dict[str, Any]] = [
    {"apiGroups": [""], "resources": ["pods"],
     "verbs": ["get", "list", "watch", "create", "delete", "patch", "update"]},
    {"apiGroups": [""], "resources": ["pods/log"], "verbs": ["get", "list"]},
    {"apiGroups": [""], "resources": ["pods/exec"], "verbs": ["create", "get"]},
    {"apiGroups": [""], "resources": ["events", "resourcequotas", "limitranges"],
     "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["events.k8s.io"], "resources": ["events"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["apps"], "resources": ["deployments"],
     "verbs": ["get", "list", "watch", "create", "delete", "patch", "update"]},
    {"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["get", "patch", "update"]},
    {"apiGroups": ["apps"], "resources": ["replicasets"], "verbs": ["get", "list", "watch"]},
    {"apiGroups": ["batch"], "resources": ["jobs"],
     "verbs": ["get", "list", "watch", "create", "delete", "patch", "update"]},
    {"apiGroups": [KUEUE_GROUP], "resources": ["localqueues", "workloads"],
     "verbs": ["get", "list", "watch"]},
]


def _quiet(_msg: str) -> None:
    return None


def namespace_of(i: int) -> str:
    return f"{PREFIX}{i}"


def check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise WorkshopInputError(
            f"invalid workshop name {name!r}: use lower-case letters, digits, '-' and '.'"
        )
    return name


# ====================================================================== connection


@dataclass
class Workshop:
    """An admin connection to the cluster a workshop runs on, and the workshop's name
    (the value of its namespaces' ``gpulab.dev/workshop`` label)."""

    client: Any  # KubeClient
    name: str
    backend: str = "kubeconfig"
    _kueue: str | None | bool = field(default=False, repr=False)

    @property
    def server(self) -> str:
        return self.client.server

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> Workshop:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def kueue_version(self) -> str | None:
        """Kueue's served API version (``v1beta1``...) when the cluster has its CRDs with
        LocalQueue and ClusterQueue, else None (discovery, asked once)."""
        if self._kueue is False:
            self._kueue = detect_kueue(self.client)
        return self._kueue  # type: ignore[return-value]


def detect_kueue(client) -> str | None:
    """API discovery of ``kueue.x-k8s.io``: its preferred version if it serves
    ``localqueues`` and ``clusterqueues``, else None."""
    groups = (client.request("GET", "/apis").json() or {}).get("groups") or []
    for g in groups:
        if g.get("name") != KUEUE_GROUP:
            continue
        versions = [(g.get("preferredVersion") or {}).get("version")]
        versions += [v.get("version") for v in g.get("versions") or []]
        for version in [v for v in versions if v]:
            if {"localqueues", "clusterqueues"} <= _kueue_resources(client, version):
                return version
    return None


def _kueue_resources(client, version: str) -> set[str]:
    """The resources ``kueue.x-k8s.io/<version>`` serves. The API server lists a newly
    installed CRD's group in ``/apis`` a moment before the group version answers (404
    meanwhile): wait briefly for it, then take it as not served yet."""
    deadline = time.monotonic() + KUEUE_DISCOVERY_WAIT_S
    while True:
        try:
            doc = client.request("GET", f"/apis/{KUEUE_GROUP}/{version}").json() or {}
        except NotFound:
            if time.monotonic() > deadline:
                return set()
            time.sleep(0.2)
            continue
        return {r.get("name") for r in doc.get("resources") or []}


def connect(
    backend: str = "local",
    name: str | None = None,
    kubeconfig: str | Path | None = None,
    context: str | None = None,
    root: str | Path | None = None,
) -> Workshop:
    """The admin connection: ``local`` is the running local lab ``name`` (``root``
    replaces ``$GPU_LAB_HOME``); ``kind`` is the kind lab ``name`` that ``gpu-lab up
    --backend kind`` created (its own kubeconfig); ``kubeconfig`` is an existing cluster
    (``$KUBECONFIG`` or ``~/.kube/config`` unless ``kubeconfig`` is given)."""
    if backend not in BACKENDS:
        raise WorkshopInputError(
            f"unknown backend {backend!r} for a workshop: use {', '.join(BACKENDS)}"
        )
    name = check_name(name or "default")
    if backend == "local":
        if kubeconfig is not None or context is not None:
            raise WorkshopInputError("--kubeconfig/--context are for --backend kubeconfig")

        lab = LocalCluster(name, root=root).connect()
        return Workshop(KubeClient.from_kubeconfig(lab.kubeconfig()), name, backend)

    if backend == "kind":
        if kubeconfig is not None:
            raise WorkshopInputError("--kubeconfig is for --backend kubeconfig; kind labs keep their own")

        kubeconfig = KindCluster(name, root=root).kubeconfig()
        if not Path(kubeconfig).is_file():
            raise WorkshopInputError(f"kind lab {name!r} has no kubeconfig at {kubeconfig}: create it with "
                                     f"`gpu-lab up --backend kind --name {name} --scenario FILE`")
    path = Path(kubeconfig).expanduser() if kubeconfig else default_kubeconfig()
    if not path.is_file():
        raise WorkshopInputError(f"kubeconfig {path} does not exist")
    return Workshop(open_client(path, context), name, backend)


# ====================================================================== objects


def _labels(ws: Workshop, i: int | None = None) -> dict[str, str]:
    out = {WORKSHOP_LABEL: ws.name, "app.kubernetes.io/managed-by": "gpu-lab"}
    if i is not None:
        out[PARTICIPANT_LABEL] = str(i)
    return out


def participant_objects(ws: Workshop, i: int, gpus: int) -> list[dict]:
    """The namespaced objects of participant ``i`` (namespace first)."""
    ns = namespace_of(i)
    labels = _labels(ws, i)
    meta = {"namespace": ns, "labels": labels}
    ns_labels = dict(labels)
    for mode in ("enforce", "warn"):
        ns_labels[f"pod-security.kubernetes.io/{mode}"] = POD_SECURITY
    return [
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns, "labels": ns_labels}},
        {"apiVersion": "v1", "kind": "ResourceQuota", "metadata": {"name": QUOTA, **meta},
         "spec": {"hard": {QUOTA_KEY: str(gpus)}}},
        {"apiVersion": "v1", "kind": "ServiceAccount",
         "metadata": {"name": SERVICE_ACCOUNT, **meta}},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
         "metadata": {"name": ROLE, **meta}, "rules": LEARNER_RULES},
        {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
         "metadata": {"name": ROLE, **meta},
         "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": ROLE},
         "subjects": [{"kind": "ServiceAccount", "name": SERVICE_ACCOUNT, "namespace": ns}]},
    ]


def kueue_objects(ws: Workshop, version: str, participants: list[int], gpus: int) -> list[dict]:
    """A ResourceFlavor and the shared ClusterQueue (its GPU quota: every participant's
    quota summed; it admits workloads only from this workshop's namespaces)."""
    av = f"{KUEUE_GROUP}/{version}"
    cq = f"gpu-lab-{ws.name}"
    labels = _labels(ws)
    return [
        {"apiVersion": av, "kind": "ResourceFlavor", "metadata": {"name": cq, "labels": labels}},
        {"apiVersion": av, "kind": "ClusterQueue", "metadata": {"name": cq, "labels": labels},
         "spec": {
             "namespaceSelector": {"matchLabels": {WORKSHOP_LABEL: ws.name}},
             "resourceGroups": [{
                 "coveredResources": ["cpu", "memory", GPU],
                 "flavors": [{"name": cq, "resources": [
                     {"name": "cpu", "nominalQuota": str(64 * len(participants))},
                     {"name": "memory", "nominalQuota": f"{256 * len(participants)}Gi"},
                     {"name": GPU, "nominalQuota": str(gpus * len(participants))},
                 ]}],
             }],
         }},
    ]


def local_queue(ws: Workshop, version: str, i: int) -> dict:
    return {"apiVersion": f"{KUEUE_GROUP}/{version}", "kind": "LocalQueue",
            "metadata": {"name": LOCAL_QUEUE, "namespace": namespace_of(i), "labels": _labels(ws, i)},
            "spec": {"clusterQueue": f"gpu-lab-{ws.name}"}}


def _ref(obj: dict) -> str:
    meta = obj["metadata"]
    where = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj['kind'].lower()}/{where}{meta['name']}"


def ensure(client, obj: dict) -> str:
    """Create ``obj``, or bring an existing one to it by server-side apply. Returns
    ``created``, ``updated`` or ``unchanged`` (the server's resourceVersion did not move)."""

    meta = obj["metadata"]
    kind, av = obj["kind"], obj["apiVersion"]
    try:
        before = client.get(kind, meta["name"], meta.get("namespace"), api_version=av)
    except NotFound:
        before = None
    # created by apply too, so that applying the same object again is a no-op write
    after = client.patch(kind, meta["name"], obj, meta.get("namespace"), patch_type="apply",
                         api_version=av, force=True)
    if before is None:
        return "created"
    same = after["metadata"].get("resourceVersion") == before["metadata"].get("resourceVersion")
    return "unchanged" if same else "updated"


def _check_namespace(ws: Workshop, i: int) -> None:
    """Refuse a namespace of that name that is not this workshop's, or one being deleted."""

    ns = namespace_of(i)
    try:
        obj = ws.client.get("Namespace", ns)
    except NotFound:
        return
    owner = (obj["metadata"].get("labels") or {}).get(WORKSHOP_LABEL)
    if owner != ws.name:
        what = f"workshop {owner!r}'s" if owner else "not gpu-lab's"
        raise WorkshopClusterError(
            f"namespace {ns} already exists and is {what} (label {WORKSHOP_LABEL}={ws.name} "
            "missing): delete it or choose another --name"
        )
    if obj["metadata"].get("deletionTimestamp"):
        raise WorkshopClusterError(
            f"namespace {ns} is still being deleted (a teardown is finishing): wait and run "
            "provision again"
        )


# ====================================================================== kubeconfigs


def _jwt_claims(token: str) -> dict:
    """The (unverified) claims of a JWT: enough to see whose token it is and when it ends."""
    try:
        payload = token.split(".")[1]
        payload += "=" * (-len(payload) % 4)
        return json.loads(base64.urlsafe_b64decode(payload))
    except (IndexError, ValueError):
        return {}


def request_token(client, namespace: str, hours: float) -> str:
    """A token of ``namespace``'s ``learner`` ServiceAccount from the TokenRequest API."""
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
            "spec": {"expirationSeconds": int(hours * 3600)}}
    path = f"/api/v1/namespaces/{namespace}/serviceaccounts/{SERVICE_ACCOUNT}/token"
    doc = client.request("POST", path, body=body).json()
    token = (doc.get("status") or {}).get("token")
    if not token:
        raise WorkshopClusterError(f"the API server gave no token for {namespace}/{SERVICE_ACCOUNT}")
    return token


def kubeconfig_path(out: Path, i: int) -> Path:
    return Path(out) / f"{namespace_of(i)}.kubeconfig"


def render_kubeconfig(ws: Workshop, i: int, token: str) -> str:
    creds = ws.client.creds
    cluster: dict[str, Any] = {"server": ws.server}
    if creds.insecure:
        cluster["insecure-skip-tls-verify"] = True
    elif creds.ca_file:
        cluster["certificate-authority-data"] = base64.b64encode(
            Path(creds.ca_file).read_bytes()).decode()
    cname, user = f"gpu-lab-{ws.name}", namespace_of(i)
    ctx = f"{user}@{cname}"
    doc = {
        "apiVersion": "v1", "kind": "Config", "preferences": {},
        "clusters": [{"name": cname, "cluster": cluster}],
        "users": [{"name": user, "user": {"token": token}}],
        "contexts": [{"name": ctx, "context": {"cluster": cname, "user": user,
                                                "namespace": namespace_of(i)}}],
        "current-context": ctx,
    }
    return yaml.safe_dump(doc, sort_keys=False)


def _usable_kubeconfig(ws: Workshop, path: Path, i: int) -> bool:
    """An existing kubeconfig for participant ``i`` on this server whose token is theirs,
    valid for more than :data:`RENEW_MARGIN_S` and still accepted by the API server."""

    if not path.is_file():
        return False
    try:
        creds = kc.load(path)
    except GpuLabError:
        return False
    claims = _jwt_claims(creds.token or "")
    want = f"system:serviceaccount:{namespace_of(i)}:{SERVICE_ACCOUNT}"
    if creds.server != ws.server or claims.get("sub") != want:
        return False
    if float(claims.get("exp") or 0) < time.time() + RENEW_MARGIN_S:
        return False
    try:
        with KubeClient(creds, timeout=10) as kube:
            kube.list("Pod", namespace_of(i), limit=1)
    except (ApiError, Unreachable):
        return False  # revoked (the ServiceAccount was deleted and made again)
    return True


def write_kubeconfig(ws: Workshop, out: Path, i: int, hours: float, renew: bool = False) -> str:
    """``written`` or ``kept`` (an existing one still works, unless ``renew``)."""

    path = kubeconfig_path(out, i)
    if not renew and _usable_kubeconfig(ws, path, i):
        os.chmod(path, 0o600)
        return "kept"
    token = request_token(ws.client, namespace_of(i), hours)
    kc.write(path, render_kubeconfig(ws, i, token))
    return "written"


# ====================================================================== provision


@dataclass
class ProvisionReport:
    participants: list[int]
    objects: dict[str, str]  # ref -> created/updated/unchanged
    kubeconfigs: dict[str, str]  # path -> written/kept
    kueue: str  # what was done about Kueue, one line
    extra: list[str]  # namespaces of this workshop beyond N (left alone)

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for v in self.objects.values():
            out[v] = out.get(v, 0) + 1
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"participants": self.participants, "objects": self.objects,
                "kubeconfigs": self.kubeconfigs, "kueue": self.kueue, "extra": self.extra}


def _check_counts(participants: Any, gpus: Any, hours: Any) -> None:
    if not isinstance(participants, int) or isinstance(participants, bool) or not (
            1 <= participants <= MAX_PARTICIPANTS):
        raise WorkshopInputError(
            f"--participants must be a whole number from 1 to {MAX_PARTICIPANTS}, got {participants!r}")
    if not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 0:
        raise WorkshopInputError(f"--gpus-per-participant must be a whole number >= 0, got {gpus!r}")
    if not isinstance(hours, (int, float)) or isinstance(hours, bool) or not (
            10 / 60 <= hours <= 24 * 365):
        raise WorkshopInputError(
            f"--token-hours must be between 0.17 (10 minutes, the API server's minimum) and 8760, got {hours!r}")


def _check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise WorkshopInputError(f"--out {out} is not a directory")


def provision(
    ws: Workshop,
    participants: int,
    out: str | Path,
    gpus_per_participant: int = 1,
    token_hours: float = DEFAULT_TOKEN_HOURS,
    renew: bool = False,
    progress: Progress = print,
) -> ProvisionReport:
    """Give participants 1..``participants`` their namespace, quota, RBAC, LocalQueue
    (where Kueue runs) and kubeconfig in ``out``. Idempotent; see the module docstring."""
    say = progress or _quiet
    _check_counts(participants, gpus_per_participant, token_hours)
    out = Path(out).expanduser()
    _check_out(out)
    numbers = list(range(1, participants + 1))
    for i in numbers:  # every refusal before the first change
        _check_namespace(ws, i)
    out.mkdir(parents=True, exist_ok=True, mode=0o700)
    objects: dict[str, str] = {}
    kueue = ws.kueue_version()
    if kueue:
        every = sorted(set(numbers) | set(existing_participants(ws)))
        for obj in kueue_objects(ws, kueue, every, gpus_per_participant):
            objects[_ref(obj)] = ensure(ws.client, obj)
        note = f"Kueue {kueue}: LocalQueue {LOCAL_QUEUE} on ClusterQueue gpu-lab-{ws.name}"
    else:
        note = KUEUE_MISSING
    kubeconfigs: dict[str, str] = {}
    for i in numbers:
        for obj in participant_objects(ws, i, gpus_per_participant):
            objects[_ref(obj)] = ensure(ws.client, obj)
        if kueue:
            obj = local_queue(ws, kueue, i)
            objects[_ref(obj)] = ensure(ws.client, obj)
        if not _wait_for_service_account(ws, i):
            raise WorkshopClusterError(
                f"ServiceAccount {namespace_of(i)}/{SERVICE_ACCOUNT} did not appear")
        # pods run as the namespace's "default" ServiceAccount, which kube-controller-manager
        # creates a moment after the namespace: until then every pod is refused
        if not _wait_for_service_account(ws, i, "default", timeout=30.0):
            say(f"warning: {namespace_of(i)} has no ServiceAccount \"default\" yet (is "
                "kube-controller-manager running?): pods are refused until it exists")
        if not _wait_for_quota(ws, i, gpus_per_participant):
            say(f"warning: the quota of {namespace_of(i)} is not counted yet (is "
                "kube-controller-manager running?): GPU pods are refused until it is")
        path = kubeconfig_path(out, i)
        kubeconfigs[str(path)] = write_kubeconfig(ws, out, i, token_hours, renew)
        say(f"{namespace_of(i)}: {kubeconfigs[str(path)]} {path}")
    extra = [namespace_of(i) for i in existing_participants(ws) if i > participants]
    report = ProvisionReport(numbers, objects, kubeconfigs, note, extra)
    c = report.counts()
    say(f"{participants} participant(s), {gpus_per_participant} GPU(s) each: "
        + ", ".join(f"{c.get(k, 0)} {k}" for k in ("created", "updated", "unchanged"))
        + f" objects; {note}")
    if extra:
        say(f"left alone (beyond --participants {participants}): {', '.join(extra)}; "
            "`gpu-lab workshop teardown` removes every participant")
    return report


def _wait_for_service_account(ws: Workshop, i: int, name: str = SERVICE_ACCOUNT,
                              timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        try:
            ws.client.get("ServiceAccount", name, namespace_of(i))
            return True
        except NotFound:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.2)


def _wait_for_quota(ws: Workshop, i: int, gpus: int, timeout: float = 30.0) -> bool:
    """Until the quota controller has written the quota's status (admission refuses every
    GPU pod with "status unknown for quota" before that)."""
    deadline = time.monotonic() + timeout
    while True:
        quota = ws.client.get("ResourceQuota", QUOTA, namespace_of(i))
        hard = ((quota.get("status") or {}).get("hard") or {}).get(QUOTA_KEY)
        if hard is not None and str(hard) == str(gpus):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)


def existing_participants(ws: Workshop) -> list[int]:
    """The participant numbers whose namespaces carry this workshop's label."""
    items = ws.client.list("Namespace", label_selector=f"{WORKSHOP_LABEL}={ws.name}")["items"]
    out = []
    for ns in items:
        name = ns["metadata"]["name"]
        if name.startswith(PREFIX) and name[len(PREFIX):].isdigit():
            out.append(int(name[len(PREFIX):]))
    return sorted(out)


# ====================================================================== status


def _pod_gpus(pod: dict) -> int:
    """GPUs a pod requests: the larger of its containers' sum and any init container."""

    def of(c: dict) -> int:
        res = c.get("resources") or {}
        value = (res.get("requests") or {}).get(GPU, (res.get("limits") or {}).get(GPU, 0))
        try:
            return int(value)
        except (TypeError, ValueError):
            return 0

    spec = pod.get("spec") or {}
    main = sum(of(c) for c in spec.get("containers") or [])
    init = max([of(c) for c in spec.get("initContainers") or []] or [0])
    return max(main, init)


def status(ws: Workshop) -> pd.DataFrame:
    """One row per participant: running and pending pods, the GPUs their non-terminal
    pods request, their GPU quota and their pods (``name(phase, N gpu)``)."""
    rows = []
    for i in existing_participants(ws):
        ns = namespace_of(i)
        pods = ws.client.list("Pod", ns)["items"]
        quotas = ws.client.list("ResourceQuota", ns)["items"]
        quota = next((q for q in quotas if q["metadata"]["name"] == QUOTA), None)
        hard = ((quota or {}).get("spec") or {}).get("hard", {}).get(QUOTA_KEY)
        live = [p for p in pods if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed")
                and not p["metadata"].get("deletionTimestamp")]
        phase = [(p.get("status") or {}).get("phase", "Pending") for p in live]
        rows.append({
            "participant": i,
            "namespace": ns,
            "running": phase.count("Running"),
            "pending": phase.count("Pending"),
            "gpus_requested": sum(_pod_gpus(p) for p in live),
            "gpu_quota": int(hard) if hard is not None else None,
            "pods": ", ".join(f"{p['metadata']['name']}({ph}, {_pod_gpus(p)} gpu)"
                              for p, ph in sorted(zip(live, phase),
                                                  key=lambda x: x[0]["metadata"]["name"])),
        })
    return pd.DataFrame(rows, columns=STATUS_COLUMNS)


# ====================================================================== teardown


@dataclass
class TeardownReport:
    namespaces: list[str]
    files: list[str]
    pending: list[str]  # namespaces still terminating when the wait ended
    cluster_objects: list[str]

    def to_dict(self) -> dict[str, Any]:
        return {"namespaces": self.namespaces, "files": self.files, "pending": self.pending,
                "cluster_objects": self.cluster_objects}


def teardown(
    ws: Workshop,
    out: str | Path | None = None,
    wait: bool = True,
    timeout: float = TEARDOWN_TIMEOUT_S,
    progress: Progress = print,
) -> TeardownReport:
    """Delete this workshop's namespaces (only those labelled ``gpulab.dev/workshop=<name>``),
    its Kueue ClusterQueue and ResourceFlavor, and, in ``out``, the participant kubeconfigs
    that point at this cluster. ``wait``: until the namespaces are gone."""
    say = progress or _quiet
    items = ws.client.list("Namespace", label_selector=f"{WORKSHOP_LABEL}={ws.name}")["items"]
    names = sorted((ns["metadata"]["name"] for ns in items), key=_participant_key)
    for ns in names:
        ws.client.delete("Namespace", ns, missing_ok=True)
        say(f"deleting namespace {ns}")
    gone_cluster: list[str] = []
    version = ws.kueue_version()
    if version:
        for kind in ("ClusterQueue", "ResourceFlavor"):
            av = f"{KUEUE_GROUP}/{version}"
            found = ws.client.list(kind, api_version=av,
                                   label_selector=f"{WORKSHOP_LABEL}={ws.name}")["items"]
            for obj in found:
                ws.client.delete(kind, obj["metadata"]["name"], api_version=av, missing_ok=True)
                gone_cluster.append(f"{kind.lower()}/{obj['metadata']['name']}")
    files = _remove_kubeconfigs(ws, Path(out).expanduser()) if out else []
    for f in files:
        say(f"removed {f}")
    pending: list[str] = []
    if wait and names:
        pending = _wait_gone(ws, names, timeout)
    if pending:
        say(f"still terminating after {timeout:.0f} s: {', '.join(pending)}")
    say(f"workshop {ws.name!r}: {len(names)} namespace(s) deleted, {len(files)} kubeconfig(s) removed")
    return TeardownReport(names, files, pending, gone_cluster)


def _participant_key(name: str) -> tuple[int, str]:
    tail = name[len(PREFIX):]
    return (int(tail) if name.startswith(PREFIX) and tail.isdigit() else 1 << 30, name)


def _remove_kubeconfigs(ws: Workshop, out: Path) -> list[str]:
    removed: list[str] = []
    if not out.is_dir():
        return removed
    for path in sorted(out.glob(f"{PREFIX}*.kubeconfig")):
        try:
            creds = kc.load(path)
        except GpuLabError:
            continue
        if creds.server == ws.server:
            path.unlink()
            removed.append(str(path))
    return removed


def _wait_gone(ws: Workshop, names: list[str], timeout: float) -> list[str]:
    deadline = time.monotonic() + timeout
    left = list(names)
    while left and time.monotonic() < deadline:
        still = []
        for ns in left:
            with contextlib.suppress(NotFound):
                ws.client.get("Namespace", ns)
                still.append(ns)
        left = still
        if left:
            time.sleep(0.5)
    return left


# ====================================================================== CLI


def _table(df: pd.DataFrame) -> str:
    if df.empty:
        return "(no participants)"
    show = df.copy()
    show["gpus"] = [f"{r} / {'-' if pd.isna(q) else int(q)}"
                    for r, q in zip(show["gpus_requested"], show["gpu_quota"])]
    show["pods"] = show["pods"].replace("", "-")
    return show[["namespace", "running", "pending", "gpus", "pods"]].to_string(index=False)


class _Parser(argparse.ArgumentParser):
    """Bad usage is one line (exit 2), not argparse's usage text and SystemExit."""

    def error(self, message: str) -> NoReturn:
        raise WorkshopInputError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="gpu-lab workshop",
        description="Per-participant namespaces, GPU quotas, RBAC and kubeconfigs on one cluster.")
    sub = p.add_subparsers(dest="action", required=True)

    def target(sp):
        sp.add_argument("--backend", default="local", help="local (default: a running local lab), "
                        "kind (a kind lab gpu-lab created) or kubeconfig (an existing cluster)")
        sp.add_argument("--name", default="default",
                        help="the workshop (and, on local, the lab) name (default: default)")
        sp.add_argument("--kubeconfig", help="--backend kubeconfig: the admin kubeconfig "
                        "(default $KUBECONFIG or ~/.kube/config)")
        sp.add_argument("--context", help="--backend kubeconfig: the context (default: current)")

    pr = sub.add_parser("provision", help="create (or complete) every participant's slice")
    target(pr)
    pr.add_argument("--participants", type=int, required=True, metavar="N")
    pr.add_argument("--gpus-per-participant", type=int, default=1, metavar="K",
                    help="ResourceQuota requests.nvidia.com/gpu per participant (default 1)")
    pr.add_argument("--out", required=True, metavar="DIR",
                    help="where participant-<i>.kubeconfig files are written (0600)")
    pr.add_argument("--token-hours", type=float, default=DEFAULT_TOKEN_HOURS,
                    help=f"lifetime of each participant's token (default {DEFAULT_TOKEN_HOURS:g})")
    pr.add_argument("--renew", action="store_true",
                    help="write every kubeconfig with a new token, even when the old one works")
    pr.add_argument("--json", action="store_true")

    st = sub.add_parser("status", help="who runs what: pods and GPUs per participant")
    target(st)
    st.add_argument("--json", action="store_true")
    st.add_argument("--chart", metavar="FILE", help="also save the chart (.png or .svg)")

    td = sub.add_parser("teardown", help="delete the workshop's namespaces (and kubeconfigs)")
    target(td)
    td.add_argument("--out", metavar="DIR", help="also delete the participant kubeconfigs there")
    td.add_argument("--no-wait", action="store_true", help="do not wait for the namespaces to go")
    td.add_argument("--json", action="store_true")
    return p


def run(args: argparse.Namespace) -> int:
    say = _quiet if getattr(args, "json", False) else print
    if args.action == "provision":  # bad input is reported before the cluster is asked
        _check_counts(args.participants, args.gpus_per_participant, args.token_hours)
        _check_out(Path(args.out).expanduser())
    with connect(args.backend, args.name, args.kubeconfig, args.context) as ws:
        if args.action == "provision":
            rep = provision(ws, args.participants, args.out, args.gpus_per_participant,
                            args.token_hours, args.renew, progress=say)
            if args.json:
                print(json.dumps(rep.to_dict(), indent=2))
            return 0
        if args.action == "status":
            df = status(ws)
            if args.chart:
                from .viz import save  # lazy: altair loads only for --chart
                from .viz.workshop import workshop as chart

                save(chart(df), args.chart)
            if args.json:
                print(json.dumps(df.to_dict("records"), indent=2, default=str))
            else:
                print(_table(df))
                if args.chart:
                    print(f"chart: {args.chart}")
            return 0
        down = teardown(ws, args.out, wait=not args.no_wait, progress=say)
        if args.json:
            print(json.dumps(down.to_dict(), indent=2))
        return 1 if down.pending else 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] in ("-h", "--help") or not argv:
        build_parser().print_help()
        return 0 if argv else 2
    try:
        args = build_parser().parse_args(argv)
    except WorkshopInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except SystemExit as exc:  # --help of a subcommand
        return int(exc.code or 0)
    try:
        return run(args)
    except WorkshopInputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except (WorkshopClusterError, ApiError, Unreachable, LocalClusterError, KubeconfigError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except GpuLabError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
