"""Real Kueue in a local lab: its CRDs and webhooks in the lab's API server and its manager
as one more supervised process (``gpu-lab up --with kueue``).

What runs is the stock ``sigs.k8s.io/kueue`` manager (:mod:`.kueuebuild`) with the stock
manifests of the same release: the CRDs of ``config/components/crd`` with the conversion
webhooks its kustomization enables, the Mutating/ValidatingWebhookConfigurations of
``config/components/webhook`` with their namespace selectors, and ``config/default``'s
namespace (``kueue-system``) and name prefix (``kueue-``). Only the network differs.

Webhooks. In a cluster the API server reaches Kueue through the Service
``kueue-webhook-service``, and Kueue's internal cert management (the cert-controller
rotator) issues a serving certificate for ``kueue-webhook-service.kueue-system.svc`` and
writes its CA into the webhook configurations' and CRDs' ``caBundle``. Here the Service is
of type ExternalName with ``externalName: 127.0.0.1``: kube-apiserver's webhook client
dials what its service resolver returns for an ExternalName Service (``<externalName>:
<clientConfig.service.port>``, k8s.io/apiserver/pkg/util/proxy ``ResolveCluster``) while
still verifying the certificate for the ``<service>.<namespace>.svc`` name, so Kueue's own
certificates and CA injection work unchanged and every admission and conversion request
really goes through Kueue's webhook server on 127.0.0.1.

There is no kubelet to mount the cert Secret into Kueue's Pod, so gpu-lab does that part
(:func:`mount_secret`): once the rotator has filled ``kueue-webhook-server-cert``, its keys
are written into the manager's ``webhook.certDir`` (``<lab>/kueue/serving-certs``), where
the rotator waits for ``tls.crt`` before Kueue reports ready. ``gpu-lab up`` checks that
the Service, Secret and webhook configurations still exist (a deleted ``kueue-system``
namespace takes them along) and installs them again if not.

Why not ``clientConfig.url`` with a certificate from the lab CA: that needs Kueue's
internal cert management off, and then the v0.17 manager loads certificates from fixed
absolute paths, ``/etc/kueue/metrics/certs/tls.{crt,key}`` (cmd/kueue/main.go: it exits
when they are missing, even with metrics disabled) and ``/visibility/tls.{crt,key}``
(pkg/visibility/server.go): a lab would have to write outside its directory, as root.

Configuration (``config.kueue.x-k8s.io/v1beta2``, the version v0.17 decodes first):
``waitForPodsReady`` on (timeout from ``gpu-lab up --with kueue
--kueue-pods-ready-timeout``, default 5m, Kueue's documented example), the ``batch/job``
integration only (the others get Kueue's no-op webhooks), leader election off, metrics
off (``bindAddress: "0"``), and the VisibilityOnDemand feature off (its API server writes
self-signed certificates into ``/visibility``). The manager uses the lab's admin
kubeconfig. Everything else is Kueue's default.

A lab records that it runs Kueue (``<lab>/kueue/state.json``): ``gpu-lab up`` starts it
again after ``down`` or a crash, ``gpu-lab status`` shows it, ``gpu-lab logs kueue`` reads
its log, ``down --purge`` forgets it. While Kueue is down the API server refuses what its
webhooks cover (Kueue's pod webhook has ``failurePolicy: Fail``), as in a real cluster.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import http.client
import json
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from gpu_lab.errors import GpuLabError

from ... import processes as procs
from ...errors import BuildError, LocalClusterError
from ...kube import ApiError, KubeClient, NotFound, Unreachable
from ...model.duration import parse_duration
from . import kueuebuild
from . import ports as portlib
from .components import HOST, ComponentStatus

if TYPE_CHECKING:  # the lab passes itself in; it imports this module
    from .cluster import LocalCluster

NAME = "kueue"
API_GROUP = "kueue.x-k8s.io"
API_VERSION = "kueue.x-k8s.io/v1beta2"
CONFIG_API_VERSION = "config.kueue.x-k8s.io/v1beta2"
DEFAULT_PODS_READY_TIMEOUT = "5m"
FRAMEWORKS = ("batch/job",)
START_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 10.0
HEALTH_TIMEOUT_S = 2.0
#: a running manager that fails /readyz this long is restarted by ``gpu-lab up``
HUNG_GRACE_S = 5.0

Say = Callable[[str], object]


def _quiet(_msg: str) -> None:
    return None


@dataclass(frozen=True)
class KueueSettings:
    """What ``gpu-lab up --with kueue`` passes to Kueue's Configuration."""

    pods_ready_timeout: str = DEFAULT_PODS_READY_TIMEOUT
    block_admission: bool = False
    frameworks: tuple[str, ...] = FRAMEWORKS
    version: str = kueuebuild.DEFAULT_VERSION
    feature_gates: dict[str, bool] = field(default_factory=dict)

    def __post_init__(self):
        what = "waitForPodsReady.timeout"
        if parse_duration(self.pods_ready_timeout, what) <= 0:
            raise GpuLabError(f'{what}: invalid duration "{self.pods_ready_timeout}": '
                              "must be greater than 0")

    @classmethod
    def from_dict(cls, doc: dict[str, Any]) -> KueueSettings:
        doc = dict(doc or {})
        if "frameworks" in doc:
            doc["frameworks"] = tuple(doc["frameworks"])
        known = {k: v for k, v in doc.items() if k in cls.__dataclass_fields__}
        return cls(**known)


