"""A Kubernetes client that speaks plain dicts, on the official ``kubernetes`` package.

Requests go through the package's ``ApiClient`` (its ``Configuration`` from
:mod:`gpu_lab.kube.kubeconfig`, its urllib3 connection pool kept open for the client's
life), and objects stay exactly the API server's JSON: dicts read better than typed models
in lessons, tables and the node agent, and a CRD needs no generated class. It does what
gpu-lab needs: get, list, create, update (also of a subresource such as ``status``), patch
(merge, strategic-merge, JSON or server-side apply), delete, watch (see
:mod:`gpu_lab.kube.watch`) and ``server_version()``. Errors are one line in the API
server's own words (:mod:`gpu_lab.kube.errors`).

    from gpu_lab.kube import KubeClient
    kube = KubeClient.from_kubeconfig("~/.kube/config")
    kube.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}})
    for ev in kube.watch("Pod", namespace="team-a", timeout_seconds=30):
        print(ev.type, ev.object["metadata"]["name"])

The same calls with the package's typed API, as at work:
``kubernetes.client.CoreV1Api(kube.api).list_namespaced_pod("team-a")``.

Kinds are named by ``kind`` (``"Pod"``), plural (``"pods"``) or lower-case singular; the
common built-in kinds resolve without a request, anything else through API discovery
(pass ``api_version`` for kinds outside the core group that share a name).
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import urllib3

from gpu_lab.errors import GpuLabError

from . import kubeconfig as kc
from .errors import ApiError, NotFound
from .resources import Resource, builtin, discovered
from .transport import Transport
from .watch import CancellableWatch, WatchEvent

PATCH_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
    "apply": "application/apply-patch+yaml",
}
DEFAULT_TIMEOUT_S = 30.0
FIELD_MANAGER = "gpu-lab"


class KubeClient:
    """A thread-compatible client for one API server (one ``ApiClient``, one pool)."""

    def __init__(self, creds: kc.Credentials, timeout: float = DEFAULT_TIMEOUT_S):
        self.creds = creds
        self.server = creds.server
        self.timeout = timeout
        self.transport = Transport(creds, timeout)
        self.configuration = self.transport.configuration
        #: the package's client: ``kubernetes.client.CoreV1Api(kube.api)`` and friends work
        self.api = self.transport.api
        self._discovered: dict[str, list[dict]] = {}

    @classmethod
    def from_kubeconfig(
        cls, path: Path | str, context: str | None = None, timeout: float = DEFAULT_TIMEOUT_S
    ) -> KubeClient:
        return cls(kc.load(path, context), timeout=timeout)

    @classmethod
    def in_cluster(cls, timeout: float = DEFAULT_TIMEOUT_S) -> KubeClient:
        """The pod's own ServiceAccount, when gpu-lab runs inside a cluster."""
        return cls(kc.in_cluster(), timeout=timeout)

    def close(self) -> None:
        self.transport.close()

    def __enter__(self) -> KubeClient:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"KubeClient({self.server!r})"

    # ------------------------------------------------------------------ transport
    def request(self, method: str, path: str, **kw: Any) -> urllib3.BaseHTTPResponse:
        """One HTTP request (``transport.py``: params, body, content_type, stream, timeout);
        raises :class:`ApiError` on an HTTP error status."""
        return self.transport.request(method, path, **kw)

    def _json(self, method: str, path: str, **kw) -> dict:
        # every verb through request(): the one door (a test records what a call sends there)
        data = self.request(method, path, **kw).data
        return json.loads(data) if data else {}

    # ------------------------------------------------------------------ resources

    def resource(self, kind: str, api_version: str | None = None) -> Resource:
        """Resolve ``kind`` (Kind, plural or lower-case singular) to its REST resource."""
        r = builtin(kind, api_version)
        if r is None and api_version:
            r = discovered(kind, api_version, self._discover(api_version))
        if r is None:
            raise ApiError(404, "NotFound", f'the server doesn\'t have a resource type "{kind}"')
        return r

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
        return self._json("GET", r.path(_ns(r, namespace), name, subresource))

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
        ns = _ns(r, namespace or (obj.get("metadata") or {}).get("namespace"))
        return self._json(
            "POST", r.path(ns), body=obj, params=_dry(dry_run, {"fieldManager": FIELD_MANAGER})
        )

    def update(
        self, obj: Mapping[str, Any], subresource: str | None = None, dry_run: bool = False
    ) -> dict:
        """PUT the whole object (``metadata.resourceVersion`` guards against lost updates)."""
        r = self._of(obj)
        meta = obj.get("metadata") or {}
        path = r.path(_ns(r, meta.get("namespace")), meta["name"], subresource)
        return self._json("PUT", path, body=obj, params=_dry(dry_run))

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
        params = _dry(dry_run)
        if patch_type == "apply":
            params["fieldManager"] = FIELD_MANAGER
            if force:
                params["force"] = "true"
        return self._json(
            "PATCH",
            r.path(_ns(r, namespace), name, subresource),
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
                "DELETE", r.path(_ns(r, namespace), name), body=body, params=_dry(dry_run)
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
        too old) raises :class:`ApiError`; start again from a fresh ``list``. To stop it from
        another thread, use :class:`~gpu_lab.kube.watch.CancellableWatch` directly."""
        yield from CancellableWatch(self).stream(
            kind,
            namespace=namespace,
            resource_version=resource_version,
            timeout_seconds=timeout_seconds,
            label_selector=label_selector,
            field_selector=field_selector,
            api_version=api_version,
            allow_bookmarks=allow_bookmarks,
        )


def _dry(dry_run: bool, params: dict | None = None) -> dict:
    out = dict(params or {})
    if dry_run:
        out["dryRun"] = "All"
    return out


def _ns(r: Resource, namespace: str | None) -> str | None:
    if not r.namespaced:
        return None
    return namespace or "default"
