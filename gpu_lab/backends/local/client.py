"""A small Kubernetes REST client: JSON over HTTPS with ``requests``, TLS and client
certificates, tokens or an exec credential plugin from a kubeconfig.

It does what gpu-lab needs and no more: get, list, create, update (also of a
subresource such as ``status``), patch (merge, strategic-merge, JSON or server-side apply),
delete, watch (a streaming generator of events) and ``server_version()``. Objects are
plain dicts, exactly the API server's JSON. Errors are :class:`ApiError` whose message is
the API server's own (``pods "x" not found``).

    from gpu_lab.backends.local.client import KubeClient
    kube = KubeClient.from_kubeconfig(LocalCluster("default").kubeconfig())
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    for ev in kube.watch("Pod", namespace="team-a", timeout_seconds=30):
        print(ev.type, ev.object["metadata"]["name"])

Kinds are named by ``kind`` (``"Pod"``), plural (``"pods"``) or lower-case singular; the
common built-in kinds resolve without a request, anything else through API discovery
(pass ``api_version`` for kinds outside the core group that share a name).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import requests

from gpu_lab.errors import GpuLabError

from . import kubeconfig as kc

#: (apiVersion, kind) -> (plural, namespaced); enough for everything gpu-lab creates
BUILTIN: dict[tuple[str, str], tuple[str, bool]] = {
    ("v1", "Namespace"): ("namespaces", False),
    ("v1", "Node"): ("nodes", False),
    ("v1", "Pod"): ("pods", True),
    ("v1", "Service"): ("services", True),
    ("v1", "Endpoints"): ("endpoints", True),
    ("v1", "ConfigMap"): ("configmaps", True),
    ("v1", "Secret"): ("secrets", True),
    ("v1", "ServiceAccount"): ("serviceaccounts", True),
    ("v1", "Event"): ("events", True),
    ("v1", "LimitRange"): ("limitranges", True),
    ("v1", "ResourceQuota"): ("resourcequotas", True),
    ("v1", "PersistentVolume"): ("persistentvolumes", False),
    ("v1", "PersistentVolumeClaim"): ("persistentvolumeclaims", True),
    ("apps/v1", "Deployment"): ("deployments", True),
    ("apps/v1", "ReplicaSet"): ("replicasets", True),
    ("apps/v1", "StatefulSet"): ("statefulsets", True),
    ("apps/v1", "DaemonSet"): ("daemonsets", True),
    ("batch/v1", "Job"): ("jobs", True),
    ("batch/v1", "CronJob"): ("cronjobs", True),
    ("coordination.k8s.io/v1", "Lease"): ("leases", True),
    ("scheduling.k8s.io/v1", "PriorityClass"): ("priorityclasses", False),
    ("events.k8s.io/v1", "Event"): ("events", True),
    ("policy/v1", "PodDisruptionBudget"): ("poddisruptionbudgets", True),
    ("node.k8s.io/v1", "RuntimeClass"): ("runtimeclasses", False),
    ("rbac.authorization.k8s.io/v1", "Role"): ("roles", True),
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): ("rolebindings", True),
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): ("clusterroles", False),
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): ("clusterrolebindings", False),
    ("resource.k8s.io/v1", "DeviceClass"): ("deviceclasses", False),
    ("resource.k8s.io/v1", "ResourceClaim"): ("resourceclaims", True),
    ("resource.k8s.io/v1", "ResourceClaimTemplate"): ("resourceclaimtemplates", True),
    ("resource.k8s.io/v1", "ResourceSlice"): ("resourceslices", False),
    ("resource.k8s.io/v1", "DeviceTaintRule"): ("devicetaintrules", False),
}

PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}
DEFAULT_TIMEOUT_S = 30.0
#: kube-apiserver's --max-request-body-bytes default (3 MiB): a larger body is refused with
#: 413 before it is read; checked here so that it is one line at once, not a broken TLS stream
MAX_REQUEST_BYTES = 3 * 1024 * 1024
FIELD_MANAGER = "gpu-lab"


class ApiError(GpuLabError):
    """The API server refused a request; ``str()`` is its message, ``code``/``reason`` its
    HTTP status and ``Status.reason`` (``NotFound``, ``AlreadyExists``, ``Conflict``...)."""

    def __init__(self, code: int, reason: str, message: str, status: dict | None = None):
        self.code, self.reason, self.status = code, reason, status or {}
        super().__init__(message or f"HTTP {code} {reason}")


class NotFound(ApiError):
    pass


class AlreadyExists(ApiError):
    pass


class Conflict(ApiError):
    pass


class Unreachable(GpuLabError):
    """No answer from the API server (connection refused, TLS failure, timeout)."""


@dataclass(frozen=True)
class Resource:
    api_version: str
    kind: str
    plural: str
    namespaced: bool

    def path(self, namespace: str | None = None, name: str | None = None, sub: str | None = None):
        base = "/api/v1" if self.api_version == "v1" else f"/apis/{self.api_version}"
        parts = [base]
        if self.namespaced and namespace:
            parts.append(f"namespaces/{quote(namespace, safe='')}")
        parts.append(self.plural)
        if name:
            parts.append(quote(name, safe=""))
        if sub:
            parts.append(sub)
        return "/".join(parts)


@dataclass(frozen=True)
class WatchEvent:
    type: str  # ADDED, MODIFIED, DELETED, BOOKMARK
    object: dict


def watch_event(line: bytes) -> WatchEvent:
    """One line of a watch stream; an ``ERROR`` event (410 Gone...) raises :class:`ApiError`."""
    ev = json.loads(line)
    if ev.get("type") == "ERROR":
        st = ev.get("object") or {}
        raise ApiError(st.get("code", 500), st.get("reason", ""), st.get("message", ""), st)
    return WatchEvent(ev.get("type", ""), ev.get("object") or {})


def watch_events(resp: requests.Response) -> Iterator[WatchEvent]:
    """The events of a streaming watch response, one JSON document per line."""
    buf = b""
    for chunk in resp.iter_content(chunk_size=None):
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            if line.strip():
                yield watch_event(line)
    if buf.strip():
        yield watch_event(buf)


def _raise_for(resp: requests.Response) -> None:
    if resp.status_code < 400:
        return
    try:
        status = resp.json()
    except ValueError:
        status = {}
    if not isinstance(status, dict):
        status = {}
    reason = status.get("reason") or resp.reason or ""
    message = status.get("message") or resp.text.strip()[:300]
    cls = ApiError
    if resp.status_code == 404:
        cls = NotFound
    elif resp.status_code == 409:
        cls = AlreadyExists if reason == "AlreadyExists" else Conflict
    raise cls(resp.status_code, reason, message, status)


def _is_loopback(server: str) -> bool:
    host = urlsplit(server).hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


class KubeClient:
    """A thread-compatible client for one API server (one ``requests.Session``)."""

    def __init__(self, creds: kc.Credentials, timeout: float = DEFAULT_TIMEOUT_S):
        self.creds = creds
        self.server = creds.server
        self.timeout = timeout
        s = requests.Session()
        if creds.insecure:
            s.verify = False
        elif creds.ca_file:
            s.verify = creds.ca_file
        if creds.cert_file and creds.key_file:
            s.cert = (creds.cert_file, creds.key_file)
        if creds.token:
            s.headers["Authorization"] = f"Bearer {creds.token}"
        s.headers["Accept"] = "application/json"
        s.headers["User-Agent"] = "gpu-lab"
        if _is_loopback(self.server):
            s.trust_env = False  # never send a loopback API server's traffic to a proxy
        self.session = s
        self._discovered: dict[str, list[dict]] = {}

    @classmethod
    def from_kubeconfig(
        cls, path: Path | str, context: str | None = None, timeout: float = DEFAULT_TIMEOUT_S
    ) -> KubeClient:
        return cls(kc.load(path, context), timeout=timeout)

    def close(self) -> None:
        self.session.close()

    def __enter__(self) -> KubeClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"KubeClient({self.server!r})"

    # ------------------------------------------------------------------ transport

    def request(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, Any] | None = None,
        body: Any = None,
        content_type: str = "application/json",
        stream: bool = False,
        timeout: float | tuple[float, float | None] | None = None,
    ) -> requests.Response:
        """One HTTP request; raises :class:`ApiError` on an HTTP error status. With an exec
        credential plugin, its (cached) token or certificate goes with the request."""
        headers = {}
        data = None
        if body is not None:
            headers["Content-Type"] = content_type
            data = body if isinstance(body, (str, bytes)) else json.dumps(body)
            size = len(data.encode() if isinstance(data, str) else data)
            if size > MAX_REQUEST_BYTES:
                raise ApiError(413, "RequestEntityTooLarge",
                               f"Request entity too large: limit is {MAX_REQUEST_BYTES}")
        clean = {k: v for k, v in (params or {}).items() if v is not None}
        plugin = self.creds.exec
        cred = plugin.credential() if plugin else None
        resp = self._send(method, path, clean, data, headers, stream, timeout, cred)
        if resp.status_code == 401 and plugin is not None and cred is not None:
            # client-go's rule: a 401 means the plugin's credential was revoked or rotated
            # early; run the plugin again (once) and repeat the request with the new one
            resp.close()
            cred = plugin.refresh(cred)
            resp = self._send(method, path, clean, data, headers, stream, timeout, cred)
        _raise_for(resp)
        return resp

    def _send(self, method, path, params, data, headers, stream, timeout, cred):
        extra: dict[str, Any] = {}
        if cred is not None:
            if cred.token:
                headers = {**headers, "Authorization": f"Bearer {cred.token}"}
            if cred.cert_file and cred.key_file:
                extra["cert"] = (cred.cert_file, cred.key_file)
        try:
            return self.session.request(
                method,
                self.server + path,
                params=params,
                data=data,
                headers=headers,
                stream=stream,
                timeout=self.timeout if timeout is None else timeout,
                **extra,
            )
        except requests.exceptions.SSLError as exc:
            raise Unreachable(f"TLS error talking to {self.server}: {exc}") from exc
        except requests.exceptions.ConnectionError as exc:
            raise Unreachable(f"cannot connect to the API server at {self.server}") from exc
        except requests.exceptions.Timeout as exc:
            raise Unreachable(f"the API server at {self.server} did not answer in time") from exc

    def _json(self, method: str, path: str, **kw) -> dict:
        resp = self.request(method, path, **kw)
        return resp.json() if resp.content else {}

    # ------------------------------------------------------------------ resources

    def resource(self, kind: str, api_version: str | None = None) -> Resource:
        """Resolve ``kind`` (Kind, plural or lower-case singular) to its REST resource."""
        want = kind.lower()
        for (av, k), (plural, namespaced) in BUILTIN.items():
            if api_version not in (None, av):
                continue
            if want in (k.lower(), plural):
                return Resource(av, k, plural, namespaced)
        if api_version:
            for r in self._discover(api_version):
                if want in (r["kind"].lower(), r["name"], (r.get("singularName") or "").lower()):
                    return Resource(api_version, r["kind"], r["name"], r["namespaced"])
        raise ApiError(404, "NotFound", f'the server doesn\'t have a resource type "{kind}"')

    def _discover(self, api_version: str) -> list[dict]:
        if api_version not in self._discovered:
            path = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
            try:
                doc = self._json("GET", path)
            except NotFound:
                doc = {}
            self._discovered[api_version] = [
                r for r in doc.get("resources", []) if "/" not in r.get("name", "")
            ]
        return self._discovered[api_version]

    def _of(self, obj: Mapping[str, Any]) -> Resource:
        try:
            return self.resource(obj["kind"], obj["apiVersion"])
        except KeyError as exc:
            raise GpuLabError(f"object has no {exc.args[0]}: {str(obj)[:80]}") from exc

    @staticmethod
    def _dry(dry_run: bool, params: dict | None = None) -> dict:
        out = dict(params or {})
        if dry_run:
            out["dryRun"] = "All"
        return out

    # ------------------------------------------------------------------ verbs

    def server_version(self) -> dict:
        """``/version``: ``{"major": "1", "minor": "37", "gitVersion": "v1.37.2", ...}``."""
        return self._json("GET", "/version")

    def get(
        self,
        kind: str,
        name: str,
        namespace: str | None = None,
        api_version: str | None = None,
        subresource: str | None = None,
    ) -> dict:
        r = self.resource(kind, api_version)
        return self._json("GET", r.path(self._ns(r, namespace), name, subresource))

    def list(
        self,
        kind: str,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        api_version: str | None = None,
        limit: int | None = None,
        resource_version: str | None = None,
    ) -> dict:
        """A ``<Kind>List`` dict (``items``, ``metadata.resourceVersion``); all namespaces
        when ``namespace`` is None."""
        r = self.resource(kind, api_version)
        params = {
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "limit": limit,
            "resourceVersion": resource_version,
        }
        return self._json("GET", r.path(namespace), params=params)

    def create(self, obj: Mapping[str, Any], namespace: str | None = None, dry_run: bool = False):
        r = self._of(obj)
        ns = self._ns(r, namespace or (obj.get("metadata") or {}).get("namespace"))
        return self._json(
            "POST", r.path(ns), body=obj, params=self._dry(dry_run, {"fieldManager": FIELD_MANAGER})
        )

    def update(
        self, obj: Mapping[str, Any], subresource: str | None = None, dry_run: bool = False
    ) -> dict:
        """PUT the whole object (``metadata.resourceVersion`` guards against lost updates)."""
        r = self._of(obj)
        meta = obj.get("metadata") or {}
        path = r.path(self._ns(r, meta.get("namespace")), meta["name"], subresource)
        return self._json("PUT", path, body=obj, params=self._dry(dry_run))

    def patch(
        self,
        kind: str,
        name: str,
        patch: Any,
        namespace: str | None = None,
        patch_type: str = "merge",
        subresource: str | None = None,
        api_version: str | None = None,
        dry_run: bool = False,
        force: bool = False,
    ) -> dict:
        """``patch_type``: ``merge`` (RFC 7386), ``strategic``, ``json`` (RFC 6902, a list)
        or ``apply`` (server-side apply as field manager ``gpu-lab``)."""
        if patch_type not in PATCH_TYPES:
            raise GpuLabError(f"unknown patch type {patch_type!r}: use {', '.join(PATCH_TYPES)}")
        r = self.resource(kind, api_version)
        params = self._dry(dry_run)
        if patch_type == "apply":
            params["fieldManager"] = FIELD_MANAGER
            if force:
                params["force"] = "true"
        return self._json(
            "PATCH",
            r.path(self._ns(r, namespace), name, subresource),
            body=patch,
            content_type=PATCH_TYPES[patch_type],
            params=params,
        )

    def delete(
        self,
        kind: str,
        name: str,
        namespace: str | None = None,
        api_version: str | None = None,
        grace_period_seconds: int | None = None,
        propagation_policy: str | None = None,
        missing_ok: bool = False,
        dry_run: bool = False,
    ) -> dict | None:
        """Delete one object; returns what the server answers (the object or a Status),
        ``None`` when it was already gone and ``missing_ok``."""
        r = self.resource(kind, api_version)
        body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions"}
        if grace_period_seconds is not None:
            body["gracePeriodSeconds"] = grace_period_seconds
        if propagation_policy:
            body["propagationPolicy"] = propagation_policy
        try:
            return self._json(
                "DELETE", r.path(self._ns(r, namespace), name), body=body, params=self._dry(dry_run)
            )
        except NotFound:
            if missing_ok:
                return None
            raise

    def watch(
        self,
        kind: str,
        namespace: str | None = None,
        resource_version: str | None = None,
        timeout_seconds: int | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        api_version: str | None = None,
        allow_bookmarks: bool = False,
    ) -> Iterator[WatchEvent]:
        """Stream change events until the server ends the watch (``timeout_seconds``) or the
        caller stops iterating. An ``ERROR`` event (e.g. 410 Gone: the resourceVersion is
        too old) raises :class:`ApiError`; start again from a fresh ``list``."""
        r = self.resource(kind, api_version)
        params = {
            "watch": "true",
            "resourceVersion": resource_version,
            "timeoutSeconds": timeout_seconds,
            "labelSelector": label_selector,
            "fieldSelector": field_selector,
            "allowWatchBookmarks": "true" if allow_bookmarks else None,
        }
        read_timeout = None if timeout_seconds is None else timeout_seconds + self.timeout
        resp = self.request(
            "GET",
            r.path(namespace),
            params=params,
            stream=True,
            timeout=(self.timeout, read_timeout),
        )
        try:
            yield from watch_events(resp)
        except requests.exceptions.ChunkedEncodingError:
            return  # the server closed the stream mid-chunk (it went away): the watch ends
        except requests.exceptions.ConnectionError as exc:
            if "Read timed out" in str(exc):
                return
            raise Unreachable(f"watch of {r.plural} at {self.server} broke: {exc}") from exc
        finally:
            resp.close()

    @staticmethod
    def _ns(r: Resource, namespace: str | None) -> str | None:
        if not r.namespaced:
            return None
        return namespace or "default"