# --------------------------------------------------------------------------- paths, state


def work_dir(lab: LocalCluster) -> Path:
    return lab.dir / NAME


def log_path(lab: LocalCluster) -> Path:
    return lab.logs_dir / f"{NAME}.log"


def _state_path(lab: LocalCluster) -> Path:
    return work_dir(lab) / "state.json"


def _pid_path(lab: LocalCluster) -> Path:
    return work_dir(lab) / f"{NAME}.pid"


def _load(lab: LocalCluster) -> dict[str, Any]:
    try:
        doc = json.loads(_state_path(lab).read_text())
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def _save(lab: LocalCluster, doc: dict[str, Any]) -> None:
    path = _state_path(lab)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = path.with_name(f".state.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n")
    os.replace(tmp, path)


def enabled(lab: LocalCluster) -> bool:
    """Whether this lab runs Kueue (``gpu-lab up --with kueue`` was run on it)."""
    return bool(_load(lab).get("enabled"))


def settings(lab: LocalCluster) -> KueueSettings | None:
    doc = _load(lab)
    return KueueSettings.from_dict(doc.get("settings") or {}) if doc.get("enabled") else None


def _pid(lab: LocalCluster, doc: dict[str, Any]) -> tuple[int | None, int | None]:
    try:
        pid = int(_pid_path(lab).read_text().strip())
    except (OSError, ValueError):
        return None, None
    return pid, doc.get("start_time") if doc.get("pid") == pid else None


def _running(lab: LocalCluster, doc: dict[str, Any]) -> int | None:
    pid, started = _pid(lab, doc)
    marker = str(lab.dir) + os.sep
    return pid if procs.is_ours(pid, kueuebuild.COMPONENT, marker, started) else None


# --------------------------------------------------------------------------- manifests


#: libyaml when PyYAML has it: the Workload CRD alone is 1.4 MB of YAML
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def _yaml_docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.load_all(path.read_text(), Loader=_LOADER) if isinstance(d, dict)]


def _merge(base: Any, patch: Any) -> Any:
    """A strategic-merge patch as kustomize applies Kueue's: maps merge, a list of named
    items (``webhooks``) merges by ``name``, anything else is replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            out[k] = _merge(base.get(k), v) if k in base else copy.deepcopy(v)
        return out
    if (isinstance(base, list) and isinstance(patch, list)
            and all(isinstance(x, dict) and "name" in x for x in base + patch)):
        items = [copy.deepcopy(x) for x in base]
        index = {x["name"]: i for i, x in enumerate(items)}
        for item in patch:
            if item["name"] in index:
                items[index[item["name"]]] = _merge(items[index[item["name"]]], item)
            else:
                items.append(copy.deepcopy(item))
        return items
    return copy.deepcopy(patch)


def _kustomization(directory: Path) -> tuple[list[dict], list[dict]]:
    """(resources, patches) of a Kueue kustomization (``resources:`` files, ``patches:``
    as ``path`` or inline ``patch``)."""
    k = yaml.safe_load((directory / "kustomization.yaml").read_text()) or {}
    resources = [d for r in k.get("resources") or [] for d in _yaml_docs(directory / r)]
    patches = []
    for p in k.get("patches") or []:
        if p.get("path"):
            patches += _yaml_docs(directory / p["path"])
        elif p.get("patch"):
            patches += [d for d in yaml.safe_load_all(p["patch"]) if isinstance(d, dict)]
    return resources, patches


def _patched(resources: list[dict], patches: list[dict]) -> list[dict]:
    out = []
    for r in resources:
        for p in patches:
            if p.get("kind") == r.get("kind") and p["metadata"]["name"] == r["metadata"]["name"]:
                r = _merge(r, {k: v for k, v in p.items() if k not in ("apiVersion", "kind")})
        out.append(r)
    return out


@dataclass(frozen=True)
class Manifests:
    """Kueue's manifests as a lab installs them (see the module docstring)."""

    namespace: str
    prefix: str
    crds: list[dict]
    webhooks: list[dict]
    secret: dict
    service: dict

    @property
    def service_name(self) -> str:
        return self.service["metadata"]["name"]

    @property
    def secret_name(self) -> str:
        return self.secret["metadata"]["name"]


def render(manifests_dir: Path, webhook_port: int) -> Manifests:
    """Kueue's stock manifests with ``config/default``'s namespace and prefix applied and
    every webhook (admission and conversion) pointed at ``<service>:<webhook_port>``."""
    root = Path(manifests_dir) / "config"
    default = yaml.safe_load((root / "default" / "kustomization.yaml").read_text()) or {}
    ns, prefix = default.get("namespace", "kueue-system"), default.get("namePrefix", "kueue-")
    comp = root / "components"

    def service_ref(ref: dict) -> dict:
        return {**ref, "namespace": ns, "name": prefix + ref["name"], "port": webhook_port}

    crds = []
    for crd in _patched(*_kustomization(comp / "crd")):
        hook = ((crd["spec"].get("conversion") or {}).get("webhook") or {}).get("clientConfig")
        if hook and hook.get("service"):
            hook["service"] = service_ref(hook["service"])
        crds.append(crd)
    webhooks, services = [], []
    for obj in _patched(*_kustomization(comp / "webhook")):
        if obj.get("kind") == "Service":
            services.append(obj)
            continue
        obj["metadata"] = {**obj["metadata"], "name": prefix + obj["metadata"]["name"]}
        for w in obj.get("webhooks") or []:
            if (w.get("clientConfig") or {}).get("service"):
                w["clientConfig"]["service"] = service_ref(w["clientConfig"]["service"])
        webhooks.append(obj)
    (secret,) = _yaml_docs(comp / "internalcert" / "secret.yaml")
    secret = {"apiVersion": "v1", "kind": "Secret",
              "metadata": {"name": prefix + secret["metadata"]["name"], "namespace": ns}}
    svc = services[0] if services else {"metadata": {"name": "webhook-service"}}
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": prefix + svc["metadata"]["name"], "namespace": ns,
                     "labels": {"app.kubernetes.io/name": "kueue",
                                "app.kubernetes.io/component": "webhook-service"}},
        # the API server's webhook client dials <externalName>:<clientConfig.service.port>
        "spec": {"type": "ExternalName", "externalName": HOST,
                 "ports": [{"name": "https", "port": webhook_port, "protocol": "TCP"}]},
    }
    return Manifests(ns, prefix, crds, webhooks, secret, service)


def configuration(lab: LocalCluster, st: KueueSettings, m: Manifests, ports: dict) -> dict:
    """Kueue's ``Configuration`` for this lab (see the module docstring)."""
    return {
        "apiVersion": CONFIG_API_VERSION,
        "kind": "Configuration",
        "namespace": m.namespace,
        "health": {"healthProbeBindAddress": f"{HOST}:{ports['health']}"},
        "metrics": {"bindAddress": "0"},
        "webhook": {"port": ports["webhook"], "host": HOST,
                    "certDir": str(work_dir(lab) / "serving-certs")},
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {
            "enable": True,
            "webhookServiceName": m.service_name,
            "webhookSecretName": m.secret_name,
        },
        "waitForPodsReady": {"timeout": st.pods_ready_timeout,
                             "blockAdmission": st.block_admission},
        "integrations": {"frameworks": list(st.frameworks)},
        "featureGates": {"VisibilityOnDemand": False, **st.feature_gates},
    }


def _apply(client: KubeClient, obj: dict) -> None:
    """Server-side apply as gpu-lab: fields Kueue's rotator owns (``caBundle``) stay."""
    client.patch(obj["kind"], obj["metadata"]["name"], obj,
                 namespace=obj["metadata"].get("namespace"), patch_type="apply",
                 api_version=obj["apiVersion"], force=True)


def install(client: KubeClient, m: Manifests, say: Say = _quiet, timeout: float = 60.0) -> None:
    """Create or update Kueue's namespace, CRDs, webhook Service, cert Secret and webhook
    configurations; wait until the CRDs are Established."""
    deadline = time.monotonic() + timeout
    while True:  # a namespace being deleted (a session's reset) takes no new objects
        try:
            ns = client.get("Namespace", m.namespace)
        except NotFound:
            break
        if not ns["metadata"].get("deletionTimestamp"):
            break
        if time.monotonic() > deadline:
            raise LocalClusterError(f"kueue: namespace {m.namespace} is still being deleted "
                                    f"after {timeout:.0f} s")
        time.sleep(0.2)
    _apply(client, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": m.namespace}})
    for crd in m.crds:
        _apply(client, crd)
    _apply(client, m.service)
    try:  # never overwrite the CA and certificate Kueue keeps in it
        client.create(m.secret)
    except ApiError as err:
        if err.reason != "AlreadyExists":
            raise
    for w in m.webhooks:
        _apply(client, w)
    names = [c["metadata"]["name"] for c in m.crds]
    while True:
        waiting = [n for n in names if not _established(client, n)]
        if not waiting:
            break
        if time.monotonic() > deadline:
            raise LocalClusterError(f"kueue: CRDs not Established after {timeout:.0f} s: "
                                    f"{', '.join(waiting)}")
        time.sleep(0.2)
    say(f"  {NAME}: {len(names)} CRDs, {len(m.webhooks)} webhook configurations installed "
        f"in namespace {m.namespace}")


def installed(client: KubeClient, m: Manifests) -> bool:
    """Whether what the API server needs to reach Kueue is in place: its Service, and the
    cert Secret with the certificate Kueue issued (both go when their namespace is deleted)."""
    try:
        client.get("Service", m.service_name, namespace=m.namespace)
        secret = client.get("Secret", m.secret_name, namespace=m.namespace)
        for name in (w["metadata"]["name"] for w in m.webhooks):
            client.get(w_kind(m, name), name, api_version="admissionregistration.k8s.io/v1")
    except NotFound:
        return False
    return bool((secret.get("data") or {}).get("tls.crt"))


def w_kind(m: Manifests, name: str) -> str:
    return next(w["kind"] for w in m.webhooks if w["metadata"]["name"] == name)


def _established(client: KubeClient, name: str) -> bool:
    crd = client.get("CustomResourceDefinition", name, api_version="apiextensions.k8s.io/v1")
    conds = (crd.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conds)


# --------------------------------------------------------------------------- serving certs


def cert_dir(lab: LocalCluster) -> Path:
    return work_dir(lab) / "serving-certs"


def mount_secret(lab: LocalCluster, client: KubeClient, m: Manifests) -> bool:
    """Do what the kubelet does for Kueue's Pod, which mounts the cert Secret at its
    ``webhook.certDir``: write the Secret's keys as files there (atomically, key 0600).
    Kueue's rotator fills the Secret and then waits for ``tls.crt`` to appear in the
    directory. Returns whether the directory holds the Secret's current certificate."""
    try:
        secret = client.get("Secret", m.secret_name, namespace=m.namespace)
    except NotFound:
        return False
    data = secret.get("data") or {}
    if not data.get("tls.crt") or not data.get("tls.key"):
        return False
    d = cert_dir(lab)
    d.mkdir(parents=True, exist_ok=True, mode=0o700)
    for key, b64 in sorted(data.items()):
        if "/" in key or key.startswith("."):
            continue
        raw = base64.b64decode(b64)
        path = d / key
        with contextlib.suppress(OSError):
            if path.read_bytes() == raw:
                continue
        tmp = d / f".{key}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(raw)
        os.replace(tmp, path)
    return True


# --------------------------------------------------------------------------- health


def _readyz(port: int | None) -> tuple[bool, str]:
    if not port:
        return False, "no port recorded"
    conn = http.client.HTTPConnection(HOST, port, timeout=HEALTH_TIMEOUT_S)
    try:
        conn.request("GET", "/readyz")
        resp = conn.getresponse()
        body = resp.read(2048).decode(errors="replace").strip()
    except (OSError, http.client.HTTPException) as exc:
        return False, f"/readyz: {exc.__class__.__name__}: {exc}"
    finally:
        conn.close()
    ok = resp.status == 200
    return ok, "" if ok else f"/readyz: HTTP {resp.status}: {body[:200]}"


#: a ClusterQueue that Kueue's mutating and validating webhooks accept (dry run only)
_PROBE = {
    "apiVersion": API_VERSION,
    "kind": "ClusterQueue",
    "metadata": {"name": "gpu-lab-webhook-probe"},
    "spec": {"resourceGroups": [{"coveredResources": ["cpu"], "flavors": [
        {"name": "gpu-lab-probe", "resources": [{"name": "cpu", "nominalQuota": "1"}]}]}]},
}


def webhook_answers(client: KubeClient) -> tuple[bool, str]:
    """Whether the API server reaches Kueue's webhooks: a dry-run ClusterQueue create
    passes through both (``mclusterqueue.kb.io`` and ``vclusterqueue.kb.io``)."""
    try:
        client.create(_PROBE, dry_run=True)
    except ApiError as err:
        if err.reason == "AlreadyExists":
            return True, ""
        return False, str(err)
    except Unreachable as err:
        return False, str(err)
    return True, ""


# --------------------------------------------------------------------------- process


def status(lab: LocalCluster, check_health: bool = True) -> dict[str, ComponentStatus]:
    """``{"kueue": ComponentStatus}`` when the lab runs Kueue, else ``{}``."""
    doc = _load(lab)
    if not doc.get("enabled"):
        return {}
    port = (doc.get("ports") or {}).get("webhook")
    url = f"http://{HOST}:{(doc.get('ports') or {}).get('health')}/readyz"
    pid = _running(lab, doc)
    if pid is None:
        return {NAME: ComponentStatus(NAME, "stopped", None, port, url,
                                      f"`gpu-lab up{lab._name_flag}` starts it")}
    if not check_health:
        return {NAME: ComponentStatus(NAME, "running", pid, port, url)}
    ok, why = _readyz((doc.get("ports") or {}).get("health"))
    if not ok and procs.is_frozen(pid):
        why += f"; pid {pid} is stopped by a signal (hung): `gpu-lab up{lab._name_flag}` resumes it"
    return {NAME: ComponentStatus(NAME, "healthy" if ok else "unhealthy", pid, port, url, why)}


def check(lab: LocalCluster) -> None:
    """Raise :class:`LocalClusterError` (one line) when the lab runs Kueue and it is not
    running or is stopped by a signal: the API server refuses what its webhooks cover."""
    doc = _load(lab)
    if not doc.get("enabled"):
        return
    up = f"`gpu-lab up{lab._name_flag}`"
    pid = _running(lab, doc)
    if pid is None:
        raise LocalClusterError(f"lab {lab.name!r}: kueue is not running; {up} starts it")
    if procs.is_frozen(pid):
        raise LocalClusterError(
            f"lab {lab.name!r}: kueue (pid {pid}) is stopped by a signal (hung); {up} resumes it")


def stop(lab: LocalCluster, timeout: float = STOP_TIMEOUT_S, forget: bool = False) -> str | None:
    """Stop the manager (and any stray one of this lab); ``"terminated"``/``"killed"`` or
    None when none ran. ``forget``: the lab no longer runs Kueue."""
    doc = _load(lab)
    marker = str(lab.dir) + os.sep
    pid, started = _pid(lab, doc)
    pids = {p: NAME for p in procs.find(kueuebuild.COMPONENT, marker)}
    if pid and procs.is_ours(pid, kueuebuild.COMPONENT, marker, started):
        pids[pid] = NAME
    result = procs.stop(list(pids), pids, marker, timeout=timeout,
                        started={pid: started} if pid else {})
    _pid_path(lab).unlink(missing_ok=True)
    if doc:
        doc.pop("pid", None)
        doc.pop("start_time", None)
        if forget:
            doc["enabled"] = False
        _save(lab, doc)
    hows = [h for h in result.values() if h != "gone"]
    return ("killed" if "killed" in hows else hows[0]) if hows else None


def _ports(lab: LocalCluster, doc: dict) -> dict[str, int]:
    """The recorded ports while they stay free, else new ones (none of the lab's)."""
    old = doc.get("ports") or {}
    avoid = set(lab.ports().values())
    out: dict[str, int] = {}
    for key in ("webhook", "health"):
        out[key] = portlib.pick_port(old.get(key), avoid=avoid | set(out.values()))
    return out


def _spawn(lab: LocalCluster, doc: dict, binary: Path, say: Say) -> int:
    config = work_dir(lab) / "config.yaml"
    argv = [str(binary), f"--config={config}", f"--kubeconfig={lab.kubeconfig()}"]
    env = {k: v for k, v in os.environ.items() if k != "KUBECONFIG"}
    try:
        pid, started = procs.spawn(argv, log_path(lab), env=env, cwd=work_dir(lab))
    except OSError as exc:
        raise LocalClusterError(f"cannot start kueue ({binary}): {exc.strerror}") from exc
    _pid_path(lab).write_text(f"{pid}\n")
    doc.update(pid=pid, start_time=started, argv=argv)
    _save(lab, doc)
    say(f"  {NAME}: started (pid {pid}, webhook port {doc['ports']['webhook']})")
    return pid


def _log_tail(lab: LocalCluster, n: int = 3) -> str:
    try:
        lines = log_path(lab).read_bytes().decode(errors="replace").splitlines()
    except OSError:
        return ""
    lines = [ln.strip() for ln in lines if ln.strip() and not ln.startswith("=== gpu-lab")]
    return " | ".join(ln[:300] for ln in lines[-n:])


def _wait_ready(lab: LocalCluster, client: KubeClient, m: Manifests, doc: dict, pid: int,
                deadline: float, say: Say, t0: float) -> None:
    why = "not started"
    ready = mounted = False
    while True:
        if not mounted:
            mounted = mount_secret(lab, client, m)
        if not procs.alive(pid, doc.get("start_time")):
            code = procs.exited(pid)
            detail = f" with code {code}" if code is not None else ""
            _pid_path(lab).unlink(missing_ok=True)
            raise LocalClusterError(f"kueue exited{detail} while starting; see `gpu-lab logs "
                                    f"kueue{lab._name_flag}`: {_log_tail(lab)}")
        if not ready:
            ready, why = _readyz(doc["ports"]["health"])
            if ready:
                say(f"  {NAME}: ready after {time.monotonic() - t0:.1f} s")
        if ready:
            ok, why = webhook_answers(client)
            if ok:
                say(f"  {NAME}: the API server reaches its webhooks "
                    f"(https://{doc['service']}:{doc['ports']['webhook']})")
                return
        if time.monotonic() > deadline:
            raise LocalClusterError(f"kueue: not ready after {deadline - t0:.0f} s ({why}); "
                                    f"last log lines: {_log_tail(lab)}")
        time.sleep(0.25)


def _ensure(lab: LocalCluster, st: KueueSettings, say: Say, timeout: float,
            install_binary: kueuebuild.KueueInstall | None = None) -> None:
    """Start Kueue unless it runs, healthy, with this configuration (then: nothing)."""
    t0 = time.monotonic()
    doc = _load(lab)
    pid = _running(lab, doc)
    if pid is not None and procs.resume(pid):
        say(f"  {NAME}: resumed (it was stopped by a signal)")
    kb = install_binary or kueuebuild.require_kueue(st.version)
    ports: dict[str, int] = doc["ports"] if pid is not None else _ports(lab, doc)  # recorded when it started
    manifests = render(kb.manifests, ports["webhook"])
    config = yaml.safe_dump(configuration(lab, st, manifests, ports), sort_keys=False)
    config_path = work_dir(lab) / "config.yaml"
    same = (config_path.read_text() if config_path.exists() else None) == config
    client = lab.client()
    try:
        if pid is not None and same and doc.get("binary") == str(kb.binary):
            ok, why = _readyz(ports["health"])
            grace = time.monotonic() + HUNG_GRACE_S
            while not ok and time.monotonic() < grace:
                time.sleep(0.2)
                ok, why = _readyz(ports["health"])
            if ok and installed(client, manifests):
                mount_secret(lab, client, manifests)  # a certificate rotated meanwhile
                say(f"  {NAME}: already running (pid {pid})")
                return
            if ok:
                say(f"  {NAME}: its Service, cert Secret or webhook configurations are gone; "
                    "installing them again and restarting it")
            else:
                say(f"  {NAME}: not answering its health check ({why}); restarting it")
        elif pid is not None:
            say(f"  {NAME}: restarting it with the new configuration")
        if pid is not None:
            stop(lab)
            ports = _ports(lab, {"ports": ports})
            manifests = render(kb.manifests, ports["webhook"])
            config = yaml.safe_dump(configuration(lab, st, manifests, ports), sort_keys=False)
        install(client, manifests, say)
        work_dir(lab).mkdir(parents=True, exist_ok=True, mode=0o700)
        if not mount_secret(lab, client, manifests):  # else: the certificate Kueue made before
            # no certificate yet: Kueue's rotator must wait for the one it is about to issue
            shutil.rmtree(cert_dir(lab), ignore_errors=True)
        config_path.write_text(config)
        doc = {**_load(lab), "enabled": True, "settings": _settings_doc(st), "ports": ports,
               "binary": str(kb.binary), "manifests": str(kb.manifests), "version": kb.version,
               "service": f"{manifests.service_name}.{manifests.namespace}.svc"}
        _save(lab, doc)
        pid = _spawn(lab, doc, kb.binary, say)
        _wait_ready(lab, client, manifests, doc, pid, t0 + timeout, say, t0)
    finally:
        client.close()


def _settings_doc(st: KueueSettings) -> dict[str, Any]:
    d = asdict(st)
    d["frameworks"] = list(st.frameworks)
    return d


def enable(lab: LocalCluster, st: KueueSettings | None = None, progress: Say | None = print,
           timeout: float = START_TIMEOUT_S, build: bool = True) -> None:
    """Run Kueue in ``lab`` (which must be up) from now on: build it first when it is not
    in the cache and ``build`` (needs Go), install its manifests, start the manager, wait
    until the API server reaches its webhooks. Idempotent; new settings restart it."""
    say = progress or _quiet
    st = st or KueueSettings()
    kb = kueuebuild.find_kueue(st.version)
    if kb is None and build:
        try:
            kb = kueuebuild.build(st.version, progress=lambda m: say(f"  {m}"))
        except BuildError as err:  # the machine lacks something: not bad input
            raise LocalClusterError(str(err)) from None
    with lab.state.lock(say):
        lab.connect()
        _ensure(lab, st, say, timeout, kb)


def repair(lab: LocalCluster, say: Say = _quiet, timeout: float = START_TIMEOUT_S) -> None:
    """``gpu-lab up``'s part for Kueue (the caller holds the lab's lock): start it again
    when the lab runs Kueue and it is stopped, hung or unhealthy."""
    st = settings(lab)
    if st is not None:
        _ensure(lab, st, say, timeout)


def logs(lab: LocalCluster, tail: int | None = 50) -> str:
    with contextlib.suppress(OSError):
        lines = log_path(lab).read_bytes().decode(errors="replace").splitlines()
        return "\n".join(lines if tail is None else lines[-tail:] if tail > 0 else [])
    return ""


__all__ = [
    "API_VERSION",
    "KueueSettings",
    "Manifests",
    "check",
    "configuration",
    "enable",
    "enabled",
    "install",
    "installed",
    "mount_secret",
    "log_path",
    "render",
    "repair",
    "settings",
    "status",
    "stop",
    "webhook_answers",
]
